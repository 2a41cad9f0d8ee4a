//! A churn's figures in the reports (`spec.churn`, `client::phases::churn`): each round's and the
//! defragmentation window's readings in a table of their own, and from a status the medians
//! the comparison shows beside bytes per item (a local report's are
//! `BenchmarkReport::churned_rss`).

use crate::client::measure::BenchmarkReport;
use crate::client::workload::Workload;
use crate::crd::RecordLayout;
use crate::report::table::{Table, format_bytes};

/// The median of what each repetition reports, if any does.
fn median(values: Vec<f64>) -> Option<f64> {
    crate::stats::Spread::of(&values).map(|s| s.median)
}

/// The same two from a status's repetitions (`membench report`).
pub fn churned_rss_of_status(
    repetitions: &[crate::crd::RepetitionStatus],
) -> (Option<f64>, Option<f64>) {
    let of = |f: &dyn Fn(&crate::crd::ChurnStatus) -> Option<u64>| {
        median(
            repetitions
                .iter()
                .filter_map(|r| f(r.churn.as_ref()?))
                .map(|b| b as f64)
                .collect(),
        )
    };
    (of(&|c| c.churned_rss()), of(&|c| c.defragmented_rss()))
}

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
}

/// Each repetition's rounds, and its defragmentation window when there was one; `None` when the
/// run had no churn.
pub fn churn_table(report: &BenchmarkReport) -> Option<Table> {
    let churned: Vec<_> = report
        .repetitions
        .iter()
        .filter_map(|r| {
            Some((
                r.repetition,
                r.used_memory,
                r.used_memory_rss,
                r.churn.as_ref()?,
            ))
        })
        .collect();
    if churned.is_empty() {
        return None;
    }
    // Records stored as hashes churn on their fields: the counts are fields, the items the
    // records left, with their fields beside them.
    let on_fields = matches!(
        report.workload.workload,
        Workload::Records {
            layout: RecordLayout::Hash,
            ..
        }
    );
    // A profile's rebuild churns keys of mixed types: the keys left, with the collections'
    // elements beside them.
    let on_keys = matches!(report.workload.workload, Workload::Profile(_));
    let (deleted, overwritten, items) = if on_fields {
        ("Fields deleted", "Fields overwritten", "Records (fields)")
    } else if on_keys {
        ("Keys deleted", "Keys overwritten", "Keys (elements)")
    } else {
        ("Deleted", "Overwritten", "Items")
    };
    let mut table = Table::new(&[
        "Rep",
        "After",
        deleted,
        overwritten,
        items,
        "used_memory",
        "used_memory_rss",
        "allocator_frag_ratio",
        "Seconds",
    ]);
    for (repetition, used, rss, churn) in churned {
        table.push(vec![
            repetition.to_string(),
            "load".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            format_bytes(used as f64),
            format_bytes(rss as f64),
            "-".into(),
            "-".into(),
        ]);
        for round in &churn.rounds {
            table.push(vec![
                repetition.to_string(),
                format!("round {}", round.round),
                round.deleted.to_string(),
                round.overwritten.to_string(),
                match round.elements {
                    Some(elements) if on_fields || on_keys => {
                        format!("{} ({elements})", round.items)
                    }
                    _ => round.items.to_string(),
                },
                format_bytes(round.used_memory as f64),
                format_bytes(round.used_memory_rss as f64),
                ratio(round.allocator_frag_ratio),
                format!("{:.2}", round.seconds),
            ]);
        }
        if let Some(defrag) = &churn.defrag {
            table.push(vec![
                repetition.to_string(),
                format!(
                    "defrag ({}, {:.1} s of {:.1} s{}, {:.2} CPU s, probe p99 {:.2} ms)",
                    defrag.switched,
                    defrag.seconds,
                    defrag.window_seconds,
                    match (defrag.bound_reached, defrag.rss_before_purge) {
                        (true, Some(unpurged)) => format!(
                            ", bound reached, purged: RSS {} before MEMORY PURGE",
                            format_bytes(unpurged as f64)
                        ),
                        (true, None) => ", bound reached".into(),
                        _ => String::new(),
                    },
                    defrag.cpu_seconds,
                    defrag.write_latency_ms.p99
                ),
                "-".into(),
                "-".into(),
                "-".into(),
                format_bytes(defrag.used_memory_after as f64),
                format_bytes(defrag.rss_after as f64),
                ratio(defrag.allocator_frag_ratio_after),
                format!("{:.2}", defrag.window_seconds),
            ]);
        }
    }
    Some(table)
}
