//! `spec.capacity`: the size a platform team plans for, and where to look for a node that holds
//! it. The arithmetic is `crate::capacity`'s; only the fields and their admission rules are here.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// The instance families the embedded instance-type table knows (`crate::capacity`). A family
/// outside this list is refused at admission (the schema's enum), so a projection never names a
/// node size it has no figures for.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    schemars::JsonSchema,
)]
pub enum InstanceFamily {
    /// AWS Graviton4 memory optimized (arm64).
    #[serde(rename = "r8g")]
    R8g,
    /// AWS Graviton3 memory optimized (arm64).
    #[serde(rename = "r7g")]
    R7g,
    /// 4th generation Intel Xeon memory optimized (amd64).
    #[serde(rename = "r7i")]
    R7i,
    /// AWS Graviton2 memory optimized (arm64).
    #[serde(rename = "r6g")]
    R6g,
    /// 3rd generation Intel Xeon memory optimized (amd64).
    #[serde(rename = "r6i")]
    R6i,
}

impl InstanceFamily {
    pub const ALL: [InstanceFamily; 5] = [
        InstanceFamily::R8g,
        InstanceFamily::R7g,
        InstanceFamily::R7i,
        InstanceFamily::R6g,
        InstanceFamily::R6i,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InstanceFamily::R8g => "r8g",
            InstanceFamily::R7g => "r7g",
            InstanceFamily::R7i => "r7i",
            InstanceFamily::R6g => "r6g",
            InstanceFamily::R6i => "r6i",
        }
    }

    /// The family named `name` (`r8g`), or an error naming the known ones.
    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str() == name.trim())
            .ok_or_else(|| {
                format!(
                    "unknown instance family '{}': the instance-type table knows {}",
                    name.trim(),
                    Self::ALL.map(|f| f.as_str()).join(", ")
                )
            })
    }
}

impl std::fmt::Display for InstanceFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to plan for: how many items, how much memory to keep free, and which instance families
/// to look in. Every engine's result then carries the memory it would use at that size, the
/// memory a node needs for it, and the smallest instance type of each family that holds it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacitySpec {
    /// How many items (members, keys or records, as the workload counts them) to plan for.
    /// Projected from the run's own growth curve, not multiplied from bytes per item.
    #[schemars(range(min = 1, max = 1_000_000_000_000u64))]
    pub items: u64,

    /// The percent of the memory given to the engine that stays free, for fragmentation,
    /// replication buffers and fork copy-on-write (ElastiCache's `reserved-memory-percent`,
    /// 25 by default): the engine needs RSS / (1 - headroomPercent/100).
    #[serde(default = "default_headroom_percent")]
    #[schemars(range(min = 0, max = 90))]
    pub headroom_percent: u32,

    /// The instance families to look in, of r8g, r7g, r7i, r6g and r6i. Leave it out for the
    /// family of `spec.instanceType` (all five when that is not one of them, or not given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 5))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub instance_families: Vec<InstanceFamily>,

    /// A ConfigMap in the benchmark's namespace with on-demand prices, as CSV lines
    /// `instanceType,hourlyUSD` under the key `prices.csv` (the repository's
    /// `manifests/examples/prices.example.csv` shows the form; its figures are placeholders).
    /// With it, each instance type gets a monthly cost and the cheapest engine is named;
    /// without it no price is shown. The operator reads it at each reconciliation; a missing
    /// ConfigMap or a bad line gives no price and `status.capacity.message` says why. Local
    /// runs read the file given with `--prices` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices_config_map_ref: Option<ConfigMapKeyRef>,

    /// The figures the recommended maxmemory and memory limit use where the run measured none
    /// (each term of the limit says whether it was measured or is one of these).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<CapacityDefaults>,
}

/// The terms of the recommended memory limit that the run did not measure.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityDefaults {
    /// The share of the data's RSS a forking engine (Redis, Valkey) is taken to copy while it
    /// saves, when `spec.peak.snapshot` did not measure it, in percent. 100 (the default): every
    /// page written during the save, the worst case.
    #[serde(default = "default_copy_on_write_percent")]
    #[schemars(range(min = 0, max = 100))]
    pub copy_on_write_percent: u32,
    /// How many times longer than the measured save (or replica's sync) a deployed one is
    /// allowed to last, for a forking engine's `copy_on_write` term: the pages copied grow
    /// with the writes a save lasts through, and a save's length varies with the CPU its child
    /// gets (0.38 to 1.03 s for the same spec on one node). 3 by default; 1 takes the measured
    /// copy as it was.
    #[serde(default = "default_save_length_factor")]
    #[schemars(range(min = 1, max = 10))]
    pub save_length_factor: u32,
    /// The engine's `repl-backlog-size`, in bytes. Leave it out for the engine's own default
    /// (Redis and Valkey before 8.0: 1 MiB; Valkey 8.0 and later: 10 MiB; Dragonfly: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_backlog_bytes: Option<u64>,
    /// Writes buffered for a replica during its full sync, in bytes, when `spec.peak.replica`
    /// did not measure a sync (0 by default: no replica).
    #[serde(default)]
    pub replica_output_buffer_bytes: u64,
    /// Clients' query and reply buffers, in bytes (4 MiB by default: about 200 idle
    /// connections).
    #[serde(default = "default_client_buffers_bytes")]
    pub client_buffers_bytes: u64,
}

fn default_copy_on_write_percent() -> u32 {
    100
}

/// [`CapacityDefaults::save_length_factor`]'s default.
pub fn default_save_length_factor() -> u32 {
    3
}

fn default_client_buffers_bytes() -> u64 {
    4 << 20
}

/// A key of a ConfigMap in the benchmark's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKeyRef {
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key holding the CSV (`prices.csv` by default).
    #[serde(default = "default_prices_key")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

pub fn default_headroom_percent() -> u32 {
    25
}

fn default_prices_key() -> String {
    "prices.csv".to_string()
}
