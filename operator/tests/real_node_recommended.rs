//! The recommended memory limit (`status.capacity.engines[].recommended`), proven by the
//! kernel on a real node of the dev cluster (a kubelet with containerd and runc, see
//! real_node_e2e.rs), whose memory cgroup enforces the engine pod's limit on everything its
//! processes hold, a save's fork copy included.
//!
//! Each engine is measured once under a limit far above its needs, with `spec.capacity` planned
//! at the size it loads: a snapshot saved under writes, and a load past maxmemory under
//! eviction. The same spec then runs twice more with the engine pod's limit set from that
//! measurement:
//! - at the recommended limit, with the recommended maxmemory in the engine's config: the load,
//!   the snapshot under writes and the load past maxmemory all complete;
//! - at 64 MiB above Valkey's steady memory, below what any of its saves copied: Valkey,
//!   whose save forks and copies the pages its writes touch, is OOMKilled in the snapshot
//!   phase, and the operator says so naming it;
//!   Dragonfly completes under the same limit, and this machine, watching its container's
//!   cgroup, sees why: one process throughout (its save does not fork) and no rise.
//!
//! And at a second write rate, a tenth of the first, Valkey's recommendation changes (less is
//! copied during the save) and holds at its own recommended limit.
//!
//! These tests need the real node: when it cannot start they fail, naming what is missing.

mod common;

use std::time::Duration;

use anyhow::Context as _;
use common::faults::status_of;
use common::operator::*;
use membench::crd::{MemoryBenchmark, MemoryBenchmarkStatus, Phase, RecommendedStatus};
use membench_devcluster::EnsureOptions;
use membench_devcluster::real_nodes::{TOLERATE_REAL_NODES, ensure_real_node};

/// One benchmark at a time: the real node's 1750m CPUs hold one engine (1 CPU) and its client
/// (500m), and a second benchmark's writes would take the CPU the saves are timed by.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// 200,000 keys of 1 KiB: Valkey 9.1.2 holds them in about 260 MiB, and a save under 100,000
/// overwrites a second over all of them copies most of its pages (real_node_peak.rs: 1.40 to
/// 1.87 times the steady memory). Fewer would do for Valkey, but Dragonfly starts only with
/// 256 MiB of maxmemory a thread, 320Mi of limit (crd/dragonfly_memory.rs): the limit that kills
/// Valkey's save must be above that for Dragonfly to run under it at all.
const KEYS: u64 = 200_000;
const FAST: u32 = 100_000;
/// A tenth of the first rate: a save of about half a second touches far fewer pages.
const SLOW: u32 = 10_000;

const VALKEY: &str = "engine: valkey, version: \"9.1.2\"";
/// One thread, as real_node_dragonfly.rs runs it.
const DRAGONFLY: &str = "engine: dragonfly, version: \"1.40.0\", args: [\"--proactor_threads=1\"]";

const MIB: u64 = 1 << 20;

/// The spec: `entry` under `memory`, the keys loaded, a snapshot saved under `writes` a
/// second, then a load past maxmemory to 1.5 times it (`eviction`: the phase's own maxmemory, or
/// empty when the entry's config sets it), and the capacity planned at the size loaded.
fn body(entry: &str, memory: &str, writes: u32, eviction: &str) -> String {
    format!(
        "  instanceType: r7i.xlarge\n  engines:\n    - {{{entry}, memory: {memory}}}\n  workload: {{strings: {{keys: {KEYS}, valueSize: 1024}}}}\n  repetitions: 1\n  pipeline: 100\n  peak: {{snapshot: {{writesPerSecond: {writes}, writeShare: 1.0}}}}\n  eviction: {{{eviction}policy: allkeys-lru, loadTo: 1.5}}\n  capacity: {{items: {KEYS}}}\n  cleanupPolicy: KeepFailed\n{TOLERATE_REAL_NODES}"
    )
}

