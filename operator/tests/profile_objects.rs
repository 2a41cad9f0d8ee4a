//! Profiles right on application-shaped hashes: a job queue's keyspace as a job-queue library
//! writes it (job hashes of the same 16 fields, each field with a value size of its own, the
//! payload straddling the 64 B a listpack takes; a result stream per fifth job; registries as
//! sorted sets; a waiting list), profiled at the defaults and rebuilt on the same server of
//! Valkey 9.1, flushed. The profile keeps the jobs' values by field (`objectFields`), and the
//! rebuild lands within 1% of the source, each type within 2% by MEMORY USAGE.
//!
//! Measured (2026-12-07, four runs): the rebuild -0.04% to -0.08% of the source, its hashes
//! -0.10% to -0.11%. With the rebuild's object fields turned off (every value drawn from all
//! the jobs' values, under made-up field names, as before): -1.43% to -1.47%, the hashes
//! -3.27% (three runs), but once +0.56%, the hashes +1.46%, as the server's hashing of the
//! made-up names fell. The memory bounds alone do not catch that every time, so the test also
//! checks that each rebuilt job has the source's fields, each value of its own field's size:
//! without object fields that fails every time.

mod common;

use membench::crd::EngineKind;
use membench::profile::Profile;
use membench::profile::model::KeyType;

/// How many jobs the keyspace holds; a fifth of them have a result stream.
const JOBS: u64 = 3_000;

/// A generator of the keyspace's sizes and texts, from a seed.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number from `from` to `to`.
    fn between(&mut self, from: u64, to: u64) -> u64 {
        from + self.next() % (to - from + 1)
    }

    /// Text of `from` to `to` bytes (no digit at its start, so never an integer).
    fn text(&mut self, from: u64, to: u64) -> String {
        let length = self.between(from, to) as usize;
        let mut text = String::with_capacity(length);
        while text.len() < length {
            text.push_str(&format!("j{:x}", self.next()));
        }
        text.truncate(length);
        text
    }

    /// A millisecond timestamp of 2026.
    fn timestamp(&mut self) -> String {
        self.between(1_767_225_600_000, 1_798_761_600_000)
            .to_string()
    }
}

/// The job hash's fields: each its own value size, integers where the library writes numbers.
fn job(draws: &mut Draws) -> Vec<(&'static str, String)> {
    let started = draws.timestamp();
    vec![
        ("name", draws.text(6, 14)),
        ("data", draws.text(50, 80)),
        ("opts", draws.text(30, 70)),
        ("timestamp", started.clone()),
        ("delay", "0".into()),
        ("priority", draws.between(0, 3).to_string()),
        ("processedOn", started),
        ("finishedOn", draws.timestamp()),
        ("returnvalue", draws.text(4, 60)),
        ("attemptsMade", draws.between(1, 3).to_string()),
        ("attemptsStarted", draws.between(1, 3).to_string()),
        ("stacktrace", "[]".into()),
        ("progress", draws.between(0, 100).to_string()),
        ("pb", draws.text(20, 28)),
        ("ats", "1".into()),
        ("atm", "0".into()),
    ]
}

/// The job queue's keyspace, its sizes drawn from `seed`; its key count.
fn load_queue(connection: &mut redis::Connection, seed: u64) -> u64 {
    let mut draws = Draws(seed);
    let mut pipe = redis::pipe();
    for id in 0..JOBS {
        let key = format!("bull:mail:{id}");
        pipe.hset_multiple(&key, &job(&mut draws)).ignore();
        // Registries of 1,000 and 2,000: a sorted set written in one command (429 members, a
        // registry of every seventh job) gets a table sized for all its members at once,
        // where the source's grew one member at a time: 1.0% to 2.3% more by MEMORY USAGE
        // (four runs), a difference of how the rebuild batches, not of the profile.
        let registry = if id % 3 == 0 { "failed" } else { "completed" };
        pipe.zadd(format!("bull:mail:{registry}"), id, draws.timestamp())
            .ignore();
        if id % 5 == 0 {
            let entries = draws.between(1, 6);
            for _ in 0..entries {
                pipe.cmd("XADD")
                    .arg(format!("bull:mail:results:{id}"))
                    .arg("*")
                    .arg("event")
                    .arg(draws.text(5, 9))
                    .arg("value")
                    .arg(draws.text(10, 90))
                    .ignore();
            }
        }
        if id % 10 == 0 {
            pipe.rpush("bull:mail:wait", id).ignore();
        }
        if id % 250 == 249 {
            pipe.query::<()>(connection).unwrap();
            pipe.clear();
        }
    }
    redis::cmd("DBSIZE").query(connection).unwrap()
}

/// The mean length of `field`'s value over the engine's hashes, and how many hashes lack it.
fn field_mean(connection: &mut redis::Connection, field: &str) -> (f64, usize) {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("bull:mail:[0-9]*")
        .query(connection)
        .unwrap();
    let lengths: Vec<u64> = keys
        .iter()
        .fold(redis::pipe(), |mut pipe, key| {
            pipe.cmd("HSTRLEN").arg(key).arg(field);
            pipe
        })
        .query(connection)
        .unwrap();
    let lacking = lengths.iter().filter(|l| **l == 0).count();
    let mean = lengths.iter().sum::<u64>() as f64 / lengths.len().max(1) as f64;
    (mean, lacking)
}

