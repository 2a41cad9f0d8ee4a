//! Active defragmentation after a churn (`client::phases::churn`): switched on with thresholds low
//! enough to act, followed by a memory reading every half second until RSS stops falling or the
//! window's bound passes, with a light probe of writes whose latency says what the defragmenter
//! costs the engine's clients, and the engine's CPU time in the window (`INFO cpu`).
//!
//! Redis and Valkey switch it on at runtime (`activedefrag yes`): their defaults leave it idle
//! below 100 MB of fragmentation (`active-defrag-ignore-bytes`) or 10% (`-threshold-lower`), so
//! both are lowered for the window and put back after it. A build whose allocator cannot
//! defragment refuses `activedefrag yes`; [`check_supported`] asks before any write.
//!
//! The window ends on the memory, not on the fragmentation ratio alone (`ended_by`): it has
//! `held` once RSS fell less than half a percent over 12 s while the ratio held too, and RSS has
//! followed the ratio's fall since the window began (at least half of the bytes the fall of the
//! ratio implies; a fragmented engine whose ratio has not fallen at all has not been
//! defragmented yet); otherwise it waits until its `bound`. The ratio can fall at once while the
//! allocator keeps the emptied pages for a while (seen with Valkey 9.1.2: 1.85 to 1.05 with RSS
//! flat for 12 s), and a window that ended there reported that defragmentation regained nothing.
//!
//! `MEMORY PURGE` is sent only when the bound passed with RSS still short of the ratio's fall
//! (`purged: true`): the pages the defragmenter emptied and the allocator kept are then handed
//! back, and `rss_before_purge` keeps what the allocator had done by itself, so the purge never
//! hides it. An engine without the command (Dragonfly) is not purged.
//!
//! Dragonfly has no runtime switch: its defragmenter acts only while used memory is above
//! `mem_defrag_threshold` (0.7) of maxmemory, at a check every `mem_defrag_check_sec_interval`.
//! membench starts it with a check every second and a low waste threshold
//! (`validation::engine_config::DRAGONFLY_DEFRAG_FLAGS`), which leaves it idle through the load
//! and the rounds under the 0.7 gate, and the window lowers maxmemory until used memory is
//! [`DRAGONFLY_WINDOW_SHARE`] of it, over the gate (`switched: maxmemory-gate`; its refusal of
//! writes by RSS, `rss_oom_deny_ratio`, off meanwhile), and puts both back after. Measured here (Dragonfly 1.40, 1,000,000 keys of 100 B, half deleted): RSS 171.6 ->
//! 131.7 MB within a second of the gate opening, none in 20 s at its defaults.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::client::connection::engine::ControlConnection;
use crate::client::connection::shards::{ReadMemory, ShardSet, total_memory};
use crate::crd::{Defragmentation, EngineKind};
use crate::error::BenchError;
use crate::stats::percentile;

/// `ended_by` when RSS held and had followed the ratio.
pub const ENDED_HELD: &str = "held";
/// `ended_by` when the window's bound passed first.
pub const ENDED_BOUND: &str = "bound";

fn ended_held() -> String {
    ENDED_HELD.into()
}

/// The ratio has fallen when it is this much below its reading at the window's start.
const RATIO_FALL: f64 = 0.05;
/// RSS has followed the ratio once it fell by at least this share of what the ratio's fall
/// implies (the allocator's active pages fall with the ratio; RSS holds a little more than them).
const FOLLOWED_SHARE: f64 = 0.5;

/// How often memory is read during the window.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(500);
/// How often the probe writes.
const PROBE_INTERVAL: Duration = Duration::from_millis(50);
/// RSS has stopped falling when it fell less than this share over [`STEADY_FOR`], and the
/// allocator's fragmentation did not fall either. The span outlasts jemalloc's
/// `dirty_decay_ms` (10 s in Redis and Valkey): the pages the defragmenter emptied go back to
/// the kernel over that time, so RSS may not move for seconds after the fragmentation fell.
const STEADY_SHARE: f64 = 0.005;
const STEADY_FOR: Duration = Duration::from_secs(12);
/// The probe's key and value: one key of 16 bytes, deleted at the end of the window.
const PROBE_KEY: &str = "membench:defrag-probe";
const PROBE_VALUE: &str = "0123456789abcdef";

/// Dragonfly's used memory as a share of the maxmemory its window sets: over the 0.7 of
/// maxmemory (`mem_defrag_threshold`) above which it defragments, with room left for the
/// probe's writes (Dragonfly refuses writes above maxmemory).
pub const DRAGONFLY_WINDOW_SHARE: f64 = 0.8;

