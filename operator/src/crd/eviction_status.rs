//! A repetition's load past maxmemory in the status (`spec.eviction`). The client's result
//! names it in snake_case (`client::phases::eviction`); the status in camelCase.

use serde::{Deserialize, Serialize};

/// `peakSource` when every shard's own `used_memory_peak` rose during the load: recorded by the
/// engine after each command, before the next command's eviction, so no transient is missed.
pub const PEAK_FROM_ENGINE: &str = "engine";
/// `peakSource` when a shard's `used_memory_peak` had been set higher before the load (it is
/// never reset): the highest of the readings taken during it, after the engine's eviction,
/// which can miss a transient above them.
pub const PEAK_SAMPLED: &str = "sampled";

/// What a load past maxmemory measured (`spec.eviction`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvictionStatus {
    /// maxmemory as the engine was given it, in bytes (per shard).
    pub maxmemory: u64,
    /// maxmemory-policy (Dragonfly has none: `cache_mode` decides).
    pub policy: String,
    /// Items written.
    pub items_written: u64,
    /// The load's highest used_memory, in bytes: the engine's own used_memory_peak where it
    /// rose during the load (recorded after each command, before the next one's eviction),
    /// else the highest reading (every 1,000 writes and at the end).
    pub peak_used_memory: u64,
    /// Where peakUsedMemory comes from: `engine` (the engine's used_memory_peak, which misses
    /// no transient) or `sampled` (readings taken after eviction, which can miss one: the
    /// engine's own peak was set higher earlier in the run and cannot be reset).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub peak_source: String,
    /// peakUsedMemory - maxmemory, 0 when the engine stayed under it.
    pub overshoot_bytes: i64,
    /// used_memory_rss at the end, in bytes.
    pub used_memory_rss: u64,
    /// Keys the engine evicted during the load.
    pub evicted_keys: u64,
    /// Keys it held at the end.
    pub keys_kept: u64,
    /// Items written per second once eviction ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_per_sec_evicting: Option<f64>,
    /// The engine refused writes at maxmemory (noeviction, Dragonfly without cache_mode):
    /// items sent by the end of the batch it first refused in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_at_items: Option<u64>,
}

impl EvictionStatus {
    /// Whether peakUsedMemory is the highest reading ([`PEAK_SAMPLED`]), which can miss a
    /// transient, rather than the engine's own peak.
    pub fn peak_was_sampled(&self) -> bool {
        self.peak_source == PEAK_SAMPLED
    }
}
