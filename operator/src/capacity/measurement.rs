//! A run's result read as the model's input: the growth curve in table entries (a profile's
//! rebuild: its repetitions' end readings, with its keys and keys with a TTL), the
//! fragmentation ratio and the first repetition's settled readings of RSS. From a local report
//! (`membench run`, its result file) or from an engine's status (the operator).

use crate::client::measurement::measure::BenchmarkReport;
use crate::client::workloads::workload::{Workload, expected_unique_keys};
use crate::crd::{EngineStatus, PeakStatus, RecordLayout, SnapshotStatus};

use super::projection::CurvePoint;
use super::rebuild::{RebuildMeasurement, RebuildRepetition};

/// What the model needs of one engine's run.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineMeasurement {
    pub name: String,
    /// `redis`, `valkey` or `dragonfly`.
    pub engine: String,
    /// The engine's own version.
    pub version: String,
    /// used_memory against the table's entries: the first repetition's samples and its end.
    pub curve: Vec<CurvePoint>,
    /// Table entries per item (a record stored as strings is one key per field).
    pub entries_per_item: u64,
    /// Median used_memory_rss / used_memory over the repetitions.
    pub fragmentation_ratio: Option<f64>,
    /// The first repetition's empty server and its settled reading, when the run settled
    /// (`settleSeconds`): what the RSS of the data's growth is projected from.
    pub settled_growth: Option<SettledGrowth>,
    /// The threads the engine ran, when it reports them (Dragonfly: one keyspace table each).
    pub threads: Option<u32>,
    /// A profile's rebuild, projected from its repetitions' end readings instead of a curve
    /// (`super::rebuild`); `curve` is then empty.
    pub rebuild: Option<RebuildMeasurement>,
    /// The first repetition's RSS empty, after the load and after `spec.churn`'s last round,
    /// when the run churned: what the projected RSS is raised by (`super::rss`).
    pub churn: Option<ChurnGrowth>,
    /// The highest used_memory a load past maxmemory reached over its limit (`spec.eviction`),
    /// of the repetition where that ratio was highest: what the projected RSS makes room for
    /// (`super::overshoot`).
    pub eviction: Option<EvictionPeak>,
    /// The highest peak of a snapshot saved under writes over the steady memory
    /// (`spec.peak.snapshot`): what the projected RSS is raised by (`super::peak`).
    pub snapshot: Option<SnapshotPeak>,
    /// used_memory_rss of the first repetition's empty server, when the result has it.
    pub baseline_rss: Option<u64>,
}

/// The write rate of a peak phase: asked for, and reached during the save (or sync).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeakWrites {
    pub asked: u32,
    pub reached: f64,
}

/// A load past maxmemory: the limit (maxmemory of every shard) and the highest used_memory
/// read during it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvictionPeak {
    pub limit: u64,
    pub peak_used_memory: u64,
    /// The peak is the highest of the readings between batches (`peak_source: sampled`), taken
    /// after the engine's eviction, not the engine's own used_memory_peak: it can miss a
    /// transient above them.
    pub sampled: bool,
}

impl EvictionPeak {
    /// From a result's `peak_used_memory` and `overshoot_bytes` (peak - limit), with the peak
    /// taken as the engine's own.
    pub fn of(peak_used_memory: u64, overshoot_bytes: i64) -> Option<Self> {
        let limit = i128::from(peak_used_memory) - i128::from(overshoot_bytes);
        let limit = u64::try_from(limit).ok().filter(|l| *l > 0)?;
        Some(Self {
            limit,
            peak_used_memory,
            sampled: false,
        })
    }

    /// The same, with the result's `peak_source` (`engine` or `sampled`: the words the
    /// result and the status write, `EvictionStatus::peak_source`).
    pub fn with_source(self, peak_source: &str) -> Self {
        Self {
            sampled: peak_source == crate::crd::PEAK_SAMPLED,
            ..self
        }
    }

    /// peak_used_memory / limit.
    pub fn ratio(&self) -> f64 {
        self.peak_used_memory as f64 / self.limit as f64
    }
}

/// A repetition's snapshot peak, as a factor over its steady memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SnapshotPeak {
    /// peak / before (at least 1).
    pub ratio: f64,
    /// What the ratio was measured on: the engine's processes (`process-tree`), its container's
    /// memory cgroup (`container-cgroup`), or `None` when it is estimated from the engine's own
    /// copy-on-write figure (`engine-only`).
    pub measured_on: Option<&'static str>,
    /// The phase that reached it: a snapshot's save, or a replica's full sync (the primary
    /// forks for it as for a save).
    pub phase: PeakPhase,
    /// The writes during it, when the result says.
    pub writes: Option<PeakWrites>,
    /// What the measured counter (the container's memory cgroup, or the process tree) held
    /// just before the save.
    pub counter_before: Option<u64>,
    /// How much more that was than the engine's own RSS after the repetition's load: what a
    /// container holds beside the engine's pages (the page cache, the binary's pages), which
    /// the ratio multiplies too. Set from the repetition ([`highest_snapshot`]).
    pub held_above_rss: Option<u64>,
}

