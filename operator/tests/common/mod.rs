//! What the tests share. Real engines for the client tests: each test starts its own server from
//! the engine store (hack/install-engines.sh) on a free loopback port, through the same code the
//! local runner uses, and the server stops when the test ends. [`operator`]: the operator's
//! harness on the dev cluster; [`operator_process`]: the operator as its own process.
#![allow(dead_code)]

pub mod chromium;
pub mod churn;
pub mod engine_watch;
pub mod faults;
pub mod https_server;
pub mod mdbook;
pub mod operator;
pub mod operator_process;
pub mod pod_record;
pub mod rdb_keyspace;
pub mod real_node;

use std::path::PathBuf;

use membench::client::connection::engine::EngineAddress;
use membench::crd::{Allocator, EngineKind, EngineSpec};
use membench::local::engine_store::resolve_program;
use membench::local::runner::LocalEngine;
use membench_enginestore::{EngineStore, Request};

/// Starts Debian's Redis 7.0 or Valkey 9.1 (the store's preferred 9.1 build) with extra server
/// arguments, for tests of the client that any engine serves. Panics when the store lacks the
/// build, since these tests are meaningless without real engines.
pub fn start(engine: EngineKind, extra_args: &[&str]) -> LocalEngine {
    let version = match engine {
        EngineKind::Redis => "7.0",
        EngineKind::Valkey => "9.1",
        EngineKind::Dragonfly => "1",
    };
    let mut spec = EngineSpec::new(engine, version);
    spec.args = extra_args.iter().map(|a| a.to_string()).collect();
    start_spec(&spec)
}

/// Starts the engine a spec entry names, as `membench run` would.
pub fn start_spec(spec: &EngineSpec) -> LocalEngine {
    let program =
        resolve_program(0, spec).unwrap_or_else(|e| panic!("{e} (run hack/install-engines.sh)"));
    LocalEngine::start(spec, &program)
        .unwrap_or_else(|e| panic!("cannot start {} {}: {e}", spec.engine, spec.version))
}

/// A build every machine's store has: installed from Debian or a pinned wheel.
pub fn everywhere(engine: EngineKind, version: &str, jemalloc: bool) -> EngineSpec {
    let mut spec = EngineSpec::new(engine, version);
    spec.allocator = jemalloc.then_some(Allocator::Jemalloc);
    spec
}

/// The shared engine builds (`../shared/engines` beside the repository, or
/// `$MEMBENCH_SHARED_ENGINES`), which hack/install-engines.sh adds to the store where they exist.
pub fn shared_engines_dir() -> PathBuf {
    std::env::var_os("MEMBENCH_SHARED_ENGINES")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/engines"))
        })
}

/// The shared tarball of `engine` at `version` (a prefix, `8.1` for 8.1.7) for this machine's
/// arch, if the shared builds are here.
pub fn shared_tarball(engine: EngineKind, version: &str) -> Option<PathBuf> {
    shared_tarball_for(engine, version, std::env::consts::ARCH)
}

/// The shared tarball of `engine` at `version` for `arch` (`x86_64`, `aarch64`), if the shared
/// builds are here.
pub fn shared_tarball_for(engine: EngineKind, version: &str, arch: &str) -> Option<PathBuf> {
    let prefix = format!("{engine}-{version}");
    std::fs::read_dir(shared_engines_dir())
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let version_follows = name[prefix.len().min(name.len())..].starts_with(['.', '-']);
            name.starts_with(&prefix)
                && version_follows
                && (name.ends_with(&format!("-linux-{arch}.tar.xz"))
                    || (arch == "x86_64" && name.ends_with("-linux-amd64.tar.xz"))
                    || (arch == "aarch64" && name.ends_with("-linux-arm64.tar.xz")))
        })
}

