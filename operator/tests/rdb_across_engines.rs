//! A backup of each engine loaded into every other: one keyspace (strings, integers, hashes,
//! lists, sets, sorted sets, TTLs, streams) written into Redis 8.6.3, Valkey 9.1.2 and
//! Dragonfly 1.40.0, each made to save its dump in its own format (RDB 13, `VALKEY080`,
//! Dragonfly's `SAVE RDB`), and each dump loaded by `membench load --workload rdb` into the two
//! other engines. On each target, used_memory after the load is within 0.5% of the same
//! keyspace written into that engine directly, and every key is there. The table it prints is
//! the first of docs/src/results/backups-across-engines.md; with MEMBENCH_ACROSS_EVERY_BUILD=1
//! every native build of the store with its engine's official allocator takes part, which
//! prints the page's full table.

mod common;

use std::path::PathBuf;

use membench::client::connection::engine::EngineAddress;
use membench::crd::{EngineKind, EngineSpec};

/// The most a load may differ from the same data written directly.
const MOST_RELATIVE_DIFFERENCE: f64 = 0.005;

/// How many keys of each kind the keyspace holds.
const KEYS: u64 = 2_000;

/// Set to 1, every build of the engine store that runs natively with its engine's official
/// allocator takes part, one per engine and version (the full table of
/// docs/src/results/backups-across-engines.md); unset, Redis 8.6.3, Valkey 9.1.2 and Dragonfly
/// 1.40.0.
const EVERY_BUILD_ENV: &str = "MEMBENCH_ACROSS_EVERY_BUILD";

/// The engines taking part, named as the table names them.
fn engines() -> Vec<(String, EngineSpec)> {
    let mut engines: Vec<(String, EngineSpec)> =
        if std::env::var(EVERY_BUILD_ENV).is_ok_and(|v| v == "1") {
            every_build()
        } else {
            [
                (EngineKind::Redis, "8.6.3"),
                (EngineKind::Valkey, "9.1.2"),
                (EngineKind::Dragonfly, "1.40.0"),
            ]
            .into_iter()
            .map(|(engine, version)| {
                (
                    format!("{} {version}", display(engine)),
                    common::shared_build(engine, version),
                )
            })
            .collect()
        };
    // Latency tracking's per-command histograms (about 24 KiB each, made at a command's first
    // use) are not data, and the two ways in send different commands.
    for (_, spec) in &mut engines {
        if spec.engine != EngineKind::Dragonfly {
            spec.args = vec!["--latency-tracking".into(), "no".into()];
        }
    }
    engines
}

fn display(engine: EngineKind) -> &'static str {
    match engine {
        EngineKind::Redis => "Redis",
        EngineKind::Valkey => "Valkey",
        EngineKind::Dragonfly => "Dragonfly",
    }
}

/// Every native official-allocator build of the store, one per engine and version, Redis first,
/// then Valkey and Dragonfly, each by version.
fn every_build() -> Vec<(String, EngineSpec)> {
    let store = membench_enginestore::EngineStore::open_default().unwrap_or_else(|e| panic!("{e}"));
    let numbers = |version: &str| -> Vec<u64> {
        version.split('.').map(|n| n.parse().unwrap_or(0)).collect()
    };
    let mut builds: Vec<(EngineKind, &membench_enginestore::Build)> = store
        .builds()
        .iter()
        .filter(|b| b.official_allocator && b.emulator().is_none())
        .filter_map(|b| Some((b.engine.parse::<EngineKind>().ok()?, b)))
        .collect();
    builds.sort_by_key(|(engine, b)| (*engine, numbers(&b.version)));
    builds.dedup_by_key(|(engine, b)| (*engine, b.version.clone()));
    assert!(
        builds.len() >= 3,
        "{EVERY_BUILD_ENV}=1 found {} native official-allocator builds in {}: run hack/install-engines.sh",
        builds.len(),
        store.root().display()
    );
    builds
        .into_iter()
        .map(|(engine, build)| {
            let mut spec = EngineSpec::new(engine, &build.version);
            spec.build = Some(build.name.clone());
            (format!("{} {}", display(engine), build.version), spec)
        })
        .collect()
}

