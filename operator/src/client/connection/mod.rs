//! How the client talks to an engine: the wire protocol and its pipelined connections
//! (`resp`), the control connection and its readings (`engine`), a sharded cluster's join,
//! readings and load connections (`shards`), its key slots and routing (`slots`), one cluster
//! node's state (`cluster_node`), and the stop flag every batch loop consults (`stop_request`).
//!
//! Rank 0, the lowest of the client's groups: it imports no other group.

pub mod cluster_node;
pub mod engine;
pub mod resp;
pub mod shards;
pub mod slots;
pub mod stop_request;
