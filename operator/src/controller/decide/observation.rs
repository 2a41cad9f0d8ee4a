//! What one reconciliation reads and what it decides, shared by every part of the decision:
//! the observation (the benchmark, its pods, the time, a progress reading, refused pods, the
//! other benchmarks), the operator's settings, the resulting [`Plan`], and the small readings of
//! them that [`super::plan`], [`super::lifecycle`], [`super::client_lifecycle`], [`super::queue`]
//! and [`super::summary`] all make. It imports none of them, so the decision reads one way:
//! `plan` calls the others, and they take what they need from here.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::client::pod_io::result::{ClientResult, ReadError};
use crate::crd::{EngineState, EngineStatus, MemoryBenchmark, MemoryBenchmarkStatus};

use super::policy::Policy;
use crate::controller::build::network_policy::NetworkPolicySettings;
use crate::controller::build::pods::{Component, PodSettings, component, engine_index};

/// Operator settings the decision depends on.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub pods: PodSettings,
    /// What a spec may ask for: images, server arguments, tolerations.
    pub policy: Policy,
    /// The NetworkPolicy each benchmark gets (created before its first pod).
    pub network_policy: NetworkPolicySettings,
    /// How long a pod may wait for a node before the benchmark fails as Unschedulable.
    pub scheduling_timeout: Duration,
    /// How long a started engine may take to become ready (and how long an engine that was
    /// ready may stay unready while no client runs against it).
    pub startup_timeout: Duration,
    /// How long a node may keep failing to pull an image (the kubelet retries with back-off)
    /// before the engine fails.
    pub image_pull_timeout: Duration,
    /// Client pods started per engine at most (the first and its retries).
    pub client_attempts: u32,
    /// How long to wait for the client's partial result after its engine died.
    pub crash_grace: Duration,
    /// How long after a client lost its engine to wait for the engine pod's status to show
    /// whether the engine died (a crash is not a client failure to retry).
    pub connection_lost_grace: Duration,
    /// How often to look at a benchmark while it runs (progress is refreshed this often).
    pub poll_interval: Duration,
    /// How long past its deletion deadline a pod may still not have stopped before its node
    /// counts as lost (a kubelet that is there stops a pod within its grace period).
    pub lost_pod_margin: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            pods: PodSettings::default(),
            policy: Policy::default(),
            network_policy: NetworkPolicySettings::default(),
            scheduling_timeout: Duration::from_secs(600),
            startup_timeout: Duration::from_secs(300),
            image_pull_timeout: Duration::from_secs(300),
            client_attempts: 3,
            crash_grace: Duration::from_secs(30),
            connection_lost_grace: Duration::from_secs(5),
            poll_interval: Duration::from_secs(5),
            lost_pod_margin: Duration::from_secs(15),
        }
    }
}

/// What the operator read from the client under way for progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadProbe {
    /// The repetition the client is in, from 1.
    pub repetitions_begun: Option<u32>,
    /// How much of that repetition's commands it has sent, in percent.
    pub loaded_percent: Option<u32>,
    /// The client finished every repetition and serves its whole result.
    pub done: bool,
    /// The last repetition has sent its commands (or the run is done): look again soon.
    pub finishing: bool,
    /// A peak phase's mark the client waits on ([`crate::controller::read::container_reading`]).
    pub mark: Option<crate::client::measurement::container_memory::PendingMark>,
}

/// What a client pod served as its whole result when the operator asked
/// ([`crate::client::pod_io::progress_endpoint::fetch_result`]): when its progress said done, or when
/// its node stopped reporting. Held to the same bounds as a termination message
/// ([`ClientResult::read_whole`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ServedResult {
    /// The client pod it came from (a later attempt's pod never takes an earlier one's).
    pub pod: String,
    /// The result, or why it was not taken: `NoResult` when the client did not answer.
    pub result: Result<ClientResult, ReadError>,
}

