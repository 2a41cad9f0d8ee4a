//! What every reconciliation shares: the API client, the event recorder, the operator's
//! settings and metrics, the clients' progress readings, and the watched benchmarks.

use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::Store;

use crate::controller::decide::observation::Settings;
use crate::controller::read::progress::ProgressReadings;
use crate::crd::MemoryBenchmark;
use crate::metrics::Metrics;

/// The field manager of everything the operator writes.
pub const FIELD_MANAGER: &str = "membench-operator";

/// What every reconciliation shares.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub settings: Settings,
    /// Reconciliations, errors and results (`/metrics`).
    pub metrics: Metrics,
    pub(crate) readings: ProgressReadings,
    /// The benchmarks the controllers watch (their caches, one per watched namespace or one
    /// for all), for the queue on a node pool.
    pub(crate) benchmarks: Vec<Store<MemoryBenchmark>>,
}

impl Context {
    pub fn new(
        client: Client,
        settings: Settings,
        metrics: Metrics,
        benchmarks: Vec<Store<MemoryBenchmark>>,
    ) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            settings,
            metrics,
            readings: ProgressReadings::default(),
            benchmarks,
        }
    }
}
