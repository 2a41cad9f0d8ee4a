//! The eviction phase (`spec.eviction`), run after a repetition's other phases: the engine is
//! emptied, given a `maxmemory` and a policy, and loaded with the workload's items past it to
//! `loadTo` times maxmemory, its used_memory read every [`SAMPLE_EVERY`] writes. What a cache
//! at its limit really holds: how far used_memory goes above maxmemory (a hash table's grow
//! among it), RSS, the keys evicted and kept, and the write rate once eviction runs. Under
//! `noeviction` (and Dragonfly without `cache_mode`) the engine refuses writes at the limit,
//! which is that policy's result: reported as such, not as a failure. The engine's settings are
//! put back afterwards.
//!
//! The peak: an engine evicts before it runs each command, INFO included, so a reading taken
//! with INFO between batches sees memory only after eviction, never the transient the phase
//! exists to measure (a write past the limit, a hash table's grow). Redis and Valkey record
//! `used_memory_peak` after each command and before the next command's eviction; it cannot be
//! reset, so it is read before and after the phase, and when it rose during the phase it is the
//! phase's peak (`peak_source: engine`). When it did not rise (an earlier load went higher), the
//! peak is the highest reading (`peak_source: sampled`), which may miss a transient: said so.
//! Either way the peak is never below a reading taken in the phase or after it, and the
//! overshoot is never negative.

pub mod phase;

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::client::connection::engine::ControlConnection;
use crate::client::connection::resp::CommandBuffer;
use crate::client::connection::shards::{LoadConnections, Pacing, ShardSet, total_memory};
use crate::client::workloads::workload::Workload;
use crate::crd::{EngineKind, EngineSpec, EvictionSpec, EvictionStatus};
use crate::error::{BenchError, is_out_of_memory};

/// used_memory is read after every this many writes.
pub const SAMPLE_EVERY: u64 = 1_000;

/// The policies Redis and Valkey know.
pub const POLICIES: [&str; 8] = [
    "noeviction",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
];

/// The words of `peak_source`, the result's and the status's: the engine's own peak, or the
/// highest of the readings every [`SAMPLE_EVERY`] writes and at the end.
pub use crate::crd::{PEAK_FROM_ENGINE, PEAK_SAMPLED};

fn peak_sampled() -> String {
    PEAK_SAMPLED.into()
}

/// The most a phase writes, whatever `loadTo` and the bytes per item say.
const MAX_WRITES: u64 = 1_000_000_000;

/// An eviction as asked, checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Eviction {
    pub maxmemory: u64,
    pub policy: String,
    pub load_to: f64,
}