/// Finishes the resize every hash's and sorted set's table was left in by its last write: a
/// lookup moves a resizing table on by a step, and a table of 16 fields is two steps from done.
/// Left halfway, which fields wait in the old table follows the order they were written in,
/// and whether that old table needs a bucket more (64 B a key) with it: the source's jobs
/// (written field by field as the library does) and the rebuild's (in the profile's order)
/// differed so by 5.0% in one run of four before this. Done, a table holds its fields by
/// their hashes alone.
fn settle(connection: &mut redis::Connection) {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(connection).unwrap();
    let types: Vec<String> = keys
        .iter()
        .fold(redis::pipe(), |mut pipe, key| {
            pipe.cmd("TYPE").arg(key);
            pipe
        })
        .query(connection)
        .unwrap();
    let mut pipe = redis::pipe();
    for (key, key_type) in keys.iter().zip(&types) {
        let lookup = match key_type.as_str() {
            "hash" => "HEXISTS",
            "zset" => "ZSCORE",
            _ => continue,
        };
        for _ in 0..4 {
            pipe.cmd(lookup).arg(key).arg("membench:settle").ignore();
        }
    }
    pipe.query::<()>(connection).unwrap();
}

#[test]
fn job_hashes_profiled_by_field_rebuild_within_one_percent_and_each_type_within_two() {
    let mut spec = common::shared_build(EngineKind::Valkey, "9.1");
    // Latency tracking's per-command histograms are not data (see profile_defaults).
    spec.args = vec!["--latency-tracking".into(), "no".into()];
    // One server for the source and the rebuild (flushed between them): where every key has
    // the same 16 field names, the server's random hashing puts them in the same buckets of
    // every key's table, so it moves all the keys at once. Measured here (2026-12-07, Valkey
    // 9.1.2, these jobs loaded by redis-cli): 1,171.7 or 1,232.0 B a job by MEMORY USAGE
    // (+5.1%: a 64 B bucket more, in a table left halfway through a resize by the last
    // field), depending on the server process alone; `--hash-seed` did not fix it (four
    // servers started with the same seed, two layouts).
    let source = common::start_spec(&spec);
    let empty = common::used_memory(&source.address);
    let keys = load_queue(&mut common::connect(&source.address), 7);
    // The loading connection is closed; its buffers are gone.
    std::thread::sleep(std::time::Duration::from_millis(200));
    settle(&mut common::connect(&source.address));
    let source_bytes = (common::used_memory(&source.address) - empty) as f64;
    let source_by_type = common::memory_by_type(&source.address);
    let source_fields: Vec<(f64, usize)> = ["data", "opts", "name"]
        .iter()
        .map(|field| field_mean(&mut common::connect(&source.address), field))
        .collect();
    let (output, profile) = common::profile_json(
        &source.address.socket_addr(),
        &["--max-commands-per-sec", "1000000"],
    );
    assert!(output.status.success(), "{}", common::stderr(&output));
    let profile: Profile = profile.expect("the profile parses");
    redis::cmd("FLUSHALL")
        .exec(&mut common::connect(&source.address))
        .unwrap();

    let dir = std::env::temp_dir().join(format!("membench-profile-objects-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("queue.json");
    std::fs::write(&path, &output.stdout).unwrap();
    let target = source;
    let report = common::rebuild_keeping_data(&target.address, &path, keys, &[]);
    let rep = &report["repetitions"][0];
    settle(&mut common::connect(&target.address));
    let rebuilt_bytes = (common::used_memory(&target.address)
        - rep["baseline_used_memory"].as_u64().unwrap()) as f64;
    let rebuilt_by_type = common::memory_by_type(&target.address);
    // Each job rebuilt has the source's fields, each value of its own field's size: what
    // makes the memory right whatever the server's hashing does with the names (the rebuild
    // without objects wrote made-up names, and landed -1.5% or +0.6% by the server process).
    let mut failures = Vec::new();
    for (field, (source_mean, _)) in ["data", "opts", "name"].iter().zip(&source_fields) {
        let (mean, lacking) = field_mean(&mut common::connect(&target.address), field);
        if lacking > 0 || (mean / source_mean - 1.0).abs() > 0.02 {
            failures.push(format!(
                "the rebuilt jobs' {field} is {mean:.1} B on average ({lacking} jobs lack it), the source's {source_mean:.1} B"
            ));
        }
    }
    let off = rebuilt_bytes / source_bytes - 1.0;
    eprintln!(
        "job queue on valkey 9.1, {keys} keys: source {source_bytes} B, rebuilt {rebuilt_bytes} B ({:+.2}%); by MEMORY USAGE source {source_by_type:?}, rebuilt {rebuilt_by_type:?}",
        off * 100.0
    );
    for (key_type, bytes) in &source_by_type {
        let rebuilt = rebuilt_by_type.get(key_type).copied().unwrap_or(0) as f64;
        let type_off = rebuilt / *bytes as f64 - 1.0;
        if type_off.abs() > 0.02 {
            failures.push(format!(
                "the rebuild's {key_type} keys take {rebuilt} B by MEMORY USAGE, {:+.2}% off the source's {bytes} B",
                type_off * 100.0
            ));
        }
    }
    if off.abs() > 0.01 {
        failures.push(format!(
            "the rebuild's used_memory is {:+.2}% off the source's",
            off * 100.0
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("; "));

    // The jobs' group keeps each of its 16 fields by name, their value sizes apart.
    let jobs = profile
        .groups
        .iter()
        .find(|g| g.key_type == KeyType::Hash)
        .expect("a hash group");
    let names: Vec<&str> = jobs.object_fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names.len(), 16, "the jobs' fields by name: {names:?}");
    for name in ["data", "delay", "timestamp", "pb"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let field = |name: &str| jobs.object_fields.iter().find(|f| f.name == name).unwrap();
    let data = field("data").values.text_length.as_ref().unwrap();
    assert!(
        (60.0..70.0).contains(&data.mean()) && data.max() <= 80,
        "data's lengths: {data:?}"
    );
    assert_eq!(field("delay").values.integer_keys, 1.0);
    assert_eq!(field("timestamp").share, 1.0);
}
