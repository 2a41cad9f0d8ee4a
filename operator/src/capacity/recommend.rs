//! The pair a team writes into its manifests: the engine's `maxmemory` and its container's
//! memory limit (and request), at the size planned for (`spec.capacity.items`).
//!
//! `maxmemory` is the used_memory projected at that size. The limit is a sum of named terms,
//! each measured by this run or a default the spec sets (`spec.capacity.defaults`) and named as
//! one:
//! - `empty_rss`: the engine's RSS with no data (the first repetition's empty server);
//! - `data_rss`: maxmemory's data as RSS: the RSS the data added, by the run's settled growth or
//!   its ratio, with the fragmentation after `spec.churn`'s rounds when the run churned;
//! - `copy_on_write`: what a forking engine copies while it saves or syncs a replica under
//!   writes: the measured peak over steady memory (`spec.peak.snapshot`, `spec.peak.replica`)
//!   at the write rate the run reached; a default share of the data where none was measured; no
//!   term for an engine that saves without a fork, unless its save's peak was measured
//!   (`save_peak`);
//! - `replication_backlog`: the engine's `repl-backlog-size` (default: its own default);
//! - `replica_output_buffer`: writes buffered for a replica during its sync (inside the measured
//!   peak when the run measured a replica's sync; a default otherwise);
//! - `eviction_overshoot`: how far used_memory went past maxmemory under eviction
//!   (`spec.eviction`), as a share of maxmemory;
//! - `client_buffers`: connections' query and reply buffers (a default).
//!
//! The request is what the engine holds steadily (`empty_rss + data_rss`); the reserve,
//! `(limit - maxmemory) / limit`, is the figure comparable with ElastiCache's
//! `reserved-memory-percent`. Pure: no I/O.

use serde::{Deserialize, Serialize};

use super::measurement::{EngineMeasurement, PeakPhase};
use super::{peak, rss};
use crate::crd::{EngineKind, dragonfly_memory};

const MIB: u64 = 1 << 20;

/// The figures used where the run measured none (`spec.capacity.defaults`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TermDefaults {
    /// The share of `data_rss` a forking engine's save is taken to copy when no peak was
    /// measured, in percent (100: every page written during the save, the worst case).
    pub copy_on_write_percent: u32,
    /// How many times longer than the measured save (or sync) a deployed one may last: the
    /// measured copy is raised to what a save that long copies (see [`peak::longer_save_copy`]).
    pub save_length_factor: u32,
    /// `repl-backlog-size`; None: the engine's own default.
    pub replication_backlog_bytes: Option<u64>,
    /// A replica's output buffer during its full sync.
    pub replica_output_buffer_bytes: u64,
    /// Clients' query and reply buffers.
    pub client_buffers_bytes: u64,
}

impl Default for TermDefaults {
    fn default() -> Self {
        Self {
            copy_on_write_percent: 100,
            save_length_factor: crate::crd::default_save_length_factor(),
            replication_backlog_bytes: None,
            replica_output_buffer_bytes: 0,
            client_buffers_bytes: 4 * MIB,
        }
    }
}

impl From<&crate::crd::CapacityDefaults> for TermDefaults {
    fn from(spec: &crate::crd::CapacityDefaults) -> Self {
        Self {
            copy_on_write_percent: spec.copy_on_write_percent,
            save_length_factor: spec.save_length_factor,
            replication_backlog_bytes: spec.replication_backlog_bytes,
            replica_output_buffer_bytes: spec.replica_output_buffer_bytes,
            client_buffers_bytes: spec.client_buffers_bytes,
        }
    }
}

/// Where a term's bytes come from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TermSource {
    /// A measurement of this run.
    Measured,
    /// A default (`spec.capacity.defaults`, or membench's own).
    Default,
}

impl TermSource {
    /// The word, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            TermSource::Measured => "measured",
            TermSource::Default => "default",
        }
    }
}

/// One term of the memory limit.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Term {
    pub name: String,
    pub bytes: u64,
    pub source: TermSource,
    /// What the figure is, and what would measure it when it is a default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The lines to paste.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DeployConfig {
    /// The container's `resources` (requests and limits of memory, in MiB).
    pub resources: String,
    /// The engine's `maxmemory` setting: a config file line, or Dragonfly's flag.
    pub maxmemory: String,
    /// ElastiCache's nearest `reserved-memory-percent` (Redis and Valkey).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elasticache_reserved_memory_percent: Option<u32>,
}