/// A build that only the shared tarballs provide (the Redis and Valkey versions of the
/// published tables with their bundled jemalloc, Dragonfly), as a spec naming it. A test that
/// needs one fails without it, on every machine, naming the build and how to install it: a
/// test that passed without its engine would have proven nothing about it.
pub fn shared_build(engine: EngineKind, version: &str) -> EngineSpec {
    let store = EngineStore::open_default().unwrap_or_else(|e| panic!("{e}"));
    let request = Request {
        engine: engine.as_str(),
        version,
        arch: membench_enginestore::HOST_ARCH,
        build: None,
        jemalloc: false,
    };
    let why_not = match store.select(&request) {
        Ok(chosen) if chosen.build.official_allocator => {
            let mut spec = EngineSpec::new(engine, version);
            spec.build = Some(chosen.build.name.clone());
            return spec;
        }
        Ok(chosen) => format!(
            "its only {engine} {version} is {}, without the official allocator",
            chosen.build.name
        ),
        Err(e) => e.to_string(),
    };
    let wanted = format!(
        "{engine}-{version}*-linux-{}.tar.xz",
        std::env::consts::ARCH
    );
    panic!(
        "{}",
        missing_shared_build(&wanted, shared_tarball(engine, version), &why_not)
    );
}

/// What a test that needs the shared tarball `wanted` says when the engine store lacks its
/// build: run hack/install-engines.sh when the tarball is here, else where to put it first.
pub fn missing_shared_build(wanted: &str, found: Option<PathBuf>, why_not: &str) -> String {
    match found {
        Some(tarball) => format!(
            "{} is here, but the engine store lacks its build ({why_not}): run hack/install-engines.sh",
            tarball.display()
        ),
        None => format!(
            "this test needs the shared engine build {wanted}, which this machine lacks ({why_not}; \
             looked in {}): put the shared engine tarballs there (or set MEMBENCH_SHARED_ENGINES \
             to their directory), then run hack/install-engines.sh",
            shared_engines_dir().display()
        ),
    }
}

/// The freshly built `membench` binary run with `args`, as a user runs it.
pub fn membench(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(args)
        .output()
        .expect("membench runs")
}

/// `membench load --workload rdb --rdb FILE` into the engine at `address`, one repetition, its
/// result as JSON on stdout; `extra` flags follow (`--keep-data` to read the keys back).
pub fn load_rdb(file: &std::path::Path, address: &str, extra: &[&str]) -> std::process::Output {
    let args = load_rdb_args(&file.display().to_string(), address, extra);
    membench(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The arguments of [`load_rdb`] for the file at `source` (a path or a URL).
pub fn load_rdb_args(source: &str, address: &str, extra: &[&str]) -> Vec<String> {
    [
        "load",
        "--workload",
        "rdb",
        "--rdb",
        source,
        "--addr",
        address,
        "--repetitions",
        "1",
        "--output",
        "json",
    ]
    .iter()
    .chain(extra)
    .map(|a| a.to_string())
    .collect()
}

/// `membench ARGS...` killed after `limit`: None if it had not ended by then. Its output is
/// read meanwhile, so a long one cannot fill a pipe and stall it.
pub fn membench_within(args: &[&str], limit: std::time::Duration) -> Option<std::process::Output> {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("membench runs");
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    Some(std::process::Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    })
}

/// `membench profile --addr ADDR --output json EXTRA...`, and the profile it printed, if any.
pub fn profile_json(
    addr: &str,
    extra: &[&str],
) -> (std::process::Output, Option<membench::profile::Profile>) {
    let mut args = vec!["profile", "--addr", addr, "--output", "json"];
    args.extend_from_slice(extra);
    let output = membench(&args);
    let profile = serde_json::from_slice(&output.stdout).ok();
    (output, profile)
}

/// The arguments of `membench load --workload profile --profile PROFILE` into `addr`, for
/// `repetitions` repetitions, printed as `output`.
pub fn rebuild_args(
    addr: &str,
    profile: &std::path::Path,
    repetitions: u32,
    output: &str,
) -> Vec<String> {
    [
        "load",
        "--addr",
        addr,
        "--workload",
        "profile",
        "--profile",
        profile.to_str().expect("a UTF-8 path"),
        "--repetitions",
        &repetitions.to_string(),
        "--output",
        output,
    ]
    .map(String::from)
    .to_vec()
}

/// `membench load --workload profile --profile PROFILE` into `address`, one repetition, the
/// keys kept for their MEMORY USAGE (`--keep-data`) and `extra` flags: its JSON report, the
/// run checked to have succeeded and stored `keys` keys.
pub fn rebuild_keeping_data(
    address: &EngineAddress,
    profile: &std::path::Path,
    keys: u64,
    extra: &[&str],
) -> serde_json::Value {
    let mut args = rebuild_args(&address.socket_addr(), profile, 1, "json");
    args.push("--keep-data".into());
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = membench(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report["repetitions"][0]["items"].as_u64(),
        Some(keys),
        "the rebuild stores every key"
    );
    report
}

/// A plain redis-crate connection to check what the load left in the engine.
pub fn connect(address: &EngineAddress) -> redis::Connection {
    redis::Client::open(format!("redis://{}/", address.socket_addr()))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// Each type's keys and the sum of their MEMORY USAGE (SAMPLES 0: every element counted) in
/// the engine at `address`, over SCAN and TYPE.
pub fn memory_usage_by_type(
    address: &EngineAddress,
) -> std::collections::BTreeMap<String, (u64, u64)> {
    let mut connection = connect(address);
    let mut by_type = std::collections::BTreeMap::<String, (u64, u64)>::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query(&mut connection)
            .unwrap();
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.cmd("TYPE").arg(key);
            pipe.cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .arg("SAMPLES")
                .arg(0);
        }
        let replies: Vec<redis::Value> = pipe.query(&mut connection).unwrap();
        for pair in replies.chunks(2) {
            let key_type: String = redis::from_redis_value(pair[0].clone()).unwrap();
            let usage: u64 = redis::from_redis_value(pair[1].clone()).unwrap();
            let entry = by_type.entry(key_type).or_default();
            entry.0 += 1;
            entry.1 += usage;
        }
        cursor = next;
        if cursor == 0 {
            return by_type;
        }
    }
}

