//! Every way a user stops `membench run` and `membench load` (Ctrl-C's SIGINT, `kill`'s
//! SIGTERM, `timeout`), against real engines and a real `membench` process: what was measured
//! is printed and written with `error.category` `Stopped`, the engine `membench run` started is
//! stopped and reaped, its temporary directory is gone, and the exit code is the documented one.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use membench::client::connection::engine::EngineAddress;
use membench::crd::EngineKind;
use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("membench-cli-stop-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A comparison of two engines long enough to be stopped during the first: 60 repetitions of
/// 200,000 keys each.
fn long_spec(dir: &Path) -> PathBuf {
    let path = dir.join("long.yaml");
    std::fs::write(
        &path,
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: long}\nspec:\n  engines: [{engine: redis, version: \"7.0\"}, {engine: valkey, version: \"9.1\"}]\n  workload: {strings: {keys: 200000}}\n  repetitions: 60\n",
    )
    .unwrap();
    path
}

/// The processes whose parent is `parent`, from /proc.
fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // `pid (comm) state ppid ...`; comm may hold spaces, so read after its ')'.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = stat.rsplit_once(')')?.1.to_string();
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// The engine membench (PID `membench`, `process` itself or its child under `timeout`)
/// started, and its loopback address, from its private directory `membench-<pid>-<port>` under
/// the temporary directory.
fn started_engine(process: &mut Child, membench: u32) -> (u32, EngineAddress, PathBuf) {
    let prefix = format!("membench-{membench}-");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            process.try_wait().unwrap().is_none(),
            "membench run ended before it started an engine"
        );
        let dir = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix));
        if let (Some(dir), [engine]) = (dir, children_of(membench).as_slice()) {
            let port = dir.file_name().to_string_lossy()[prefix.len()..]
                .parse()
                .unwrap();
            let address = EngineAddress {
                host: "127.0.0.1".into(),
                port,
                password: None,
            };
            return (*engine, address, dir.path());
        }
        assert!(Instant::now() < deadline, "no engine started within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_for_exit(process: &mut Child, within: Duration) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = process.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < within,
            "membench did not exit within {within:?} of the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read(pipe: Option<impl std::io::Read>) -> String {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut pipe.expect("piped"), &mut text).unwrap();
    text
}

/// What a stopped `membench run` left: its output, its result file and its engine.
struct StoppedRun {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    result: Value,
    engine_pid: u32,
    engine_dir: PathBuf,
}

/// Runs the long comparison through `wrapper` (none, or `timeout 8`), stops it with `stop`
/// (given membench and its engine's PID) once two repetitions of the first engine are done,
/// and collects what it left.
fn stopped_run(name: &str, wrapper: &[&str], stop: impl FnOnce(&Child, u32)) -> StoppedRun {
    let dir = scratch(name);
    let spec = long_spec(&dir);
    let result_file = dir.join("result.json");
    let (program, args) = match wrapper.split_first() {
        Some((program, args)) => (program.to_string(), args.to_vec()),
        None => (env!("CARGO_BIN_EXE_membench").to_string(), Vec::new()),
    };
    let mut command = Command::new(program);
    command.args(args);
    if !wrapper.is_empty() {
        command.arg(env!("CARGO_BIN_EXE_membench"));
    }
    let mut process = command
        .arg("run")
        .arg(&spec)
        .arg("--result-file")
        .arg(&result_file)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("membench runs");
    // Under `timeout`, membench is timeout's child and the engine membench's.
    let mut membench_pid = process.id();
    if !wrapper.is_empty() {
        let deadline = Instant::now() + Duration::from_secs(10);
        membench_pid = loop {
            if let [child] = children_of(process.id()).as_slice() {
                break *child;
            }
            assert!(Instant::now() < deadline, "timeout started no membench");
            std::thread::sleep(Duration::from_millis(20));
        };
    }
    let (engine_pid, address, engine_dir) = started_engine(&mut process, membench_pid);
    common::wait_for_repetitions(&address, &mut process, 2);
    stop(&process, engine_pid);
    let status = wait_for_exit(&mut process, Duration::from_secs(30));
    let stdout = read(process.stdout.take());
    let stderr = read(process.stderr.take());
    let result = serde_json::from_str(
        &std::fs::read_to_string(&result_file)
            .unwrap_or_else(|e| panic!("no result file ({e}); stderr: {stderr}")),
    )
    .expect("the result file is JSON");
    let _ = std::fs::remove_dir_all(&dir);
    StoppedRun {
        status,
        stdout,
        stderr,
        result,
        engine_pid,
        engine_dir,
    }
}

