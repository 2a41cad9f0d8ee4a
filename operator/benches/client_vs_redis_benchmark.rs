//! Is membench's client ever the bottleneck? Loads the same command stream as `redis-benchmark`
//! (the C client shipped with Redis) on one connection at the same pipeline depth against the
//! same Redis server, alternating the two clients, and prints both rates and their ratio.
//! The target is a ratio of at least 1.0: membench must insert at least as fast as
//! redis-benchmark. Run with `cargo bench -p membench --bench client_vs_redis_benchmark`.
//!
//! Both send `SET key:<12 digits> <16 x's>` with keys drawn from a 1,000,000-key space, the
//! `redis-benchmark -t set -r 1000000 -d 16` workload. For ZADD, redis-benchmark can only draw
//! random members (`ZADD key NX __rand_int__ m:__rand_int__`) where membench adds `m:{i}` in
//! order, so that row is printed for information, not as the target.

use std::process::Command;

use membench::crd::{EngineKind, EngineSpec};
use membench::local::{LocalEngine, resolve_program};
use membench::measure::{LoadOptions, measure};
use membench::workload::Workload;

const REQUESTS: u64 = 1_000_000;
const ROUNDS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Requests per second from `redis-benchmark --csv` (`"SET","812345.67",...`).
fn redis_benchmark(port: u16, pipeline: u32, command: &[&str]) -> f64 {
    let mut args: Vec<String> = [
        "-p",
        &port.to_string(),
        "-c",
        "1",
        "-P",
        &pipeline.to_string(),
        "-n",
        &REQUESTS.to_string(),
        "--csv",
    ]
    .map(String::from)
    .to_vec();
    args.extend(command.iter().map(|s| s.to_string()));
    let output = Command::new("redis-benchmark")
        .args(&args)
        .output()
        .expect("redis-benchmark runs (apt-get install redis-tools)");
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().last().unwrap_or_default();
    line.split(',')
        .nth(1)
        .and_then(|f| f.trim_matches('"').parse().ok())
        .unwrap_or_else(|| panic!("no rate in redis-benchmark output: {text}"))
}

fn membench_rate(engine: &LocalEngine, workload: &Workload, pipeline: u32) -> f64 {
    let options = LoadOptions {
        pipeline,
        repetitions: 1,
        ..LoadOptions::default()
    };
    let report = measure(&engine.address, workload, &options, &mut |_| {});
    assert!(report.error.is_none(), "{:?}", report.error);
    report.repetitions[0].ops_per_sec
}

fn flush(port: u16) {
    Command::new("redis-cli")
        .args(["-p", &port.to_string(), "FLUSHALL"])
        .output()
        .expect("redis-cli runs");
}

fn main() {
    let spec = EngineSpec::new(EngineKind::Redis, "7");
    let program =
        resolve_program(0, &spec).expect("redis-server is installed (hack/install-engines.sh)");
    let engine = LocalEngine::start(&spec, &program).expect("redis-server starts");
    let port = engine.address.port;
    println!(
        "client throughput against redis-server {} on one connection, {REQUESTS} requests, median of {ROUNDS} alternating rounds",
        program.version
    );
    println!(
        "{:<8} {:>8} {:>18} {:>18} {:>8}",
        "command", "pipeline", "redis-benchmark/s", "membench/s", "ratio"
    );
    let set = Workload::RandomStrings {
        requests: REQUESTS,
        keyspace: 1_000_000,
        value_size: 16,
        seed: membench::crd::default_seed(),
    };
    let zadd = Workload::SortedSet {
        members: REQUESTS,
        key: "membench:zset".into(),
        sample_every: 0,
    };
    let cases: [(&str, &Workload, &[&str]); 2] = [
        ("SET", &set, &["-r", "1000000", "-d", "16", "-t", "set"]),
        (
            "ZADD",
            &zadd,
            &[
                "-r",
                "1000000000",
                "zadd",
                "membench:zset",
                "NX",
                "__rand_int__",
                "m:__rand_int__",
            ],
        ),
    ];
    for (name, workload, peer_args) in cases {
        for pipeline in [16u32, 100] {
            let (mut peer, mut ours) = (Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                flush(port);
                peer.push(redis_benchmark(port, pipeline, peer_args));
                ours.push(membench_rate(&engine, workload, pipeline));
            }
            let (peer, ours) = (median(peer), median(ours));
            println!(
                "{name:<8} {pipeline:>8} {peer:>18.0} {ours:>18.0} {:>8.2}",
                ours / peer
            );
        }
    }
    engine.stop();
}
