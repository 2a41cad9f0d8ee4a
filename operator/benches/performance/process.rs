//! Running one client as a child process and taking the operating system's account of it:
//! CPU seconds from `wait4`'s rusage of that child alone, and peak resident memory from its
//! `VmHWM` (read from `/proc/<pid>/status` while it runs; `ru_maxrss` would also count the
//! bench process that spawned it, whose pages the child held until `exec`).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How often a running child's VmHWM is read. VmHWM only grows, so the last reading before
/// the child exits is its peak unless it grew in its final few milliseconds.
const POLL_EVERY: Duration = Duration::from_millis(5);

/// What the operating system saw of one finished child.
pub struct Finished {
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
    /// From spawn to exit, to within `POLL_EVERY`.
    pub wall: Duration,
    /// User plus system CPU time of the child.
    pub cpu_seconds: f64,
    /// The highest VmHWM read, in KiB.
    pub peak_rss_kib: u64,
}

/// `VmHWM` of a running process, in KiB.
fn vm_hwm_kib(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn seconds(time: libc::timeval) -> f64 {
    time.tv_sec as f64 + time.tv_usec as f64 / 1e6
}

/// Runs `command` to its end (stdin from `stdin`, or nothing), collecting its output.
// The child is reaped by wait4 below (for its rusage), not by std's Child::wait.
#[allow(clippy::zombie_processes)]
pub fn run(command: &mut Command, stdin: Option<std::fs::File>) -> Finished {
    command
        .stdin(stdin.map_or_else(Stdio::null, Stdio::from))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let drain = |stream: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut stream) = stream {
                let _ = stream.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let mut peak_rss_kib = 0;
    let (status, usage) = loop {
        if let Some(hwm) = vm_hwm_kib(pid) {
            peak_rss_kib = peak_rss_kib.max(hwm);
        }
        let mut status = 0;
        // SAFETY: rusage is plain data, fully written by wait4 when it reaps the child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our own child, not yet reaped (std's Child is never waited on).
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if reaped == pid {
            break (status, usage);
        }
        assert!(
            reaped == 0,
            "wait4 failed: {}",
            std::io::Error::last_os_error()
        );
        std::thread::sleep(POLL_EVERY);
    };
    let wall = started.elapsed();
    Finished {
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        wall,
        cpu_seconds: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        peak_rss_kib,
    }
}