/// The settings the window lowers on Redis and Valkey, and the values it gives them.
const LOWERED: [(&str, &str); 2] = [
    ("active-defrag-ignore-bytes", "1048576"),
    ("active-defrag-threshold-lower", "1"),
];

/// One reading of the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DefragSample {
    /// Seconds since defragmentation was switched on.
    pub at_seconds: f64,
    pub used_memory_rss: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio: Option<f64>,
}

/// The probe's write latencies, in milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeLatency {
    pub writes: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// What the window regained and what it cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DefragReport {
    /// How it was switched on: `activedefrag` (Redis, Valkey) or `maxmemory-gate` (Dragonfly:
    /// maxmemory lowered for the window until used memory passed its defragmentation threshold).
    pub switched: String,
    pub rss_before: u64,
    pub rss_after: u64,
    pub used_memory_before: u64,
    pub used_memory_after: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio_before: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_frag_ratio_after: Option<f64>,
    /// Seconds from switching it on to the first reading within half a percent of the
    /// window's lowest RSS: how long it took to regain what it regained.
    pub seconds: f64,
    /// The whole window, until RSS had held for 12 s or the bound passed.
    pub window_seconds: f64,
    /// The engine's CPU time (user and system) in the window.
    pub cpu_seconds: f64,
    /// True when the bound passed while RSS was still falling or had not yet followed the
    /// fragmentation ratio's fall.
    pub bound_reached: bool,
    /// Which rule ended the window: [`ENDED_HELD`] or [`ENDED_BOUND`].
    #[serde(default = "ended_held")]
    pub ended_by: String,
    /// `MEMORY PURGE` was sent after the window (its bound passed with RSS short of the
    /// ratio's fall); `rss_before_purge` is RSS before it, `rss_after` after it.
    #[serde(default)]
    pub purged: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_before_purge: Option<u64>,
    pub sample_interval_ms: u64,
    pub write_latency_ms: ProbeLatency,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<DefragSample>,
}

/// Whether the engine switches defragmentation at runtime (Redis and Valkey) or opens its
/// maxmemory gate (Dragonfly).
fn switches_at_runtime(engine: &str) -> bool {
    matches!(
        EngineKind::capabilities_of(engine).defragmentation,
        Defragmentation::RuntimeSwitch { .. }
    )
}

/// Refuses, before any write, a `defrag` the engine cannot do: Redis and Valkey are asked to
/// switch it on (and off again at once); a build whose allocator has no defragmentation says
/// so in its refusal, which the error carries.
pub fn check_supported(
    shards: &mut ShardSet,
    engine: &str,
    allocator: &str,
    field: &str,
) -> Result<(), BenchError> {
    if !switches_at_runtime(engine) {
        return Ok(());
    }
    shards.each(|control, address| {
        let on = control.query::<()>(redis::cmd("CONFIG").arg("SET").arg("activedefrag").arg("yes"));
        match on {
            Ok(()) => control.query::<()>(redis::cmd("CONFIG").arg("SET").arg("activedefrag").arg("no")),
            Err(error) => Err(BenchError::InvalidArgument {
                field: field.to_string(),
                message: format!(
                    "{engine} at {address} (allocator {}) cannot defragment: it refused `CONFIG SET activedefrag yes` ({error}); active defragmentation needs the engine's own bundled jemalloc (not libc malloc, not a system jemalloc): run this build without defrag, or pick a build with its bundled jemalloc",
                    if allocator.is_empty() { "not reported" } else { allocator }
                ),
            }),
        }
    })?;
    Ok(())
}

