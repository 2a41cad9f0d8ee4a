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
//! message is the fallback (see `crate::client::pod_io::progress_endpoint`).
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

use crate::error::BenchError;
use crate::text::head;

use crate::crd::engine_settings::MAX_CONFIG_SETTINGS;

use crate::client::measurement::measure::{
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
pub use crate::crd::MAX_REPETITIONS;

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
    /// The first repetition's used_memory_rss empty, when it did not settle (else in
    /// `first_settled_rss`): the empty server's RSS, the recommended limit's `empty_rss` term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_baseline_rss: Option<u64>,
    /// Each listed repetition's churn (`spec.churn`), in order, without the defragmentation
    /// window's readings. Whole results only: a termination message leaves it out first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub churn: Vec<crate::client::phases::churn::ChurnReport>,
    /// Each listed repetition's load past maxmemory (`spec.eviction`), in order. Whole results
    /// only, as `churn`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub eviction: Vec<crate::client::phases::eviction::EvictionReport>,
    /// Each listed repetition's peak phases (`spec.peak`), in order. Whole results only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peak: Vec<crate::client::measurement::measured::PeakReport>,
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
    head(text, MAX_TEXT)
}

impl ClientResult {
    /// The result of a client that refused its plan before measuring anything: the error
    /// alone, its message cut as every result's is, so the operator takes it as sent.
    pub fn refused(error: &BenchError) -> Self {
        let mut error = ErrorReport::from(error);
        error.message = shorten(&error.message);
        Self {
            error: Some(error),
            ..Self::default()
        }
    }

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
                    .map(|(name, value)| (head(name, 64), head(value, 64)))
                    .collect(),
                config_unreported: report
                    .engine
                    .config_unreported
                    .iter()
                    .take(MAX_CONFIG_SETTINGS)
                    .map(|name| head(name, 64))
                    .collect(),
                modules: report.engine.modules.as_ref().map(|modules| {
                    modules
                        .iter()
                        .take(MAX_MODULES)
                        .map(|m| crate::crd::EngineModule {
                            name: head(&m.name, 64),
                            version: head(&m.version, 64),
                        })
                        .collect()
                }),
                cluster: report.engine.cluster.clone().map(|cluster| {
                    crate::crd::ClusterNodeState {
                        state: head(&cluster.state, 64),
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
            first_baseline_rss: report
                .repetitions
                .first()
                .filter(|r| r.settled.is_none())
                .map(|r| r.baseline_used_memory_rss),
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
pub(crate) mod tests;
