//! The client's result as it travels from a client pod to the operator: the container's
//! termination message, which Kubernetes caps at 4096 bytes. No API access is needed for it,
//! so the client pod runs without a service account token.
//!
//! The message is JSON holding the engine's identity, the summary over every repetition, and
//! the repetitions themselves as columns of integers, each column either one value (when every
//! repetition agrees, as verified counts do) or the first value followed by each repetition's
//! difference from it (used_memory barely moves between repetitions, so the differences are
//! short). 100 repetitions of a 50-million-member load fit. The sorted set's growth curve (the
//! first repetition's used_memory every `sampleEvery` members) travels as a [`GrowthColumn`]
//! of at most [`MAX_GROWTH_POINTS`] points. When a message would still exceed the budget,
//! optional columns go first, then the warnings, then the curve is thinned and then left out,
//! and last the last repetitions; the summary always covers every repetition, and `omitted`
//! says how many were left out of the list.
//!
//! The same result travels whole, never fitted, over the client's progress endpoint
//! ([`ClientResult::whole`], [`ClientResult::read_whole`], at most [`WHOLE_RESULT_LIMIT`]
//! bytes): the operator takes it from there when the client reports done, and the termination
//! message is the fallback (see `crate::client::progress_endpoint`).
//!
//! A sharded cluster's result holds the same fields with the same meaning, each figure the sum
//! over the shards, and one more, `shards` ([`ShardColumns`]): each shard's median baseline and
//! final used_memory and keys, in `--addr` order, from which the reader rebuilds the spread
//! (`ShardColumns::spread`). 16 shards fit beside 100 repetitions; the summary's own `shards`
//! is left out of the message.

mod checked;
mod shard_columns;

pub use shard_columns::ShardColumns;

pub use checked::{QUOTED_BYTES, ReadError, quote};

use serde::{Deserialize, Serialize};

use crate::crd::engine_settings::MAX_CONFIG_SETTINGS;

use crate::client::measure::{
    BenchmarkReport, ErrorReport, MemorySample, RepetitionResult, Summary,
};

/// Kubernetes truncates termination messages longer than this.
pub const TERMINATION_MESSAGE_LIMIT: usize = 4096;

/// What a result may take, leaving some room below the limit.
const BUDGET: usize = 4000;

/// The most bytes of a whole result (served by the progress endpoint). 100 repetitions with
/// every column and a 64-point curve take about 10 KB; figures that defeat the difference
/// encoding (20 digits each) about 20 KB.
pub const WHOLE_RESULT_LIMIT: usize = 64 * 1024;

/// The longest error or warning text carried.
const MAX_TEXT: usize = 400;

/// The most points of a growth curve carried (and kept in status): enough for a smooth curve,
/// small enough to leave the repetitions room. 50 million members sampled every million give 50.
pub const MAX_GROWTH_POINTS: usize = 64;

/// The fewest points a curve is thinned to before it is left out of a message that does not fit.
const MIN_GROWTH_POINTS: usize = 16;
/// The most repetitions a spec asks for (`spec.repetitions`), so the most a result holds.
pub const MAX_REPETITIONS: u32 = 100;

/// The compact result a client pod leaves in its termination message.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientResult {
    /// Who the engine said it was.
    pub engine: EngineIdentity,
    /// Commands sent per repetition.
    pub commands: u64,
    /// `OBJECT ENCODING` of the sorted set (of the last repetition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// The verified repetitions, as columns.
    #[serde(default, skip_serializing_if = "RepetitionColumns::is_empty")]
    pub repetitions: RepetitionColumns,
    /// Verified repetitions left out of `repetitions` to fit the message (the last ones).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: u32,
    /// Median, min and max over every verified repetition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// The first repetition's growth curve (the sorted set's used_memory during the load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth: Option<GrowthColumn>,
    /// How far the repetition that failed got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<FailedProgress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReport>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// A sharded cluster's figures, shard by shard ([`ShardColumns`]); the summary's own
    /// `shards` is left out of the message, this carries it. None for one engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<ShardColumns>,
    /// The first repetition's used_memory_rss empty and after `settleSeconds`, when it
    /// settled: what the capacity plan projects RSS from. The first repetition's only: a
    /// column for every repetition would not fit 100 of them beside the curve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_settled_rss: Option<SettledRss>,
    /// Each listed repetition's churn (`spec.churn`), in order, without the defragmentation
    /// window's readings. Whole results only: a termination message leaves it out first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub churn: Vec<crate::client::churn::ChurnReport>,
    /// Each listed repetition's load past maxmemory (`spec.eviction`), in order. Whole results
    /// only, as `churn`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub eviction: Vec<crate::client::eviction::EvictionReport>,
    /// Each listed repetition's peak phases (`spec.peak`), in order. Whole results only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peak: Vec<crate::client::measured::PeakReport>,
}

