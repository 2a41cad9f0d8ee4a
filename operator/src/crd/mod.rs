//! The `MemoryBenchmark` custom resource (group `membench.io`, version `v1alpha1`).
//!
//! The same spec drives both `membench run SPEC.yaml` (engines as local processes) and the
//! operator (engines as pods pinned to a node of the requested instance type). The doc comments
//! below become the schema descriptions that `kubectl explain memorybenchmark.spec` prints, so
//! they are written for users.
//!
//! - [`spec`]: the resource and the fields of its spec as a whole;
//! - [`engine_spec`]: one engine entry, and [`engine_capabilities`] what each engine kind can
//!   do (forks to save, the commands it answers, its defragmentation, its maxmemory form);
//! - [`engine_settings`]: the engine settings an entry may change (`config`, and in a cluster
//!   `args`);
//! - [`workload_spec`]: the data to load;
//! - [`placement`]: where the pods may run;
//! - [`pod_resources_spec`]: the pods' CPU and the client's memory;
//! - [`auth_spec`]: which Secret holds the engines' password;
//! - [`capacity_spec`]: the size to plan for (`spec.capacity`);
//! - [`churn_spec`]: deletes, overwrites and defragmentation after the load (`spec.churn`), and
//!   a load past maxmemory (`spec.eviction`);
//! - [`status`]: what the operator reports back, and [`churn_status`] a repetition's churn in it;
//! - [`engine_state`] and [`condition_reason`]: the words the status holds (an engine's state
//!   and kind, the reasons), typed, read back from older and newer releases.
//!
//! Every type is re-exported here, so `crate::crd::EngineSpec` and the like keep working.
//!
//! It may use only the leaves (`formats`): everything else reads the resource, so nothing here
//! reads anything else (docs/src/contributing/architecture.md, `layout_tests.rs`).

mod auth_spec;
mod capacity_spec;
mod churn_spec;
mod churn_status;
mod condition_reason;
pub mod dragonfly_memory;
mod engine_capabilities;
pub mod engine_settings;
mod engine_spec;
mod engine_state;
mod placement;
mod pod_resources_spec;
mod spec;
mod status;
#[cfg(test)]
mod tests;
mod workload_spec;

pub use auth_spec::{AuthSpec, SecretKeyRef};
pub use capacity_spec::{
    CapacityDefaults, CapacitySpec, ConfigMapKeyRef, InstanceFamily, default_headroom_percent,
    default_save_length_factor,
};
pub use churn_spec::{
    ChurnSpec, DEFAULT_EVICTION_POLICY, EvictionSpec, PeakSpec, ReplicaSpec, SnapshotSpec,
    default_churn_seed, default_defrag_seconds, default_load_to, default_write_share,
};
pub use churn_status::{
    ChurnRoundStatus, ChurnStatus, DefragStatus, EvictionStatus, LatencyStatus, PeakRatioStatus,
    PeakStatus, PeakSummaryStatus, ReplicaStatus, SnapshotStatus, WriteLatencyStatus,
};
pub use condition_reason::ConditionReason;
pub use engine_capabilities::{Defragmentation, EngineCapabilities, MaxmemoryForm};
pub use engine_spec::{Allocator, EngineKind, EngineSpec};
pub use engine_state::{EngineState, StatusEngineKind};
pub use placement::{PlacementSpec, TolerationSpec};
pub use pod_resources_spec::{
    PodResourcesSpec, default_client_cpu, default_client_memory, default_engine_cpu,
};
pub use spec::{
    Arch, CleanupPolicy, ImagePullSecret, MAX_PIPELINE, MAX_REPETITIONS, MemoryBenchmark,
    MemoryBenchmarkSpec, PublishedTableName, default_pipeline,
};
pub use status::{
    CapacityStatus, ClusterFixedCostStatus, ClusterNodeState, EngineCapacityStatus, EngineModule,
    EngineStatus, GrowthPoint, MemoryBenchmarkStatus, Phase, Progress, RecommendedStatus,
    RecommendedTermStatus, RepetitionStatus, ShardSpreadStatus, ShardStatus, SpreadStatus,
    SummaryStatus, TypeBytesStatus, describe_modules,
};
pub use workload_spec::{
    ProfileConfigMapRef, ProfileWorkloadSpec, RandomStringsWorkload, RdbWorkloadSpec, RecordLayout,
    RecordsWorkload, SortedSetWorkload, StringsWorkload, TtlSpec, WorkloadSpec,
    default_record_fields, default_sample_every, default_seed, default_sorted_set_key,
};
