//! The spec of a `MemoryBenchmark` as a whole: the custom resource's own fields, the node's
//! architecture and what happens to the pods afterwards.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::{
    AuthSpec, CapacitySpec, ChurnSpec, EngineSpec, EvictionSpec, MemoryBenchmarkStatus, PeakSpec,
    PlacementSpec, PodResourcesSpec, WorkloadSpec,
};
use crate::formats::{LABEL_VALUE, MAX_BENCHMARK_NAME, message};

/// A comparison of how much memory in-memory engines need for the same data.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "membench.io",
    version = "v1alpha1",
    kind = "MemoryBenchmark",
    namespaced,
    shortname = "mb",
    category = "membench",
    status = "MemoryBenchmarkStatus",
    derive = "PartialEq",
    doc = "MemoryBenchmark loads the same workload into one or more in-memory engines (Redis, Valkey, Dragonfly), one at a time on a node of the requested instance type, and reports the memory each engine used per item.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Instance type",
        type_ = "string",
        json_path = ".status.instanceTypes",
        description = "spec.instanceType, or every one of spec.instanceTypes"
    ),
    printcolumn(name = "Workload", type_ = "string", json_path = ".status.workload"),
    printcolumn(
        name = "Progress",
        type_ = "string",
        json_path = ".status.progress.summary"
    ),
    printcolumn(
        name = "Best bytes/item",
        type_ = "number",
        json_path = ".status.bestBytesPerItem",
        description = "the lowest median bytes per item among the engines measured so far"
    ),
    printcolumn(
        name = "Best engine",
        type_ = "string",
        json_path = ".status.bestEngine"
    ),
    printcolumn(
        name = "Fits on",
        type_ = "string",
        json_path = ".status.capacity.smallestInstanceType",
        description = "the smallest instance type that holds an engine at spec.capacity.items"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    validation = Rule::new(format!("size(self.metadata.name) <= {MAX_BENCHMARK_NAME}")).message(message::NAME_LENGTH)
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.engines.all(a, self.engines.exists_one(b, (has(a.name) ? a.name : a.engine + '-' + a.version) == (has(b.name) ? b.name : b.engine + '-' + b.version)))").message("each engine needs a distinct name: give two entries with the same engine and version a different engines[].name"))]
#[x_kube(validation = Rule::new("!(has(self.instanceType) && has(self.instanceTypes))").message(message::BOTH_INSTANCE_TYPE_FIELDS))]
#[x_kube(validation = Rule::new("has(self.instanceType) || has(self.instanceTypes)").message(message::NO_INSTANCE_TYPE))]
#[x_kube(validation = Rule::new("!has(self.workload.sortedSet) || self.engines.all(e, !has(e.shards))").message(message::SHARDS_SORTED_SET).field_path(".engines"))]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable: results always describe the spec they were measured with; delete the MemoryBenchmark and create it again (or create one under a new name) to measure something else"))]
pub struct MemoryBenchmarkSpec {
    /// The node instance type to run the engines on, as in the node label
    /// `node.kubernetes.io/instance-type` (for example `r8g.4xlarge` for AWS Graviton4 or
    /// `r7i.4xlarge` for x86). A cluster needs this or `instanceTypes`, not both; local runs
    /// (`membench run`) need none, and record it when given, but run on this machine.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(validation = Rule::new(format!("self.matches('{LABEL_VALUE}')")).message(message::INSTANCE_TYPE))]
    pub instance_type: String,

    /// Several instance types, instead of `instanceType`: every engine runs on a node of each
    /// (the same engines, the same workload), and every result is keyed by engine and instance
    /// type, for example `[r8g.4xlarge, r7i.4xlarge]` to compare arm64 and x86 in one
    /// benchmark. `parallelism` applies to each instance type's pool. Leave `arch` out when the
    /// types differ in architecture. Local runs (`membench run`) have one machine and refuse
    /// more than one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 4), extend("items" = {"type": "string", "minLength": 1, "maxLength": 63}))]
    #[x_kube(validation = Rule::new(format!("self.all(t, t.matches('{LABEL_VALUE}'))")).message(message::INSTANCE_TYPES))]
    #[x_kube(validation = Rule::new("self.all(t, self.exists_one(u, u == t))").message(message::INSTANCE_TYPES_DISTINCT))]
    pub instance_types: Vec<String>,

    /// How many engines run at once on each instance type, each alone on its own node of the
    /// type (one engine per node stays the rule, also across benchmarks). 1 (the default)
    /// runs them one after another. With more than the pool has nodes, the engines beyond it
    /// wait for a node, and the status says how many nodes of the type there are. Local runs
    /// (`membench run`) measure one engine at a time whatever it says.
    #[serde(default = "default_parallelism")]
    #[schemars(range(min = 1, max = 32))]
    pub parallelism: u32,

    /// The CPU architecture of the node (`amd64` or `arm64`), matched against the node label
    /// `kubernetes.io/arch`. Leave it out to accept whatever the instance type is. Local runs
    /// (`membench run`) run the engine store's builds of this architecture (arm64 ones under
    /// qemu-user on an x86 machine, their rates marked as the emulator's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<Arch>,

    /// The engines to compare, measured one after another with a fresh server each. The first
    /// engine is the baseline that the others' change is computed against.
    #[schemars(length(min = 1, max = 32))]
    pub engines: Vec<EngineSpec>,

    /// What to load into each engine. Set exactly one workload.
    pub workload: WorkloadSpec,

    /// How many times to load the workload into each engine, flushing in between.
    #[serde(default = "default_repetitions")]
    // MAX_REPETITIONS, pinned by `the_schemas_limits_are_the_constants_the_client_checks`.
    #[schemars(range(min = 1, max = 100))]
    pub repetitions: u32,

    /// Commands per batch on the client's single connection: each batch is sent whole and its
    /// replies read whole. Up to 8 batches are in flight at once (never more than 64 KiB of
    /// commands), so the engine does not wait for the client between batches.
    #[serde(default = "default_pipeline")]
    // MAX_PIPELINE, pinned by `the_schemas_limits_are_the_constants_the_client_checks`.
    #[schemars(range(min = 1, max = 100000))]
    pub pipeline: u32,

    /// Seconds to wait after each load before reading memory a second time. Engines grow hash
    /// tables incrementally, so a figure read right after a load can include a half-finished
    /// resize. The published benchmarks read right after the load; 0 (the default) does the
    /// same and skips the second reading.
    #[serde(default)]
    #[schemars(range(min = 0, max = 3600))]
    pub settle_seconds: u32,

    /// Where the benchmark pods may run besides the instance type: extra node labels,
    /// tolerations for tainted benchmark node pools, and node affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementSpec>,

    /// CPU of the engine pods and CPU and memory of the client pod (request = limit), when the
    /// defaults (engine 2 CPUs; client 1 CPU and 256Mi) do not suit the instance type. The
    /// engine, its memory and the client must fit on one node of the instance type: the
    /// operator checks them against the node's allocatable resources (a node of the type in the
    /// cluster, else the instance-type table less EKS's reserve) before creating any pod. Local
    /// runs ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_resources: Option<PodResourcesSpec>,

    /// Give up after this many seconds in total; what was measured until then is kept.
    #[serde(default = "default_timeout_seconds")]
    #[schemars(range(min = 60, max = 604800))]
    pub timeout_seconds: u32,

    /// What to do with the benchmark's pods once an engine is done: `Delete` them (the
    /// default) or `KeepFailed` to keep the pods of an engine that failed, for debugging.
    #[serde(default)]
    pub cleanup_policy: CleanupPolicy,

    /// The published table this benchmark reproduces, if any: `sorted-set-50m` (50 million
    /// sorted-set members, Redis 7.4-8.10 and Valkey 7.2-9.1), `valkey-strings-16b` (Percona's
    /// 16-byte SETs over Valkey releases), `strings-100b-1m` (1 million 100-byte values on
    /// Dragonfly, Redis 8.2 and Valkey 8.1) or `records-hash-vs-strings` (Percona's user
    /// records). The workload must be the table's. Each engine's published figure (same engine,
    /// same release line) is then marked beside its measured one in `--output html`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_table: Option<PublishedTableName>,

    /// A password every engine requires, from a Secret in the benchmark's namespace (see
    /// `auth.passwordSecretRef`). Without it the operator creates a Secret of its own,
    /// `<benchmark>-engine-password-<uid>`, with a random password (owned by the benchmark,
    /// never read back), so engines are never open. Local runs ignore it: their engines listen
    /// on loopback only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,

    /// Secrets (type `kubernetes.io/dockerconfigjson`, in the benchmark's namespace) the nodes
    /// use to pull the engine and client images from a private registry, as in a pod's
    /// `imagePullSecrets`. Added after the ones the operator gives every benchmark (the chart's
    /// `benchmarkImagePullSecrets`). The operator never reads them; local runs ignore them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub image_pull_secrets: Vec<ImagePullSecret>,

    /// The size to plan for: with it, every engine's result also carries its projected memory
    /// at `capacity.items`, the memory a node needs for it and the smallest instance type of
    /// each family that holds it (and, with prices, what that costs a month).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacitySpec>,

    /// What happens to the data after the load, in every repetition: rounds of deletes and
    /// overwrites with values of another size, each followed by a memory reading (used_memory,
    /// RSS, the allocator's fragmentation), then optionally active defragmentation and what it
    /// regains. Run after the load's readings (and `settleSeconds`), so bytes per item is the
    /// fresh load's as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub churn: Option<ChurnSpec>,

    /// A load past maxmemory in every repetition, after its other phases: the overshoot above
    /// maxmemory, RSS, keys evicted and kept, and the write rate while evicting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction: Option<EvictionSpec>,

    /// What the engine holds at its peak, in every repetition after its readings: a snapshot
    /// saved under writes (`peak.snapshot`) and a replica's full sync under writes
    /// (`peak.replica`, local runs only for now), its peak memory beside the steady state. Local
    /// runs read the engine's process tree (Pss, every 20 ms); in a cluster the client reports
    /// the engine's own figures (the copy-on-write it counted, the save's duration, the
    /// writes' latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<PeakSpec>,
}

impl MemoryBenchmarkSpec {
    /// The instance types the engines run on: `instanceTypes`, else `instanceType` (empty in a
    /// local run that names none).
    pub fn instance_types(&self) -> Vec<String> {
        if self.instance_types.is_empty() {
            vec![self.instance_type.clone()]
        } else {
            self.instance_types.clone()
        }
    }

    /// How many runs the benchmark makes: every engine on every instance type. Run `r` is
    /// engine `r % engines` on instance type `r / engines` (all engines on the first type,
    /// then all on the next), the order of `status.engines` and of the pods' engine index.
    pub fn runs(&self) -> usize {
        self.engines.len() * self.instance_types().len()
    }

    /// The index in `engines` of run `run`'s entry.
    pub fn entry_of_run(&self, run: usize) -> usize {
        run % self.engines.len().max(1)
    }

    /// The engine entry of run `run`.
    pub fn engine_of_run(&self, run: usize) -> &EngineSpec {
        &self.engines[self.entry_of_run(run)]
    }

    /// The instance type of run `run`.
    pub fn instance_type_of_run(&self, run: usize) -> String {
        let types = self.instance_types();
        types[(run / self.engines.len().max(1)).min(types.len() - 1)].clone()
    }
}

/// A Secret for pulling images, by name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ImagePullSecret {
    /// The Secret's name, in the benchmark's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

fn default_parallelism() -> u32 {
    1
}

fn default_repetitions() -> u32 {
    10
}

/// `spec.pipeline`'s default, which `membench load --pipeline` shares.
pub fn default_pipeline() -> u32 {
    100
}

/// The largest `spec.pipeline` (and `--pipeline`, and a run plan's): the schema's `maximum`
/// above is this number written out, as schemars takes it, and a test pins the two together.
pub const MAX_PIPELINE: u32 = 100_000;

/// The most repetitions, written out in the schema's `maximum` as [`MAX_PIPELINE`] is.
pub const MAX_REPETITIONS: u32 = 100;

fn default_timeout_seconds() -> u32 {
    6 * 3600
}

/// CPU architecture of a node, as in the label `kubernetes.io/arch`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    Amd64,
    Arm64,
}

