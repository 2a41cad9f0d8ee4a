//! Pod addresses: each pod gets its own loopback address, so that two engines can listen on the
//! same container port, as they would in their own network namespaces.
//!
//! Linux routes all of 127.0.0.0/8 to the loopback interface, so any 127.x.y.z can be bound
//! without configuring anything. Fake node number `i` hands out 127.(first+i).y.z, which makes a
//! pod's node visible in its address; 127.0.0.0/16, where the control plane listens, is never
//! used. `first` is 100 for the shared dev cluster; a private one (another state directory)
//! gets its own block of second octets from `hack/dev-cluster.sh`, so two clusters on one
//! machine never hand out the same address.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

/// The first second octet of the shared dev cluster's pod addresses (node 0's range).
pub const DEFAULT_FIRST_OCTET: u8 = 100;

/// Which pod addresses are in use.
#[derive(Debug)]
pub struct PodAddresses {
    /// The second octet of node 0's range.
    first_octet: u8,
    in_use: HashSet<Ipv4Addr>,
    /// Per node, where the next search starts, so a freed address is not reused at once (a
    /// client of the old pod might still be connecting to it).
    cursor: HashMap<u8, u16>,
}

impl Default for PodAddresses {
    fn default() -> Self {
        Self::new(DEFAULT_FIRST_OCTET)
    }
}

impl PodAddresses {
    /// Addresses whose node 0 range is 127.`first_octet`.y.z (at least 1: 127.0/16 is the
    /// control plane's).
    pub fn new(first_octet: u8) -> Self {
        Self {
            first_octet: first_octet.max(1),
            in_use: HashSet::new(),
            cursor: HashMap::new(),
        }
    }

    /// The node index whose range contains `ip`, if it is a pod address at all.
    pub fn node_of(&self, ip: Ipv4Addr) -> Option<u8> {
        let [a, b, _, _] = ip.octets();
        (a == 127 && b >= self.first_octet).then(|| b - self.first_octet)
    }

    /// Marks an address (from an existing pod's status) as taken.
    pub fn reserve(&mut self, ip: Ipv4Addr) {
        self.in_use.insert(ip);
    }

    /// A free address in the node's range: 127.(100+node).y.z, skipping .0 and .255 in the last
    /// octet so no address looks like a network or broadcast address.
    pub fn allocate(&mut self, node_index: u8) -> Option<Ipv4Addr> {
        let second = self.first_octet.checked_add(node_index)?;
        let start = self.cursor.get(&node_index).copied().unwrap_or(0);
        for step in 0..=u16::MAX {
            let n = start.wrapping_add(step);
            let [hi, lo] = n.to_be_bytes();
            if lo == 0 || lo == 255 || (hi == 0 && lo == 1) {
                continue;
            }
            let ip = Ipv4Addr::new(127, second, hi, lo);
            if self.in_use.insert(ip) {
                self.cursor.insert(node_index, n.wrapping_add(1));
                return Some(ip);
            }
        }
        None
    }

    pub fn release(&mut self, ip: Ipv4Addr) {
        self.in_use.remove(&ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_node_hands_out_distinct_addresses_in_its_own_range() {
        let mut addresses = PodAddresses::default();
        let a = addresses.allocate(0).unwrap();
        let b = addresses.allocate(0).unwrap();
        let c = addresses.allocate(2).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.octets()[..2], [127, 100]);
        assert_eq!(c.octets()[..2], [127, 102]);
        assert_eq!(addresses.node_of(c), Some(2));
        assert_eq!(addresses.node_of(Ipv4Addr::LOCALHOST), None);
    }

    #[test]
    fn a_private_cluster_hands_out_addresses_outside_the_shared_ones() {
        let mut shared = PodAddresses::default();
        let mut private = PodAddresses::new(140);
        let a = shared.allocate(0).unwrap();
        let b = private.allocate(0).unwrap();
        assert_ne!(a, b);
        assert_eq!(b.octets()[..2], [127, 140]);
        assert_eq!(private.node_of(b), Some(0));
        assert_eq!(shared.node_of(b), Some(40));
    }

    #[test]
    fn reserved_addresses_are_skipped_and_released_ones_come_back_later() {
        let mut addresses = PodAddresses::default();
        addresses.reserve(Ipv4Addr::new(127, 100, 0, 2));
        let first = addresses.allocate(0).unwrap();
        assert_eq!(first, Ipv4Addr::new(127, 100, 0, 3));
        addresses.release(first);
        assert_eq!(
            addresses.allocate(0).unwrap(),
            Ipv4Addr::new(127, 100, 0, 4)
        );
    }
}
