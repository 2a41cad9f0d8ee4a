//! Faults and changes a test asks of the running agent, through files in its control directory
//! (`<state-dir>/control/`, read every second), so that no test needs a restart of the agent,
//! which would disturb every other test's pods:
//!
//! - `nodes/<name>`, holding an instance type (`r7i.2xlarge`): a node that appears, as
//!   Karpenter or a cluster autoscaler would add one. Removing the file removes the node (its
//!   processes stop, the Node object is deleted).
//! - `silent/<name>` (empty): the node stops reporting, as a machine that lost power or its
//!   network: no more Lease renewals or status heartbeats, its processes die at once, and
//!   nothing more is written about its pods. The node lifecycle controller then marks it
//!   NotReady, taints it and evicts its pods. Removing the file lets it report again, like a
//!   kubelet that restarts.
//!
//! [`crate::faults`] writes these files for tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::nodes::{INSTANCE_TYPES, InstanceType};

/// The control directory's subdirectory of nodes to add.
pub const NODES_DIR: &str = "nodes";
/// The control directory's subdirectory of nodes that stopped reporting.
pub const SILENT_DIR: &str = "silent";

/// What the control directory asks for.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Requests {
    /// Extra nodes by name, with their instance type.
    pub nodes: BTreeMap<String, InstanceType>,
    /// Nodes that must stop reporting.
    pub silent: BTreeSet<String>,
}

/// Reads the control directory. A file that does not make sense (an unknown instance type, a
/// name that is not a DNS label) is skipped with a warning, once per read.
pub fn read(dir: &Path) -> Requests {
    let mut requests = Requests::default();
    for (name, content) in entries(&dir.join(NODES_DIR)) {
        let wanted = content.trim();
        match INSTANCE_TYPES.iter().find(|t| t.name == wanted) {
            Some(instance) if is_node_name(&name) => {
                requests.nodes.insert(name, instance.clone());
            }
            Some(_) => tracing::warn!(node = %name, "not a valid node name; ignored"),
            None => tracing::warn!(
                node = %name,
                "unknown instance type {wanted:?} (known: {}); ignored",
                INSTANCE_TYPES.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    requests.silent = entries(&dir.join(SILENT_DIR))
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    requests
}

fn entries(dir: &Path) -> Vec<(String, String)> {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    listing
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_string();
            // Written as `.name.tmp`, then renamed, so a half-written file is never read.
            if name.starts_with('.') {
                return None;
            }
            let content = std::fs::read_to_string(entry.path()).ok()?;
            Some((name, content))
        })
        .collect()
}

/// A DNS label: what a node name must be here (its hostname label is the same).
fn is_node_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// The smallest node index (which picks a node's range of pod addresses) not in `used`.
pub fn free_index(used: &BTreeSet<u8>) -> Option<u8> {
    (0..=u8::MAX).find(|i| !used.contains(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "membench-agent-control-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(NODES_DIR)).unwrap();
        std::fs::create_dir_all(dir.join(SILENT_DIR)).unwrap();
        dir
    }

    #[test]
    fn nodes_to_add_and_silent_nodes_are_read_from_their_files() {
        let dir = scratch("read");
        std::fs::write(dir.join(NODES_DIR).join("late-0"), "r7i.2xlarge\n").unwrap();
        std::fs::write(dir.join(NODES_DIR).join(".late-1.tmp"), "r7i.2xl").unwrap();
        std::fs::write(dir.join(SILENT_DIR).join("r8g-4xlarge-1"), "").unwrap();
        let requests = read(&dir);
        assert_eq!(
            requests.nodes.keys().collect::<Vec<_>>(),
            vec!["late-0"],
            "half-written files are not read"
        );
        assert_eq!(requests.nodes["late-0"].arch, "amd64");
        assert!(requests.silent.contains("r8g-4xlarge-1"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn unknown_instance_types_and_bad_names_are_ignored() {
        let dir = scratch("bad");
        std::fs::write(dir.join(NODES_DIR).join("late-0"), "m5.large").unwrap();
        std::fs::write(dir.join(NODES_DIR).join("Late_0"), "r7i.2xlarge").unwrap();
        assert!(read(&dir).nodes.is_empty());
        assert!(read(&dir.join("missing")).nodes.is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_new_node_gets_the_smallest_free_index() {
        assert_eq!(free_index(&[0, 1, 3].into()), Some(2));
        assert_eq!(free_index(&BTreeSet::new()), Some(0));
    }
}
