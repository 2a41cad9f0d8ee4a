//! `membench profile --rdb` in bounded memory: the profile of a dump holds its groups, not its
//! keys. Measured as the peak resident set of the `membench profile --rdb` process (its
//! `ru_maxrss`, from `wait4` on that one child) on a dump Valkey 9.1.2 writes itself.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use membench::crd::{EngineKind, EngineSpec};

/// Keys in the dump: enough that holding something per key shows (the former profile held each
/// key's name, its elements and its name's template parts), few enough that the debug build's
/// profile takes seconds (7 s here).
const KEYS: u64 = 400_000;
/// The bound on the profile's peak RSS. Measured with this debug build: 17.6 MiB for a
/// `membench profile --rdb` that fails before reading a key (its code and libraries), 24.4 MiB
/// for this keyspace at 100,000, 400,000 and 1,600,000 keys alike. 64 MiB leaves 40 MiB for
/// an allocator's or a build's differences, and is still well under what 400,000 keys at a
/// hundred bytes each would add.
const PEAK_BOUND_MIB: u64 = 64;

/// Runs `membench args`, returning its exit status, stderr and peak resident set in KiB.
fn peak_rss_kib(args: &[&str]) -> (i32, String, u64) {
    // Reaped below by wait4, which also gives the child's rusage (Child::wait would not).
    #[allow(clippy::zombie_processes)]
    let child = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("membench starts");
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).ok();
        text
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value, and wait4 writes into it; the pid is our own
    // child, which no one else waits for.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    let text = reader.join().unwrap();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, text, usage.ru_maxrss as u64)
}

#[test]
fn a_file_profile_of_400k_keys_peaks_under_64_mib() {
    let mut spec = EngineSpec::new(EngineKind::Valkey, "9.1.2");
    spec.args = vec!["--enable-debug-command".into(), "yes".into()];
    let server = common::start_spec(&spec);
    let mut con = common::connect(&server.address);
    // Strings under two namespaces: two groups.
    let _: () = redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(KEYS * 3 / 4)
        .arg("user")
        .arg(24)
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(KEYS / 4)
        .arg("session")
        .arg(60)
        .query(&mut con)
        .unwrap();
    // The sessions expire, each at its own millisecond: a TTL distribution of one value a key.
    for start in (0..KEYS / 4).step_by(10_000) {
        let mut pipe = redis::pipe();
        for i in start..(start + 10_000).min(KEYS / 4) {
            pipe.cmd("PEXPIRE")
                .arg(format!("session:{i}"))
                .arg(3_600_000 + i * 13)
                .ignore();
        }
        let _: () = pipe.query(&mut con).unwrap();
    }
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut con)
        .unwrap();
    let dump = PathBuf::from(&dir[1]).join("dump.rdb");
    drop(con);
    let started = std::time::Instant::now();
    let (code, stderr, peak_kib) = peak_rss_kib(&[
        "profile",
        "--rdb",
        dump.to_str().unwrap(),
        "--output",
        "json",
    ]);
    eprintln!(
        "membench profile --rdb of {KEYS} keys ({} bytes): peak RSS {:.1} MiB in {:.1} s",
        std::fs::metadata(&dump).map_or(0, |m| m.len()),
        peak_kib as f64 / 1024.0,
        started.elapsed().as_secs_f64()
    );
    server.stop();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        peak_kib < PEAK_BOUND_MIB * 1024,
        "the profile of {KEYS} keys peaked at {:.1} MiB, past {PEAK_BOUND_MIB} MiB: it holds something per key",
        peak_kib as f64 / 1024.0
    );
}