/// The phase a peak was measured in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PeakPhase {
    #[default]
    Snapshot,
    Replica,
}

impl PeakPhase {
    /// The spec's field, for notes.
    pub fn field(self) -> &'static str {
        match self {
            PeakPhase::Snapshot => "spec.peak.snapshot",
            PeakPhase::Replica => "spec.peak.replica",
        }
    }

    /// What the node holds at the peak, for notes.
    pub fn what(self) -> &'static str {
        match self {
            PeakPhase::Snapshot => "during a save",
            PeakPhase::Replica => "while it sends a replica its full sync",
        }
    }
}

impl SnapshotPeak {
    /// From a repetition's snapshot: its measured ratio (or a container's high-water mark over
    /// its memory before, when the mark did not rise), or the engine's copy-on-write size over
    /// its used_memory before the save; None when none is known.
    pub fn of(snapshot: &SnapshotStatus) -> Option<Self> {
        let writes = (snapshot.writes_per_sec > 0.0 || snapshot.writes_per_sec_asked > 0)
            .then_some(PeakWrites {
                asked: snapshot.writes_per_sec_asked,
                reached: snapshot.writes_per_sec,
            });
        // A container whose high-water mark did not rise during the save (no peakBytes): the
        // save's peak was at most that mark, so the mark over the memory before is its ratio at
        // most (seen with Dragonfly on a real node: without it the run had no peak, and the
        // recommendation no save term and no write rate).
        let at_most = || {
            let before = snapshot.before_bytes.filter(|b| *b > 0)?;
            Some(snapshot.high_water_bytes? as f64 / before as f64)
        };
        let ratio = snapshot.ratio.or_else(at_most);
        if let Some(ratio) = ratio.filter(|r| r.is_finite() && *r > 0.0) {
            return Some(Self {
                counter_before: snapshot.before_bytes,
                held_above_rss: None,
                ratio: ratio.max(1.0),
                measured_on: Some(if snapshot.source == "container-cgroup" {
                    "the engine container's memory cgroup"
                } else {
                    "the engine's process tree"
                }),
                phase: PeakPhase::Snapshot,
                writes,
            });
        }
        let cow = snapshot.cow_bytes?;
        (snapshot.used_memory_before > 0).then(|| Self {
            counter_before: None,
            held_above_rss: None,
            ratio: 1.0 + cow as f64 / snapshot.used_memory_before as f64,
            measured_on: None,
            phase: PeakPhase::Snapshot,
            writes,
        })
    }

    /// The higher of a repetition's peaks: its snapshot's and its replica sync's (the
    /// primary's, in a snapshot's shape).
    pub fn of_peak(peak: &PeakStatus) -> Option<Self> {
        let snapshot = peak.snapshot.as_ref().and_then(Self::of);
        let replica = peak.replica.as_ref().and_then(|r| {
            Self::of(&r.primary).map(|p| Self {
                phase: PeakPhase::Replica,
                ..p
            })
        });
        highest_snapshot_peak(snapshot.into_iter().chain(replica))
    }
}

/// The highest of the repetitions' peaks.
pub fn highest_snapshot_peak(peaks: impl Iterator<Item = SnapshotPeak>) -> Option<SnapshotPeak> {
    peaks.max_by(|a, b| a.ratio.total_cmp(&b.ratio))
}

/// The highest of the repetitions' snapshot peaks.
fn highest_snapshot(repetitions: &[Reading]) -> Option<SnapshotPeak> {
    highest_snapshot_peak(repetitions.iter().filter_map(|r| {
        r.snapshot.map(|p| SnapshotPeak {
            held_above_rss: p
                .counter_before
                .map(|before| before.saturating_sub(r.used_memory_rss)),
            ..p
        })
    }))
}

/// The peak of the repetitions' whose ratio to its limit is highest.
fn highest_peak(repetitions: &[Reading]) -> Option<EvictionPeak> {
    repetitions
        .iter()
        .filter_map(|r| r.eviction)
        .max_by(|a, b| a.ratio().total_cmp(&b.ratio()))
}

