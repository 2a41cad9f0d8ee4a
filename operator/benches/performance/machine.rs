//! The machine a run measured on, and how busy it was with work other than the run itself:
//! figures taken on shared cores are only comparable within the run that took them.

use std::time::Instant;

/// Busy CPU time of the whole machine, in seconds (`/proc/stat`: every state but idle and
/// iowait).
fn machine_busy_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(cpu) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let ticks: Vec<f64> = cpu
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: f64 = ticks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .take(8)
        .map(|(_, t)| t)
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    busy / hz
}

/// CPU seconds of this process and of every child it has waited for (the clients, and the
/// engines once stopped).
fn own_cpu_seconds() -> f64 {
    let usage = |who| {
        // SAFETY: rusage is plain data that getrusage fills.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid `who` and a pointer to a live rusage.
        unsafe { libc::getrusage(who, &mut usage) };
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        seconds(usage.ru_utime) + seconds(usage.ru_stime)
    };
    usage(libc::RUSAGE_SELF) + usage(libc::RUSAGE_CHILDREN)
}

/// The machine's busy time and this run's own, from the start of the run.
pub struct OtherWork {
    started: Instant,
    busy: f64,
    own: f64,
}

impl OtherWork {
    pub fn start() -> Self {
        Self {
            started: Instant::now(),
            busy: machine_busy_seconds(),
            own: own_cpu_seconds(),
        }
    }

    /// A line saying how much CPU went to other processes while the run went on. Call it
    /// once every engine has been stopped and waited for.
    pub fn summary(&self) -> String {
        let wall = self.started.elapsed().as_secs_f64();
        let busy = machine_busy_seconds() - self.busy;
        let own = own_cpu_seconds() - self.own;
        let other = (busy - own).max(0.0);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        format!(
            "other work on the machine during the run: {other:.0} CPU seconds in {wall:.0} s ({:.0}% of {cores:.0} cores; this run used {own:.0}){}",
            100.0 * other / (wall * cores),
            if other > 0.1 * wall * cores {
                ": the machine was shared, so timings are noisier than on a quiet one"
            } else {
                ""
            }
        )
    }
}

fn first_line_with<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|line| line.strip_prefix(prefix))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).trim())
}

/// Cores, CPU model, memory, kernel and load average, one line each.
pub fn describe() -> Vec<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory_gib = first_line_with(&meminfo, "MemTotal")
        .and_then(|v| v.trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    vec![
        format!(
            "cores: {cores} ({})",
            first_line_with(&cpuinfo, "model name").unwrap_or("unknown CPU")
        ),
        format!("memory: {memory_gib:.1} GiB"),
        format!("kernel: Linux {}", kernel.trim()),
        format!(
            "load average at start: {}",
            loadavg
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        ),
    ]
}