/// What one reconciliation saw.
pub struct Observation<'a> {
    pub benchmark: &'a MemoryBenchmark,
    /// Pods carrying the benchmark's label; those it does not control are ignored.
    pub pods: &'a [Pod],
    pub now: Timestamp,
    pub load: Option<LoadProbe>,
    /// Pods of this plan that the API server refused to create, in this reconciliation.
    pub rejected: &'a [PodRejection],
    /// Whole results read from client pods in this reconciliation ([`ServedResult`]).
    pub served: &'a [ServedResult],
    /// The other benchmarks the operator watches, for the queue on a node pool.
    pub others: &'a [Arc<MemoryBenchmark>],
    /// The prices of `spec.capacity.pricesConfigMapRef`, or why there are none; `None` when
    /// the spec names no ConfigMap.
    pub prices: Option<&'a Result<crate::capacity::Prices, String>>,
    /// What the cluster's nodes of the benchmark's instance types give pods, read while none
    /// of its pods exists yet (empty when there is no such node, or the operator may not list
    /// nodes: the instance-type table stands in).
    pub nodes: &'a [super::pod_fit::NodeAllocatable],
}

impl<'a> Observation<'a> {
    /// What is known from the benchmark and its pods alone (no probe, no refusals, no other
    /// benchmarks): enough to tell which pods are whose.
    pub fn of_pods(benchmark: &'a MemoryBenchmark, pods: &'a [Pod], now: Timestamp) -> Self {
        Self {
            benchmark,
            pods,
            now,
            load: None,
            rejected: &[],
            served: &[],
            others: &[],
            prices: None,
            nodes: &[],
        }
    }
}

/// A pod the API server refused to create: admission (Pod Security, a ResourceQuota, a
/// LimitRange, a webhook or policy) or the pod API's own validation. Creating it again would
/// be refused again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRejection {
    pub pod: String,
    /// The API server's message.
    pub message: String,
}

/// What to do.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub status: MemoryBenchmarkStatus,
    /// Pods to create, before the status is written.
    pub create: Vec<Pod>,
    /// Pods to delete (by name), once the status is written.
    pub delete: Vec<String>,
    /// Client pods whose result finalizer comes off once the status is written: what they
    /// measured is in it, or they have nothing (more) to give.
    pub release: Vec<String>,
    /// Pods to delete at once (grace period 0), once released: their node stopped reporting,
    /// so no kubelet will ever confirm they stopped.
    pub force_delete: Vec<String>,
    /// When to reconcile again without a watch event; `None` once the benchmark is finished.
    pub requeue: Option<Duration>,
}

/// Where to read progress from: the progress endpoint of the client under way
/// ([`crate::client::pod_io::progress_endpoint`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeTarget {
    pub address: std::net::SocketAddr,
    /// The engine container the client measures, for its marks; `None` for a result read.
    pub engine: Option<EngineContainer>,
    /// The run's replica's container (`spec.peak.replica`), read at the same marks.
    pub replica: Option<EngineContainer>,
}

/// An engine pod's container, where the kubelet serves its memory.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineContainer {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub node: String,
}

impl EngineContainer {
    /// The container of an engine pod (its one), once the pod is on a node.
    pub fn of(pod: &Pod) -> Option<Self> {
        use kube::ResourceExt;
        let spec = pod.spec.as_ref()?;
        Some(Self {
            namespace: pod.namespace().unwrap_or_default(),
            pod: pod.name_any(),
            container: spec.containers.first()?.name.clone(),
            node: spec.node_name.clone()?,
        })
    }
}

pub(super) fn is_terminal(engine: &EngineStatus) -> bool {
    engine.state == EngineState::Succeeded || engine.state == EngineState::Failed
}

pub(super) fn elapsed_since(now: Timestamp, then: Timestamp) -> Duration {
    now.duration_since(then).unsigned_abs()
}

/// A timestamp to the second, as the API stores it, so that what is written reads back equal.
pub fn to_the_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

pub(super) fn pods_of(pods: &[&Pod], index: usize, which: Component) -> Vec<Pod> {
    pods.iter()
        .filter(|p| engine_index(p) == Some(index) && component(p) == Some(which))
        .map(|p| (*p).clone())
        .collect()
}

/// The engine currently being measured (the first not finished), if any.
pub(super) fn current_engine(status: &MemoryBenchmarkStatus) -> Option<usize> {
    status.engines.iter().position(|e| !is_terminal(e))
}