/// used_memory_rss of the first repetition's empty server, after its load (settled, when it
/// settled) and after the last round of its churn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChurnGrowth {
    pub baseline_rss: u64,
    pub loaded_rss: u64,
    pub churned_rss: u64,
}

/// The first repetition's empty server and the same server `settleSeconds` after its load:
/// used_memory and used_memory_rss of both. The settled reading, not the one right after the
/// load: Redis and Valkey refresh used_memory_rss only in their 100 ms cron, so the reading
/// right after a short load may still be the empty server's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SettledGrowth {
    pub baseline_used_memory: u64,
    pub baseline_used_memory_rss: u64,
    pub settled_used_memory: u64,
    pub settled_used_memory_rss: u64,
}

/// Entries of the growing table per item of a workload.
fn entries_per_item(workload: &Workload) -> u64 {
    match workload {
        Workload::Records {
            layout: RecordLayout::Strings,
            fields,
            ..
        } => fields.len() as u64,
        _ => 1,
    }
}

/// The table's entries after `items` items of a sample (random keys: the expected distinct
/// keys after that many SETs).
fn sample_entries(workload: &Workload, items: u64) -> u64 {
    match workload {
        Workload::RandomStrings { keyspace, .. } => {
            expected_unique_keys(items, *keyspace).round() as u64
        }
        _ => items * entries_per_item(workload),
    }
}

/// The median of the finite ratios above zero.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite() && *v > 0.0);
    crate::stats::Spread::of(&values).map(|s| s.median)
}

/// What both sources give: a repetition's (baseline, used_memory, used_memory_rss, items),
/// and its empty server's RSS and settled reading when known.
struct Reading {
    baseline_used_memory: u64,
    used_memory: u64,
    used_memory_rss: u64,
    items: u64,
    baseline_used_memory_rss: Option<u64>,
    /// (used_memory, used_memory_rss) `settleSeconds` after the load.
    settled: Option<(u64, u64)>,
    /// used_memory_rss after the last churn round.
    churned_rss: Option<u64>,
    /// The load past maxmemory, when the repetition had one.
    eviction: Option<EvictionPeak>,
    /// The snapshot saved under writes, when the repetition had one.
    snapshot: Option<SnapshotPeak>,
}

impl Reading {
    fn churn_growth(&self) -> Option<ChurnGrowth> {
        Some(ChurnGrowth {
            baseline_rss: self.baseline_used_memory_rss?,
            loaded_rss: self.settled.map_or(self.used_memory_rss, |(_, rss)| rss),
            churned_rss: self.churned_rss?,
        })
    }

    fn settled_growth(&self) -> Option<SettledGrowth> {
        let (settled_used_memory, settled_used_memory_rss) = self.settled?;
        Some(SettledGrowth {
            baseline_used_memory: self.baseline_used_memory,
            baseline_used_memory_rss: self.baseline_used_memory_rss?,
            settled_used_memory,
            settled_used_memory_rss,
        })
    }
}

/// Who was measured: the entry's name, the engine's kind and version.
struct Identity {
    name: String,
    engine: String,
    version: String,
    threads: Option<u32>,
}

#[cfg(test)]
impl EngineMeasurement {
    /// A measurement of `name` (`engine` at `version`) with nothing measured yet: no curve, one
    /// table entry an item, no ratio and no phase. Tests set what they need with `..`.
    pub(crate) fn bare(name: &str, engine: &str, version: &str) -> Self {
        Self {
            name: name.into(),
            engine: engine.into(),
            version: version.into(),
            curve: Vec::new(),
            entries_per_item: 1,
            fragmentation_ratio: None,
            settled_growth: None,
            threads: None,
            rebuild: None,
            churn: None,
            eviction: None,
            snapshot: None,
            baseline_rss: None,
        }
    }
}

