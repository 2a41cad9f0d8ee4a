//! Running one client as a child process and taking the operating system's account of it:
//! CPU seconds from `wait4`'s rusage of that child alone, and peak resident memory from its
//! `VmHWM` (read from `/proc/<pid>/status` while it runs; `ru_maxrss` would also count the
//! bench process that spawned it, whose pages the child held until `exec`). For section 1b,
//! [`OneCore`] holds the engine and every client started here to one core.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
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

/// The core every client started by `run` is held to, or -1 for none (see `OneCore`).
static CLIENT_CORE: AtomicI32 = AtomicI32::new(-1);

fn one_core_set(core: usize) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; CPU_SET only writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(core, &mut set) };
    set
}

fn set_affinity(pid: libc::pid_t, set: &libc::cpu_set_t) -> std::io::Result<()> {
    // SAFETY: `set` lives across the call and its size is passed with it.
    if unsafe { libc::sched_setaffinity(pid, std::mem::size_of_val(set), set) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn affinity(pid: libc::pid_t) -> std::io::Result<libc::cpu_set_t> {
    // SAFETY: as above; sched_getaffinity fills the set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(pid, std::mem::size_of_val(&set), &mut set) } == 0 {
        Ok(set)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Every thread of a process (the engine's background threads too).
fn threads(pid: libc::pid_t) -> Vec<libc::pid_t> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// While it lives, the engine process and every client started by `run` share one core, so
/// that a round trip needs no wake-up of another (idle) core: what is left of it is the two
/// processes' own work. Dropping it gives the engine back the cores it had before.
pub struct OneCore {
    engine: libc::pid_t,
    /// The engine's cores before, given back to every thread of it.
    before: libc::cpu_set_t,
}

impl OneCore {
    pub fn hold(engine: u32, core: usize) -> Self {
        let engine = engine as libc::pid_t;
        let before = affinity(engine)
            .unwrap_or_else(|e| panic!("cannot read the engine's cores (pid {engine}): {e}"));
        let engine_threads = threads(engine);
        assert!(
            !engine_threads.is_empty(),
            "the engine (pid {engine}) is not running"
        );
        for thread in engine_threads {
            set_affinity(thread, &one_core_set(core))
                .unwrap_or_else(|e| panic!("cannot hold the engine to core {core}: {e}"));
        }
        CLIENT_CORE.store(core as i32, Ordering::SeqCst);
        Self { engine, before }
    }
}

impl Drop for OneCore {
    fn drop(&mut self) {
        CLIENT_CORE.store(-1, Ordering::SeqCst);
        for thread in threads(self.engine) {
            if let Err(e) = set_affinity(thread, &self.before) {
                eprintln!("warning: engine thread {thread} stays on one core: {e}");
            }
        }
    }
}

/// Runs `command` to its end (stdin from `stdin`, or nothing), collecting its output.
// The child is reaped by wait4 below (for its rusage), not by std's Child::wait.
#[allow(clippy::zombie_processes)]
pub fn run(command: &mut Command, stdin: Option<std::fs::File>) -> Finished {
    command
        .stdin(stdin.map_or_else(Stdio::null, Stdio::from))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let core = CLIENT_CORE.load(Ordering::SeqCst);
    if core >= 0 {
        // SAFETY: the closure only makes one system call (async-signal-safe) in the child.
        unsafe {
            command.pre_exec(move || set_affinity(0, &one_core_set(core as usize)));
        }
    }
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