/// What the keys of each type take by MEMORY USAGE, summed: the data without the key tables,
/// type by type.
pub fn memory_by_type(address: &EngineAddress) -> std::collections::BTreeMap<String, u64> {
    memory_usage_by_type(address)
        .into_iter()
        .map(|(key_type, (_, bytes))| (key_type, bytes))
        .collect()
}

/// used_memory of the engine, over a control connection of its own.
pub fn used_memory(address: &EngineAddress) -> u64 {
    membench::client::connection::engine::ControlConnection::open(
        address,
        std::time::Duration::from_secs(5),
    )
    .unwrap()
    .memory()
    .unwrap()
    .used_memory
}

/// How many SET commands the engine at `address` has run since it started (INFO
/// commandstats, over the test's own connection): the engine's count of the writes a client
/// says it sent.
pub fn set_calls(address: &EngineAddress) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut connect(address))
        .unwrap();
    stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_set:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or_else(|| panic!("no SET calls in {stats}"))
}

/// How long the engine at `address` froze in its latest fork, in ms (INFO stats
/// latest_fork_usec; 0 for an engine that reports none, as Dragonfly, which does not fork):
/// the engine answers nothing while it forks.
pub fn fork_freeze_ms(address: &EngineAddress) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(&mut connect(address))
        .unwrap();
    membench::client::connection::engine::parse_info(&info)
        .get("latest_fork_usec")
        .map(|usec| {
            usec.parse::<f64>()
                .unwrap_or_else(|e| panic!("latest_fork_usec {usec}: {e}"))
        })
        .unwrap_or(0.0)
        / 1000.0
}

/// used_memory of the engine, read over `connection` until two readings in a row agree (an
/// empty engine's figure moves for a few readings after its first connections and commands).
pub fn settled_used_memory(connection: &mut redis::Connection) -> u64 {
    let mut read = || -> u64 {
        let info: String = redis::cmd("INFO").arg("memory").query(connection).unwrap();
        membench::client::connection::engine::parse_info(&info)["used_memory"]
            .parse()
            .unwrap()
    };
    let mut last = read();
    for _ in 0..20 {
        let next = read();
        if next == last {
            return next;
        }
        last = next;
    }
    panic!("used_memory did not settle over 20 readings");
}

