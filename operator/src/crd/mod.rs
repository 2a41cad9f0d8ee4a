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
//! - one spec file and one status file per measurement phase (`client::phases`): the snapshot
//!   ([`snapshot_spec`], [`snapshot_status`]) and the replica's sync ([`replica_spec`],
//!   [`replica_status`]), side by side under `spec.peak` ([`peak_spec`], [`peak_status`]); the
//!   churn and its defragmentation ([`churn_spec`], [`churn_status`]); the load past maxmemory
//!   ([`eviction_spec`], [`eviction_status`]);
//! - [`status`]: what the operator reports back;
//! - [`definition`]: the CRD the API server is given, its integer formats ones it knows;
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
mod definition;
pub mod dragonfly_memory;
mod engine_capabilities;
pub mod engine_settings;
mod engine_spec;
mod engine_state;
mod eviction_spec;
mod eviction_status;
mod peak_spec;
mod peak_status;
mod placement;
mod pod_resources_spec;
mod replica_spec;
mod replica_status;
mod snapshot_spec;
mod snapshot_status;
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
pub use churn_spec::{ChurnSpec, default_churn_seed, default_defrag_seconds};
pub use churn_status::{ChurnRoundStatus, ChurnStatus, DefragStatus, LatencyStatus};
pub use condition_reason::ConditionReason;
pub use definition::{KNOWN_FORMATS, definition};
pub use engine_capabilities::{Defragmentation, EngineCapabilities, MaxmemoryForm};
pub use engine_spec::{Allocator, EngineKind, EngineSpec};
pub use engine_state::{EngineState, StatusEngineKind};
pub use eviction_spec::{DEFAULT_EVICTION_POLICY, EvictionSpec, default_load_to};
pub use eviction_status::{EvictionStatus, PEAK_FROM_ENGINE, PEAK_SAMPLED};
pub use peak_spec::PeakSpec;
pub use peak_status::{PeakRatioStatus, PeakStatus, PeakSummaryStatus};
pub use placement::{PlacementSpec, TolerationSpec};
pub use pod_resources_spec::{
    PodResourcesSpec, default_client_cpu, default_client_memory, default_engine_cpu,
};
pub use replica_spec::ReplicaSpec;
pub use replica_status::ReplicaStatus;
pub use snapshot_spec::{SnapshotSpec, default_write_share};
pub use snapshot_status::{SnapshotStatus, WriteLatencyStatus};
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
    ProfileConfigMapRef, ProfileWorkloadSpec, RandomStringsWorkload, RdbCredentialsSecret,
    RdbVolumeClaim, RdbWorkloadSpec, RecordLayout, RecordsWorkload, SortedSetWorkload,
    StringsWorkload, TtlSpec, WorkloadSpec, default_record_fields, default_sample_every,
    default_seed, default_sorted_set_key,
};
