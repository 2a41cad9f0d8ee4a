//! Churn against real engines from the store: deletes leave RSS where the load left it while
//! used_memory falls, active defragmentation gives it back (Valkey 9.1.2 with its bundled
//! jemalloc), the same deletes sent by `redis-cli --pipe` from the test's own script give the
//! same memory (at the Churn table's 1,000,000 keys), overwrites and sorted-set members are
//! counted, and what cannot be churned or defragmented is refused before any write.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use membench::client::engine::{EngineAddress, parse_info};
use membench::crd::EngineKind;
use serde_json::Value;

/// 200,000 keys of 100 B: about 35 MB, enough for fragmentation to show in RSS.
const KEYS: u64 = 200_000;

/// The Churn table's row size (docs/results.md): 1,000,000 keys of 100 B. The independent check
/// runs at it: RSS moves by what redis-cli's query buffer left in the allocator (a few hundred
/// KiB, measured), which is over 1% of a smaller run's RSS.
const ROW_KEYS: u64 = 1_000_000;

fn load(address: &str, extra: &[&str]) -> (Value, std::process::Output) {
    load_keys(address, KEYS, extra)
}

fn load_keys(address: &str, keys: u64, extra: &[&str]) -> (Value, std::process::Output) {
    let keys = keys.to_string();
    let mut args = vec![
        "load",
        "--addr",
        address,
        "--workload",
        "strings",
        "--keys",
        &keys,
        "--repetitions",
        "1",
        "--output",
        "json",
    ];
    args.extend(extra);
    let output = common::membench(&args);
    let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (json, output)
}

fn memory(address: &EngineAddress) -> (u64, u64) {
    let mut connection = common::connect(address);
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut connection)
        .unwrap();
    let fields = parse_info(&info);
    let number = |name: &str| fields[name].parse::<u64>().unwrap();
    (number("used_memory"), number("used_memory_rss"))
}

fn dbsize(address: &EngineAddress) -> u64 {
    redis::cmd("DBSIZE")
        .query(&mut common::connect(address))
        .unwrap()
}

