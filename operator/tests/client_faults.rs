//! How `membench load` ends when something goes wrong under it, against real engines: asked
//! to stop (SIGTERM, as when its pod is deleted), it leaves what it measured in its result file
//! within the pod's grace period; when its engine dies, it reports `ConnectionLost` with what
//! it had sent and measured, wherever in a repetition the engine went.

mod common;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use membench::client::connection::engine::EngineAddress;
use membench::client::measurement::load_options::RunSettings;
use membench::client::measurement::measure::{LoadOptions, measure};
use membench::client::pod_io::result::ClientResult;
use membench::client::workloads::workload::Workload;
use membench::crd::EngineKind;

/// Client pods get this long between SIGTERM and SIGKILL.
const CLIENT_POD_GRACE: Duration = Duration::from_secs(5);

/// `membench load` of a sorted set, as a client pod runs it, writing its result to `result`.
fn start_load(address: &EngineAddress, members: u64, repetitions: u32, result: &Path) -> Child {
    let members = members.to_string();
    common::start_load(
        std::slice::from_ref(address),
        &[
            "--workload",
            "sorted-set",
            "--sample-every",
            "0",
            "--members",
            &members,
        ],
        repetitions,
        result,
    )
}

fn signal(pid: u32, signal: libc::c_int) {
    common::send_signal(pid, signal).unwrap_or_else(|e| panic!("signal {signal} to {pid}: {e}"));
}

fn wait_for_exit(client: &mut Child, within: Duration) -> (std::process::ExitStatus, Duration) {
    let started = Instant::now();
    loop {
        if let Some(status) = client.try_wait().unwrap() {
            return (status, started.elapsed());
        }
        assert!(
            started.elapsed() < within,
            "the client did not exit within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_result(path: &Path) -> ClientResult {
    let text = std::fs::read_to_string(path).expect("the client wrote its result file");
    // Read as the operator reads it, within the bounds of the most repetitions a spec allows.
    ClientResult::read(&text, membench::client::pod_io::result::MAX_REPETITIONS)
        .expect("the result parses")
}

#[test]
fn sigterm_mid_run_leaves_the_finished_repetitions_in_the_result_within_the_grace_period() {
    let redis = common::start(EngineKind::Redis, &[]);
    let dir = tempdir("sigterm");
    let result = dir.join("termination-log");
    let mut client = start_load(&redis.address, 200_000, 40, &result);
    common::wait_for_repetitions(&redis.address, &mut client, 2);

    signal(client.id(), libc::SIGTERM);
    let (status, took) = wait_for_exit(&mut client, CLIENT_POD_GRACE);
    assert!(!status.success(), "a stopped run exits non-zero");
    let message = read_result(&result);
    let error = message
        .error
        .clone()
        .expect("the result says why it stopped");
    assert_eq!(error.category, "Stopped", "{}", error.message);
    let kept = message.decoded_repetitions();
    assert!(kept.len() >= 2, "kept {} repetitions", kept.len());
    assert!(kept.len() < 40);
    assert!(
        kept.iter()
            .all(|r| r.items == 200_000 && r.bytes_per_item() > 0.0),
        "{kept:?}"
    );
    assert_eq!(
        message
            .summary
            .expect("a summary of what finished")
            .repetitions,
        kept.len() as u32
    );
    eprintln!(
        "stopped {} ms after SIGTERM with {} repetitions",
        took.as_millis(),
        kept.len()
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_engine_killed_mid_run_is_connection_lost_with_the_finished_repetitions_kept() {
    let redis = common::start(EngineKind::Redis, &[]);
    let dir = tempdir("killed");
    let result = dir.join("termination-log");
    let mut client = start_load(&redis.address, 200_000, 40, &result);
    common::wait_for_repetitions(&redis.address, &mut client, 2);

    signal(redis.pid(), libc::SIGKILL);
    let (status, _) = wait_for_exit(&mut client, Duration::from_secs(30));
    assert!(!status.success());
    let message = read_result(&result);
    let error = message
        .error
        .clone()
        .expect("the result says why it stopped");
    assert_eq!(error.category, "ConnectionLost", "{}", error.message);
    assert!(message.decoded_repetitions().len() >= 2);
    let failed = message.failed.expect("how far the failed repetition got");
    assert!(failed.repetition > 2, "{failed:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The engine dies while the client waits to be its only client before the baseline (a
/// control-connection command fails, not the load's): still `ConnectionLost`, never the
/// "check the address" of an engine that was never reached, and the repetition's partial record
/// is there.
#[test]
fn an_engine_that_dies_between_loads_is_connection_lost_not_unreachable() {
    let redis = common::start(EngineKind::Redis, &[]);
    let address = redis.address.clone();
    // A second client holds the engine, so the run waits before its first baseline.
    let mut holder = common::connect(&address);
    let _: String = redis::cmd("PING").query(&mut holder).unwrap();
    let pid = redis.pid();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        signal(pid, libc::SIGKILL);
    });
    let workload = Workload::SortedSet {
        members: 1000,
        key: "membench:zset".into(),
        sample_every: 0,
    };
    let options = LoadOptions::of(RunSettings {
        repetitions: 2,
        other_clients_timeout: Duration::from_secs(30),
        ..RunSettings::default()
    });
    let report = measure(&address, &workload, &options, &mut |_| {});
    killer.join().unwrap();
    let error = report.error.expect("the run failed");
    assert_eq!(error.category, "ConnectionLost", "{}", error.message);
    let failed = report
        .failed_repetition
        .expect("the failed repetition's record");
    assert_eq!((failed.repetition, failed.commands_sent), (1, 0));
    assert!(report.repetitions.is_empty());
    drop(redis);
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "membench-client-faults-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
