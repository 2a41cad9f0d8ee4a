//! A container memory limit the user gives (`membench capacity --memory-limit`), checked
//! against a saved result: refused when it is below what the engine holds with no data at all
//! (the empty server's RSS the run measured, or the least limit the engine starts under:
//! Dragonfly's 256 MiB of maxmemory a thread), and otherwise compared with the recommended
//! limit. A spec's `engines[].memory` is checked before any run, where only the known
//! minimums apply (`crate::validation`). Pure: no I/O.

use super::measurement::EngineMeasurement;
use super::recommend::Recommended;
use crate::crd::{EngineKind, dragonfly_memory};

const MIB: u64 = 1 << 20;

/// What an engine holds before any data: the larger of its measured empty RSS and the least
/// limit it starts under, each when known.
#[derive(Clone, Debug, PartialEq)]
pub struct EmptyNeed {
    /// used_memory_rss of the first repetition's empty server, before its load.
    pub empty_rss: Option<u64>,
    /// The least container limit the engine starts under, and its threads.
    pub start_minimum: Option<(u64, u32)>,
}

impl EmptyNeed {
    /// What `measurement`'s engine needs with no data.
    pub fn of(measurement: &EngineMeasurement) -> Self {
        let can = EngineKind::capabilities_of(&measurement.engine);
        let start_minimum = (can.least_maxmemory_per_thread > 0).then(|| {
            let threads = measurement.threads.unwrap_or(dragonfly_memory::POD_THREADS);
            (dragonfly_memory::minimum_limit(threads), threads)
        });
        Self {
            empty_rss: measurement.baseline_rss.filter(|b| *b > 0),
            start_minimum,
        }
    }

    /// The larger of the two, in bytes.
    pub fn bytes(&self) -> u64 {
        self.empty_rss
            .unwrap_or(0)
            .max(self.start_minimum.map_or(0, |(bytes, _)| bytes))
    }
}

/// Refuses `limit` (`given`, as the user wrote it) when it is below what `measurement`'s
/// engine needs with no data, naming both figures and what to give instead (`recommended`,
/// the limit at the planned size, when the plan has one).
pub fn check(
    given: &str,
    limit: u64,
    measurement: &EngineMeasurement,
    recommended: Option<&Recommended>,
) -> Result<(), String> {
    let need = EmptyNeed::of(measurement);
    if limit >= need.bytes() {
        return Ok(());
    }
    let name = &measurement.name;
    let mut figures = Vec::new();
    if let Some(empty) = need.empty_rss {
        figures.push(format!(
            "its empty RSS is {empty} bytes ({:.1} MiB, the first repetition's server before its load)",
            empty as f64 / MIB as f64
        ));
    }
    if let Some((least, threads)) = need.start_minimum {
        figures.push(format!(
            "it starts only under a limit of {least} bytes ({} MiB: {} MiB of maxmemory a thread with {threads} thread{}, and an engine pod gives it {}% of the limit)",
            least / MIB,
            dragonfly_memory::MAXMEMORY_PER_THREAD / MIB,
            if threads == 1 { "" } else { "s" },
            dragonfly_memory::MAXMEMORY_PERCENT
        ));
    }
    let instead = match recommended {
        Some(r) => format!(
            "give at least its recommended memory limit at --items, {} MiB, or leave --memory-limit out to see its terms",
            r.memory_limit_bytes / MIB
        ),
        None => format!(
            "give at least {} MiB, plus the data's memory",
            need.bytes().div_ceil(MIB)
        ),
    };
    Err(format!(
        "--memory-limit {given} ({limit} bytes) is below what {name} holds with no data: {}; the engine would not fit before its first key: {instead}",
        figures.join(", and ")
    ))
}