/// The real node, this file's turn on it, and a harness whose namespaces start with `prefix`.
async fn on_the_real_node(
    prefix: &str,
) -> anyhow::Result<(tokio::sync::MutexGuard<'static, ()>, Harness)> {
    let turn = ONE_AT_A_TIME.lock().await;
    ensure_real_node(&EnsureOptions::default()).await?;
    Ok((turn, Harness::start(prefix, real_node_settings()).await?))
}

/// A finished benchmark's status, asserted Succeeded (`what` says under which limit).
fn succeeded(done: &MemoryBenchmark, what: &str) -> anyhow::Result<MemoryBenchmarkStatus> {
    let status = done
        .status
        .clone()
        .context("a finished benchmark's status")?;
    assert_eq!(
        status.phase,
        Some(Phase::Succeeded),
        "{what}: {}",
        status_of(done)
    );
    Ok(status)
}

/// Runs `body` as benchmark `name` to its end.
async fn run(harness: &Harness, name: &str, body: &str) -> anyhow::Result<MemoryBenchmark> {
    harness.create(&spec(name, body)).await?;
    harness.finished(name, Duration::from_secs(300)).await
}

/// What a measurement under a generous limit gave: the recommendation, and the container's
/// peak during the save as the kernel counted it.
struct Measured {
    recommended: RecommendedStatus,
    peak_bytes: u64,
    steady_bytes: u64,
}

/// Valkey measured at [`FAST`], once for the tests of this file.
static VALKEY_FAST: tokio::sync::OnceCell<Measured> = tokio::sync::OnceCell::const_new();

/// [`VALKEY_FAST`], measured by the first test that needs it (under [`ONE_AT_A_TIME`]).
async fn valkey_fast() -> anyhow::Result<&'static Measured> {
    VALKEY_FAST
        .get_or_try_init(|| async {
            let harness = Harness::start("real-rec-measure", real_node_settings()).await?;
            let measured = measure(&harness, "vk-measure", VALKEY, FAST).await?;
            harness.finish().await;
            Ok(measured)
        })
        .await
}

/// Measures `entry` under 1Gi at `writes` a second and reads its recommendation.
async fn measure(
    harness: &Harness,
    name: &str,
    entry: &str,
    writes: u32,
) -> anyhow::Result<Measured> {
    let done = run(
        harness,
        name,
        &body(entry, "1Gi", writes, "maxmemory: 64mb, "),
    )
    .await?;
    let status = succeeded(&done, &format!("{name} under 1Gi"))?;
    let recommended = status
        .capacity
        .as_ref()
        .and_then(|c| c.engines.first())
        .and_then(|e| e.recommended.clone())
        .with_context(|| format!("a recommendation in {:#?}", status.capacity))?;
    let snapshot = status.engines[0]
        .repetitions
        .first()
        .and_then(|r| r.peak.as_ref()?.snapshot.clone())
        .with_context(|| format!("a snapshot's figures in {:#?}", status.engines[0]))?;
    assert_eq!(snapshot.source, "container-cgroup", "{snapshot:#?}");
    let steady_bytes = snapshot
        .before_bytes
        .context("the container before the save")?;
    let peak_bytes = snapshot
        .peak_bytes
        .or(snapshot.high_water_bytes)
        .context("the container's peak during the save")?;
    eprintln!(
        "{name}: steady {steady_bytes} B, peak {peak_bytes} B, recommended maxmemory {} limit {} ({:.1}% reserve) at {:?} writes/s: {:?}",
        recommended.maxmemory_bytes,
        recommended.memory_limit_bytes,
        recommended.reserve_percent,
        recommended.writes_per_sec,
        recommended
            .terms
            .iter()
            .map(|t| format!("{} {} {}", t.name, t.bytes, t.source))
            .collect::<Vec<_>>()
    );
    Ok(Measured {
        recommended,
        peak_bytes,
        steady_bytes,
    })
}

/// What a limit between Valkey's steady memory and its save's peak leaves above the steady
/// memory: 64 MiB. A save's copy varies with its length, and so from one save to the next:
/// 104 to 226 MiB over 12 saves of this spec (real_node_peak.rs's header), and a limit at a
/// measured peak less a tenth once held the next save, which copied less. 64 MiB is 40 MiB
/// below the least of those copies; it also leaves Dragonfly's start minimum (320Mi) under
/// the limit, so Dragonfly runs under the same one.
const ABOVE_STEADY: u64 = 64 * MIB;