/// The recommended settings of one engine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Recommended {
    pub maxmemory_bytes: u64,
    /// The sum of `terms`, rounded up to a MiB.
    pub memory_limit_bytes: u64,
    /// What the engine holds steadily: `empty_rss + data_rss`, rounded up to a MiB.
    pub memory_request_bytes: u64,
    /// (memory_limit_bytes - maxmemory_bytes) / memory_limit_bytes, in percent.
    pub reserve_percent: f64,
    pub terms: Vec<Term>,
    /// The write rate the copy-on-write term holds for: the rate the run reached during its
    /// save (or sync), when it measured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes_per_sec: Option<f64>,
    /// What to add to the spec to measure a default, and rates not reached.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub config: DeployConfig,
}

/// The recommendation as the status carries it (the reserve to a tenth of a percent, the rate
/// to a write a second).
impl From<&Recommended> for crate::crd::RecommendedStatus {
    fn from(r: &Recommended) -> Self {
        Self {
            maxmemory_bytes: r.maxmemory_bytes,
            memory_limit_bytes: r.memory_limit_bytes,
            memory_request_bytes: r.memory_request_bytes,
            reserve_percent: (r.reserve_percent * 10.0).round() / 10.0,
            writes_per_sec: r.writes_per_sec.map(f64::round),
            terms: r
                .terms
                .iter()
                .map(|t| crate::crd::RecommendedTermStatus {
                    name: t.name.clone(),
                    bytes: t.bytes,
                    source: t.source.as_str().to_string(),
                })
                .collect(),
        }
    }
}

/// Its `repl-backlog-size` when not set, by engine and version: a version's default, not a
/// capability of the kind (`EngineCapabilities`).
fn default_backlog(engine: &str, version: &str) -> u64 {
    match engine.parse::<EngineKind>() {
        Ok(EngineKind::Dragonfly) => 0,
        // Valkey 8.0 raised it from 1 MiB to 10 MiB.
        Ok(EngineKind::Valkey) if major(version) >= 8 => 10 * MIB,
        _ => MIB,
    }
}

