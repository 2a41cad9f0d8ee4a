//! A repetition's churn in the status (`spec.churn`): what each round did and what the engine
//! held after it, and what defragmentation regained. The client's result names them in
//! snake_case (`client::phases::churn`); the status in camelCase.

use serde::{Deserialize, Serialize};

/// One round of deletes and overwrites.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChurnRoundStatus {
    /// Counted from 1.
    pub round: u32,
    /// Items the round deleted (records stored as hashes: fields).
    pub deleted: u64,
    /// Items the round overwrote with values of `overwriteValueSize` (records stored as
    /// hashes: fields).
    pub overwritten: u64,
    /// used_memory after the round, in bytes.
    pub used_memory: u64,
    /// used_memory_rss after the round, in bytes.
    pub used_memory_rss: u64,
    /// The allocator's fragmentation after the round (Redis and Valkey).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio: Option<f64>,
    /// used_memory_rss / used_memory after the round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_fragmentation_ratio: Option<f64>,
    /// Items held after the round, verified in the engine (records stored as hashes: the
    /// records with a field left; a profile's rebuild: its keys).
    pub items: u64,
    /// Elements held after the round, verified, where items hold them (a record's fields; a
    /// rebuild's collections' elements).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<u64>,
    /// How long the round's commands took, in seconds.
    pub seconds: f64,
}

/// The probe's write latency during defragmentation, in milliseconds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LatencyStatus {
    /// Probe writes sent (one every 50 ms on the control connection).
    pub writes: u64,
    /// The median write latency.
    pub p50: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The slowest write.
    pub max: f64,
}

/// What active defragmentation regained after the rounds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefragStatus {
    /// How it was switched on: `activedefrag` (Redis, Valkey) or `maxmemory-gate` (Dragonfly:
    /// maxmemory lowered for the window until used memory passed its defragmentation threshold).
    pub switched: String,
    /// used_memory_rss before defragmentation was switched on, in bytes.
    pub rss_before: u64,
    /// used_memory_rss at the end of the window, in bytes.
    pub rss_after: u64,
    /// used_memory before the window, in bytes.
    pub used_memory_before: u64,
    /// used_memory at its end, in bytes.
    pub used_memory_after: u64,
    /// allocator_frag_ratio before the window (Redis and Valkey).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio_before: Option<f64>,
    /// allocator_frag_ratio at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio_after: Option<f64>,
    /// Seconds until RSS came within half a percent of the window's lowest.
    pub seconds: f64,
    /// The whole window, in seconds.
    pub window_seconds: f64,
    /// The engine's CPU time in the window, in seconds.
    pub cpu_seconds: f64,
    /// The window's bound passed while RSS still fell, or had not yet followed the
    /// fragmentation ratio's fall.
    #[serde(default)]
    pub bound_reached: bool,
    /// Which rule ended the window: `held` (RSS held for 12 s after following the ratio's
    /// fall) or `bound` (the window's bound passed first).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ended_by: String,
    /// `MEMORY PURGE` was sent after the window: its bound passed with RSS short of what the
    /// ratio's fall implies. rssAfter is then after the purge, rssBeforePurge before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub purged: bool,
    /// used_memory_rss at the end of the window, before `MEMORY PURGE`: what the allocator
    /// gave back by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_before_purge: Option<u64>,
    /// The probe's write latency during the window, in milliseconds.
    pub write_latency_ms: LatencyStatus,
}

/// A repetition's churn.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChurnStatus {
    /// Each round, in order.
    pub rounds: Vec<ChurnRoundStatus>,
    /// Active defragmentation after the rounds, when `spec.churn.defrag` asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defrag: Option<DefragStatus>,
}

impl ChurnStatus {
    /// used_memory_rss after the last round: the churned RSS.
    pub fn churned_rss(&self) -> Option<u64> {
        self.rounds.last().map(|r| r.used_memory_rss)
    }

    /// used_memory_rss at the end of defragmentation, when there was one.
    pub fn defragmented_rss(&self) -> Option<u64> {
        self.defrag.as_ref().map(|d| d.rss_after)
    }

    /// The churned and the defragmented RSS of an engine's repetitions (those that churned),
    /// each the median over the repetitions that report it (`membench report`'s comparison,
    /// beside bytes per item; a local report's are `BenchmarkReport::churned_rss`).
    pub fn medians_of<'a>(
        churns: impl Iterator<Item = &'a Self> + Clone,
    ) -> (Option<f64>, Option<f64>) {
        let median = |figure: fn(&Self) -> Option<u64>| {
            let values: Vec<f64> = churns
                .clone()
                .filter_map(figure)
                .map(|bytes| bytes as f64)
                .collect();
            crate::stats::Spread::of(&values).map(|s| s.median)
        };
        (median(Self::churned_rss), median(Self::defragmented_rss))
    }
}
