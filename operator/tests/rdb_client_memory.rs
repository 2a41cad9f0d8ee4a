//! The client's memory on a dump far larger than its limit: `membench load --workload rdb` of
//! a file of about 216 MB that Valkey 9.1.2 wrote (800,000 strings of 250 bytes) peaks under
//! 64 MiB of RSS (the bound for a 2 GB file), read from the process's own rusage
//! (`wait4`'s ru_maxrss, the peak resident set). The load reads the file streaming: it holds
//! one element and at most 8 batches of 64 KiB of commands ahead of the engine.
//!
//! `membench profile --rdb` has its own test of its peak (profile_rdb_memory.rs): it reads
//! the file twice and holds its groups, not its keys.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use membench::crd::EngineKind;

/// The bound. Margin: the debug binary peaked at 28 MiB here on this file; a client that
/// held the file's commands or values ahead of the engine would need up to the file's size,
/// 216 MB, more than three times the bound.
const PEAK_RSS_LIMIT_KIB: i64 = 64 * 1024;
/// The file must dwarf the bound, or the test would say nothing.
const LEAST_FILE_BYTES: u64 = 3 * 64 * 1024 * 1024;

const KEYS: &str = "800000";
const VALUE_BYTES: &str = "250";

/// Runs membench with `args` to its end; its exit status, stderr and peak RSS in KiB.
// The child is reaped by wait4, which also gives its rusage; Child::wait would not.
#[allow(clippy::zombie_processes)]
fn peak_rss_of(args: &[&str]) -> (std::process::ExitStatus, String, i64) {
    let child = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("membench starts");
    let pid = child.id() as libc::pid_t;
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        use std::io::Read;
        child.stderr.unwrap().read_to_string(&mut text).unwrap();
        text
    });
    let mut status = 0;
    // SAFETY: rusage is plain data, filled by the kernel for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4 on membench");
    (
        std::process::ExitStatus::from_raw(status),
        stderr.join().unwrap(),
        usage.ru_maxrss,
    )
}

/// Valkey 9.1.2 holding 800,000 strings of 250 bytes, saved uncompressed; the dump copied
/// out.
fn large_dump() -> PathBuf {
    let server = common::start_spec(&common::shared_build(EngineKind::Valkey, "9.1.2"));
    let fill = common::membench(&[
        "load",
        "--workload",
        "strings",
        "--keys",
        KEYS,
        "--value-size",
        VALUE_BYTES,
        "--addr",
        &server.address.socket_addr(),
        "--repetitions",
        "1",
        "--keep-data",
    ]);
    assert!(fill.status.success(), "{}", common::stderr(&fill));
    let mut con = common::connect(&server.address);
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut con)
        .unwrap();
    // membench's values are one byte repeated: compressed, the file would be a tenth.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdbcompression")
        .arg("no")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let kept = std::env::temp_dir().join(format!(
        "membench-rdb-client-memory-{}.rdb",
        std::process::id()
    ));
    std::fs::copy(PathBuf::from(&dir[1]).join("dump.rdb"), &kept).unwrap();
    drop(con);
    server.stop();
    kept
}

#[test]
fn loading_a_216_mb_dump_peaks_under_64_mib() {
    let dump = large_dump();
    let size = std::fs::metadata(&dump).unwrap().len();
    assert!(
        size >= LEAST_FILE_BYTES,
        "the dump is {size} bytes, under {LEAST_FILE_BYTES}"
    );
    let target = common::start_spec(&common::shared_build(EngineKind::Valkey, "9.1.2"));
    let file = dump.display().to_string();
    let address = target.address.socket_addr();
    let (status, stderr, load_kib) = peak_rss_of(&[
        "load",
        "--workload",
        "rdb",
        "--rdb",
        &file,
        "--addr",
        &address,
        "--repetitions",
        "1",
        "--output",
        "json",
    ]);
    assert!(status.success(), "membench load: {stderr}");
    target.stop();
    let _ = std::fs::remove_file(&dump);
    eprintln!("a {size}-byte dump: the load peaked at {load_kib} KiB");
    assert!(
        load_kib < PEAK_RSS_LIMIT_KIB,
        "membench load --workload rdb of {size} bytes peaked at {load_kib} KiB"
    );
}