/// What `limit` holds of `recommended`, for its notes: the share of the recommended limit, and
/// the terms (in order) it covers whole.
pub fn compared(given: &str, limit: u64, recommended: &Recommended) -> String {
    let wanted = recommended.memory_limit_bytes;
    if limit >= wanted {
        return format!(
            "--memory-limit {given} ({} MiB) holds the recommended limit of {} MiB, with {} MiB to spare",
            limit / MIB,
            wanted / MIB,
            (limit - wanted) / MIB
        );
    }
    let mut sum = 0u64;
    let short: Vec<&str> = recommended
        .terms
        .iter()
        .filter(|t| {
            sum = sum.saturating_add(t.bytes);
            sum > limit
        })
        .map(|t| t.name.as_str())
        .collect();
    let left_out = match short.first() {
        Some(first) => format!(
            "it holds the terms before {first}, not {}",
            short.join(", ")
        ),
        None => "it holds every term, not the limit's rounding up to a MiB".into(),
    };
    format!(
        "--memory-limit {given} ({} MiB) is {} MiB short of the recommended limit of {} MiB: {left_out}; the kernel kills the engine when it reaches the limit",
        limit / MIB,
        (wanted - limit).div_ceil(MIB),
        wanted / MIB,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::recommend::{TermDefaults, recommend};

    /// Valkey as the recommended-limits run measured it: 9,297,920 bytes of empty RSS.
    fn valkey() -> EngineMeasurement {
        EngineMeasurement {
            fragmentation_ratio: Some(1.1),
            baseline_rss: Some(9_297_920),
            ..EngineMeasurement::bare("valkey-9.1", "valkey", "9.1.2")
        }
    }

    #[test]
    fn a_limit_below_the_empty_rss_is_refused_naming_both_and_the_limit_to_give() {
        let m = valkey();
        let r = recommend(&m, 100_000_000, &TermDefaults::default());
        let error = check("8Mi", 8 << 20, &m, Some(&r)).unwrap_err();
        assert!(
            error.starts_with("--memory-limit 8Mi (8388608 bytes) is below what valkey-9.1 holds with no data: its empty RSS is 9297920 bytes (8.9 MiB"),
            "{error}"
        );
        assert!(
            error.contains(&format!(
                "give at least its recommended memory limit at --items, {} MiB",
                r.memory_limit_bytes / MIB
            )),
            "{error}"
        );
        // At the empty RSS and above: accepted (what it holds is for compared to say).
        assert_eq!(check("9297920", 9_297_920, &m, Some(&r)), Ok(()));
        // No reading of the empty server and no start minimum: nothing to refuse on.
        let unread = EngineMeasurement {
            baseline_rss: None,
            ..valkey()
        };
        assert_eq!(check("1", 1, &unread, None), Ok(()));
    }

    #[test]
    fn dragonfly_is_refused_under_its_start_minimum_even_above_its_empty_rss() {
        let mut m = valkey();
        m.name = "dragonfly-1.40".into();
        m.engine = "dragonfly".into();
        m.threads = Some(1);
        m.baseline_rss = Some(18_255_872);
        let error = check("300Mi", 300 << 20, &m, None).unwrap_err();
        assert!(
            error.contains("its empty RSS is 18255872 bytes")
                && error.contains(
                    "it starts only under a limit of 335544320 bytes (320 MiB: 256 MiB of maxmemory a thread with 1 thread"
                )
                && error.contains("give at least 320 MiB"),
            "{error}"
        );
        assert_eq!(check("320Mi", 320 << 20, &m, None), Ok(()));
    }

    #[test]
    fn a_limit_below_the_recommendation_names_the_terms_it_leaves_out() {
        let m = valkey();
        let r = recommend(&m, 1_000_000_000, &TermDefaults::default());
        let steady: u64 = r.terms.iter().take(2).map(|t| t.bytes).sum();
        let note = compared("1200Mi", steady + MIB, &r);
        assert!(
            note.contains("short of the recommended limit")
                && note.contains("it holds the terms before copy_on_write, not copy_on_write, replication_backlog"),
            "{note}"
        );
        let note = compared("4Gi", 4 << 30, &r);
        assert!(
            note.contains("holds the recommended limit")
                && note.contains(&format!(
                    "{} MiB to spare",
                    ((4 << 30) - r.memory_limit_bytes) / MIB
                )),
            "{note}"
        );
    }
}