/// `maxmemory` as Redis reads it: a number of bytes with an optional unit (k, kb, m, mb, g, gb,
/// any case; the `b` ones are powers of 1024).
pub fn parse_memory(text: &str) -> Option<u64> {
    let lower = text.trim().to_ascii_lowercase();
    let units: [(&str, u64); 7] = [
        ("kb", 1 << 10),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("k", 1_000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
        ("b", 1),
    ];
    let (number, unit) = units
        .iter()
        .find_map(|(suffix, unit)| lower.strip_suffix(suffix).map(|n| (n, *unit)))
        .unwrap_or((lower.as_str(), 1));
    if number.is_empty() || number.len() > 20 || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    number.parse::<u64>().ok()?.checked_mul(unit)
}

impl Eviction {
    /// The checks an eviction passes whichever way it was given; `field` names a setting
    /// (`maxmemory`) as the user gave it.
    pub fn checked(
        spec: &EvictionSpec,
        field: &dyn Fn(&str) -> String,
    ) -> Result<Self, BenchError> {
        let invalid = |name: &str, message: String| BenchError::InvalidArgument {
            field: field(name),
            message,
        };
        let Some(written) = spec.maxmemory.as_deref() else {
            return Err(invalid(
                "maxmemory",
                "is not set: give the limit to load past (100mb, 2gb, 104857600), here or as each engine's config.maxmemory".into(),
            ));
        };
        let maxmemory = parse_memory(written).ok_or_else(|| {
            invalid(
                "maxmemory",
                format!(
                    "is '{written}': give bytes with an optional unit, as the engine reads it (100mb, 2gb, 104857600)"
                ),
            )
        })?;
        if maxmemory < 1 << 20 {
            return Err(invalid(
                "maxmemory",
                format!(
                    "is {maxmemory} bytes: it must be at least 1mb (an engine empty holds about that)"
                ),
            ));
        }
        let policy = spec
            .policy
            .as_deref()
            .unwrap_or(crate::crd::DEFAULT_EVICTION_POLICY);
        if !POLICIES.contains(&policy) {
            return Err(invalid(
                "policy",
                format!("is '{policy}': it must be one of {}", POLICIES.join(", ")),
            ));
        }
        if !(spec.load_to > 1.0 && spec.load_to <= 20.0) {
            return Err(invalid(
                "loadTo",
                format!(
                    "is {}: it must be above 1 (a load that never reaches maxmemory evicts nothing) and at most 20",
                    spec.load_to
                ),
            ));
        }
        Ok(Self {
            maxmemory,
            policy: policy.to_string(),
            load_to: spec.load_to,
        })
    }

    /// The eviction entry `index` of a spec runs (`spec.eviction`, its maxmemory and policy
    /// given there or in the entry's own `config`: [`EvictionSpec::for_entry`]), checked; the
    /// fields named as the user gave them.
    pub fn for_entry(
        spec: &EvictionSpec,
        engine: &EngineSpec,
        index: usize,
    ) -> Result<Self, BenchError> {
        let resolved = spec
            .for_entry(engine)
            .map_err(|message| BenchError::InvalidArgument {
                field: format!("spec.engines[{index}]"),
                message,
            })?;
        Self::checked(&resolved, &|name| match name {
            "maxmemory" if spec.maxmemory.is_none() => {
                format!("spec.engines[{index}].config.maxmemory")
            }
            "policy" if spec.policy.is_none() => {
                format!("spec.engines[{index}].config.maxmemory-policy")
            }
            _ => format!("spec.eviction.{name}"),
        })
    }

    /// Whether it applies to `workload`: one of many keys whose numbers can go on past the
    /// workload's (strings, records).
    pub fn check_workload(&self, workload: &Workload, field: &str) -> Result<(), BenchError> {
        match workload {
            Workload::Strings { .. } | Workload::Records { .. } => Ok(()),
            other => Err(BenchError::InvalidArgument {
                field: field.to_string(),
                message: format!(
                    "applies to the strings and records workloads (many keys an engine can evict one by one), not to {}",
                    other.kind()
                ),
            }),
        }
    }
}

/// What the phase measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EvictionReport {
    pub maxmemory: u64,
    pub policy: String,
    /// Items written (the workload's items, numbered from 0 on).
    pub items_written: u64,
    /// The phase's highest used_memory (summed over shards): the engine's own
    /// `used_memory_peak` where it rose during the phase, else the highest reading.
    pub peak_used_memory: u64,
    /// Where the peak comes from: [`PEAK_FROM_ENGINE`] or [`PEAK_SAMPLED`].
    #[serde(default = "peak_sampled")]
    pub peak_source: String,
    /// peak_used_memory - maxmemory, 0 when the engine stayed under it.
    pub overshoot_bytes: i64,
    /// used_memory and used_memory_rss at the end of the phase.
    pub used_memory: u64,
    pub used_memory_rss: u64,
    /// Keys the engine evicted (`INFO stats` `evicted_keys`, over the phase).
    pub evicted_keys: u64,
    /// Keys it holds at the end (DBSIZE).
    pub keys_kept: u64,
    /// Items written per second before eviction began, and once it ran.
    pub items_per_sec_filling: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items_per_sec_evicting: Option<f64>,
    /// The engine refused writes at maxmemory (`noeviction`, Dragonfly without cache_mode):
    /// the items sent by the end of the batch it first refused in, and what it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_at_items: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    pub seconds: f64,
}

impl From<&EvictionReport> for EvictionStatus {
    fn from(r: &EvictionReport) -> Self {
        EvictionStatus {
            maxmemory: r.maxmemory,
            policy: r.policy.clone(),
            items_written: r.items_written,
            peak_used_memory: r.peak_used_memory,
            peak_source: r.peak_source.clone(),
            overshoot_bytes: r.overshoot_bytes,
            used_memory_rss: r.used_memory_rss,
            evicted_keys: r.evicted_keys,
            keys_kept: r.keys_kept,
            items_per_sec_evicting: r.items_per_sec_evicting,
            refused_at_items: r.refused_at_items,
        }
    }
}

/// Each shard's `used_memory_peak` (None where the engine reports none).
fn engine_peaks(shards: &mut ShardSet) -> Result<Vec<Option<u64>>, BenchError> {
    shards.each(|control, _| {
        Ok(control
            .info("memory")?
            .get("used_memory_peak")
            .and_then(|v| v.parse::<u64>().ok()))
    })
}