/// FLUSHALL calls the engine at `url` (`redis://[:password@]host:port/`) has answered:
/// membench flushes at the start of each repetition. Read over a connection of a few
/// milliseconds, which membench's wait to be the engine's only client outlasts; 0 while the
/// engine does not answer.
pub fn flushall_calls_at(url: &str) -> u64 {
    let Ok(client) = redis::Client::open(url) else {
        return 0;
    };
    let Ok(mut connection) = client.get_connection() else {
        return 0;
    };
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut connection)
        .unwrap_or_default();
    stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_flushall:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Waits until `finished` repetitions of the membench `process` loading `address` are done
/// (the next one has begun); fails if membench ends first or nothing moves for 120 s.
pub fn wait_for_repetitions(
    address: &EngineAddress,
    process: &mut std::process::Child,
    finished: u64,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let url = format!("redis://{}/", address.socket_addr());
    while flushall_calls_at(&url) <= finished {
        assert!(
            process.try_wait().unwrap().is_none(),
            "membench finished before {finished} repetitions were done; make the load bigger"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no progress within 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

pub fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A program on PATH.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Sends `signal` (`libc::SIGTERM`, `libc::SIGKILL`) to process `pid`, as a pod's deletion or a
/// crash would.
pub fn send_signal(pid: u32, signal: libc::c_int) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(std::io::Error::other)?;
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A MemoryBenchmark named `name` with `spec` (YAML lines indented by two, not necessarily
/// valid), written to `dir`.
pub fn write_spec(dir: &std::path::Path, name: &str, spec: &str) -> PathBuf {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: {name}}}\nspec:\n{spec}"
        ),
    )
    .unwrap();
    path
}

/// `membench run` of a MemoryBenchmark named `name` with `spec` (as [`write_spec`], in `dir`),
/// which must succeed: its result file's JSON.
pub fn run_spec(dir: &std::path::Path, name: &str, spec: &str) -> serde_json::Value {
    let path = write_spec(dir, name, spec);
    let result = dir.join(format!("{name}.json"));
    let output = membench(&[
        "run",
        path.to_str().unwrap(),
        "--result-file",
        result.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap()
}

/// `membench load` of `workload` (its flags) into the engine at each of `addresses` (one
/// engine, or the shards of a cluster), `repetitions` times, writing its result to `result` as
/// a client pod does; its stderr piped, its stdout dropped.
pub fn start_load(
    addresses: &[EngineAddress],
    workload: &[&str],
    repetitions: u32,
    result: &std::path::Path,
) -> std::process::Child {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_membench"));
    command.arg("load");
    for address in addresses {
        command.args(["--addr", &address.socket_addr()]);
    }
    command
        .args(workload)
        .args(["--repetitions", &repetitions.to_string()])
        .args(["--output", "json", "--result-file"])
        .arg(result)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("membench runs")
}

/// `membench capacity RESULT --items 1000000 --instance-families r8g --output json`: each
/// engine's plan, in the result's order.
pub fn capacity_plans(result: &std::path::Path) -> Vec<serde_json::Value> {
    let output = membench(&[
        "capacity",
        result.to_str().unwrap(),
        "--items",
        "1000000",
        "--instance-families",
        "r8g",
        "--output",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    json["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["capacity"].clone())
        .collect()
}

/// The commands a server answered, from INFO commandstats (`cmdstat_get:calls=...`).
pub fn commands_called(
    connection: &mut redis::Connection,
) -> std::collections::BTreeMap<String, u64> {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(connection)
        .unwrap();
    stats
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|f| f.strip_prefix("calls="))?;
            Some((name.to_string(), calls.parse().ok()?))
        })
        .collect()
}

/// The value a server gives for `CONFIG GET name`.
pub fn config(connection: &mut redis::Connection, name: &str) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query(connection)
        .unwrap();
    pair[1].clone()
}