/// The limit, in Mi, between Valkey's steady memory and its save's peak ([`ABOVE_STEADY`]).
fn between(valkey: &Measured) -> anyhow::Result<String> {
    let limit = valkey.steady_bytes + ABOVE_STEADY;
    // The measured save itself copied more than the limit leaves room for, by the margin the
    // varying copies need (or this run proves nothing about the save).
    anyhow::ensure!(
        limit + 32 * MIB < valkey.peak_bytes,
        "Valkey's save copied {} B over its steady memory ({} B), too little to put a limit between them",
        valkey.peak_bytes.saturating_sub(valkey.steady_bytes),
        valkey.steady_bytes
    );
    let least = membench::crd::dragonfly_memory::minimum_limit(1);
    anyhow::ensure!(
        limit >= least,
        "the limit ({limit} B) is below the least one Dragonfly starts under ({least} B)"
    );
    Ok(format!("{}Mi", limit.div_ceil(MIB)))
}

/// Runs `entry` at its recommended limit, with the recommended maxmemory in its config, its
/// save under the writes the recommendation holds for (the rate its measurement reached: a
/// loaded machine reached 43,134 of the 100,000 asked once, and a run asking 100,000 again
/// copied more and was killed, as the recommendation's note warns), and asserts that every
/// phase completed: the load, the snapshot under writes, the load past maxmemory. With `comm`,
/// this machine watches the engine container's cgroup (the process named `comm` in it) until
/// the container ends, and returns what it saw.
async fn holds_at_recommended(
    harness: &Harness,
    name: &str,
    entry: &str,
    recommended: &RecommendedStatus,
    comm: Option<&'static str>,
) -> anyhow::Result<Option<common::real_node::ContainerWatch>> {
    let holds_for = recommended
        .writes_per_sec
        .context("the rate the recommendation holds for")?;
    let writes = holds_for.floor().max(1.0) as u32;
    let limit = format!("{}Mi", recommended.memory_limit_bytes.div_ceil(MIB));
    let entry = format!(
        "{entry}, config: {{maxmemory: \"{}\"}}",
        recommended.maxmemory_bytes
    );
    harness
        .create(&spec(name, &body(&entry, &limit, writes, "")))
        .await?;
    let watch = comm.map(|comm| {
        common::real_node::watch_engine_cgroup(harness.pods(), &format!("{name}-0-engine"), comm)
    });
    let done = harness.finished(name, Duration::from_secs(300)).await?;
    let status = succeeded(&done, &format!("at the recommended limit {limit}"))?;
    let watched = match watch {
        Some(watch) => Some(
            tokio::time::timeout(Duration::from_secs(60), watch)
                .await
                .context("the engine's cgroup outlived its pod by a minute")???,
        ),
        None => None,
    };
    let repetition = status.engines[0]
        .repetitions
        .first()
        .context("a repetition")?;
    assert_eq!(repetition.items, KEYS, "{repetition:#?}");
    let snapshot = repetition
        .peak
        .as_ref()
        .and_then(|p| p.snapshot.as_ref())
        .context("the snapshot ran")?;
    // The save ran under writes near the rate the recommendation holds for, so the limit held
    // a save that copied, not one that ran idle. Half of it: two runs on this 2-core machine
    // reached 9,241 and 11,541 writes a second (Dragonfly, 100,000 asked).
    assert!(
        snapshot.writes_per_sec > 0.5 * holds_for,
        "{} writes/s against the {holds_for} the recommendation holds for: {snapshot:#?}",
        snapshot.writes_per_sec
    );
    // The load reached maxmemory: the engine evicted (Redis and Valkey under allkeys-lru) or
    // refused writes at the limit (Dragonfly without cache_mode), and ran on.
    let eviction = repetition.eviction.as_ref().context("the eviction ran")?;
    assert!(
        eviction.evicted_keys > 0 || eviction.refused_at_items.is_some(),
        "the load went past maxmemory: {eviction:#?}"
    );
    Ok(watched)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkeys_recommended_limit_holds_its_save_under_writes_and_a_limit_below_its_saves_copy_is_oom_killed()
-> anyhow::Result<()> {
    let (_turn, harness) = on_the_real_node("real-rec-valkey").await?;
    let measured = valkey_fast().await?;
    let recommended = &measured.recommended;
    // The limit holds the measured peak: the recommendation is the sum of its terms, the
    // copy-on-write among them.
    assert!(
        recommended.memory_limit_bytes >= measured.peak_bytes,
        "recommended {} below the measured peak {}",
        recommended.memory_limit_bytes,
        measured.peak_bytes
    );
    let watched = holds_at_recommended(
        &harness,
        "vk-recommended",
        VALKEY,
        recommended,
        Some("valkey-server"),
    )
    .await?
    .context("the watch asked for")?;
    // The witness the Dragonfly test relies on sees a fork: Valkey's save added its child to
    // the container for the save's length.
    assert_eq!(
        watched.most_processes,
        watched.fewest_processes + 1,
        "Valkey's save forks: {watched:?}"
    );

    // The kernel's verdict under less: a limit above the steady memory and below what any save
    // of these copied (see [`between`]).
    let limit = between(measured)?;
    let done = run(
        &harness,
        "vk-below",
        &body(VALKEY, &limit, FAST, "maxmemory: 64mb, "),
    )
    .await?;
    let valkey = engine(&done, 0);
    assert_eq!(
        valkey.reason.as_ref().map(|r| r.as_str()),
        Some("EngineOOMKilled"),
        "under {limit}: {}",
        status_of(&done)
    );
    let message = valkey.message.as_deref().unwrap_or_default();
    // The phase, from the client whose connection broke in it; the engine's own last words
    // (its log's tail) show the save it had forked.
    for said in [
        &format!(
            "OOMKilled (memory limit {limit}) during repetition 1's snapshot phase, after 1 of 1 repetitions"
        ),
        "the save forks",
        "Background saving started by pid",
    ] {
        assert!(message.contains(said), "{said:?} missing from {message:?}");
    }
    // Its readings, taken before the snapshot, are kept; its peak was never measured.
    assert_eq!(valkey.repetitions.len(), 1, "{valkey:#?}");
    let first = &valkey.repetitions[0];
    assert_eq!(first.items, KEYS);
    assert!(first.peak.is_none(), "{first:#?}");
    // The kubelet's record: the kernel killed the container's main process (the server, PID 1
    // of the container), not only the save's child, which would have left it running.
    common::real_node::assert_oom_killed(&harness.pods(), "vk-below-0-engine").await?;
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dragonfly_holds_at_its_recommended_limit_and_under_the_limit_that_kills_valkey_without_a_fork_or_a_rise()
-> anyhow::Result<()> {
    let (_turn, harness) = on_the_real_node("real-rec-dragonfly").await?;
    let valkey = valkey_fast().await?;
    let measured = measure(&harness, "df-measure", DRAGONFLY, FAST).await?;
    let names: Vec<&str> = measured
        .recommended
        .terms
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert!(!names.contains(&"copy_on_write"), "{names:?}");
    holds_at_recommended(
        &harness,
        "df-recommended",
        DRAGONFLY,
        &measured.recommended,
        None,
    )
    .await?;

    let limit = between(valkey)?;
    harness
        .create(&spec(
            "df-below",
            &body(DRAGONFLY, &limit, FAST, "maxmemory: 64mb, "),
        ))
        .await?;
    // This machine's own reading of the engine container's cgroup, beside the operator's.
    let watch =
        common::real_node::watch_engine_cgroup(harness.pods(), "df-below-0-engine", "dragonfly");
    let done = harness
        .finished("df-below", Duration::from_secs(300))
        .await?;
    // The watch ends when the container's cgroup does, as the pod is deleted.
    let container = tokio::time::timeout(Duration::from_secs(60), watch)
        .await
        .context("the engine's cgroup outlived its pod by a minute")???;
    let status = succeeded(
        &done,
        &format!("Dragonfly under the limit that kills Valkey's save ({limit})"),
    )?;
    let repetition = &status.engines[0].repetitions[0];
    let snapshot = repetition
        .peak
        .as_ref()
        .and_then(|p| p.snapshot.as_ref())
        .with_context(|| format!("a snapshot's figures in {repetition:#?}"))?;
    eprintln!(
        "df-below under {limit}: {container:?}; rss {} B; snapshot {snapshot:#?}",
        repetition.used_memory_rss
    );
    // Why the recommendation has no copy-on-write term, measured rather than taken from the
    // capability table: the container held as many processes all through its load and its
    // save as when it started (a forked save adds one for the save's length, 2.7 s for
    // Dragonfly here) ...
    assert!(
        container.most_processes >= 1 && container.most_processes == container.fewest_processes,
        "Dragonfly's container's processes changed in number: {container:?}"
    );
    // ... and the save took writes all through (26,000 to 29,000 a second over 2.7 s here, once
    // 5,400 over 12.5 s): more than the 60 MiB (about 15,000 pages of 4 KiB) that Valkey's save
    // copied before its copy reached 320Mi, so a save that copied on write would have shown it.
    let writes = snapshot.writes_per_sec * snapshot.duration_seconds;
    assert!(
        writes > 40_000.0,
        "{writes} writes during the save: {snapshot:#?}"
    );
    // ... and the kernel's high-water mark over the whole run, load and save, stayed at the
    // memory the keys hold: less than a tenth above the engine's RSS after the load (Valkey's
    // rose 1.40 to 1.87 times its steady memory under the same writes).
    let rss = repetition.used_memory_rss;
    let ratio = container.high_water_bytes as f64 / rss as f64;
    assert!(
        ratio < 1.1,
        "Dragonfly's container peaked at {} B, {ratio:.3} times its RSS after the load ({rss} B)",
        container.high_water_bytes
    );
    // The operator read the same kernel counter from the kubelet (`container-cgroup`), after
    // the save: it agrees with this machine's reading, which ran on until the container ended
    // (only the eviction phase's smaller load ran after the save).
    assert_eq!(snapshot.source, "container-cgroup", "{snapshot:#?}");
    assert_eq!(snapshot.cow_bytes, None, "{snapshot:#?}");
    let kubelet = snapshot
        .high_water_bytes
        .context("the container's mark after the save")?;
    assert!(
        (kubelet as f64 / container.high_water_bytes as f64 - 1.0).abs() < 0.02,
        "the kubelet said {kubelet} B, this machine's cgroup {} B",
        container.high_water_bytes
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkeys_recommendation_at_a_tenth_of_the_write_rate_is_smaller_and_holds()
-> anyhow::Result<()> {
    let (_turn, harness) = on_the_real_node("real-rec-rate").await?;
    let fast = valkey_fast().await?;
    let slow = measure(&harness, "vk-slow", VALKEY, SLOW).await?;
    let cow = |m: &Measured| -> u64 {
        m.recommended
            .terms
            .iter()
            .find(|t| t.name == "copy_on_write")
            .map(|t| t.bytes)
            .unwrap_or(0)
    };
    // Fewer writes during the save copy fewer pages: the term falls by more than the noise of
    // the copy between two saves at the same rate (real_node_peak.rs: 1.40 to 1.87 times).
    assert!(
        (cow(&slow) as f64) < 0.75 * cow(fast) as f64,
        "copy_on_write at {SLOW}/s: {} B, at {FAST}/s: {} B",
        cow(&slow),
        cow(fast)
    );
    assert!(slow.recommended.memory_limit_bytes < fast.recommended.memory_limit_bytes);
    holds_at_recommended(&harness, "vk-slow-rec", VALKEY, &slow.recommended, None).await?;
    harness.finish().await;
    Ok(())
}