/// The phase's peak per shard, and its source: a shard's own `used_memory_peak` where it rose
/// above its value before the phase, else the highest of that shard's readings. A peak is never
/// below a reading. `sampled[i]` is the highest reading of shard i.
fn phase_peak(
    before: &[Option<u64>],
    after: &[Option<u64>],
    sampled: &[u64],
) -> (u64, &'static str) {
    let mut total = 0u64;
    let mut every_shard_from_engine = true;
    for (index, reading) in sampled.iter().enumerate() {
        let rose = match (
            before.get(index).copied().flatten(),
            after.get(index).copied().flatten(),
        ) {
            (Some(then), Some(now)) if now > then => Some(now),
            _ => None,
        };
        every_shard_from_engine &= rose.is_some();
        total = total.saturating_add(rose.unwrap_or(0).max(*reading));
    }
    let source = if every_shard_from_engine && !sampled.is_empty() {
        PEAK_FROM_ENGINE
    } else {
        PEAK_SAMPLED
    };
    (total, source)
}

fn evicted(shards: &mut ShardSet) -> Result<u64, BenchError> {
    let each = shards.each(|control, _| {
        Ok(control
            .info("stats")?
            .get("evicted_keys")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0))
    })?;
    Ok(each.iter().sum())
}

/// The settings the phase changes on `engine`, as they are now (to put back).
fn settings(
    control: &mut ControlConnection,
    engine: &str,
) -> Result<Vec<(String, String)>, BenchError> {
    let policy = EngineKind::capabilities_of(engine).eviction_policy_setting;
    let mut kept = Vec::new();
    for name in std::iter::once("maxmemory").chain(policy) {
        let pair: Vec<String> = control.query(redis::cmd("CONFIG").arg("GET").arg(name))?;
        if let [_, value] = pair.as_slice() {
            kept.push((name.to_string(), value.clone()));
        }
    }
    Ok(kept)
}

fn apply(control: &mut ControlConnection, settings: &[(String, String)]) -> Result<(), BenchError> {
    for (name, value) in settings {
        control.query::<()>(redis::cmd("CONFIG").arg("SET").arg(name).arg(value))?;
    }
    Ok(())
}

/// Runs the phase: empties the engine, sets maxmemory (per shard: the limit is each
/// process's) and the policy, writes `load_to x maxmemory` worth of the workload's items at
/// `bytes_per_item` (the repetition's own figure), puts the settings back.
pub fn run(
    shards: &mut ShardSet,
    workload: &Workload,
    eviction: &Eviction,
    engine: &str,
    bytes_per_item: f64,
    pacing: &Pacing<'_>,
) -> Result<EvictionReport, BenchError> {
    shards.each(|control, _| control.flush_all())?;
    let kept = shards.each(|control, _| settings(control, engine))?;
    let mut limits = vec![("maxmemory".to_string(), eviction.maxmemory.to_string())];
    let policy_setting = EngineKind::capabilities_of(engine).eviction_policy_setting;
    if let Some(setting) = policy_setting {
        limits.push((setting.to_string(), eviction.policy.clone()));
    }
    shards.each(|control, _| apply(control, &limits))?;
    let result = load_past(shards, workload, eviction, bytes_per_item, pacing);
    // Put back what was changed whatever the load's outcome, then report that outcome.
    let mut index = 0;
    let restored = shards.each(|control, _| {
        let result = apply(control, &kept[index]);
        index += 1;
        result
    });
    let mut report = result?;
    restored?;
    if policy_setting.is_none() {
        // No runtime policy (Dragonfly): its startup flag cache_mode decides.
        report.policy = format!("{engine}-cache-mode");
    }
    Ok(report)
}