/// used_memory_rss of the empty server and `settleSeconds` after the load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SettledRss {
    pub baseline: u64,
    pub settled: u64,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The engine's own account of itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineIdentity {
    pub name: String,
    pub version: String,
    pub allocator: String,
    pub arch: String,
    /// The server's event loop (`INFO server` `multiplexing_api`), when it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
    /// The threads the server reported (`INFO server` `thread_count`: Dragonfly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// The settings the spec changed, as `CONFIG GET` read them back (at most 16, each value
    /// at most 64 bytes).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub config: std::collections::BTreeMap<String, String>,
    /// Settings asked for that the engine does not report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_unreported: Vec<String>,
    /// The modules the engine loaded (`INFO modules`; at most [`MAX_MODULES`], each name and
    /// version at most 64 bytes); absent when the engine did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<Vec<crate::crd::EngineModule>>,
    /// A cluster-mode engine's `CLUSTER INFO` (its state at most 64 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::crd::ClusterNodeState>,
}

/// The most modules a result lists (engines load 0 to 3 of them).
pub const MAX_MODULES: usize = 8;

/// How far a failed repetition got before it stopped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FailedProgress {
    pub repetition: u32,
    pub commands_sent: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_memory: Option<u64>,
}

/// Each repetition's figures, one column per figure (see [`encode_column`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RepetitionColumns {
    /// How many repetitions the columns hold.
    pub n: u32,
    pub baseline: Vec<i64>,
    pub used: Vec<i64>,
    pub rss: Vec<i64>,
    pub items: Vec<i64>,
    /// Load time in microseconds.
    pub micros: Vec<i64>,
    /// used_memory after `settleSeconds`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settled: Vec<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dataset: Vec<i64>,
    /// mem_fragmentation_ratio in hundredths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frag: Vec<i64>,
}

impl RepetitionColumns {
    fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn of(repetitions: &[RepetitionResult]) -> Self {
        let column = |f: &dyn Fn(&RepetitionResult) -> i64| {
            encode_column(&repetitions.iter().map(f).collect::<Vec<_>>())
        };
        let optional = |f: &dyn Fn(&RepetitionResult) -> Option<i64>| {
            let values: Option<Vec<i64>> = repetitions.iter().map(f).collect();
            values.map(|v| encode_column(&v)).unwrap_or_default()
        };
        Self {
            n: repetitions.len() as u32,
            baseline: column(&|r| r.baseline_used_memory as i64),
            used: column(&|r| r.used_memory as i64),
            rss: column(&|r| r.used_memory_rss as i64),
            items: column(&|r| r.items as i64),
            micros: column(&|r| (r.seconds * 1e6).round() as i64),
            settled: optional(&|r| r.settled.as_ref().map(|s| s.used_memory as i64)),
            dataset: optional(&|r| r.used_memory_dataset.map(|d| d as i64)),
            frag: optional(&|r| {
                r.mem_fragmentation_ratio
                    .map(|f| (f * 100.0).round() as i64)
            }),
        }
    }
}

/// A growth curve: used_memory at `start`, `start + every`, `start + 2 every`, … items. The
/// samples are read at whole multiples of `sampleEvery`; a curve thinned to fit keeps every
/// k-th sample counted back from the last, so the end of the load is always its last point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GrowthColumn {
    /// Items loaded at the first point.
    pub start: u64,
    /// Items between two points.
    pub every: u64,
    /// used_memory at the first point, then each point's difference from the point before
    /// (the curve only climbs by about `every` items' worth, so the differences are short).
    pub used: Vec<i64>,
}