impl EngineMeasurement {
    /// The measurement of `samples` (items, used_memory) of the first repetition and every
    /// repetition's final reading.
    fn of(
        who: Identity,
        workload: &Workload,
        samples: impl Iterator<Item = (u64, u64)>,
        repetitions: &[Reading],
    ) -> Result<Self, String> {
        let first = repetitions
            .first()
            .ok_or_else(|| format!("{}: no finished repetition to project from", who.name))?;
        let ratio = median(
            repetitions
                .iter()
                .map(|r| r.used_memory_rss as f64 / r.used_memory.max(1) as f64)
                .collect(),
        );
        // A rebuild's load reads used_memory by type, which is no growth curve: it is
        // projected from its end readings (`super::rebuild`).
        if let Workload::Profile(profile) = workload {
            return Ok(Self {
                name: who.name,
                engine: who.engine,
                version: who.version,
                curve: Vec::new(),
                entries_per_item: 1,
                fragmentation_ratio: ratio,
                settled_growth: first.settled_growth(),
                threads: who.threads,
                churn: first.churn_growth(),
                eviction: highest_peak(repetitions),
                snapshot: highest_snapshot(repetitions),
                baseline_rss: first.baseline_used_memory_rss,
                rebuild: Some(RebuildMeasurement {
                    keys: profile.keys,
                    ttl_keys: profile.ttl_keys,
                    repetitions: repetitions
                        .iter()
                        .map(|r| RebuildRepetition {
                            baseline_used_memory: r.baseline_used_memory,
                            used_memory: r.used_memory,
                            keys: r.items,
                        })
                        .collect(),
                }),
            });
        }
        let mut curve: Vec<CurvePoint> = samples
            .map(|(items, used_memory)| CurvePoint {
                entries: sample_entries(workload, items),
                used_memory,
            })
            .collect();
        // The end of the load (verified entries), unless a sample is already there.
        let end = CurvePoint {
            entries: first.items * entries_per_item(workload),
            used_memory: first.used_memory,
        };
        if curve.last().is_none_or(|p| p.entries < end.entries) {
            curve.push(end);
        }
        Ok(Self {
            name: who.name,
            engine: who.engine,
            version: who.version,
            curve,
            entries_per_item: entries_per_item(workload),
            fragmentation_ratio: ratio,
            settled_growth: first.settled_growth(),
            threads: who.threads,
            rebuild: None,
            churn: first.churn_growth(),
            eviction: highest_peak(repetitions),
            snapshot: highest_snapshot(repetitions),
            baseline_rss: first.baseline_used_memory_rss,
        })
    }

    /// From a local run's report of one engine.
    pub fn from_report(report: &BenchmarkReport) -> Result<Self, String> {
        let first = report.repetitions.first();
        Self::of(
            Identity {
                name: report.name.clone(),
                engine: report.engine.name.clone(),
                version: report.engine.version.clone(),
                threads: report.engine.threads,
            },
            &report.workload.workload,
            first
                .into_iter()
                .flat_map(|r| r.samples.iter().map(|s| (s.items, s.used_memory))),
            &report
                .repetitions
                .iter()
                .map(|r| Reading {
                    baseline_used_memory: r.baseline_used_memory,
                    used_memory: r.used_memory,
                    used_memory_rss: r.used_memory_rss,
                    items: r.items,
                    baseline_used_memory_rss: Some(r.baseline_used_memory_rss),
                    settled: r
                        .settled
                        .as_ref()
                        .map(|s| (s.used_memory, s.used_memory_rss)),
                    churned_rss: r.churn.as_ref().and_then(|c| c.churned_rss()),
                    eviction: r.eviction.as_ref().and_then(|e| {
                        EvictionPeak::of(e.peak_used_memory, e.overshoot_bytes)
                            .map(|p| p.with_source(&e.peak_source))
                    }),
                    snapshot: r.peak.as_ref().and_then(|p| {
                        SnapshotPeak::of_peak(&crate::crd::PeakStatus {
                            snapshot: p.snapshot.as_ref().map(Into::into),
                            replica: p.replica.as_ref().map(Into::into),
                        })
                    }),
                })
                .collect::<Vec<_>>(),
        )
    }

    /// From an engine's status (its growth curve holds at most 64 points).
    pub fn from_status(status: &EngineStatus, workload: &Workload) -> Result<Self, String> {
        Self::of(
            Identity {
                name: status.name.clone(),
                engine: status.engine.to_string(),
                version: status
                    .version
                    .clone()
                    .unwrap_or_else(|| status.requested_version.clone()),
                threads: status.threads,
            },
            workload,
            status.growth.iter().map(|g| (g.items, g.used_memory)),
            &status
                .repetitions
                .iter()
                .map(|r| Reading {
                    baseline_used_memory: r.baseline_used_memory,
                    used_memory: r.used_memory,
                    used_memory_rss: r.used_memory_rss,
                    items: r.items,
                    baseline_used_memory_rss: r.baseline_used_memory_rss,
                    settled: r.settled_used_memory.zip(r.settled_used_memory_rss),
                    churned_rss: r.churn.as_ref().and_then(|c| c.churned_rss()),
                    eviction: r.eviction.as_ref().and_then(|e| {
                        EvictionPeak::of(e.peak_used_memory, e.overshoot_bytes)
                            .map(|p| p.with_source(&e.peak_source))
                    }),
                    snapshot: r.peak.as_ref().and_then(SnapshotPeak::of_peak),
                })
                .collect::<Vec<_>>(),
        )
    }
}
