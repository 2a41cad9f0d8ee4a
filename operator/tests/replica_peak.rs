//! The replica peak phase against real engines from the store, on this machine: a replica's
//! full sync under paced overwrites. Valkey 9.1.2 forks to send it, and its process tree rises
//! by the pages the writes copy; Dragonfly 1.40 syncs without a fork and without that rise.
//! Either way the replica ends in sync holding the primary's keys, and is left detached and
//! empty. Bad input is refused before anything is written to either server.
//!
//! Measured by hand first (2026-12-05, this 2-core machine, 50,000 keys of 1,000 B, writes at
//! 20,000/s over every key, `membench load --replica`): Valkey 9.1.2's primary peaked at
//! 1.108, 1.131, 1.123, 1.126, 1.140, 1.132, 1.135 times its tree before the sync (7 syncs,
//! 74.2 MB before, 82-85 MB at the peak; rdb_last_cow_size 8.5-9.9 MB; 5.3-6.2 s, most of it
//! the 5 s repl-diskless-sync-delay), its replica's used_memory 60.9-65.6 MB against the
//! primary's 65.6 MB. Dragonfly 1.40's primary: 1.000 in 3 of 3 syncs (0.3-0.45 s), 1.023 in a
//! sync under unpaced redis-benchmark writes; its replica's used_memory 47.25 MB against 47.08.
//! In this file's tests (3 runs, fresh engines): Valkey's first sync 1.296-1.361 (the primary
//! also allocates its 10 MB backlog then), its second 1.097-1.138, rdb_last_cow_size
//! 8.2-11.2 MB; Dragonfly's first sync 1.018-1.033 (a rise of 1.2-2.2 MB), its second
//! 1.000; each replica's data within 0.4% of its primary's.

mod common;

use membench::crd::EngineKind;
use membench::local::runner::LocalEngine;
use serde_json::Value;

const KEYS: &str = "50000";
const VALUE_SIZE: &str = "1000";
/// The overwrites a second beside each engine's sync: a rate each serves while it syncs on this
/// 2-core machine with another test binary running beside it. Measured (2026-12-06, 30 runs
/// of both tests beside `client_workloads`, at 20,000/s for both): Valkey's 60 syncs reached
/// 0.995-1.005 of the rate the timing allows; Dragonfly's, whose one thread also sends the
/// sync, 0.55-1.03, under 0.9 in 8 runs: the engine's limit, not the pacer's, so it is asked
/// for half. Then (30 more runs, 30 passed) Valkey 0.993-1.005, Dragonfly 0.951-1.116.
const VALKEY_WRITES_PER_SEC: u32 = 20_000;
const DRAGONFLY_WRITES_PER_SEC: u32 = 10_000;