impl GrowthColumn {
    /// The curve of samples taken at `sample_every`, 2 `sample_every`, …, thinned to at most
    /// `max_points`. `None` when there are no samples or they are not evenly spaced.
    pub fn of(samples: &[MemorySample], max_points: usize) -> Option<Self> {
        let first = samples.first()?;
        let every = first.items;
        let evenly_spaced = every > 0
            && samples
                .iter()
                .zip(1u64..)
                .all(|(s, k)| every.checked_mul(k) == Some(s.items));
        if !evenly_spaced || max_points == 0 {
            return None;
        }
        let stride = samples.len().div_ceil(max_points);
        // Counted back from the last sample, so the end of the load is kept.
        let kept: Vec<&MemorySample> = samples
            .iter()
            .rev()
            .step_by(stride)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let used: Vec<i64> = kept
            .iter()
            .scan(None::<i64>, |previous, s| {
                let value = s.used_memory as i64;
                let encoded = previous.map_or(value, |p| value - p);
                *previous = Some(value);
                Some(encoded)
            })
            .collect();
        Some(Self {
            start: kept[0].items,
            every: every * stride as u64,
            used,
        })
    }

    /// The points, as (items, used_memory); empty when the column is malformed (too many
    /// points, no spacing, or figures that overflow).
    pub fn points(&self) -> Vec<MemorySample> {
        if self.used.len() > MAX_GROWTH_POINTS || (self.every == 0 && self.used.len() > 1) {
            return Vec::new();
        }
        let mut points = Vec::with_capacity(self.used.len());
        let mut used: Option<i64> = None;
        for (k, value) in (0u64..).zip(&self.used) {
            let next = match used {
                None => Some(*value),
                Some(previous) => previous.checked_add(*value),
            };
            let items = self
                .every
                .checked_mul(k)
                .and_then(|step| self.start.checked_add(step));
            match (next, items) {
                (Some(next), Some(items)) if next >= 0 => {
                    used = Some(next);
                    points.push(MemorySample {
                        items,
                        used_memory: next as u64,
                    });
                }
                _ => return Vec::new(),
            }
        }
        points
    }

    /// The same curve with at most `max_points` points, the last one kept.
    fn thinned(&self, max_points: usize) -> Option<Self> {
        let points = self.points();
        if points.len() <= max_points {
            return Some(self.clone());
        }
        let stride = points.len().div_ceil(max_points);
        let kept: Vec<MemorySample> = points
            .iter()
            .rev()
            .step_by(stride)
            .cloned()
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let mut used = Vec::with_capacity(kept.len());
        let mut previous: Option<i64> = None;
        for point in &kept {
            let value = point.used_memory as i64;
            used.push(previous.map_or(value, |p| value - p));
            previous = Some(value);
        }
        Some(Self {
            start: kept.first()?.items,
            every: self.every * stride as u64,
            used,
        })
    }
}

/// A column: `[v]` when every value is `v`, otherwise the first value followed by each
/// value's difference from it (the first difference, always 0, included so that the
/// column's length is the number of repetitions).
pub fn encode_column(values: &[i64]) -> Vec<i64> {
    match values.first() {
        None => Vec::new(),
        Some(&first) if values.iter().all(|v| *v == first) => vec![first],
        Some(&first) => std::iter::once(first)
            .chain(values[1..].iter().map(|v| v - first))
            .collect(),
    }
}

/// The values of a column of `n` repetitions; `None` when it does not hold `n` or a
/// difference overflows.
pub fn decode_column(column: &[i64], n: usize) -> Option<Vec<i64>> {
    match column {
        [] => None,
        [only] => Some(vec![*only; n]),
        [first, differences @ ..] if column.len() == n => std::iter::once(Some(*first))
            .chain(differences.iter().map(|d| first.checked_add(*d)))
            .collect(),
        _ => None,
    }
}

