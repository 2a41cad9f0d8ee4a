//! `spec.churn`: what the engine holds after the data changes (deletes, overwrites with values
//! of another size, then active defragmentation), measured in every repetition. The phase
//! itself is `crate::client::phases::churn`; only the fields are here.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// Rounds of deletes and overwrites on the loaded data, each followed by a memory reading; then,
/// with `defrag`, active defragmentation switched on and followed until it stops regaining
/// memory. Which items a round deletes and overwrites is drawn from `seed`, so every engine
/// loses and rewrites the same ones. Records stored as hashes churn on their fields (each field
/// drawn on its own; a record whose last field is deleted is gone, as the engine deletes an
/// empty hash); a randomStrings load on the keys its draws wrote; a profile's rebuild on its
/// keys (an overwritten collection has its elements replaced by as many of
/// `overwriteValueSize` bytes; a key's TTL from the profile is given again). Applies to
/// strings, randomStrings, records, sortedSet and profile without `ttlSeconds`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChurnSpec {
    /// How many rounds of deletes and overwrites.
    #[serde(default = "default_rounds")]
    #[schemars(range(min = 1, max = 100))]
    pub rounds: u32,

    /// The share of the items still held that each round deletes (keys with `DEL`, sorted-set
    /// members with `ZREM`, a hash record's fields with `HDEL`, a rebuild's keys of any type
    /// with `DEL`): above 0 and below 1 (a round must leave something to measure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_share: Option<f64>,

    /// The share of the items a round left that it then overwrites with values of
    /// `overwriteValueSize` bytes (`SET`; a hash record's fields left with `HSET`; a sorted-set
    /// member is removed and added again under a name of that size; a rebuild's collection is
    /// written again with as many elements of that size): above 0 and at most 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite_share: Option<f64>,

    /// The size in bytes of the values an overwrite writes (needed with `overwriteShare`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1048576))]
    pub overwrite_value_size: Option<u32>,

    /// After the rounds and `spec.settleSeconds`, switch the engine's active defragmentation on
    /// with thresholds low enough to act (Redis and Valkey: `activedefrag yes`,
    /// `active-defrag-ignore-bytes 1mb`, `active-defrag-threshold-lower 1`) and read memory
    /// every half second until RSS stops falling, having followed the fragmentation ratio's
    /// fall (`endedBy: held`), or `defragSeconds` pass (`endedBy: bound`). Refused on a build
    /// whose allocator cannot defragment (a libc malloc build, Debian's system jemalloc).
    /// Dragonfly cannot switch it at runtime: with `defrag`, membench starts it with
    /// `mem_defrag_check_sec_interval=1` and `mem_defrag_waste_threshold=0.05` (unless the entry
    /// sets them), which leave it idle under its 0.7-of-maxmemory gate
    /// (`mem_defrag_threshold`) through the load and the rounds, and for the window lowers
    /// maxmemory until used memory is 0.8 of it, putting it back after.
    #[serde(default)]
    pub defrag: bool,

    /// The longest defragmentation window, in seconds.
    #[serde(default = "default_defrag_seconds")]
    #[schemars(range(min = 5, max = 3600))]
    pub defrag_seconds: u32,

    /// The seed of the draws that pick which items each round deletes and overwrites.
    #[serde(default = "default_churn_seed")]
    pub seed: u64,
}

fn default_rounds() -> u32 {
    1
}

pub fn default_defrag_seconds() -> u32 {
    60
}

pub fn default_churn_seed() -> u64 {
    1
}
