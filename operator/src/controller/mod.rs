//! The operator: a kube-rs controller that turns each `MemoryBenchmark` into measurements on
//! the requested hardware, one engine at a time, with the results in the status.
//!
//! One reconciliation ([`reconcile::reconcile`]) runs four stages, each a folder:
//!
//! - [`read`]: the benchmark afresh from the API server (never the cache, which may lag behind
//!   the operator's own last write), its pods, the progress and marks of the clients under
//!   way, their served results, prices and nodes.
//! - [`decide`]: the pure decision ([`decide::plan::plan`]) of the new status and the pods to
//!   create and delete, from what was read (with the other benchmarks in the controller's
//!   cache, for the queue on a node pool).
//! - [`build`]: the objects the decision creates (pods, NetworkPolicy, password Secret), pure.
//! - [`write`](mod@write): the decision carried out. Pods are created first; one the API server refuses
//!   for good goes back into the decision as a [`decide::observation::PodRejection`], which
//!   fails its engine at once. Then the status is written (server-side apply, only when it
//!   changed, on condition that the benchmark is still at the version read: a status that
//!   changed in between is read again, never overwritten), then events are published, client
//!   pods' result finalizers released, and finished pods deleted. Only transient API errors
//!   are retried.
//!
//! [`runtime`] runs the controller (its scope, the loop, leader election among replicas).
//! `layout_tests.rs` fails when a file under `decide/` or `build/` awaits or holds an API
//! handle, so the decision stays testable without a cluster.
//!
//! It may use the parts below it (`report`, `metrics`, `validation`, `client`, `auth`, `crd`
//! and the leaves); never the local runner, its peer (docs/src/contributing/architecture.md, `layout_tests.rs`).

pub mod build;
pub mod context;
pub mod decide;
pub mod error;
pub mod read;
pub mod reconcile;
pub mod runtime;
pub mod write;

pub use context::{Context, FIELD_MANAGER};
pub use decide::observation::Settings;
pub use error::Error;
pub use reconcile::{error_policy, reconcile};
pub use runtime::running::{Election, Scope, run, run_elected};
pub use write::{rejection_message, write_status};
