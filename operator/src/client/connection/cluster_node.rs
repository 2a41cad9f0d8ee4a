//! A cluster-mode node as the client's control connection sees it: `CLUSTER INFO`, the slots
//! a one-node cluster is given, and the state recorded in the result
//! ([`ClusterNodeState`]). The join of several shards is `client::connection::shards`.

use std::collections::HashMap;
use std::time::Duration;

pub use crate::crd::ClusterNodeState;
use crate::error::BenchError;

use super::engine::{ControlConnection, parse_info};

/// The state a `CLUSTER INFO` reply gives; None when a field the state needs is missing or is
/// not a number.
pub fn cluster_node_state(info: &HashMap<String, String>) -> Option<ClusterNodeState> {
    let number = |name: &str| info.get(name)?.parse::<u32>().ok();
    Some(ClusterNodeState {
        state: info.get("cluster_state")?.clone(),
        slots: number("cluster_slots_assigned")?,
        nodes: number("cluster_known_nodes")?,
        size: number("cluster_size")?,
    })
}

impl ControlConnection {
    /// `CLUSTER INFO`, parsed; an engine not in cluster mode is an `EngineStart` error saying so.
    pub fn cluster_info(&mut self) -> Result<HashMap<String, String>, BenchError> {
        match self.query::<String>(redis::cmd("CLUSTER").arg("INFO")) {
            Ok(text) => Ok(parse_info(&text)),
            Err(BenchError::EngineRejected { message, .. }) => {
                Err(BenchError::EngineStart(format!(
                    "the engine is not in cluster mode (CLUSTER INFO: {message}); clusterMode starts it with cluster-enabled yes"
                )))
            }
            Err(other) => Err(other),
        }
    }

    /// Gives the node the slots `first` to `last` (`CLUSTER ADDSLOTSRANGE`, or `CLUSTER
    /// ADDSLOTS` of each where the engine has no range form, as Redis 6.2).
    pub fn add_slots(&mut self, first: u16, last: u16) -> Result<(), BenchError> {
        let range = self.query::<String>(
            redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(first)
                .arg(last),
        );
        if let Err(BenchError::EngineRejected { .. }) = range {
            let mut each = redis::cmd("CLUSTER");
            each.arg("ADDSLOTS");
            for slot in first..=last {
                each.arg(slot);
            }
            self.query::<String>(&mut each)?;
            return Ok(());
        }
        range.map(|_| ())
    }

    /// Makes a cluster-mode node that owns no slots a one-node cluster owning all 16,384
    /// ([`ControlConnection::add_slots`]), and waits up to 10 s for `cluster_state:ok`. A node
    /// that already owns them (Dragonfly's emulated cluster) is left as it is.
    pub fn own_all_slots(&mut self) -> Result<(), BenchError> {
        let info = self.cluster_info()?;
        let assigned: u64 = info
            .get("cluster_slots_assigned")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if assigned > 0 && assigned < 16384 {
            return Err(BenchError::InvalidArgument {
                field: "--own-all-slots".into(),
                message: format!(
                    "the node at {} already owns {assigned} of the 16384 slots (it is part of a cluster, or was given some before): --own-all-slots makes a node that owns none a one-node cluster. Give every shard's node with --addr instead, or reset this node (CLUSTER RESET) if it is yours to reset",
                    self.address()
                ),
            });
        }
        if assigned == 0 {
            self.add_slots(0, 16383)?;
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let info = self.cluster_info()?;
            if info.get("cluster_state").map(String::as_str) == Some("ok") {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(BenchError::EngineStart(format!(
                    "the one-node cluster did not reach cluster_state:ok within 10 s (cluster_state:{}, cluster_slots_assigned:{})",
                    info.get("cluster_state").cloned().unwrap_or_default(),
                    info.get("cluster_slots_assigned")
                        .cloned()
                        .unwrap_or_default()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the node says of its cluster, for the result; None for a standalone engine (which
    /// refuses `CLUSTER INFO`) or one whose reply lacks the fields.
    pub fn cluster_node_state(&mut self) -> Option<ClusterNodeState> {
        let text: String = self.query(redis::cmd("CLUSTER").arg("INFO")).ok()?;
        cluster_node_state(&parse_info(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_read_from_a_cluster_info_reply() {
        // Valkey 9.1.2's reply as a one-node cluster owning every slot.
        let reply = "cluster_enabled:1\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:1\r\ncluster_size:1\r\ncluster_current_epoch:0\r\n";
        assert_eq!(
            cluster_node_state(&parse_info(reply)),
            Some(ClusterNodeState {
                state: "ok".into(),
                slots: 16384,
                nodes: 1,
                size: 1
            })
        );
        // A node that owns no slot yet, and a reply without the fields.
        let empty = "cluster_state:fail\r\ncluster_slots_assigned:0\r\ncluster_known_nodes:1\r\ncluster_size:0\r\n";
        assert_eq!(
            cluster_node_state(&parse_info(empty)).map(|s| (s.state, s.slots, s.size)),
            Some(("fail".into(), 0, 0))
        );
        assert_eq!(
            cluster_node_state(&parse_info("cluster_state:ok\r\n")),
            None
        );
        assert_eq!(
            cluster_node_state(&parse_info(
                "cluster_state:ok\r\ncluster_slots_assigned:x\r\ncluster_known_nodes:1\r\ncluster_size:1\r\n"
            )),
            None
        );
    }
}
