//! The decision of one reconciliation, pure: from what was read ([`observation::Observation`])
//! to the status to write and the pods to create and delete ([`plan::plan`]). No file here
//! awaits or holds an API handle (`layout_tests.rs` fails on one that does), so every decision
//! is tested without a cluster (the `*_tests.rs` files beside it).

pub(crate) mod client_lifecycle;
pub(crate) mod cluster_cost;
pub mod conditions;
mod engine_run;
pub mod events;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod hostile_input_tests;
pub(crate) mod lifecycle;
#[cfg(test)]
mod never_stuck_tests;
pub mod observation;
#[cfg(test)]
mod operator_settings_tests;
#[cfg(test)]
mod parallel_tests;
pub mod plan;
pub mod pod_fit;
pub mod pod_state;
pub mod policy;
pub mod pull_failure;
pub mod queue;
pub(crate) mod replica_pods;
#[cfg(test)]
mod replica_tests;
pub mod results;
#[cfg(test)]
mod served_result_tests;
pub(crate) mod shards;
#[cfg(test)]
mod shards_tests;
pub mod spec_error;
pub(crate) mod step;
pub mod summary;
#[cfg(test)]
pub(crate) mod test_fixtures;
