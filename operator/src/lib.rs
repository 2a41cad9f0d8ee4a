//! membench: measures how much memory Redis, Valkey and Dragonfly need for the same data.
//!
//! The library holds everything that can be tested without a cluster: the `MemoryBenchmark`
//! types, the workloads and the pipelined client that loads them, the measurement protocol,
//! statistics, reports and the local runner. `main.rs` is a thin command line over it.
#![forbid(unsafe_code)]

pub mod auth;
pub mod client_result;
pub mod client_stop;
pub mod controller;
pub mod crd;
pub mod engine;
pub mod engine_store;
pub mod error;
pub mod formats;
#[cfg(test)]
mod fuzz_tests;
pub mod html_report;
pub mod local;
pub mod measure;
pub mod metrics;
pub mod progress;
pub mod progress_endpoint;
pub mod published;
pub mod report;
pub mod resp;
pub mod stats;
pub mod status_report;
pub mod validation;
pub mod workload;

use kube::CustomResourceExt;

/// The CRD of `MemoryBenchmark` as YAML, exactly as committed in `crds/memorybenchmark.yaml`.
pub fn crd_yaml() -> String {
    let crd = crd::MemoryBenchmark::crd();
    serde_saphyr::to_string(&crd).expect("the CRD always serializes")
}
