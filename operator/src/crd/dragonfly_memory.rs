//! What Dragonfly needs of its pod's memory. Dragonfly refuses to start with less than 256 MiB of
//! `maxmemory` per thread ("There are 2 threads, so 512.00MiB are required. Exiting...", seen
//! with 1.40.0), and left to itself it sizes `maxmemory` from its cgroup's limit. Engine pods
//! pass `--maxmemory` explicitly, [`MAXMEMORY_PERCENT`] of the pod's limit, so the figure does
//! not depend on how a node exposes the cgroup, and the rest of the limit is headroom for what
//! the process holds beyond its own accounting (the kernel kills at the limit). Validation
//! refuses a limit too small for the threads the pod runs.

use super::engine_spec::EngineSpec;

const MIB: u64 = 1 << 20;

/// Threads an engine pod's Dragonfly runs unless its args say otherwise (its pod has 2 CPUs).
pub const POD_THREADS: u32 = 2;
/// `maxmemory` Dragonfly needs per thread to start.
pub const MAXMEMORY_PER_THREAD: u64 = 256 * MIB;
/// The share of the pod's memory limit given to Dragonfly as `maxmemory`.
pub const MAXMEMORY_PERCENT: u64 = 80;

/// The threads Dragonfly runs with: the last `--proactor_threads` of the spec's args (the
/// last flag wins), else [`POD_THREADS`]. A value that does not parse counts as the default:
/// Dragonfly refuses it itself, with its own message.
pub fn threads(engine: &EngineSpec) -> u32 {
    let mut threads = POD_THREADS;
    let mut args = engine.args.iter();
    while let Some(arg) = args.next() {
        let value = match arg.trim_start_matches('-').split_once('=') {
            Some(("proactor_threads", value)) => Some(value.to_string()),
            None if arg.trim_start_matches('-') == "proactor_threads" => args.next().cloned(),
            _ => None,
        };
        if let Some(n) = value.and_then(|v| v.parse::<u32>().ok()).filter(|n| *n > 0) {
            threads = n;
        }
    }
    threads
}

/// The `maxmemory` an engine pod with `limit_bytes` gives Dragonfly.
pub fn maxmemory(limit_bytes: u64) -> u64 {
    (u128::from(limit_bytes) * u128::from(MAXMEMORY_PERCENT) / 100) as u64
}

/// The smallest pod memory limit, in whole MiB, whose `maxmemory` lets `threads` threads start.
pub fn minimum_limit(threads: u32) -> u64 {
    let needed = u64::from(threads) * MAXMEMORY_PER_THREAD;
    (needed * 100).div_ceil(MAXMEMORY_PERCENT).div_ceil(MIB) * MIB
}

#[cfg(test)]
mod tests {
    use super::super::engine_spec::EngineKind;
    use super::*;

    fn with_args(args: &[&str]) -> EngineSpec {
        let mut engine = EngineSpec::new(EngineKind::Dragonfly, "1.40.0");
        engine.args = args.iter().map(|a| a.to_string()).collect();
        engine
    }

    #[test]
    fn the_threads_are_the_pods_two_unless_the_last_flag_says_otherwise() {
        assert_eq!(threads(&with_args(&[])), 2);
        assert_eq!(threads(&with_args(&["--proactor_threads=4"])), 4);
        assert_eq!(threads(&with_args(&["--proactor_threads", "6"])), 6);
        assert_eq!(
            threads(&with_args(&["-proactor_threads=3", "--proactor_threads=1"])),
            1
        );
        assert_eq!(threads(&with_args(&["--proactor_threads=many"])), 2);
    }

    #[test]
    fn a_limit_at_the_minimum_gives_each_thread_its_256_mib() {
        for threads in [1, 2, 8] {
            let limit = minimum_limit(threads);
            assert!(maxmemory(limit) >= u64::from(threads) * MAXMEMORY_PER_THREAD);
            assert!(maxmemory(limit - MIB) < u64::from(threads) * MAXMEMORY_PER_THREAD);
        }
        assert_eq!(minimum_limit(2), 640 * MIB);
    }
}