/// What every stop path of `membench run` must leave: the finished repetitions printed and
/// written with `Stopped`, the second engine never started, the first one stopped and reaped,
/// its directory removed.
fn assert_stopped_cleanly(run: &StoppedRun, signal_name: &str) {
    let engines = run.result["engines"].as_array().expect("engines");
    assert_eq!(
        engines.len(),
        1,
        "the second engine is not started after a stop: {}",
        run.result
    );
    let first = &engines[0];
    let kept = first["repetitions"].as_array().unwrap().len();
    assert!((2..60).contains(&kept), "kept {kept} repetitions");
    assert_eq!(first["error"]["category"], "Stopped", "{}", first["error"]);
    let message = first["error"]["message"].as_str().unwrap();
    assert!(message.contains(signal_name), "{message}");
    assert!(
        !message.contains("pod"),
        "a local run has no pod: {message}"
    );
    assert_eq!(
        first["summary"]["repetitions"].as_u64(),
        Some(kept as u64),
        "the summary covers the finished repetitions"
    );
    // Printed too: the table's row of the engine, with its median.
    assert!(
        run.stdout.lines().any(|l| l.starts_with("Redis")),
        "stdout: {}",
        run.stdout
    );
    assert!(
        run.stderr.contains("not run: valkey-9.1"),
        "stderr: {}",
        run.stderr
    );
    // membench reaped its engine: a process left running (or a zombie) still has its /proc.
    assert!(
        !Path::new(&format!("/proc/{}", run.engine_pid)).exists(),
        "the engine (PID {}) outlived membench",
        run.engine_pid
    );
    assert!(
        !run.engine_dir.exists(),
        "{} was left behind",
        run.engine_dir.display()
    );
}

#[test]
fn run_stopped_by_sigint_prints_and_writes_what_it_measured_and_stops_its_engine() {
    let run = stopped_run("sigint", &[], |p, _| {
        common::send_signal(p.id(), libc::SIGINT).unwrap()
    });
    assert_eq!(run.status.code(), Some(130), "stderr: {}", run.stderr);
    assert_stopped_cleanly(&run, "SIGINT");
}

#[test]
fn run_stopped_by_sigterm_prints_and_writes_what_it_measured_and_stops_its_engine() {
    let run = stopped_run("sigterm", &[], |p, _| {
        common::send_signal(p.id(), libc::SIGTERM).unwrap()
    });
    assert_eq!(run.status.code(), Some(143), "stderr: {}", run.stderr);
    assert_stopped_cleanly(&run, "SIGTERM");
}

#[test]
fn run_under_timeout_prints_and_writes_what_it_measured_and_stops_its_engine() {
    // `timeout` sends SIGTERM when its time is up and reports 124 itself. Two repetitions of
    // the first engine take about two seconds here; the whole comparison far longer.
    let run = stopped_run("timeout", &["timeout", "8"], |_, _| {});
    assert_eq!(run.status.code(), Some(124), "stderr: {}", run.stderr);
    assert_stopped_cleanly(&run, "SIGTERM");
}

#[test]
fn run_stopped_while_its_engine_hangs_kills_the_engine_and_still_keeps_what_it_measured() {
    let started = std::cell::Cell::new(None);
    let run = stopped_run("hung", &[], |p, engine| {
        // An engine that stops answering (SIGSTOP) mid-load: the measurement cannot return
        // by itself, so membench kills it at its deadline.
        common::send_signal(engine, libc::SIGSTOP).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        common::send_signal(p.id(), libc::SIGINT).unwrap();
        started.set(Some(Instant::now()));
    });
    let took = started.get().unwrap().elapsed();
    assert_eq!(run.status.code(), Some(130), "stderr: {}", run.stderr);
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_stopped_cleanly(&run, "SIGINT");
}