fn cpu_seconds(shards: &mut ShardSet) -> Result<f64, BenchError> {
    let each = shards.each(|control, _| {
        let cpu = control.info("cpu")?;
        let field = |name: &str| {
            cpu.get(name)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        Ok(field("used_cpu_user") + field("used_cpu_sys"))
    })?;
    Ok(each.iter().sum())
}

/// Reads the settings the window changes, to put them back after it.
fn current_settings(control: &mut ControlConnection) -> Result<Vec<(String, String)>, BenchError> {
    let mut kept = Vec::new();
    for name in ["activedefrag", LOWERED[0].0, LOWERED[1].0] {
        let pair: Vec<String> = control.query(redis::cmd("CONFIG").arg("GET").arg(name))?;
        if let [_, value] = pair.as_slice() {
            kept.push((name.to_string(), value.clone()));
        }
    }
    Ok(kept)
}

/// Opens Dragonfly's gate: maxmemory lowered until used memory is [`DRAGONFLY_WINDOW_SHARE`]
/// of it (never raised), with `rss_oom_deny_ratio` off for the window (a fragmented engine's
/// RSS passes 1.25 times the lowered maxmemory, and Dragonfly would then refuse the probe's
/// writes); returns the settings to put back, in the order to put them back.
fn open_dragonfly_gate(
    control: &mut ControlConnection,
) -> Result<Vec<(String, String)>, BenchError> {
    let deny: Vec<String> =
        control.query(redis::cmd("CONFIG").arg("GET").arg("rss_oom_deny_ratio"))?;
    let pair: Vec<String> = control.query(redis::cmd("CONFIG").arg("GET").arg("maxmemory"))?;
    let Some(current) = pair.get(1).and_then(|v| v.parse::<u64>().ok()) else {
        return Err(BenchError::InvalidArgument {
            field: "churn.defrag".into(),
            message: format!(
                "Dragonfly answered `CONFIG GET maxmemory` with {pair:?}, not a number of bytes: its defragmentation window lowers maxmemory and cannot without it"
            ),
        });
    };
    let used: u64 = control
        .info("memory")?
        .get("used_memory")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let gate = (used as f64 / DRAGONFLY_WINDOW_SHARE).ceil() as u64;
    let mut kept = vec![("maxmemory".to_string(), current.to_string())];
    if let [_, ratio] = deny.as_slice() {
        control.query::<()>(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("rss_oom_deny_ratio")
                .arg("-1"),
        )?;
        kept.push(("rss_oom_deny_ratio".to_string(), ratio.clone()));
    }
    if gate < current {
        control.query::<()>(redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(gate))?;
    }
    Ok(kept)
}

fn set(control: &mut ControlConnection, settings: &[(String, String)]) -> Result<(), BenchError> {
    for (name, value) in settings {
        control.query::<()>(redis::cmd("CONFIG").arg("SET").arg(name).arg(value))?;
    }
    Ok(())
}

/// Runs the window: reads memory (`read`: the control connection alone), switches
/// defragmentation on, samples and probes until RSS has held for 12 s or `bound` passes, puts
/// the settings back, deletes the probe's key and reads memory again.
pub fn run(
    shards: &mut ShardSet,
    engine: &str,
    bound: Duration,
    read: &mut ReadMemory<'_>,
    stop: &crate::client::connection::stop_request::StopRequest,
) -> Result<DefragReport, BenchError> {
    let before = read(shards, "before defragmentation")?;
    let cpu_before = cpu_seconds(shards)?;
    let runtime = switches_at_runtime(engine);
    let kept = if runtime {
        let kept = shards.each(|control, _| current_settings(control))?;
        let lowered: Vec<(String, String)> =
            std::iter::once(("activedefrag".to_string(), "yes".to_string()))
                .chain(LOWERED.iter().map(|(n, v)| (n.to_string(), v.to_string())))
                .collect();
        shards.each(|control, _| set(control, &lowered))?;
        kept
    } else {
        shards.each(|control, _| open_dragonfly_gate(control))?
    };
    let window = follow(shards, bound, stop);
    // Put back what was changed whatever the window's outcome, then report that outcome.
    let mut index = 0;
    let restored = shards.each(|control, _| {
        let result = set(control, &kept[index]);
        index += 1;
        result
    });
    let (samples, latencies, window_seconds, bound_reached) = window?;
    restored?;
    let cpu_after = cpu_seconds(shards)?;
    shards.each(|control, _| control.query::<u64>(redis::cmd("DEL").arg(PROBE_KEY)))?;
    let unfollowed = !rss_followed_ratio(&samples);
    let mut after = read(shards, "after defragmentation")?;
    let mut rss_before_purge = None;
    if bound_reached && unfollowed && runtime {
        let unpurged = after.used_memory_rss;
        // Redis and Valkey built with jemalloc answer OK; others refuse, and are not purged.
        let purged = shards.each(|control, _| {
            Ok(control
                .query::<()>(redis::cmd("MEMORY").arg("PURGE"))
                .is_ok())
        })?;
        if purged.iter().all(|&p| p) {
            rss_before_purge = Some(unpurged);
            after = read(shards, "after MEMORY PURGE")?;
        }
    }
    let mut sorted = latencies.clone();
    sorted.sort_by(f64::total_cmp);
    Ok(DefragReport {
        switched: if runtime {
            "activedefrag"
        } else {
            "maxmemory-gate"
        }
        .into(),
        rss_before: before.used_memory_rss,
        rss_after: after.used_memory_rss,
        used_memory_before: before.used_memory,
        used_memory_after: after.used_memory,
        allocator_frag_ratio_before: before.allocator_frag_ratio,
        allocator_frag_ratio_after: after.allocator_frag_ratio,
        seconds: settled_at(&samples),
        window_seconds,
        cpu_seconds: (cpu_after - cpu_before).max(0.0),
        bound_reached,
        ended_by: if bound_reached {
            ENDED_BOUND
        } else {
            ENDED_HELD
        }
        .into(),
        purged: rss_before_purge.is_some(),
        rss_before_purge,
        sample_interval_ms: SAMPLE_INTERVAL.as_millis() as u64,
        write_latency_ms: ProbeLatency {
            writes: sorted.len() as u64,
            p50: percentile(&sorted, 50.0),
            p99: percentile(&sorted, 99.0),
            max: sorted.last().copied().unwrap_or(0.0),
        },
        samples,
    })
}

type Window = (Vec<DefragSample>, Vec<f64>, f64, bool);

/// When RSS first came within [`STEADY_SHARE`] of the window's lowest.
fn settled_at(samples: &[DefragSample]) -> f64 {
    let Some(lowest) = samples.iter().map(|s| s.used_memory_rss).min() else {
        return 0.0;
    };
    let near = lowest as f64 * (1.0 + STEADY_SHARE);
    samples
        .iter()
        .find(|s| s.used_memory_rss as f64 <= near)
        .map_or(0.0, |s| s.at_seconds)
}

/// Samples memory every [`SAMPLE_INTERVAL`] and writes the probe every [`PROBE_INTERVAL`] on
/// the first shard's control connection, until RSS fell less than [`STEADY_SHARE`] over
/// [`STEADY_FOR`] having followed the ratio's fall, or `bound` passes.
fn follow(
    shards: &mut ShardSet,
    bound: Duration,
    stop: &crate::client::connection::stop_request::StopRequest,
) -> Result<Window, BenchError> {
    let started = Instant::now();
    let mut samples: Vec<DefragSample> = Vec::new();
    let mut latencies = Vec::new();
    let mut next_sample = started;
    loop {
        stop.check(0)?;
        let now = Instant::now();
        if now >= next_sample {
            let memory = total_memory(&shards.memory()?);
            let at = started.elapsed().as_secs_f64();
            samples.push(DefragSample {
                at_seconds: at,
                used_memory_rss: memory.used_memory_rss,
                allocator_frag_ratio: memory.allocator_frag_ratio,
            });
            next_sample += SAMPLE_INTERVAL;
            if held_steady(&samples) && rss_followed_ratio(&samples) {
                return Ok((samples, latencies, at, false));
            }
            if started.elapsed() >= bound {
                return Ok((samples, latencies, at, true));
            }
        }
        let sent = Instant::now();
        shards
            .first()
            .query::<()>(redis::cmd("SET").arg(PROBE_KEY).arg(PROBE_VALUE))?;
        latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
        std::thread::sleep(PROBE_INTERVAL.saturating_sub(sent.elapsed()));
    }
}

/// Whether RSS fell less than [`STEADY_SHARE`] over the last [`STEADY_FOR`].
fn held_steady(samples: &[DefragSample]) -> bool {
    let Some(last) = samples.last() else {
        return false;
    };
    let since = last.at_seconds - STEADY_FOR.as_secs_f64();
    if since < 0.0 {
        return false;
    }
    let Some(then) = samples.iter().rev().find(|s| s.at_seconds <= since) else {
        return false;
    };
    let fragmentation_fell = matches!(
        (then.allocator_frag_ratio, last.allocator_frag_ratio),
        (Some(then), Some(now)) if now < then
    );
    (then.used_memory_rss as f64 - last.used_memory_rss as f64)
        < STEADY_SHARE * then.used_memory_rss as f64
        && !fragmentation_fell
}

/// Whether the defragmenter's work shows in RSS since the window's first reading: true when
/// the ratio is not reported (Dragonfly: RSS alone says), or there was little fragmentation to
/// begin with (the ratio within [`RATIO_FALL`] of 1), or the ratio fell and RSS fell by at
/// least [`FOLLOWED_SHARE`] of what its fall implies (`rss x fall / ratio`: the allocator's
/// active pages shrink in proportion to the ratio while its allocations stay). A ratio that
/// has not fallen yet from a fragmented start is a defragmenter that has not acted yet (seen
/// on a loaded machine: Valkey 9.1.2 at 1.85 for the first 12 s), not one that is done.
fn rss_followed_ratio(samples: &[DefragSample]) -> bool {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return true;
    };
    let (Some(ratio_then), Some(ratio_now)) =
        (first.allocator_frag_ratio, last.allocator_frag_ratio)
    else {
        return true;
    };
    if ratio_then <= 1.0 + RATIO_FALL {
        return true;
    }
    let fall = ratio_then - ratio_now;
    if fall < RATIO_FALL {
        return false;
    }
    let implied = first.used_memory_rss as f64 * fall / ratio_then;
    let regained = first.used_memory_rss as f64 - last.used_memory_rss as f64;
    regained >= FOLLOWED_SHARE * implied
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: f64, rss: u64) -> DefragSample {
        DefragSample {
            at_seconds: at,
            used_memory_rss: rss,
            allocator_frag_ratio: None,
        }
    }

    #[test]
    fn rss_has_held_once_it_fell_less_than_half_a_percent_over_twelve_seconds() {
        let falling: Vec<_> = (0..12)
            .map(|i| sample(i as f64 * 0.5, 100_000_000 - i * 2_000_000))
            .collect();
        assert!(!held_steady(&falling));
        let mut flat = falling.clone();
        for i in 12..36 {
            flat.push(sample(i as f64 * 0.5, 78_000_000));
        }
        assert!(!held_steady(&flat[..30]), "11.5 s flat is not yet held");
        assert!(held_steady(&flat));
        // Less than twelve seconds of readings never counts as held.
        assert!(!held_steady(&[sample(0.0, 10), sample(0.5, 10)]));
        // It took until RSS came within half a percent of its lowest: 78 MB first at 11 x 0.5 s
        // (100 - 11 x 2 = 78).
        assert_eq!(settled_at(&flat), 5.5);
        // RSS flat while the fragmentation still falls (the allocator has yet to give the
        // pages back) is not held.
        let mut still_falling = flat.clone();
        for sample in &mut still_falling {
            sample.allocator_frag_ratio = Some(1.85);
        }
        still_falling.last_mut().unwrap().allocator_frag_ratio = Some(1.03);
        assert!(!held_steady(&still_falling));
    }

    fn with_ratio(at: f64, rss: u64, ratio: f64) -> DefragSample {
        DefragSample {
            at_seconds: at,
            used_memory_rss: rss,
            allocator_frag_ratio: Some(ratio),
        }
    }

    #[test]
    fn a_ratio_that_fell_at_once_keeps_the_window_open_until_rss_follows() {
        // The ratio fell from 1.85 to 1.05 in the first second and stayed; RSS flat for 13 s.
        let mut flat: Vec<_> = (0..27)
            .map(|i| {
                let ratio = if i < 2 { 1.85 } else { 1.05 };
                with_ratio(i as f64 * 0.5, 200_000_000, ratio)
            })
            .collect();
        assert!(held_steady(&flat), "RSS and the ratio held for 12 s");
        assert!(
            !rss_followed_ratio(&flat),
            "the ratio's fall implies about 86 MB the allocator still holds"
        );
        // RSS then falls by 60 MB: at least half of the 86 MB implied.
        flat.push(with_ratio(13.5, 140_000_000, 1.05));
        assert!(rss_followed_ratio(&flat));
        // 30 MB is not half of it.
        flat.last_mut().unwrap().used_memory_rss = 170_000_000;
        assert!(!rss_followed_ratio(&flat));
        // A fragmented engine whose ratio has not fallen yet: the defragmenter has not acted.
        let idle: Vec<_> = (0..27)
            .map(|i| with_ratio(i as f64 * 0.5, 41_000_000, 1.85))
            .collect();
        assert!(held_steady(&idle), "nothing moved for 12 s");
        assert!(!rss_followed_ratio(&idle));
        // Little fragmentation to begin with (within 0.05 of 1), or a ratio not reported
        // (Dragonfly), asks nothing of RSS.
        let unfragmented: Vec<_> = (0..4).map(|i| with_ratio(i as f64, 10, 1.04)).collect();
        assert!(rss_followed_ratio(&unfragmented));
        assert!(rss_followed_ratio(&[sample(0.0, 10), sample(1.0, 10)]));
    }
}