/// The keyspace, written in batches.
fn write_keyspace(con: &mut redis::Connection) {
    let mut pipe = redis::pipe();
    for i in 0..KEYS {
        pipe.set(format!("session:{i}"), format!("{:x}", i * 7919).repeat(6))
            .ignore();
        pipe.set(format!("counter:{i}"), i * 13).ignore();
        pipe.cmd("SET")
            .arg(format!("token:{i}"))
            .arg("t".repeat(20 + (i % 30) as usize))
            .arg("PX")
            .arg(86_400_000)
            .ignore();
        pipe.hset_multiple(
            format!("user:{i}"),
            &[
                ("name", format!("user-{}", i * 31)),
                ("email", format!("u{i}@example.org")),
                ("age", (18 + i % 60).to_string()),
            ],
        )
        .ignore();
        let items: Vec<String> = (0..(1 + i % 12)).map(|j| format!("job-{i}-{j}")).collect();
        pipe.rpush(format!("queue:{i}"), items).ignore();
        let members: Vec<u64> = (0..(1 + i % 9)).map(|j| j * 17 + i).collect();
        pipe.sadd(format!("ids:{i}"), members).ignore();
        let scored: Vec<(u64, String)> = (0..(1 + i % 7))
            .map(|j| (i * 10 + j, format!("player-{j}")))
            .collect();
        pipe.zadd_multiple(format!("board:{i}"), &scored).ignore();
        if i % 20 == 0 {
            for j in 0..5 {
                pipe.cmd("XADD")
                    .arg(format!("events:{i}"))
                    .arg(format!("{}-{j}", 1_700_000_000_000 + i))
                    .arg("kind")
                    .arg("click")
                    .arg("at")
                    .arg(j * 100)
                    .ignore();
            }
        }
        if i % 200 == 199 {
            pipe.query::<()>(con).unwrap();
            pipe.clear();
        }
    }
}

/// A fresh server of `spec`: its used_memory empty, then after `fill` wrote into it (settled).
fn bytes_added(spec: &EngineSpec, fill: impl FnOnce(&EngineAddress)) -> (u64, u64) {
    let server = common::start_spec(spec);
    // Closed while `fill` runs: membench loads into an engine it is the only client of.
    let empty = common::settled_used_memory(&mut common::connect(&server.address));
    fill(&server.address);
    let mut con = common::connect(&server.address);
    let full = common::settled_used_memory(&mut con);
    let keys: u64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    drop(con);
    server.stop();
    (full - empty, keys)
}

/// `spec`'s dump of the keyspace, copied out.
fn dump_of(name: &str, spec: &EngineSpec) -> PathBuf {
    let server = common::start_spec(spec);
    let mut con = common::connect(&server.address);
    write_keyspace(&mut con);
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut con)
        .unwrap();
    if spec.engine == EngineKind::Dragonfly {
        redis::cmd("SAVE")
            .arg("RDB")
            .arg("membench-across")
            .exec(&mut con)
            .unwrap();
    } else {
        redis::cmd("SAVE").exec(&mut con).unwrap();
    }
    let dump = std::fs::read_dir(&dir[1])
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "rdb"))
        .unwrap_or_else(|| panic!("{name} saved no .rdb in {}", dir[1]));
    let kept = std::env::temp_dir().join(format!(
        "membench-across-{}-{}.rdb",
        name.replace(' ', "-"),
        std::process::id()
    ));
    std::fs::copy(dump, &kept).unwrap();
    drop(con);
    server.stop();
    kept
}

#[test]
fn each_engines_backup_loads_into_every_other_within_half_a_percent_of_the_data_written_there() {
    let engines = engines();
    let direct: Vec<(u64, u64)> = engines
        .iter()
        .map(|(_, spec)| {
            bytes_added(spec, |address| {
                write_keyspace(&mut common::connect(address))
            })
        })
        .collect();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (source_name, source) in &engines {
        let dump = dump_of(source_name, source);
        for ((target_name, target), (written, keys)) in engines.iter().zip(&direct) {
            if target_name == source_name {
                continue;
            }
            let (loaded, loaded_keys) = bytes_added(target, |address| {
                let output = common::load_rdb(&dump, &address.socket_addr(), &["--keep-data"]);
                assert!(
                    output.status.success(),
                    "{source_name}'s dump into {target_name}: {}",
                    common::stderr(&output)
                );
            });
            let off = loaded as f64 / *written as f64 - 1.0;
            rows.push(format!(
                "| {source_name} | {target_name} | {written} B | {loaded} B | {:+.2}% |",
                off * 100.0
            ));
            if loaded_keys != *keys {
                failures.push(format!(
                    "{source_name}'s dump into {target_name}: {loaded_keys} keys, {keys} written directly"
                ));
            }
            if off.abs() > MOST_RELATIVE_DIFFERENCE {
                failures.push(format!(
                    "{source_name}'s dump into {target_name}: {loaded} B against {written} B written directly ({:+.2}%)",
                    off * 100.0
                ));
            }
        }
        let _ = std::fs::remove_file(dump);
    }
    eprintln!(
        "| backup of | loaded into | written directly | loaded by membench | difference |\n|---|---|---:|---:|---:|\n{}",
        rows.join("\n")
    );
    let pairs = engines.len() * (engines.len() - 1);
    assert_eq!(rows.len(), pairs, "every pair of engines measured");
    assert!(failures.is_empty(), "{}", failures.join("; "));
}
