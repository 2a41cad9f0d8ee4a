//! The reads of one reconciliation: everything the decision is made from, fetched from the
//! API server, the kubelet and the client pods (the benchmark afresh, its pods, the load's
//! progress and marks, served results, prices, nodes, a profile's ConfigMap). Nothing here
//! decides; [`super::decide`] does, from what [`Reading`] holds.

pub(crate) mod capacity_prices;
pub(crate) mod container_reading;
pub mod nodes;
pub mod profile_config_map;
pub mod progress;
pub mod rdb_claim;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::Store;
use tracing::info;

use crate::capacity::Prices;
use crate::controller::build::pods;
use crate::controller::context::Context;
use crate::controller::decide::observation::{
    self, LoadProbe, Observation, PodRejection, Settings,
};
use crate::controller::decide::plan::{self, probe_target};
use crate::controller::decide::pod_fit::NodeAllocatable;
use crate::controller::error::Error;
use crate::crd::MemoryBenchmark;

use self::container_reading::MarkAnswer;

/// What one reconciliation read of a live benchmark: everything its decision is made from.
pub struct Reading {
    /// The benchmark as the API server holds it now (a profile from a ConfigMap made inline).
    pub benchmark: MemoryBenchmark,
    /// Its pods.
    pub pods: Vec<Pod>,
    /// When the reading was taken.
    pub now: Timestamp,
    /// The progress of the client under load, if one is.
    pub load: Option<LoadProbe>,
    /// A client waits on a peak phase's mark the kubelet has not answered yet: look again soon.
    pub mark_waits: bool,
    /// The whole results the clients that said done served.
    pub served: Vec<observation::ServedResult>,
    /// The other benchmarks the controllers watch, for the queue on a node pool.
    pub others: Vec<Arc<MemoryBenchmark>>,
    /// The prices of `spec.capacity.pricesConfigMapRef`.
    pub prices: Option<Result<Prices, String>>,
    /// What the nodes of the benchmark's instance types give pods, before its first pod.
    pub nodes: Vec<NodeAllocatable>,
}

impl Reading {
    /// What the decision observes, with the pods the API server refused so far.
    pub fn observation<'a>(&'a self, rejected: &'a [PodRejection]) -> Observation<'a> {
        Observation {
            benchmark: &self.benchmark,
            pods: &self.pods,
            now: self.now,
            load: self.load,
            rejected,
            served: &self.served,
            others: &self.others,
            prices: self.prices.as_ref(),
            nodes: &self.nodes,
        }
    }
}

/// What a reconciliation found of its benchmark.
pub enum Found {
    /// Gone from the API server: nothing to do.
    Gone,
    /// Being deleted, with its pods (their results have nowhere to go).
    Deleting(Vec<Pod>),
    /// Live: what its decision is made from.
    Live(Box<Reading>),
}

/// Reads everything one reconciliation of `cached` decides from.
pub async fn read(cached: &MemoryBenchmark, ctx: &Context) -> Result<Found, Error> {
    let namespace = cached.namespace().unwrap_or_default();
    let name = cached.name_any();
    let api: Api<MemoryBenchmark> = Api::namespaced(ctx.client.clone(), &namespace);
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    // The cache may hold a version older than the operator's own last write (a watch that lags,
    // a restart): deciding from it could undo a result. A read is cheap next to that.
    let Some(benchmark) = api.get_opt(&name).await.map_err(Error::ReadBenchmark)? else {
        return Ok(Found::Gone);
    };
    // A profile from a ConfigMap is decided from inline, like any other spec.
    let benchmark = profile_config_map::resolve(&ctx.client, benchmark)
        .await
        .map_err(Error::ReadProfile)?;
    let pods = pods_api
        .list(&ListParams::default().labels(&pods::benchmark_pods_selector(&name)))
        .await
        .map_err(Error::ListPods)?
        .items;
    // An RDB file's claim must exist before anything starts for it (and only then).
    let benchmark = if rdb_claim::looked_up(&benchmark, &pods) {
        rdb_claim::resolve(&ctx.client, benchmark)
            .await
            .map_err(Error::ReadClaim)?
    } else {
        benchmark
    };
    if benchmark.metadata.deletion_timestamp.is_some() {
        return Ok(Found::Deleting(pods));
    }
    let target = probe_target(&benchmark, &pods);
    let mut load = match &target {
        Some(target) => ctx.readings.read(&namespace, &name, target.clone()).await,
        None => None,
    };
    // A client waiting on a peak phase's mark gets the engine container's memory; until the
    // kubelet's reading is newer than the mark, the benchmark is looked at again in a second.
    // The clients of runs in parallel are read for their marks only.
    let mut mark_waits = false;
    if let (Some(target), Some(mark)) = (&target, load.and_then(|l| l.mark)) {
        match container_reading::answer(&ctx.client, target, mark).await {
            MarkAnswer::Answered => {
                ctx.readings.forget(&namespace, &name);
                if let Some(load) = &mut load {
                    load.mark = None;
                }
            }
            MarkAnswer::NotYet => mark_waits = true,
        }
    }
    for other in plan::other_clients_under_way(&benchmark, &pods) {
        let mark =
            crate::client::pod_io::progress_endpoint::fetch_mark(other.address, MARK_READ_TIMEOUT);
        if let Some(mark) = mark.await
            && container_reading::answer(&ctx.client, &other, mark).await == MarkAnswer::NotYet
        {
            mark_waits = true;
        }
    }
    let now = Timestamp::now();
    let served = read_served_results(&benchmark, &pods, load, now, &ctx.settings).await;
    let others = ctx.benchmarks.iter().flat_map(Store::state).collect();
    let prices = capacity_prices::read(&ctx.client, &namespace, &benchmark).await;
    let nodes = nodes::read_before_first_pod(&ctx.client, &benchmark, &pods).await;
    Ok(Found::Live(Box::new(Reading {
        benchmark,
        pods,
        now,
        load,
        mark_waits,
        served,
        others,
        prices,
        nodes,
    })))
}

/// How long reading the progress of a client in parallel (for its marks) may take.
const MARK_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// How long reading a client's whole result may take.
const RESULT_READ_TIMEOUT: Duration = Duration::from_secs(3);

/// Reads the whole result of each client [`plan::result_targets`] names (a client that said
/// done, one on a node that stopped reporting), each bounded in time and bytes and held to the
/// bounds of a result; one that does not answer is `NoResult`, and the termination message
/// stays the fallback.
async fn read_served_results(
    benchmark: &MemoryBenchmark,
    pods: &[Pod],
    load: Option<LoadProbe>,
    now: Timestamp,
    settings: &Settings,
) -> Vec<observation::ServedResult> {
    let mut served = Vec::new();
    for (pod, target) in plan::result_targets(benchmark, pods, load, now, settings) {
        let body = crate::client::pod_io::progress_endpoint::fetch_result(
            target.address,
            RESULT_READ_TIMEOUT,
        )
        .await;
        let result = match body {
            Some(body) => crate::client::pod_io::result::ClientResult::read_whole(
                &body,
                benchmark.spec.repetitions,
            ),
            None => Err(crate::client::pod_io::result::ReadError::NoResult(format!(
                "the client pod {pod} did not serve a result at {}",
                target.address
            ))),
        };
        if let Err(e) = &result {
            info!(pod = %pod, "no whole result from the client: {e}");
        }
        served.push(observation::ServedResult { pod, result });
    }
    served
}