fn major(version: &str) -> u32 {
    version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

fn round_up_mib(bytes: u64) -> u64 {
    bytes.div_ceil(MIB).saturating_mul(MIB)
}

/// The maxmemory recommended for `used_memory` of data: that, rounded up to a MiB (before an
/// engine's start minimum raises it).
pub fn data_maxmemory(used_memory: u64) -> u64 {
    round_up_mib(used_memory)
}

/// The recommended settings for `measurement` at `used_memory` (the projected used_memory at
/// the planned size).
pub fn recommend(
    measurement: &EngineMeasurement,
    used_memory: u64,
    defaults: &TermDefaults,
) -> Recommended {
    let can = EngineKind::capabilities_of(&measurement.engine);
    let maxmemory = data_maxmemory(used_memory);
    let mut notes = Vec::new();
    let mut terms = Vec::new();

    // The steady RSS at maxmemory, before any room for peaks: the data's growth (raised by a
    // churn's factor when the run churned), never below used_memory.
    let steady = rss::project(measurement, maxmemory, maxmemory);
    let empty = measurement.baseline_rss;
    let empty_bytes = empty.unwrap_or(0).min(steady.rss);
    terms.push(match empty {
        Some(_) => Term {
            name: "empty_rss".into(),
            bytes: empty_bytes,
            source: TermSource::Measured,
            note: Some("the engine's RSS with no data, before the first load".into()),
        },
        None => Term {
            name: "empty_rss".into(),
            bytes: 0,
            source: TermSource::Default,
            note: Some(
                "the result has no reading of the empty server's RSS; counted inside data_rss"
                    .into(),
            ),
        },
    });
    // Where the peak was measured on a counter that holds more than the engine's RSS (a
    // container's memory cgroup: the page cache, the binary's pages; seen on a real node,
    // 276.1 MB before the save against 268.4 MB of RSS), the steady memory the peak's ratio
    // multiplies has that too, or the limit would fall short of the peak.
    let held_above = measurement
        .snapshot
        .as_ref()
        .map(peak::held_above_rss)
        .filter(|b| *b > 0);
    let steady_rss = steady.rss + held_above.unwrap_or(0);
    let data_rss = steady_rss.saturating_sub(empty_bytes);
    let fragmentation = if steady.churn_factor.is_some() {
        "with the fragmentation measured after spec.churn's rounds"
    } else if measurement.churn.is_some() {
        "with the fragmentation after the load (the churn raised it by less than the load's)"
    } else {
        notes.push(
            "no spec.churn: data_rss has the fragmentation right after a load; add spec.churn (rounds of deletes and overwrites) to measure it as a cache lives".into(),
        );
        "with the fragmentation after the load"
    };
    terms.push(Term {
        name: "data_rss".into(),
        bytes: data_rss,
        source: TermSource::Measured,
        note: Some(match held_above {
            Some(above) => format!(
                "maxmemory's data as RSS, {fragmentation}, and the {above} bytes {} held above the engine's RSS before the save",
                measurement
                    .snapshot
                    .and_then(|p| p.measured_on)
                    .unwrap_or("the measured peak's counter")
            ),
            None => format!("maxmemory's data as RSS, {fragmentation}"),
        }),
    });

    // The save's (or a replica's sync's) peak over steady memory.
    let mut writes_per_sec = None;
    let mut replica_measured = false;
    match &measurement.snapshot {
        Some(peak) => {
            let measured = peak::measured_copy(peak, steady_rss);
            // A forking engine's copy grows with the save's length; a save without a fork
            // copies nothing, and its peak is taken as measured. The node's sizing plans the
            // same copy (`peak::make_room`).
            let bytes = peak::planned_copy(
                peak,
                steady_rss,
                peak::SaveCopyPlan::of(&measurement.engine, defaults.save_length_factor),
            );
            replica_measured = peak.phase == PeakPhase::Replica;
            let rate = peak.writes.map(|w| w.reached);
            writes_per_sec = rate;
            if let Some(w) = peak.writes
                && w.asked > 0
                && w.reached < 0.95 * f64::from(w.asked)
            {
                notes.push(format!(
                    "{} asked {} writes/s and reached {:.0}: the copy-on-write term holds for {:.0} writes/s",
                    peak.phase.field(),
                    w.asked,
                    w.reached,
                    w.reached
                ));
            }
            terms.push(Term {
                name: if can.forks_to_save {
                    "copy_on_write"
                } else {
                    "save_peak"
                }
                .into(),
                bytes,
                source: TermSource::Measured,
                note: Some(format!(
                    "peak over steady memory {} ({:.3}){}, measured on {}{}",
                    peak.phase.what(),
                    peak.ratio,
                    rate.map_or_else(String::new, |r| format!(" at {r:.0} writes/s")),
                    peak.measured_on
                        .unwrap_or("the engine's own copy-on-write figure"),
                    if bytes > measured {
                        format!(
                            ": {measured} bytes copied, raised to what a save {} times as long copies (spec.capacity.defaults.saveLengthFactor)",
                            defaults.save_length_factor
                        )
                    } else {
                        String::new()
                    }
                )),
            });
        }
        None if can.forks_to_save => {
            let bytes = data_rss.saturating_mul(u64::from(defaults.copy_on_write_percent)) / 100;
            notes.push(format!(
                "no spec.peak.snapshot: a forking engine copies the pages written while it saves; copy_on_write is the default {}% of data_rss; add spec.peak.snapshot with your write rate to measure it",
                defaults.copy_on_write_percent
            ));
            terms.push(Term {
                name: "copy_on_write".into(),
                bytes,
                source: TermSource::Default,
                note: Some(format!(
                    "{}% of data_rss (spec.capacity.defaults.copyOnWritePercent)",
                    defaults.copy_on_write_percent
                )),
            });
        }
        // An engine that saves without a fork copies nothing: no term, since none was measured.
        None => {}
    }

    let backlog = defaults
        .replication_backlog_bytes
        .unwrap_or_else(|| default_backlog(&measurement.engine, &measurement.version));
    if backlog > 0 || defaults.replication_backlog_bytes.is_some() {
        terms.push(Term {
            name: "replication_backlog".into(),
            bytes: backlog,
            source: TermSource::Default,
            note: Some(match defaults.replication_backlog_bytes {
                Some(_) => {
                    "repl-backlog-size (spec.capacity.defaults.replicationBacklogBytes)".into()
                }
                None => format!(
                    "the engine's default repl-backlog-size ({} {})",
                    measurement.engine, measurement.version
                ),
            }),
        });
    }
    terms.push(if replica_measured {
        Term {
            name: "replica_output_buffer".into(),
            bytes: 0,
            source: TermSource::Measured,
            note: Some("inside the measured peak of the replica's sync".into()),
        }
    } else {
        Term {
            name: "replica_output_buffer".into(),
            bytes: defaults.replica_output_buffer_bytes,
            source: TermSource::Default,
            note: Some(
                "writes buffered for a replica during its full sync (spec.capacity.defaults.replicaOutputBufferBytes); spec.peak.replica measures it"
                    .into(),
            ),
        }
    });

    match &measurement.eviction {
        Some(peak) => {
            let share = (peak.ratio() - 1.0).max(0.0);
            terms.push(Term {
                name: "eviction_overshoot".into(),
                bytes: (share * maxmemory as f64).ceil() as u64,
                source: TermSource::Measured,
                note: Some(format!(
                    "used_memory went {:.4}% past maxmemory under eviction (spec.eviction){}",
                    share * 100.0,
                    if peak.sampled {
                        // The engine's used_memory_peak cannot be reset: when an earlier load
                        // set it higher, only the readings between batches are left.
                        ": the peak is the highest reading between batches of writes (taken after the engine's eviction), not the engine's own used_memory_peak, which an earlier load had set higher; it may miss a transient above them"
                    } else {
                        ""
                    }
                )),
            });
        }
        None => {
            notes.push(
                "no spec.eviction: an engine evicting at maxmemory can go past it; add spec.eviction to measure by how much".into(),
            );
            terms.push(Term {
                name: "eviction_overshoot".into(),
                bytes: 0,
                source: TermSource::Default,
                note: Some("not measured (spec.eviction)".into()),
            });
        }
    }
    terms.push(Term {
        name: "client_buffers".into(),
        bytes: defaults.client_buffers_bytes,
        source: TermSource::Default,
        note: Some(
            "connections' query and reply buffers (spec.capacity.defaults.clientBuffersBytes)"
                .into(),
        ),
    });

    // An engine that will not start below a maxmemory per thread (Dragonfly) gets that
    // maxmemory, and a limit that gives it that much as an engine pod does (a share of the
    // limit): the data's terms above hold what it uses, this term what it needs to start.
    let mut configured_maxmemory = maxmemory;
    if can.least_maxmemory_per_thread > 0 {
        let threads = measurement.threads.unwrap_or(dragonfly_memory::POD_THREADS);
        let least = u64::from(threads) * can.least_maxmemory_per_thread;
        if maxmemory < least {
            configured_maxmemory = least;
            let least_limit = dragonfly_memory::minimum_limit(threads);
            let sum: u64 = terms.iter().map(|t| t.bytes).sum();
            notes.push(format!(
                "{} needs a maxmemory of at least {} MiB per thread to start: with {threads} thread{} maxmemory is {} MiB (the data needs {} MiB), and the limit at least {} MiB, of which an engine pod gives it {}%",
                measurement.engine,
                can.least_maxmemory_per_thread / MIB,
                if threads == 1 { "" } else { "s" },
                least / MIB,
                maxmemory / MIB,
                least_limit / MIB,
                dragonfly_memory::MAXMEMORY_PERCENT
            ));
            if sum < least_limit {
                terms.push(Term {
                    name: "start_minimum".into(),
                    bytes: least_limit - sum,
                    source: TermSource::Default,
                    note: Some(format!(
                        "what the terms above leave short of the least limit {} starts under with {threads} thread{} ({} MiB)",
                        measurement.engine,
                        if threads == 1 { "" } else { "s" },
                        least_limit / MIB
                    )),
                });
            }
        }
    }
    let maxmemory = configured_maxmemory;
    let sum: u64 = terms.iter().map(|t| t.bytes).sum();
    let limit = round_up_mib(sum.max(maxmemory));
    let request = round_up_mib(empty_bytes + data_rss).min(limit);
    let reserve_percent = (limit - maxmemory.min(limit)) as f64 / limit.max(1) as f64 * 100.0;
    let config = DeployConfig {
        resources: format!(
            "resources:\n  requests:\n    memory: {}Mi\n  limits:\n    memory: {}Mi",
            request / MIB,
            limit / MIB
        ),
        maxmemory: can.maxmemory.written(maxmemory),
        elasticache_reserved_memory_percent: can
            .elasticache
            .then(|| reserve_percent.round().clamp(0.0, 100.0) as u32),
    };
    Recommended {
        maxmemory_bytes: maxmemory,
        memory_limit_bytes: limit,
        memory_request_bytes: request,
        reserve_percent,
        terms,
        writes_per_sec,
        notes,
        config,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::measurement::{EvictionPeak, PeakWrites, SettledGrowth, SnapshotPeak};

    /// Valkey at 1 GB of data: 3 MB empty, RSS 1.1 bytes a byte of data.
    fn valkey() -> EngineMeasurement {
        EngineMeasurement {
            fragmentation_ratio: Some(1.1),
            settled_growth: Some(SettledGrowth {
                baseline_used_memory: 1_000_000,
                baseline_used_memory_rss: 3_000_000,
                settled_used_memory: 101_000_000,
                settled_used_memory_rss: 113_000_000,
            }),
            baseline_rss: Some(3_000_000),
            ..EngineMeasurement::bare("valkey-9.1", "valkey", "9.1.2")
        }
    }

    fn term<'a>(r: &'a Recommended, name: &str) -> &'a Term {
        r.terms
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", r.terms))
    }

    #[test]
    fn the_limit_is_the_sum_of_its_terms_and_the_reserve_is_what_it_holds_above_maxmemory() {
        let r = recommend(&valkey(), 1_000_000_000, &TermDefaults::default());
        assert_eq!(r.maxmemory_bytes, 954 * MIB, "1 GB rounded up to a MiB");
        let sum: u64 = r.terms.iter().map(|t| t.bytes).sum();
        assert_eq!(r.memory_limit_bytes, round_up_mib(sum));
        assert_eq!(term(&r, "empty_rss").bytes, 3_000_000);
        // The data's RSS: 1.1 bytes a byte of data above the empty server's.
        let data = term(&r, "data_rss").bytes;
        let expected = 3_000_000.0 + 1.1 * (954.0 * MIB as f64 - 1_000_000.0) - 3_000_000.0;
        assert!(
            (data as f64 - expected).abs() < 2.0,
            "{data} against {expected}"
        );
        // No snapshot measured on a forking engine: the default copy of all of the data.
        let cow = term(&r, "copy_on_write");
        assert_eq!((cow.bytes, cow.source), (data, TermSource::Default));
        assert_eq!(term(&r, "replication_backlog").bytes, 10 * MIB);
        assert_eq!(r.memory_request_bytes, round_up_mib(3_000_000 + data));
        let reserve =
            (r.memory_limit_bytes - r.maxmemory_bytes) as f64 / r.memory_limit_bytes as f64 * 100.0;
        assert!((r.reserve_percent - reserve).abs() < 1e-9);
        assert_eq!(
            r.config.elasticache_reserved_memory_percent,
            Some(reserve.round() as u32)
        );
        assert_eq!(r.config.maxmemory, format!("maxmemory {}", 954 * MIB));
        assert!(
            r.config
                .resources
                .contains(&format!("memory: {}Mi", r.memory_limit_bytes / MIB))
        );
        assert!(r.notes.iter().any(|n| n.contains("add spec.peak.snapshot")));
        assert!(r.notes.iter().any(|n| n.contains("add spec.churn")));
        assert!(r.notes.iter().any(|n| n.contains("add spec.eviction")));
    }

    #[test]
    fn a_measured_peak_and_overshoot_replace_the_defaults_and_a_rate_not_reached_is_said() {
        let mut m = valkey();
        m.snapshot = Some(SnapshotPeak {
            counter_before: None,
            held_above_rss: None,
            ratio: 1.4,
            measured_on: Some("the engine's process tree"),
            phase: PeakPhase::Snapshot,
            writes: Some(PeakWrites {
                asked: 100_000,
                reached: 60_000.0,
            }),
        });
        m.eviction = Some(EvictionPeak {
            limit: 100 << 20,
            peak_used_memory: (101 << 20),
            sampled: false,
        });
        let as_measured = TermDefaults {
            save_length_factor: 1,
            ..TermDefaults::default()
        };
        let r = recommend(&m, 1_000_000_000, &as_measured);
        let steady = term(&r, "empty_rss").bytes + term(&r, "data_rss").bytes;
        let cow = term(&r, "copy_on_write");
        assert_eq!(cow.source, TermSource::Measured);
        assert!((cow.bytes as f64 - 0.4 * steady as f64).abs() <= 1.0);
        // By default, what a save three times as long copies: 1 - 0.6^3 of the steady memory.
        let longer = recommend(&m, 1_000_000_000, &TermDefaults::default());
        let cow = term(&longer, "copy_on_write");
        assert!(
            (cow.bytes as f64 - 0.784 * steady as f64).abs() <= 2.0,
            "{cow:?} against {steady}"
        );
        assert!(
            cow.note.as_deref().unwrap_or("").contains(
                "a save 3 times as long copies (spec.capacity.defaults.saveLengthFactor)"
            ),
            "{cow:?}"
        );
        let over = term(&r, "eviction_overshoot");
        assert_eq!(over.source, TermSource::Measured);
        assert_eq!(over.bytes, (0.01 * r.maxmemory_bytes as f64).ceil() as u64);
        assert_eq!(r.writes_per_sec, Some(60_000.0));
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("asked 100000 writes/s and reached 60000")),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn an_engine_that_saves_without_a_fork_gets_no_copy_on_write_term_unless_its_save_was_measured()
    {
        let mut m = valkey();
        m.engine = "dragonfly".into();
        m.version = "1.40.0".into();
        let r = recommend(&m, 1_000_000_000, &TermDefaults::default());
        assert!(r.terms.iter().all(|t| t.name != "copy_on_write"));
        assert!(r.terms.iter().all(|t| t.name != "replication_backlog"));
        assert_eq!(r.config.maxmemory, format!("--maxmemory={}", 954 * MIB));
        assert_eq!(r.config.elasticache_reserved_memory_percent, None);
        m.snapshot = Some(SnapshotPeak {
            counter_before: None,
            held_above_rss: None,
            ratio: 1.02,
            measured_on: Some("the engine's process tree"),
            phase: PeakPhase::Snapshot,
            writes: None,
        });
        let r = recommend(&m, 1_000_000_000, &TermDefaults::default());
        assert_eq!(term(&r, "save_peak").source, TermSource::Measured);
    }

    /// Seen on the dev cluster's real node (Valkey 9.1.2, 200,000 keys of 1 KiB): 267.8 MB of
    /// used_memory, the container 276.1 MB before the save and 539.3 MB at its peak. A limit
    /// from the engine's RSS (268.4 MB) times the container's ratio came out 0.14% above that
    /// peak, held only by the backlog's and the clients' terms.
    #[test]
    fn a_peak_measured_on_the_container_multiplies_what_the_container_held_before_the_save() {
        let mut m = valkey();
        m.baseline_rss = None;
        m.settled_growth = None;
        m.fragmentation_ratio = Some(1.0);
        // used_memory a whole number of MiB (255, 267.4 MB), so that maxmemory is used_memory
        // and the engine's RSS (ratio 1.0); the container's figures as measured.
        let (used, before, peak) = (f64::from(255 * (1 << 20)), 276_100_000.0, 539_300_000.0);
        m.snapshot = Some(SnapshotPeak {
            counter_before: Some(before as u64),
            held_above_rss: Some((before - used) as u64),
            ratio: peak / before,
            measured_on: Some("the engine container's memory cgroup"),
            phase: PeakPhase::Snapshot,
            writes: None,
        });
        let defaults = TermDefaults {
            client_buffers_bytes: 0,
            replication_backlog_bytes: Some(0),
            save_length_factor: 1,
            ..TermDefaults::default()
        };
        let r = recommend(&m, used as u64, &defaults);
        assert_eq!(r.maxmemory_bytes as f64, used);
        // The engine's RSS at maxmemory and what the container held above it: the container's
        // own figure before the save.
        let held = before;
        let data = term(&r, "data_rss");
        assert!(
            (data.bytes as f64 - held).abs() <= 1.0,
            "{data:?} against {held}"
        );
        assert!(data.note.as_deref().unwrap_or("").contains("memory cgroup"));
        // With no other term the limit is the container's peak, rounded up to a MiB.
        assert!(
            r.memory_limit_bytes as f64 >= peak && (r.memory_limit_bytes as f64) < peak + 2e6,
            "{} against the peak {peak}",
            r.memory_limit_bytes
        );
        // Without the container's reading, only the engine's RSS: the limit falls short.
        m.snapshot = m.snapshot.map(|p| SnapshotPeak {
            held_above_rss: None,
            ..p
        });
        let short = recommend(&m, used as u64, &defaults);
        assert!((short.memory_limit_bytes as f64) < peak);
    }

    /// Seen on the dev cluster's real node: 100,000 keys of 1 KiB in one-thread Dragonfly were
    /// recommended a 116 MiB limit and 90 MiB of maxmemory, which Dragonfly will not start
    /// with (256 MiB of maxmemory a thread), and the operator refused the spec.
    #[test]
    fn dragonfly_is_recommended_the_maxmemory_and_limit_it_starts_with_whatever_its_data() {
        let mut m = valkey();
        m.engine = "dragonfly".into();
        m.version = "1.40.0".into();
        m.threads = Some(1);
        let small = recommend(&m, 94_000_000, &TermDefaults::default());
        assert_eq!(small.maxmemory_bytes, 256 * MIB);
        assert_eq!(small.memory_limit_bytes, 320 * MIB, "{:?}", small.terms);
        assert_eq!(
            small.memory_limit_bytes,
            crate::crd::dragonfly_memory::minimum_limit(1)
        );
        let floor = term(&small, "start_minimum");
        let sum: u64 = small.terms.iter().map(|t| t.bytes).sum();
        assert_eq!((sum, floor.source), (320 * MIB, TermSource::Default));
        assert!(
            small.notes.iter().any(|n| n.contains("256 MiB per thread")),
            "{:?}",
            small.notes
        );
        assert_eq!(small.config.maxmemory, format!("--maxmemory={}", 256 * MIB));
        // Two threads need twice as much; data above the least needs no floor.
        m.threads = Some(2);
        assert_eq!(
            recommend(&m, 94_000_000, &TermDefaults::default()).maxmemory_bytes,
            512 * MIB
        );
        let large = recommend(&m, 1_000_000_000, &TermDefaults::default());
        assert_eq!(large.maxmemory_bytes, 954 * MIB);
        assert!(large.terms.iter().all(|t| t.name != "start_minimum"));
        // Redis and Valkey have no such floor.
        let valkey = recommend(&valkey(), 94_000_000, &TermDefaults::default());
        assert_eq!(valkey.maxmemory_bytes, 90 * MIB);
    }

    #[test]
    fn defaults_the_spec_sets_are_used_and_named() {
        let defaults = TermDefaults {
            copy_on_write_percent: 50,
            save_length_factor: 3,
            replication_backlog_bytes: Some(64 * MIB),
            replica_output_buffer_bytes: 32 * MIB,
            client_buffers_bytes: MIB,
        };
        let r = recommend(&valkey(), 1_000_000_000, &defaults);
        assert_eq!(
            term(&r, "copy_on_write").bytes,
            term(&r, "data_rss").bytes / 2
        );
        assert_eq!(term(&r, "replication_backlog").bytes, 64 * MIB);
        assert_eq!(term(&r, "replica_output_buffer").bytes, 32 * MIB);
        assert_eq!(term(&r, "client_buffers").bytes, MIB);
        assert!(
            term(&r, "replication_backlog")
                .note
                .as_deref()
                .unwrap()
                .contains("replicationBacklogBytes")
        );
    }
}