/// `membench load` of strings, with its result file, as a user runs it.
fn start_load(address: &EngineAddress, result: &Path, in_pod: bool) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_membench"));
    command
        .args(["load", "--addr", &address.socket_addr()])
        .args(["--workload", "strings", "--keys", "200000"])
        .args(["--repetitions", "40", "--output", "json", "--result-file"])
        .arg(result)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if in_pod {
        // What Kubernetes sets in every container.
        command.env("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    } else {
        command.env_remove("KUBERNETES_SERVICE_HOST");
    }
    command.spawn().expect("membench runs")
}

/// Stops a load with `signal` after two repetitions (its engine first frozen with SIGSTOP when
/// `hang`); its exit status, its JSON output, its result file's error and its stderr.
fn stopped_load(
    name: &str,
    signal: libc::c_int,
    in_pod: bool,
    hang: bool,
) -> (ExitStatus, Value, Value, String) {
    let redis = common::start(EngineKind::Redis, &[]);
    let dir = scratch(name);
    let result = dir.join("result");
    let mut load = start_load(&redis.address, &result, in_pod);
    common::wait_for_repetitions(&redis.address, &mut load, 2);
    if hang {
        common::send_signal(redis.pid(), libc::SIGSTOP).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    common::send_signal(load.id(), signal).unwrap();
    let status = wait_for_exit(&mut load, Duration::from_secs(5));
    let stdout = read(load.stdout.take());
    let stderr = read(load.stderr.take());
    let printed: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("the load printed no JSON ({e}): {stdout}; stderr: {stderr}"));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&result).expect("a result file")).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    if hang {
        // The engine stops with the test: thawed, it is stopped as always.
        common::send_signal(redis.pid(), libc::SIGCONT).unwrap();
    }
    (status, printed, written, stderr)
}

#[test]
fn load_stopped_by_sigint_keeps_its_finished_repetitions_and_says_nothing_of_a_pod() {
    let (status, printed, written, stderr) =
        stopped_load("load-sigint", libc::SIGINT, false, false);
    assert_eq!(status.code(), Some(130), "{stderr}");
    let kept = printed["repetitions"].as_array().unwrap().len();
    assert!((2..40).contains(&kept), "kept {kept}");
    assert_eq!(printed["error"]["category"], "Stopped");
    assert_eq!(written["error"]["category"], "Stopped");
    let message = printed["error"]["message"].as_str().unwrap();
    assert!(message.contains("SIGINT (Ctrl-C)"), "{message}");
    assert!(
        !message.contains("pod") && !stderr.contains("pod"),
        "{stderr}"
    );
}

#[test]
fn load_stopped_by_sigterm_names_a_pods_deletion_only_in_a_pod() {
    let (status, printed, _, stderr) = stopped_load("load-sigterm", libc::SIGTERM, false, false);
    assert_eq!(status.code(), Some(143), "{stderr}");
    let message = printed["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("SIGTERM") && !message.contains("pod"),
        "{message}"
    );
    let (status, printed, written, stderr) = stopped_load("load-pod", libc::SIGTERM, true, false);
    assert_eq!(status.code(), Some(143), "{stderr}");
    let message = printed["error"]["message"].as_str().unwrap();
    assert!(message.contains("the pod is being deleted"), "{message}");
    assert_eq!(written["error"]["category"], "Stopped");
}

#[test]
fn load_stopped_while_its_engine_hangs_prints_and_writes_its_journal_at_the_deadline() {
    let (status, printed, written, stderr) = stopped_load("load-hung", libc::SIGINT, false, true);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("did not stop within 3 s"), "{stderr}");
    let kept = printed["repetitions"].as_array().unwrap().len();
    assert!(kept >= 2, "kept {kept}");
    assert_eq!(printed["error"]["category"], "Stopped");
    assert_eq!(written["error"]["category"], "Stopped");
}