impl Arch {
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }
}

/// What happens to an engine's pods once it is done.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum CleanupPolicy {
    /// Delete the engine and client pods after each engine.
    #[default]
    Delete,
    /// Keep the pods of an engine that failed, for `kubectl logs` and `describe`.
    KeepFailed,
}

// Only the names are part of the spec; the tables' data, and the row that applies to an engine,
// are crate::report::published's.
/// The published tables a spec can name.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum PublishedTableName {
    /// 50,000,000 members into one sorted set; Redis 7.4 to 8.10 and Valkey 7.2 to 9.1 on an
    /// r8g.4xlarge, used_memory in decimal GB.
    #[serde(rename = "sorted-set-50m")]
    SortedSet50m,
    /// Percona's `valkey-benchmark -t set -n 1000000 -r 1000000 -d 16` on Valkey 7.2 to 9.1,
    /// bytes per key.
    #[serde(rename = "valkey-strings-16b")]
    ValkeyStrings16b,
    /// 1,000,000 keys of 100-byte values on Dragonfly, Redis 8.2 and Valkey 8.1, bytes per key.
    #[serde(rename = "strings-100b-1m")]
    Strings100b1m,
    /// Percona's 1,000,000 user records of four fields as hashes and as string keys.
    #[serde(rename = "records-hash-vs-strings")]
    RecordsHashVsStrings,
}
