//! Pod addresses: each pod gets its own loopback address, so that two engines can listen on the
//! same container port, as they would in their own network namespaces.
//!
//! Linux routes all of 127.0.0.0/8 to the loopback interface, so any 127.x.y.z can be bound
//! without configuring anything. Fake node number `i` hands out 127.(100+i).y.z, which makes a
//! pod's node visible in its address; 127.0.0.0/16, where the control plane listens, is never
//! used.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

/// The first second octet of pod addresses (node 0's range).
const FIRST_NODE_OCTET: u8 = 100;

/// Which pod addresses are in use.
#[derive(Debug, Default)]
pub struct PodAddresses {
    in_use: HashSet<Ipv4Addr>,
    /// Per node, where the next search starts, so a freed address is not reused at once (a
    /// client of the old pod might still be connecting to it).
    cursor: HashMap<u8, u16>,
}

impl PodAddresses {
    /// The node index whose range contains `ip`, if it is a pod address at all.
    pub fn node_of(ip: Ipv4Addr) -> Option<u8> {
        let [a, b, _, _] = ip.octets();
        (a == 127 && b >= FIRST_NODE_OCTET).then(|| b - FIRST_NODE_OCTET)
    }

    /// Marks an address (from an existing pod's status) as taken.
    pub fn reserve(&mut self, ip: Ipv4Addr) {
        self.in_use.insert(ip);
    }

    /// A free address in the node's range: 127.(100+node).y.z, skipping .0 and .255 in the last
    /// octet so no address looks like a network or broadcast address.
    pub fn allocate(&mut self, node_index: u8) -> Option<Ipv4Addr> {
        let second = FIRST_NODE_OCTET.checked_add(node_index)?;
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
        assert_eq!(PodAddresses::node_of(c), Some(2));
        assert_eq!(PodAddresses::node_of(Ipv4Addr::LOCALHOST), None);
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
