//! The memory of an engine's process tree as the kernel keeps it, for a peak phase run on the
//! engine's own machine (`membench run`, `membench load` against a local server): the engine's
//! resident set (`VmRSS` of `/proc/PID/status`) plus the pages only its descendants hold (a fork child that
//! writes a snapshot: `Private_Clean` + `Private_Dirty` of its `/proc/PID/smaps_rollup`),
//! sampled on a thread of its own. A fork's untouched pages count once and each page the parent
//! copied on write twice, as they cost the machine. (The engine's own smaps_rollup would say
//! the same as Pss, but while the parent faults in copies it takes 100 ms and more to read; its
//! status and the child's rollup take well under a millisecond.)
//!
//! The engine is found by the `process_id` its INFO reports, and taken only when that process
//! is the engine on this machine (its `comm` names the engine); a client in a pod of its own
//! sees no such process, and the phase then has only the engine's own figures.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How often the sampler reads the tree.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(20);

/// The names an engine's process goes by (`/proc/PID/comm`, at most 15 bytes).
const ENGINE_COMMS: [&str; 4] = [
    "redis-server",
    "valkey-server",
    "dragonfly",
    "redis-check-rdb",
];

fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The process and its descendants, depth first.
fn tree(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut index = 0;
    while index < all.len() && all.len() < 64 {
        all.extend(children(all[index]));
        index += 1;
    }
    all
}

/// A field of a smaps_rollup (`Pss:`, `Private_Dirty:`), in bytes.
fn rollup_field(rollup: &str, name: &str) -> Option<u64> {
    rollup
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// The resident set of `pid` (`VmRSS` of its `status`, counters the kernel keeps), in bytes.
fn resident(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    rollup_field(&status, "VmRSS:")
}

/// The engine's resident set plus the pages only its descendants hold, in bytes (a child that
/// ended meanwhile counts 0).
pub fn tree_bytes(pid: u32) -> u64 {
    tree_reading(pid).0
}

/// [`tree_bytes`], and how many processes the tree held when it was read (the engine itself
/// counts one: a fork that saves or syncs makes it two or more).
fn tree_reading(pid: u32) -> (u64, u64) {
    let all = tree(pid);
    let count = all.len() as u64;
    let mut processes = all.into_iter();
    let root = processes.next().and_then(resident).unwrap_or(0);
    let children: u64 = processes
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")).ok())
        .map(|text| {
            rollup_field(&text, "Private_Clean:").unwrap_or(0)
                + rollup_field(&text, "Private_Dirty:").unwrap_or(0)
        })
        .sum();
    (root + children, count)
}

/// The engine's process on this machine: `pid` when its `comm` names an engine and its
/// smaps_rollup can be read.
pub fn local_engine(pid: u32) -> Option<u32> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    let comm = comm.trim();
    let named = ENGINE_COMMS.iter().any(|name| comm.starts_with(name));
    (named && std::fs::metadata(format!("/proc/{pid}/smaps_rollup")).is_ok()).then_some(pid)
}

/// A thread that reads the tree's memory every [`SAMPLE_INTERVAL`] and keeps the highest, and
/// the most processes the tree held at a reading (whether the engine forked: a child that
/// lived less than one interval between two readings can go unseen).
pub struct PeakSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    most_processes: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a [`PeakSampler`] read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplerReading {
    pub peak_bytes: u64,
    pub most_processes: u64,
    pub samples: u64,
}

impl PeakSampler {
    pub fn start(pid: u32) -> Self {
        // The first reading is taken here, before the phase begins: a phase shorter than the
        // thread's start on a busy machine still has one (seen: a 0.43 s sync with none).
        let (bytes, processes) = tree_reading(pid);
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(bytes));
        let most_processes = Arc::new(AtomicU64::new(processes));
        let samples = Arc::new(AtomicU64::new(1));
        let thread = {
            let (stop, peak, most, samples) = (
                stop.clone(),
                peak.clone(),
                most_processes.clone(),
                samples.clone(),
            );
            std::thread::spawn(move || {
                loop {
                    std::thread::sleep(SAMPLE_INTERVAL);
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let (bytes, processes) = tree_reading(pid);
                    peak.fetch_max(bytes, Ordering::Relaxed);
                    most.fetch_max(processes, Ordering::Relaxed);
                    samples.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        Self {
            stop,
            peak,
            most_processes,
            samples,
            thread: Some(thread),
        }
    }

    /// Stops the thread; the highest figure it read, the most processes it saw, and how many
    /// readings it took.
    pub fn finish(mut self) -> SamplerReading {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        SamplerReading {
            peak_bytes: self.peak.load(Ordering::Relaxed),
            most_processes: self.most_processes.load(Ordering::Relaxed),
            samples: self.samples.load(Ordering::Relaxed),
        }
    }
}

/// An engine's process tree watched through a phase, when the engine runs on this machine: its
/// memory just before, and the sampler reading it meanwhile.
pub struct TreeWatch {
    before_bytes: Option<u64>,
    sampler: Option<PeakSampler>,
}

/// What a [`TreeWatch`] saw.
pub struct TreePeak {
    /// `process-tree` when the engine's processes were seen, else `engine-only`.
    pub source: &'static str,
    pub before_bytes: Option<u64>,
    /// The highest reading, never below `before_bytes`.
    pub peak_bytes: Option<u64>,
    /// The most processes the tree held at a reading: 1 when the engine never forked while
    /// it was watched.
    pub most_processes: Option<u64>,
    pub samples: u64,
}

impl TreeWatch {
    /// Reads the tree of the engine whose INFO says `process_id`, if it is on this machine, and
    /// starts sampling it.
    pub fn start(process_id: Option<u32>) -> Self {
        let local = process_id.and_then(local_engine);
        Self {
            before_bytes: local.map(tree_bytes),
            sampler: local.map(PeakSampler::start),
        }
    }

    pub fn finish(self) -> TreePeak {
        let reading = self.sampler.map(PeakSampler::finish);
        let peak = reading.map(|r| r.peak_bytes);
        TreePeak {
            source: if peak.is_some() {
                "process-tree"
            } else {
                "engine-only"
            },
            before_bytes: self.before_bytes,
            peak_bytes: peak.zip(self.before_bytes).map(|(p, b)| p.max(b)),
            // No reading at all says nothing about a fork.
            most_processes: reading.filter(|r| r.samples > 0).map(|r| r.most_processes),
            samples: reading.map_or(0, |r| r.samples),
        }
    }
}

impl Drop for PeakSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollups_fields_are_read_in_bytes() {
        let rollup = "00400000-7fff rw-p 00000000 00:00 0 [rollup]\nRss:  2048 kB\nPss:  1536 kB\nPrivate_Dirty: 1000 kB\n";
        assert_eq!(rollup_field(rollup, "Pss:"), Some(1536 * 1024));
        assert_eq!(rollup_field(rollup, "Private_Dirty:"), Some(1000 * 1024));
        assert_eq!(rollup_field("Rss: 1 kB\n", "Pss:"), None);
    }

    #[test]
    fn this_test_process_is_no_engine_and_its_tree_holds_its_resident_set() {
        let me = std::process::id();
        assert_eq!(local_engine(me), None, "a test binary is not an engine");
        let held = tree_bytes(me);
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let rss_kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap();
        // Read a moment apart, the two agree to within a few MiB of a test binary's growth.
        assert!(
            held.abs_diff(rss_kb * 1024) < 8 << 20,
            "{held} against VmRSS {rss_kb} kB"
        );
    }
}