fn load_past(
    shards: &mut ShardSet,
    workload: &Workload,
    eviction: &Eviction,
    bytes_per_item: f64,
    pacing: &Pacing<'_>,
) -> Result<EvictionReport, BenchError> {
    let Pacing {
        pipeline,
        connect_timeout,
        stop,
    } = *pacing;
    let per_item = bytes_per_item.max(1.0);
    let commands_per_item = workload.commands_per_item();
    let items = ((eviction.load_to * eviction.maxmemory as f64 * shards.len() as f64 / per_item)
        .ceil() as u64)
        .clamp(1, MAX_WRITES);
    let commands = items * commands_per_item;
    let evicted_before = evicted(shards)?;
    let peaks_before = engine_peaks(shards)?;
    let mut sampled = vec![0u64; shards.len()];
    let sample = |shards: &mut ShardSet, sampled: &mut Vec<u64>| {
        let readings = shards.memory()?;
        for (high, reading) in sampled.iter_mut().zip(&readings) {
            *high = (*high).max(reading.used_memory);
        }
        Ok::<_, BenchError>(total_memory(&readings))
    };
    let mut connections = LoadConnections::connect(shards, connect_timeout)?;
    let mut encoder = workload.encoder();
    let mut batch = CommandBuffer::with_capacity(64 * 1024);
    let mut owed = Vec::new();
    let started = Instant::now();
    let mut eviction_began: Option<(Instant, u64)> = None;
    let mut refused: Option<(u64, String)> = None;
    let mut sent = 0u64;
    let batch_size = u64::from(pipeline.clamp(1, 1_000));
    let mut next_sample = SAMPLE_EVERY;
    while sent < commands && refused.is_none() {
        stop.check(sent)?;
        batch.clear();
        let mut replies = 0;
        let end = (sent + batch_size).min(commands);
        for index in sent..end {
            replies += encoder.encode(index, &mut batch);
        }
        let lost = |connections: &LoadConnections, failure| BenchError::ConnectionLost {
            items_sent: sent,
            detail: format!("eviction phase: {}", connections.describe(&failure)),
        };
        connections
            .send(&batch, replies, &mut owed)
            .map_err(|f| lost(&connections, f))?;
        let (tally, shard) = connections.read(&owed).map_err(|f| lost(&connections, f))?;
        sent = end;
        if let Some(reply) = tally.first_error {
            if is_out_of_memory(&reply) {
                refused = Some((sent / commands_per_item, reply));
            } else {
                return Err(BenchError::from_load_reply(
                    "eviction phase",
                    reply,
                    sent,
                    connections.address(shard),
                ));
            }
        }
        if sent >= next_sample || sent >= commands || refused.is_some() {
            next_sample = sent + SAMPLE_EVERY;
            sample(shards, &mut sampled)?;
            if eviction_began.is_none() && evicted(shards)? > evicted_before {
                eviction_began = Some((Instant::now(), sent));
            }
        }
    }
    drop(connections);
    let seconds = started.elapsed().as_secs_f64();
    let items_written = sent / commands_per_item;
    let memory = sample(shards, &mut sampled)?;
    let peaks_after = engine_peaks(shards)?;
    let (peak, peak_source) = phase_peak(&peaks_before, &peaks_after, &sampled);
    let evicted_keys = evicted(shards)?.saturating_sub(evicted_before);
    let keys_kept = shards.each(|control, _| control.dbsize())?.iter().sum();
    let (filling, evicting) = match eviction_began {
        Some((at, at_sent)) => {
            let before = at.duration_since(started).as_secs_f64();
            let after = seconds - before;
            (
                (at_sent / commands_per_item) as f64 / before.max(1e-9),
                (after > 0.0).then(|| ((sent - at_sent) / commands_per_item) as f64 / after),
            )
        }
        None => (items_written as f64 / seconds.max(1e-9), None),
    };
    let limit = eviction.maxmemory * shards.len() as u64;
    Ok(EvictionReport {
        maxmemory: eviction.maxmemory,
        policy: eviction.policy.clone(),
        items_written,
        peak_used_memory: peak,
        peak_source: peak_source.into(),
        overshoot_bytes: i64::try_from(peak.saturating_sub(limit)).unwrap_or(i64::MAX),
        used_memory: memory.used_memory,
        used_memory_rss: memory.used_memory_rss,
        evicted_keys,
        keys_kept,
        items_per_sec_filling: filling,
        items_per_sec_evicting: evicting,
        refused_at_items: refused.as_ref().map(|(at, _)| *at),
        refusal: refused.map(|(_, reply)| reply),
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_peak_counts_only_where_it_rose_during_the_phase_and_never_below_a_reading() {
        // It rose on the one shard: the engine's figure, above every reading.
        assert_eq!(
            phase_peak(&[Some(100)], &[Some(180)], &[150]),
            (180, PEAK_FROM_ENGINE)
        );
        // It did not rise (set higher by an earlier load): the highest reading.
        assert_eq!(
            phase_peak(&[Some(500)], &[Some(500)], &[150]),
            (150, PEAK_SAMPLED)
        );
        // Not reported: the readings.
        assert_eq!(phase_peak(&[None], &[None], &[150]), (150, PEAK_SAMPLED));
        // Two shards, one of which rose: each shard's own, the source says not all were the
        // engine's.
        assert_eq!(
            phase_peak(
                &[Some(100), Some(900)],
                &[Some(180), Some(900)],
                &[150, 160]
            ),
            (340, PEAK_SAMPLED)
        );
    }

    #[test]
    fn maxmemory_is_read_as_the_engine_reads_it() {
        assert_eq!(parse_memory("100mb"), Some(100 << 20));
        assert_eq!(parse_memory("100MB"), Some(100 << 20));
        assert_eq!(parse_memory("2gb"), Some(2 << 30));
        assert_eq!(parse_memory("100m"), Some(100_000_000));
        assert_eq!(parse_memory("104857600"), Some(104_857_600));
        assert_eq!(parse_memory("1k"), Some(1_000));
        assert_eq!(parse_memory("mb"), None);
        assert_eq!(parse_memory("-1mb"), None);
        assert_eq!(parse_memory("1.5gb"), None);
    }

    fn spec(maxmemory: &str, policy: &str, load_to: f64) -> EvictionSpec {
        EvictionSpec {
            maxmemory: Some(maxmemory.into()),
            policy: Some(policy.into()),
            load_to,
        }
    }

    #[test]
    fn a_bad_size_policy_or_multiple_is_refused_naming_the_field() {
        let plain = EngineSpec::new(crate::crd::EngineKind::Valkey, "9.1");
        let refusal = |s: EvictionSpec| Eviction::for_entry(&s, &plain, 0).unwrap_err().to_string();
        assert!(refusal(spec("lots", "allkeys-lru", 3.0)).contains("spec.eviction.maxmemory"));
        assert!(refusal(spec("1000", "allkeys-lru", 3.0)).contains("at least 1mb"));
        assert!(refusal(spec("100mb", "allkeys-lrx", 3.0)).contains("one of noeviction"));
        assert!(refusal(spec("100mb", "allkeys-lru", 1.0)).contains("spec.eviction.loadTo"));
        assert!(refusal(spec("100mb", "allkeys-lru", f64::NAN)).contains("above 1"));
        assert_eq!(
            Eviction::for_entry(&spec("100mb", "noeviction", 3.0), &plain, 0)
                .unwrap()
                .maxmemory,
            100 << 20
        );
    }

    #[test]
    fn an_entrys_own_config_gives_the_limit_and_policy_and_is_refused_beside_the_specs() {
        let mut own = EngineSpec::new(crate::crd::EngineKind::Valkey, "9.1");
        own.config.insert("maxmemory".into(), "64mb".into());
        own.config
            .insert("maxmemory-policy".into(), "allkeys-lfu".into());
        let only_load_to = EvictionSpec {
            maxmemory: None,
            policy: None,
            load_to: 2.0,
        };
        let eviction = Eviction::for_entry(&only_load_to, &own, 1).unwrap();
        assert_eq!(
            (
                eviction.maxmemory,
                eviction.policy.as_str(),
                eviction.load_to
            ),
            (64 << 20, "allkeys-lfu", 2.0)
        );
        // Without a policy anywhere: allkeys-lru.
        own.config.remove("maxmemory-policy");
        let eviction = Eviction::for_entry(&only_load_to, &own, 1).unwrap();
        assert_eq!(eviction.policy, "allkeys-lru");
        // A bad size in the entry's config is named there.
        own.config.insert("maxmemory".into(), "lots".into());
        let refused = Eviction::for_entry(&only_load_to, &own, 1)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("spec.engines[1].config.maxmemory"),
            "{refused}"
        );
        // Both, or neither: refused naming what to do.
        own.config.insert("maxmemory".into(), "64mb".into());
        let refused = Eviction::for_entry(&spec("100mb", "allkeys-lru", 3.0), &own, 1)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("spec.engines[1]") && refused.contains("keep one"),
            "{refused}"
        );
        let plain = EngineSpec::new(crate::crd::EngineKind::Valkey, "9.1");
        let refused = Eviction::for_entry(&only_load_to, &plain, 0)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("set spec.eviction.maxmemory, or config.maxmemory"),
            "{refused}"
        );
        // Two policies that differ.
        own.config
            .insert("maxmemory-policy".into(), "allkeys-lfu".into());
        let two = EvictionSpec {
            maxmemory: None,
            policy: Some("allkeys-lru".into()),
            load_to: 2.0,
        };
        let refused = Eviction::for_entry(&two, &own, 1).unwrap_err().to_string();
        assert!(refused.contains("differ"), "{refused}");
    }
}
