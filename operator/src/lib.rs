//! membench: measures how much memory Redis, Valkey and Dragonfly need for the same data.
//!
//! The library holds everything that can be tested without a cluster: the `MemoryBenchmark`
//! types, the workloads and the pipelined client that loads them, the measurement protocol,
//! statistics, reports and the local runner. `main.rs` is a thin command line over it.
#![forbid(unsafe_code)]

pub mod auth;
pub mod capacity;
pub mod client;
pub mod controller;
pub mod crd;
pub mod docs_reference;
pub mod error;
pub mod formats;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod layout_tests;
pub mod local;
pub mod metrics;
#[cfg(test)]
mod plan_agreement_tests;
pub mod profile;
pub mod profiler;
pub mod rdb;
pub mod report;
pub mod stats;
pub mod table;
pub mod text;
pub mod validation;
pub mod words;

/// The CRD of `MemoryBenchmark` as YAML, exactly as committed in `crds/memorybenchmark.yaml`.
pub fn crd_yaml() -> String {
    let crd = crd::definition();
    serde_saphyr::to_string(&crd).expect("the CRD always serializes")
}