/// `membench load --output json` of 50,000 strings of 1,000 B into `primary`, `repetitions`
/// times, each followed by a full sync of `replica` under `writes_per_sec` writes a second.
fn load_with_replica(
    primary: &LocalEngine,
    replica: &LocalEngine,
    repetitions: &str,
    writes_per_sec: u32,
) -> Value {
    let output = common::membench(&[
        "load",
        "--addr",
        &primary.address.socket_addr(),
        "--workload",
        "strings",
        "--keys",
        KEYS,
        "--value-size",
        VALUE_SIZE,
        "--repetitions",
        repetitions,
        "--replica",
        &replica.address.socket_addr(),
        "--replica-writes-per-sec",
        &writes_per_sec.to_string(),
        "--output",
        "json",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn figure(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a figure: {value}"))
}

fn keys(engine: &LocalEngine) -> u64 {
    redis::cmd("DBSIZE")
        .query(&mut common::connect(&engine.address))
        .unwrap()
}

/// What every sync shows on any engine: the replica held the primary's keys, its memory about
/// the primary's, the writes ran at the asked rate, and the replica is left detached and empty.
fn assert_in_sync_and_left_clean(
    json: &Value,
    primary: &LocalEngine,
    replica: &LocalEngine,
    writes_per_sec: u32,
) {
    // The primary's fork freeze, read once after the run: its latest fork's, which each sync's
    // fork of the same 50,000 keys matches (0 on Dragonfly, which does not fork).
    let freeze_ms = common::fork_freeze_ms(&primary.address);
    let repetitions = json["repetitions"].as_array().unwrap();
    let mut written = 0.0;
    for repetition in repetitions {
        let sync = &repetition["peak"]["replica"];
        assert_eq!(sync["source"], "process-tree", "{sync}");
        assert_eq!(sync["replica_keys"], 50_000, "{sync}");
        assert_eq!(sync["replica_keys"], repetition["items"], "{sync}");
        // Both hold the data and, on Valkey, a replication backlog each, which the primary
        // allocates in its first sync and the replica as the sync ends or at the first write
        // after it: the data is compared.
        let without_backlog =
            |used: &str, backlog: &str| figure(&sync[used]) - sync[backlog].as_f64().unwrap_or(0.0);
        let primary_data = without_backlog("primary_used_memory_after", "backlog_bytes");
        let held = without_backlog("replica_used_memory", "replica_backlog_bytes");
        println!(
            "ratio {} cow {} sync {:.2} s, {} writes, a rise of {} B, p99 {} ms, {} writes/s, {} processes: the replica's data {held} against the primary's {primary_data}",
            sync["ratio"],
            sync["cow_bytes"],
            figure(&sync["duration_seconds"]),
            sync["writes"],
            figure(&sync["peak_bytes"]) - figure(&sync["before_bytes"]),
            sync["write_latency_ms"]["p99"],
            sync["writes_per_sec"],
            sync["most_processes"],
        );
        assert!(
            (held - primary_data).abs() < 0.05 * primary_data,
            "the replica's used_memory {held} against the primary's {primary_data}: {sync}"
        );
        // The rate reported is the writes over the sync's seconds: within 1%, the figure
        // being rounded far finer.
        let writes = figure(&sync["writes"]);
        let seconds = figure(&sync["duration_seconds"]);
        let reported = figure(&sync["writes_per_sec"]);
        assert!(
            writes > 0.0 && (reported - writes / seconds).abs() <= 0.01 * writes / seconds,
            "reported {reported}/s, {writes} writes in {seconds} s: {sync}"
        );
        written += writes;
        // The floor, from the timing the phase configures: the pacer sends what is due in
        // batches of at most 100 and catches up after any stall, so it falls short of the
        // asked rate only by the writes due while the poll that ends the phase waited
        // (the replica answers only once it has loaded the sync), never sent (longest_poll_ms
        // at most), and by the primary's fork freeze (latest_fork_usec of the sync's fork;
        // read above), in which it answers nothing.
        let lost_ms = figure(&sync["longest_poll_ms"]) + freeze_ms;
        let reachable = f64::from(writes_per_sec) * (seconds - lost_ms / 1000.0).max(0.0) / seconds;
        println!(
            "rate: {writes} writes in {seconds:.3} s, {reported:.0}/s against {reachable:.0}/s reachable ({:.4}), longest poll {} ms, fork freeze {freeze_ms} ms",
            reported / reachable,
            sync["longest_poll_ms"],
        );
        // 10% below it for the sync's start (REPLICAOF and the writes' connection, inside its
        // seconds) and a loaded machine (see VALKEY_WRITES_PER_SEC for the spread measured).
        assert!(
            reported >= 0.9 * reachable,
            "the asked rate, less the last poll and the fork's freeze ({reachable}/s), is reached: {sync}"
        );
        assert_eq!(sync["writes_per_sec_asked"], writes_per_sec, "{sync}");
        assert_eq!(sync["sample_interval_ms"], 20, "{sync}");
        assert!(figure(&sync["duration_seconds"]) > 0.0, "{sync}");
    }
    // The primary ran every write the client counts, no more and no fewer: its SETs are each
    // repetition's 50,000 and the syncs' writes (its own count, over the test's connection).
    assert_eq!(
        common::set_calls(&primary.address) as f64,
        repetitions.len() as f64 * 50_000.0 + written,
        "the primary's SETs against the loads and the writes reported"
    );
    assert_eq!(keys(replica), 0, "the replica is left empty");
    let role: String = redis::cmd("ROLE")
        .query::<Vec<redis::Value>>(&mut common::connect(&replica.address))
        .map(|r| match &r[0] {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        })
        .unwrap();
    assert_eq!(role, "master", "the replica is left detached");
}

/// Two repetitions with a replica's sync on a primary and a replica of the shared build of
/// `engine` at `version`, checked by [`assert_in_sync_and_left_clean`]: the result, and each
/// repetition's sync.
fn synced_twice(engine: EngineKind, version: &str, writes_per_sec: u32) -> (Value, Vec<Value>) {
    let build = common::shared_build(engine, version);
    let (primary, replica) = (common::start_spec(&build), common::start_spec(&build));
    let json = load_with_replica(&primary, &replica, "2", writes_per_sec);
    assert_in_sync_and_left_clean(&json, &primary, &replica, writes_per_sec);
    let syncs = json["repetitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["peak"]["replica"].clone())
        .collect();
    (json, syncs)
}

#[test]
fn valkey_forks_to_send_the_sync_and_rises_while_its_replica_ends_with_the_primarys_keys() {
    let (json, syncs) = synced_twice(EngineKind::Valkey, "9.1.2", VALKEY_WRITES_PER_SEC);
    for sync in &syncs {
        // By hand: 1.108 to 1.140 over 7 syncs, each reading of the tree before within 1%; in
        // these tests 1.097 at the lowest.
        assert!(
            figure(&sync["ratio"]) > 1.05,
            "the fork's copy shows: {sync}"
        );
        assert!(
            figure(&sync["most_processes"]) >= 2.0,
            "the fork child was seen: {sync}"
        );
        // By hand: 8.5 to 9.9 MB; in these tests 8.2 to 11.2.
        let cow = figure(&sync["cow_bytes"]);
        assert!(cow > 4e6, "the fork copied pages: {sync}");
        // The tree rose by about what the fork copied (the sampler, every 20 ms, can miss the
        // last pages copied before the child exits).
        let rise = figure(&sync["peak_bytes"]) - figure(&sync["before_bytes"]);
        assert!(
            rise > 0.5 * cow,
            "rise {rise} against copy-on-write {cow}: {sync}"
        );
        assert!(
            sync["backlog_bytes"].as_f64().is_some(),
            "Valkey keeps a backlog: {sync}"
        );
    }
    let summary = &json["summary"]["peak"]["replica"];
    assert_eq!(summary["repetitions"], 2, "{summary}");
    assert!(figure(&summary["ratio"]) > 1.05, "{summary}");
}

#[test]
fn dragonfly_syncs_its_replica_without_a_fork_and_without_a_rise() {
    let (_, syncs) = synced_twice(EngineKind::Dragonfly, "1.40", DRAGONFLY_WRITES_PER_SEC);
    for sync in &syncs {
        // Measured, not assumed: the primary's process tree held one process at every
        // reading of the sync (every 20 ms), and so no copy is reported, saying why.
        assert_eq!(sync["most_processes"], 1, "no fork: {sync}");
        assert!(figure(&sync["samples"]) >= 5.0, "{sync}");
        assert!(
            sync["cow_bytes"].is_null()
                && sync["cow_note"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("no fork")),
            "no copy, and why: {sync}"
        );
        // Without a fork, what the primary may add is the writes the sync carries: each one
        // held at most once, as the command the replica is sent (1,000 B of value, its key
        // and RESP's framing: under 1,100 B), so the rise is bounded by the sync's own writes
        // times 1,100 B. Measured (2026-12-06, 4 runs of this test, two syncs each): first
        // syncs rose 1.16-3.36 MB over 10,213-17,453 writes (at most 192 B a write), second
        // syncs 0; the fresh-clone suite's failure at a fixed bound rose 4.27 MB. A fork's
        // copy of the 47 MB of data, or any figure not bounded by the writes, passes it.
        let rise = figure(&sync["peak_bytes"]) - figure(&sync["before_bytes"]);
        let carried = figure(&sync["writes"]) * 1_100.0;
        assert!(
            rise <= carried,
            "a rise of {rise} B, above the {carried} B the sync's writes could hold: {sync}"
        );
    }
}

/// `membench load` of 100 strings into `primary` with `replica_flags`, which must be refused
/// (exit 2) with a message containing `says`.
fn refused(primary: &str, workload: &[&str], replica_flags: &[&str], says: &str) {
    let mut args = vec!["load", "--addr", primary];
    args.extend(workload);
    args.extend(replica_flags);
    let output = common::membench(&args);
    let stderr = common::stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(says), "{args:?}: {stderr}");
}

#[test]
fn bad_replica_input_is_refused_before_anything_is_written_to_either_server() {
    let primary = common::start(EngineKind::Valkey, &[]);
    let replica = common::start(EngineKind::Valkey, &[]);
    let second_shard = common::start(EngineKind::Valkey, &[]);
    let (at, replica_at) = (primary.address.socket_addr(), replica.address.socket_addr());
    let strings = ["--workload", "strings", "--keys", "100"];
    let with = |rate: &'static str| ["--replica", "REPLICA", "--replica-writes-per-sec", rate];
    let flags = |rate: &'static str, address: &str| -> Vec<String> {
        with(rate)
            .iter()
            .map(|f| f.replace("REPLICA", address))
            .collect()
    };
    let check = |workload: &[&str], flags: Vec<String>, says: &str| {
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        refused(&at, workload, &flags, says);
    };
    check(&strings, flags("0", &replica_at), "between 1 and 10000000");
    check(
        &strings,
        flags("10000001", &replica_at),
        "between 1 and 10000000",
    );
    check(&strings, flags("1000", &at), "is the engine's own address");
    check(
        &strings,
        flags("1000", &format!("localhost:{}", primary.address.port)),
        "is the engine's own address",
    );
    let unused = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    check(&strings, flags("1000", &unused), "does not answer");
    check(
        &["--workload", "sorted-set", "--members", "100"],
        flags("1000", &replica_at),
        "strings and records",
    );
    let mut sharded = vec!["--addr".to_string(), second_shard.address.socket_addr()];
    sharded.extend(strings.iter().map(|s| s.to_string()));
    let sharded: Vec<&str> = sharded.iter().map(String::as_str).collect();
    check(&sharded, flags("1000", &replica_at), "2 shards were given");
    check(
        &strings,
        vec!["--replica".into(), replica_at.clone()],
        "--replica-writes-per-sec",
    );
    // A replica that holds keys: its sync would wipe them.
    let _: () = redis::cmd("SET")
        .arg("theirs")
        .arg("kept")
        .query(&mut common::connect(&replica.address))
        .unwrap();
    check(
        &strings,
        flags("1000", &replica_at),
        "holds 1 keys, which its full sync would wipe",
    );
    assert_eq!(keys(&primary), 0, "nothing was written to the primary");
    assert_eq!(keys(&second_shard), 0, "nor to the second shard");
    assert_eq!(keys(&replica), 1, "the replica keeps its own key");
    let kept: String = redis::cmd("GET")
        .arg("theirs")
        .query(&mut common::connect(&replica.address))
        .unwrap();
    assert_eq!(kept, "kept");
}

#[test]
fn a_local_run_with_peak_replica_starts_the_replica_and_reports_its_sync() {
    let dir = std::env::temp_dir().join(format!("membench-replica-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = common::run_spec(
        &dir,
        "replica",
        "  engines: [{engine: valkey, version: \"9.1\"}]\n  workload: {strings: {keys: 20000, valueSize: 200}}\n  repetitions: 2\n  peak: {replica: {writesPerSecond: 5000}}\n",
    );
    let engine = &json["engines"][0];
    let repetitions = engine["repetitions"].as_array().unwrap();
    assert_eq!(repetitions.len(), 2, "{engine}");
    for repetition in repetitions {
        let sync = &repetition["peak"]["replica"];
        assert_eq!(sync["replica_keys"], 20_000, "{sync}");
        assert_eq!(sync["source"], "process-tree", "{sync}");
        // The sync is measured, not echoed: the engine counted the fork's copy, and the ratio
        // is the tree's own readings. Measured (2026-12-06, 3 runs of this test, 2 syncs
        // each): copies of 1.30-1.53 MB; a fifth of the least is asked. The tree's rise is not
        // compared with the copy here: the fork that sends these 4 MB can live less than the
        // sampler's 20 ms (one sync rose 53 kB against a copy of 1.36 MB).
        let cow = figure(&sync["cow_bytes"]);
        assert!(cow > 0.26e6, "the fork copied pages: {sync}");
        let (before, peak) = (figure(&sync["before_bytes"]), figure(&sync["peak_bytes"]));
        assert!(
            (figure(&sync["ratio"]) - peak / before).abs() < 1e-9,
            "the ratio is the tree's: {sync}"
        );
    }
    let summary = &engine["summary"]["peak"]["replica"];
    assert_eq!(summary["repetitions"], 2, "{summary}");
    assert!(
        figure(&summary["min"]) <= figure(&summary["ratio"])
            && figure(&summary["ratio"]) <= figure(&summary["max"]),
        "{summary}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_replica_an_earlier_run_left_attached_is_freed_with_flush_and_refused_without() {
    let primary = common::start(EngineKind::Valkey, &[]);
    let replica = common::start(EngineKind::Valkey, &[]);
    let (at, replica_at) = (primary.address.socket_addr(), replica.address.socket_addr());
    // What a client that died in the phase leaves: the replica attached to the engine, holding
    // a copy of its keys.
    for i in 0..10 {
        let _: () = redis::cmd("SET")
            .arg(format!("earlier:{i}"))
            .arg("x")
            .query(&mut common::connect(&primary.address))
            .unwrap();
    }
    let _: () = redis::cmd("REPLICAOF")
        .arg(&primary.address.host)
        .arg(primary.address.port)
        .query(&mut common::connect(&replica.address))
        .unwrap();
    let started = std::time::Instant::now();
    while keys(&replica) < 10 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the replica never took the primary's keys"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let strings = [
        "--workload",
        "strings",
        "--keys",
        "2000",
        "--value-size",
        "100",
    ];
    let replica_flags = [
        "--replica",
        replica_at.as_str(),
        "--replica-writes-per-sec",
        "2000",
    ];
    // Without --flush the primary's data is not this run's to wipe, nor its replica's copy.
    refused(
        &at,
        &strings,
        &replica_flags,
        "already replicates from the engine",
    );
    assert_eq!(keys(&replica), 10, "the replica keeps its copy");
    // With --flush (as the operator's client pods run), the replica is detached and emptied
    // first, and the run syncs it as any other.
    let mut args = vec![
        "load",
        "--addr",
        at.as_str(),
        "--flush",
        "--repetitions",
        "1",
    ];
    args.extend(strings);
    args.extend(replica_flags);
    args.extend(["--output", "json"]);
    let output = common::membench(&args);
    let stderr = common::stderr(&output);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("detached and emptied it before the run"),
        "{stderr}"
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let sync = &json["repetitions"][0]["peak"]["replica"];
    assert_eq!(sync["replica_keys"], 2000, "{sync}");
    assert_eq!(keys(&replica), 0, "the replica is left empty");
}