/// One repetition, read back from the columns.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedRepetition {
    pub baseline_used_memory: u64,
    pub used_memory: u64,
    pub used_memory_rss: u64,
    pub items: u64,
    pub seconds: f64,
    pub settled_used_memory: Option<u64>,
    pub used_memory_dataset: Option<u64>,
    pub mem_fragmentation_ratio: Option<f64>,
}

impl DecodedRepetition {
    /// (used_memory - baseline) / items, as the client computed it.
    pub fn bytes_per_item(&self) -> f64 {
        (self.used_memory as f64 - self.baseline_used_memory as f64) / self.items as f64
    }
}

fn shorten(text: &str) -> String {
    shortened(text, MAX_TEXT)
}

/// `text` cut to at most `max` bytes (on a character boundary), marked with `…` when cut.
fn shortened(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl ClientResult {
    /// The compact form of a report, fitted to the termination message budget.
    pub fn from_report(report: &BenchmarkReport) -> Self {
        let mut result = Self::whole(report);
        result.fit(&report.repetitions);
        result
    }

    /// The result of a report with nothing left out to fit a termination message: every
    /// listed repetition with every column, the warnings and the whole curve (at most
    /// [`MAX_GROWTH_POINTS`]). Texts are cut as in the compact form, so the same checks hold.
    pub fn whole(report: &BenchmarkReport) -> Self {
        let mut result = Self {
            engine: EngineIdentity {
                name: report.engine.name.clone(),
                version: report.engine.version.clone(),
                allocator: report.engine.allocator.clone(),
                arch: report.engine.arch.clone(),
                io: report.engine.multiplexing_api.clone(),
                threads: report.engine.threads,
                config: report
                    .engine
                    .config
                    .iter()
                    .take(MAX_CONFIG_SETTINGS)
                    .map(|(name, value)| (shortened(name, 64), shortened(value, 64)))
                    .collect(),
                config_unreported: report
                    .engine
                    .config_unreported
                    .iter()
                    .take(MAX_CONFIG_SETTINGS)
                    .map(|name| shortened(name, 64))
                    .collect(),
                modules: report.engine.modules.as_ref().map(|modules| {
                    modules
                        .iter()
                        .take(MAX_MODULES)
                        .map(|m| crate::crd::EngineModule {
                            name: shortened(&m.name, 64),
                            version: shortened(&m.version, 64),
                        })
                        .collect()
                }),
                cluster: report.engine.cluster.clone().map(|cluster| {
                    crate::crd::ClusterNodeState {
                        state: shortened(&cluster.state, 64),
                        ..cluster
                    }
                }),
            },
            commands: report.repetitions.first().map_or(0, |r| r.commands),
            encoding: report.repetitions.last().and_then(|r| r.encoding.clone()),
            repetitions: RepetitionColumns::of(&report.repetitions),
            omitted: 0,
            summary: report.summary.clone(),
            growth: report
                .repetitions
                .first()
                .and_then(|r| GrowthColumn::of(&r.samples, MAX_GROWTH_POINTS)),
            failed: report.failed_repetition.as_ref().map(|f| FailedProgress {
                repetition: f.repetition,
                commands_sent: f.commands_sent,
                used_memory: f.used_memory,
            }),
            error: report.error.as_ref().map(|e| ErrorReport {
                category: e.category.clone(),
                message: shorten(&e.message),
                phase: e.phase.clone(),
            }),
            warnings: report.warnings.iter().take(3).map(|w| shorten(w)).collect(),
            shards: report
                .summary
                .as_ref()
                .and_then(|s| s.shards.as_ref())
                .map(ShardColumns::of),
            first_settled_rss: report.repetitions.first().and_then(|r| {
                Some(SettledRss {
                    baseline: r.baseline_used_memory_rss,
                    settled: r.settled.as_ref()?.used_memory_rss,
                })
            }),
            churn: report
                .repetitions
                .iter()
                .map_while(|r| r.churn.as_ref().map(|c| c.without_samples()))
                .collect(),
            eviction: report
                .repetitions
                .iter()
                .map_while(|r| r.eviction.clone())
                .collect(),
            peak: report
                .repetitions
                .iter()
                .map_while(|r| r.peak.clone())
                .collect(),
        };
        if let Some(summary) = &mut result.summary {
            if let Some(reason) = &summary.unstable_reason {
                summary.unstable_reason = Some(shorten(reason));
            }
            // The reader derives items/s from commands/s and the counts (see
            // `ClientResult::items_per_command`); sending both would spend the budget twice.
            summary.items_per_sec = None;
            summary.shards = None;
        }
        result
    }

    fn size(&self) -> usize {
        self.to_message().len()
    }

    /// Drops what matters least until the message fits: the optional columns, the warnings,
    /// the growth curve's detail and then the curve, then repetitions from the end (the
    /// summary covers them all, where a curve has no other way to the status).
    fn fit(&mut self, repetitions: &[RepetitionResult]) {
        if self.size() <= BUDGET {
            return;
        }
        self.churn.clear();
        self.eviction.clear();
        self.peak.clear();
        if self.size() <= BUDGET {
            return;
        }
        self.repetitions.frag.clear();
        self.repetitions.dataset.clear();
        if self.size() <= BUDGET {
            return;
        }
        self.warnings.clear();
        if self.size() <= BUDGET {
            return;
        }
        self.growth = self
            .growth
            .as_ref()
            .and_then(|g| g.thinned(MIN_GROWTH_POINTS));
        if self.size() <= BUDGET {
            return;
        }
        self.growth = None;
        let mut kept = repetitions.len();
        while self.size() > BUDGET && kept > 0 {
            kept -= 1;
            self.repetitions = RepetitionColumns::of(&repetitions[..kept]);
            self.repetitions.frag.clear();
            self.repetitions.dataset.clear();
            self.omitted = (repetitions.len() - kept) as u32;
        }
    }

    /// The JSON written to the termination message file.
    pub fn to_message(&self) -> String {
        serde_json::to_string(self).expect("client results serialize")
    }

    /// Items stored per command sent: 1 for most workloads, 1/fields for records stored as
    /// strings, below 1 for random keys (repeated keys store nothing new). Every repetition
    /// loads the same items with the same commands, so this turns any commands/s figure of
    /// the result into items/s. `None` before a repetition has been verified.
    pub fn items_per_command(&self) -> Option<f64> {
        let items = self.summary.as_ref()?.items;
        (self.commands > 0).then(|| items as f64 / self.commands as f64)
    }

    /// The listed repetitions, in order; empty when the columns disagree in length or list
    /// more repetitions than any spec asks for ([`ClientResult::read`] refuses such results).
    pub fn decoded_repetitions(&self) -> Vec<DecodedRepetition> {
        let columns = &self.repetitions;
        let n = columns.n as usize;
        if n == 0 || columns.n > MAX_REPETITIONS {
            return Vec::new();
        }
        let required = |c: &[i64]| decode_column(c, n);
        let (Some(baseline), Some(used), Some(rss), Some(items), Some(micros)) = (
            required(&columns.baseline),
            required(&columns.used),
            required(&columns.rss),
            required(&columns.items),
            required(&columns.micros),
        ) else {
            return Vec::new();
        };
        let optional = |c: &[i64]| decode_column(c, n);
        let settled = optional(&columns.settled);
        let dataset = optional(&columns.dataset);
        let frag = optional(&columns.frag);
        (0..n)
            .map(|i| DecodedRepetition {
                baseline_used_memory: baseline[i].max(0) as u64,
                used_memory: used[i].max(0) as u64,
                used_memory_rss: rss[i].max(0) as u64,
                items: items[i].max(0) as u64,
                seconds: micros[i] as f64 / 1e6,
                settled_used_memory: settled.as_ref().map(|s| s[i].max(0) as u64),
                used_memory_dataset: dataset.as_ref().map(|d| d[i].max(0) as u64),
                mem_fragmentation_ratio: frag.as_ref().map(|f| f[i] as f64 / 100.0),
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::client::engine::EngineInfo;
    use crate::client::measure::{SettledMemory, WorkloadReport};
    use crate::client::workload::Workload;
    use crate::stats::{Spread, StabilityThresholds};

    fn repetition(i: u32, settled: bool) -> RepetitionResult {
        // Figures of the size a 50-million-member sorted set gives, varying between repetitions.
        let baseline = 912_344 + u64::from(i % 3) * 16;
        let used = 4_830_512_384 + u64::from(i) * 40_961;
        RepetitionResult {
            repetition: i,
            baseline_used_memory: baseline,
            // A later repetition starts from the pages of the one before.
            baseline_used_memory_rss: 9_000_000 + u64::from(i) * 4096,
            used_memory: used,
            used_memory_rss: 5_100_000_000 + u64::from(i) * 1_234_567,
            used_memory_dataset: Some(4_700_000_000 + u64::from(i) * 77_777),
            mem_fragmentation_ratio: Some(1.05 + f64::from(i) / 1000.0),
            items: 50_000_000,
            bytes_per_item: (used - baseline) as f64 / 50_000_000.0,
            commands_per_sec: 540_000.0,
            items_per_sec: 540_000.0,
            commands: 50_000_000,
            seconds: 92.5 + f64::from(i) * 0.137,
            encoding: Some("skiplist".into()),
            expected_unique_items: None,
            keys_with_ttl: None,
            settled: settled.then(|| SettledMemory {
                after_seconds: 5,
                used_memory: used - 1_000_000,
                used_memory_rss: 5_100_000_000 + u64::from(i) * 1_234_567 - 7_654_321,
                bytes_per_item: 0.0,
            }),
            samples: if i == 1 { growth_samples(50) } else { vec![] },
            shards: Vec::new(),
            by_type: Vec::new(),
            peak: None,
            churn: None,
            eviction: None,
        }
    }

    /// A curve like a 50-million-member load's, sampled every million members, with the steps
    /// a growing hash table makes.
    fn growth_samples(n: u64) -> Vec<MemorySample> {
        (1..=n)
            .map(|k| MemorySample {
                items: k * 1_000_000,
                used_memory: 912_344 + k * 96_612_345 + (k * k * 7_919) % 33_554_432,
            })
            .collect()
    }

    pub(crate) fn report(n: u32, settled: bool) -> BenchmarkReport {
        let repetitions: Vec<RepetitionResult> = (1..=n).map(|i| repetition(i, settled)).collect();
        BenchmarkReport {
            name: "redis-7.0.15".into(),
            engine: EngineInfo {
                name: "redis".into(),
                version: "7.0.15".into(),
                allocator: "jemalloc-5.3.0".into(),
                arch: "aarch64".into(),
                ..Default::default()
            },
            workload: WorkloadReport::from(&Workload::SortedSet {
                members: 50_000_000,
                key: "k".into(),
                sample_every: 1_000_000,
            }),
            pipeline: 100,
            ttl: None,
            cluster: None,
            repetitions_requested: n,
            summary: Summary::of(&repetitions, &StabilityThresholds::default()),
            repetitions,
            failed_repetition: None,
            warnings: vec!["RDB snapshots are on".into()],
            error: None,
        }
    }

    #[test]
    fn a_hundred_repetitions_of_a_large_load_fit_with_every_repetition_listed() {
        let report = report(100, false);
        let result = ClientResult::from_report(&report);
        let message = result.to_message();
        assert!(message.len() <= BUDGET, "{} bytes", message.len());
        assert_eq!(result.omitted, 0);
        let decoded = ClientResult::read(&message, 100)
            .unwrap()
            .decoded_repetitions();
        assert_eq!(decoded.len(), 100);
        for (d, r) in decoded.iter().zip(&report.repetitions) {
            assert_eq!(d.used_memory, r.used_memory);
            assert_eq!(d.baseline_used_memory, r.baseline_used_memory);
            assert_eq!(d.used_memory_rss, r.used_memory_rss);
            assert_eq!(d.items, r.items);
            assert_eq!(d.bytes_per_item(), r.bytes_per_item);
            assert!((d.seconds - r.seconds).abs() < 1e-6);
        }
    }

    #[test]
    fn a_hundred_repetitions_of_a_large_load_fit_with_the_whole_growth_curve() {
        let report = report(100, false);
        let result = ClientResult::from_report(&report);
        let message = result.to_message();
        println!(
            "{} bytes, of which the curve takes {}",
            message.len(),
            serde_json::to_string(&result.growth).unwrap().len()
        );
        assert!(message.len() <= BUDGET, "{} bytes", message.len());
        assert_eq!(result.omitted, 0);
        let points = ClientResult::read(&message, 100)
            .unwrap()
            .growth
            .unwrap()
            .points();
        assert_eq!(points, report.repetitions[0].samples);
    }

    /// The first repetition's RSS readings travel in every message that lists a repetition:
    /// 60 settled repetitions fit beside the whole 50-point curve; 100 of them, whose settled
    /// column leaves no room for the curve and some repetitions (as before it was carried),
    /// still carry it.
    #[test]
    fn settled_repetitions_carry_the_first_ones_rss_the_capacity_plan_reads() {
        for (n, whole) in [(60u32, true), (100, false)] {
            let report = report(n, true);
            let message = ClientResult::from_report(&report).to_message();
            assert!(message.len() <= BUDGET, "{n}: {} bytes", message.len());
            let read = ClientResult::read(&message, n).unwrap();
            let first = &report.repetitions[0];
            assert_eq!(
                read.first_settled_rss,
                Some(SettledRss {
                    baseline: first.baseline_used_memory_rss,
                    settled: first.settled.as_ref().unwrap().used_memory_rss,
                }),
                "{n}"
            );
            if whole {
                assert_eq!(read.omitted, 0);
                assert_eq!(read.growth.as_ref().unwrap().points(), first.samples);
                for (d, r) in read.decoded_repetitions().iter().zip(&report.repetitions) {
                    assert_eq!(
                        d.settled_used_memory,
                        Some(r.settled.as_ref().unwrap().used_memory)
                    );
                }
            }
        }
    }

    #[test]
    fn a_long_curve_is_thinned_evenly_to_at_most_64_points_keeping_the_end() {
        let samples = growth_samples(2000);
        let column = GrowthColumn::of(&samples, MAX_GROWTH_POINTS).unwrap();
        let points = column.points();
        assert!(points.len() <= MAX_GROWTH_POINTS, "{}", points.len());
        assert!(points.len() >= MAX_GROWTH_POINTS / 2, "{}", points.len());
        assert_eq!(points.last(), samples.last());
        // Every point is one of the samples, evenly spaced.
        for pair in points.windows(2) {
            assert_eq!(pair[1].items - pair[0].items, column.every);
        }
        for point in &points {
            assert!(samples.contains(point), "{point:?}");
        }
    }

    #[test]
    fn a_malformed_growth_column_gives_no_points() {
        let too_long = GrowthColumn {
            start: 1,
            every: 1,
            used: vec![1; MAX_GROWTH_POINTS + 1],
        };
        assert!(too_long.points().is_empty());
        let overflowing = GrowthColumn {
            start: u64::MAX,
            every: u64::MAX,
            used: vec![1, 1],
        };
        assert!(overflowing.points().is_empty());
        let negative = GrowthColumn {
            start: 1,
            every: 1,
            used: vec![10, -11],
        };
        assert!(negative.points().is_empty());
        let uneven = [
            MemorySample {
                items: 10,
                used_memory: 1,
            },
            MemorySample {
                items: 25,
                used_memory: 2,
            },
        ];
        assert_eq!(GrowthColumn::of(&uneven, MAX_GROWTH_POINTS), None);
    }

    #[test]
    fn small_results_keep_every_optional_column() {
        let result = ClientResult::from_report(&report(10, true));
        let decoded = result.decoded_repetitions();
        assert_eq!(decoded.len(), 10);
        assert_eq!(decoded[0].used_memory_dataset, Some(4_700_077_777));
        assert_eq!(decoded[0].mem_fragmentation_ratio, Some(1.05));
        assert_eq!(
            decoded[0].settled_used_memory,
            Some(4_830_512_384 + 40_961 - 1_000_000)
        );
        assert_eq!(
            result.first_settled_rss,
            Some(SettledRss {
                baseline: 9_000_000 + 4096,
                settled: 5_101_234_567 - 7_654_321
            })
        );
        assert_eq!(result.warnings.len(), 1);
        assert_eq!(result.encoding.as_deref(), Some("skiplist"));
    }

    #[test]
    fn when_even_the_columns_do_not_fit_the_last_repetitions_are_left_out_and_counted() {
        let mut report = report(100, true);
        // Wildly varying figures defeat the difference encoding.
        for (i, r) in report.repetitions.iter_mut().enumerate() {
            r.used_memory_rss = 1_000_000_000_000 + (i as u64) * 999_999_937_777;
            r.used_memory += (i as u64) * 987_654_321_123;
            r.seconds = 1000.0 + i as f64 * 37.123457;
        }
        let result = ClientResult::from_report(&report);
        let message = result.to_message();
        assert!(message.len() <= BUDGET, "{} bytes", message.len());
        assert!(result.omitted > 0);
        let listed = result.decoded_repetitions().len();
        assert_eq!(listed + result.omitted as usize, 100);
        // The curve went before any repetition did.
        assert_eq!(result.growth, None);
        // The summary still covers all of them.
        assert_eq!(result.summary.as_ref().unwrap().repetitions, 100);
    }

    #[test]
    fn a_failed_run_keeps_its_finished_repetitions_and_the_error() {
        let mut report = report(3, false);
        report.error = Some(ErrorReport {
            category: "ConnectionLost".into(),
            message: "x".repeat(5000),
            phase: None,
        });
        report.failed_repetition = Some(crate::client::measure::FailedRepetition {
            repetition: 4,
            commands_sent: 1234,
            baseline_used_memory: Some(1),
            used_memory: None,
            samples: vec![],
        });
        let result =
            ClientResult::read(&ClientResult::from_report(&report).to_message(), 10).unwrap();
        assert_eq!(result.decoded_repetitions().len(), 3);
        assert_eq!(result.error.as_ref().unwrap().category, "ConnectionLost");
        assert!(result.error.as_ref().unwrap().message.len() < 500);
        assert_eq!(result.failed.as_ref().unwrap().commands_sent, 1234);
    }

    #[test]
    fn the_message_carries_commands_per_second_and_items_per_second_is_derived() {
        let mut report = report(3, false);
        // Records stored as strings: four SETs per record.
        for r in &mut report.repetitions {
            r.commands = 4 * r.items;
        }
        report.summary = Summary::of(&report.repetitions, &StabilityThresholds::default());
        let result = ClientResult::from_report(&report);
        let message = result.to_message();
        assert!(message.contains("commands_per_sec") && !message.contains("items_per_sec"));
        let parsed = ClientResult::read(&message, 100).unwrap();
        assert_eq!(parsed.items_per_command(), Some(0.25));
        // A client from before the rename sent the same figure as ops_per_sec.
        let before = ClientResult::read(&message.replace("commands_per_sec", "ops_per_sec"), 3);
        assert_eq!(before.unwrap().summary, parsed.summary);
    }

    #[test]
    fn columns_are_one_value_when_constant_and_differences_otherwise() {
        assert_eq!(encode_column(&[5, 5, 5]), vec![5]);
        assert_eq!(encode_column(&[100, 103, 98]), vec![100, 3, -2]);
        assert_eq!(decode_column(&[100, 3, -2], 3), Some(vec![100, 103, 98]));
        assert_eq!(decode_column(&[7], 2), Some(vec![7, 7]));
        assert_eq!(decode_column(&[1, 2], 3), None);
        assert!(encode_column(&[]).is_empty());
    }

    #[test]
    fn an_empty_or_foreign_message_is_an_error_that_says_so() {
        let empty = ClientResult::read("", 3).unwrap_err();
        assert!(matches!(&empty, ReadError::NoResult(why) if why.contains("no result")));
        let logs = ClientResult::read("panicked at main.rs", 3).unwrap_err();
        assert!(
            matches!(&logs, ReadError::NoResult(why) if why.contains("not a membench result")),
            "{logs:?}"
        );
        let _ = Spread::default();
    }
}