fn number(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

#[test]
fn deleting_half_the_keys_leaves_rss_where_the_load_left_it_and_active_defrag_gives_it_back() {
    let server = common::start_spec(&common::shared_build(EngineKind::Valkey, "9.1.2"));
    let addr = server.address.socket_addr();
    let (json, output) = load(
        &addr,
        &[
            "--churn-rounds",
            "1",
            "--delete-share",
            "0.5",
            "--defrag",
            "--keep-data",
        ],
    );
    assert!(output.status.success(), "{}", common::stderr(&output));
    let repetition = &json["repetitions"][0];
    let loaded_used = number(&repetition["used_memory"]);
    let loaded_rss = number(&repetition["used_memory_rss"]);
    let data = loaded_used - number(&repetition["baseline_used_memory"]);
    let round = &repetition["churn"]["rounds"][0];
    let deleted = round["deleted"].as_u64().unwrap();
    // A binomial draw of half of 200,000: within 5 standard deviations (about 1,120).
    assert!(deleted.abs_diff(KEYS / 2) < 1_120, "{round}");
    assert_eq!(round["items"].as_u64().unwrap(), KEYS - deleted);
    assert_eq!(
        dbsize(&server.address),
        KEYS - deleted,
        "the engine holds what the round says, counted over the test's own connection"
    );

    // used_memory falls by about the deleted half of the data; RSS stays where it was.
    let freed = loaded_used - number(&round["used_memory"]);
    assert!(
        freed > 0.4 * data && freed < 0.6 * data,
        "deleting half the keys frees about half the data: freed {freed} of {data}"
    );
    let churned_rss = number(&round["used_memory_rss"]);
    assert!(
        churned_rss > 0.95 * loaded_rss,
        "RSS stays where the load left it: {loaded_rss} -> {churned_rss}"
    );
    let fragmented = number(&round["allocator_frag_ratio"]);
    assert!(fragmented >= 1.4, "allocator_frag_ratio {fragmented}");

    // Active defragmentation gives most of the freed memory back to the kernel.
    let defrag = &repetition["churn"]["defrag"];
    assert_eq!(defrag["switched"], "activedefrag");
    let regained = number(&defrag["rss_before"]) - number(&defrag["rss_after"]);
    assert!(
        regained > 0.5 * freed,
        "defragmentation regains most of the {freed} bytes freed: {defrag}"
    );
    assert!(
        number(&defrag["allocator_frag_ratio_after"]) < 1.15,
        "{defrag}"
    );
    assert!(number(&defrag["cpu_seconds"]) > 0.0, "{defrag}");
    assert!(
        defrag["write_latency_ms"]["writes"].as_u64().unwrap() > 10,
        "{defrag}"
    );
    assert!(number(&defrag["write_latency_ms"]["p99"]) > 0.0, "{defrag}");
    assert_eq!(defrag["sample_interval_ms"], 500);
    // The window's settings are put back, and its probe key is gone.
    let mut connection = common::connect(&server.address);
    let activedefrag: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("activedefrag")
        .query(&mut connection)
        .unwrap();
    assert_eq!(activedefrag[1], "no");
    let ignore: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("active-defrag-ignore-bytes")
        .query(&mut connection)
        .unwrap();
    assert_eq!(ignore[1], "104857600", "the default 100mb is back");
    assert_eq!(dbsize(&server.address), KEYS - deleted, "no probe key left");
}

#[test]
fn the_same_deletes_sent_by_redis_cli_pipe_give_the_same_memory() {
    let redis_cli = common::find_on_path("redis-cli").expect(
        "this test needs redis-cli (Debian's redis-tools, which hack/install-engines.sh installs)",
    );
    let spec = common::shared_build(EngineKind::Valkey, "9.1.2");
    // membench's own round on one server...
    let churned = common::start_spec(&spec);
    let (json, output) = load_keys(
        &churned.address.socket_addr(),
        ROW_KEYS,
        &["--churn-rounds", "1", "--delete-share", "0.5"],
    );
    assert!(output.status.success(), "{}", common::stderr(&output));
    let round = json["repetitions"][0]["churn"]["rounds"][0].clone();

    // ...and the same load into another, then the same keys deleted by redis-cli --pipe from
    // a script written here, the keys picked by the churn's published draw.
    let piped = common::start_spec(&spec);
    let (_, output) = load_keys(&piped.address.socket_addr(), ROW_KEYS, &["--keep-data"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let mut script = Vec::new();
    let mut deleted = 0u64;
    for item in 0..ROW_KEYS {
        if membench::client::churn::deletes(1, 1, item, 0.5) {
            let key = format!("key:{item:012}");
            write!(script, "*2\r\n$3\r\nDEL\r\n${}\r\n{key}\r\n", key.len()).unwrap();
            deleted += 1;
        }
    }
    assert_eq!(deleted, round["deleted"].as_u64().unwrap());
    let port = piped
        .address
        .socket_addr()
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let mut child = Command::new(redis_cli)
        .args(["-h", "127.0.0.1", "-p", &port, "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&script).unwrap();
    let piped_output = child.wait_with_output().unwrap();
    assert!(piped_output.status.success());
    let said = String::from_utf8_lossy(&piped_output.stdout);
    assert!(said.contains(&format!("replies: {deleted}")), "{said}");
    assert_eq!(dbsize(&piped.address), ROW_KEYS - deleted);

    // Read as membench reads a round: after the engine's cron refreshed its figures.
    std::thread::sleep(membench::client::churn::ROUND_SETTLE);
    let (used, rss) = memory(&piped.address);
    println!(
        "membench's round: used_memory {}, RSS {}; redis-cli --pipe: used_memory {used}, RSS {rss}",
        round["used_memory"], round["used_memory_rss"]
    );
    let within = |ours: f64, theirs: f64, what: &str| {
        assert!(
            (ours - theirs).abs() <= 0.01 * theirs,
            "{what}: membench's round {ours} against redis-cli --pipe {theirs}"
        );
    };
    within(number(&round["used_memory"]), used as f64, "used_memory");
    within(
        number(&round["used_memory_rss"]),
        rss as f64,
        "used_memory_rss",
    );
}

#[test]
fn overwrites_and_sorted_set_members_are_churned_and_counted_in_the_engine() {
    let server = common::start(EngineKind::Valkey, &[]);
    let addr = server.address.socket_addr();
    // Two rounds on a sorted set: members removed, others re-added under 64-byte names.
    let output = common::membench(&[
        "load",
        "--addr",
        &addr,
        "--workload",
        "sorted-set",
        "--members",
        "20000",
        "--sample-every",
        "0",
        "--repetitions",
        "1",
        "--churn-rounds",
        "2",
        "--delete-share",
        "0.25",
        "--overwrite-share",
        "0.5",
        "--overwrite-value-size",
        "64",
        "--keep-data",
        "--output",
        "json",
    ]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rounds = json["repetitions"][0]["churn"]["rounds"]
        .as_array()
        .unwrap();
    assert_eq!(rounds.len(), 2);
    let held = rounds[1]["items"].as_u64().unwrap();
    let deleted: u64 = rounds.iter().map(|r| r["deleted"].as_u64().unwrap()).sum();
    assert_eq!(held, 20_000 - deleted);
    let mut connection = common::connect(&server.address);
    let zcard: u64 = redis::cmd("ZCARD")
        .arg("membench:zset")
        .query(&mut connection)
        .unwrap();
    assert_eq!(zcard, held);
    // Overwritten members now have names of 64 bytes.
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg("membench:zset")
        .arg(0)
        .arg(-1)
        .query(&mut connection)
        .unwrap();
    let long = members.iter().filter(|m| m.len() == 64).count();
    assert!(
        long as f64 > 0.4 * held as f64,
        "about half the members held were overwritten: {long} of {held}"
    );
    // Their bytes: the round that overwrote with longer names grew used_memory per member.
    let per_member = |r: &Value| number(&r["used_memory"]) / r["items"].as_u64().unwrap() as f64;
    assert!(
        per_member(&rounds[1]) > per_member(&rounds[0]),
        "{rounds:?}"
    );
}

#[test]
fn what_cannot_be_churned_or_defragmented_is_refused_before_any_write() {
    // Debian's Redis links the system jemalloc, which cannot defragment.
    let server = common::start(EngineKind::Redis, &[]);
    let addr = server.address.socket_addr();
    let (_, output) = load(
        &addr,
        &["--churn-rounds", "1", "--delete-share", "0.5", "--defrag"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", common::stderr(&output));
    let stderr = common::stderr(&output);
    assert!(stderr.contains("cannot defragment"), "{stderr}");
    assert!(stderr.contains("activedefrag"), "{stderr}");
    assert_eq!(dbsize(&server.address), 0, "nothing was written");

    for (flags, says) in [
        (
            vec!["--churn-rounds", "1", "--delete-share", "1"],
            "would delete every item",
        ),
        (
            vec!["--churn-rounds", "1", "--delete-share", "0"],
            "above 0 and below 1",
        ),
        (
            vec![
                "--churn-rounds",
                "1",
                "--overwrite-share",
                "1.5",
                "--overwrite-value-size",
                "10",
            ],
            "--overwrite-share",
        ),
        (
            vec!["--churn-rounds", "1", "--overwrite-share", "0.5"],
            "--overwrite-value-size",
        ),
        (
            vec!["--delete-share", "0.5"],
            "applies only with --churn-rounds",
        ),
        (
            vec!["--churn-rounds", "0", "--delete-share", "0.5"],
            "between 1 and 100",
        ),
    ] {
        let (_, output) = load(&addr, &flags);
        assert_eq!(output.status.code(), Some(2), "{flags:?}");
        let stderr = common::stderr(&output);
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    let output = common::membench(&[
        "load",
        "--addr",
        &addr,
        "--workload",
        "random-strings",
        "--requests",
        "100",
        "--keyspace",
        "100",
        "--churn-rounds",
        "1",
        "--delete-share",
        "0.5",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(common::stderr(&output).contains("strings, records and sortedSet"));
    assert_eq!(dbsize(&server.address), 0, "nothing was written");
}

#[test]
fn a_spec_that_would_delete_every_key_is_refused_naming_the_field() {
    let dir = std::env::temp_dir().join(format!("membench-churn-spec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = common::write_spec(
        &dir,
        "churn",
        "  engines: [{engine: valkey, version: \"9.1\"}]\n  workload: {strings: {keys: 1000}}\n  repetitions: 1\n  churn: {rounds: 2, deleteShare: 1.0}\n",
    );
    let output = common::membench(&["run", spec.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", common::stderr(&output));
    let stderr = common::stderr(&output);
    assert!(stderr.contains("spec.churn.deleteShare"), "{stderr}");
    assert!(stderr.contains("would delete every item"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}
