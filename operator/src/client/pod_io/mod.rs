//! What the client pod shows the outside: progress on a terminal (`progress`) and on the pod's
//! HTTP endpoint (`progress_endpoint`), leaving on SIGINT and SIGTERM (`stop`), and the result
//! in the container's termination message (`result`).
//!
//! Rank 3, the highest of the client's groups: it may import all the others.

pub mod progress;
pub mod progress_endpoint;
pub mod result;
pub mod stop;
