//! What the churn adds to the reports (`spec.churn`): each round's and the defragmentation
//! window's readings in a table of their own under an engine's repetitions, and a chart of
//! used_memory_rss after the load, after each round and after defragmentation, a line per
//! engine from its first repetition. What a reader sees: which engine keeps the memory its
//! deleted data held, and which gives it back.

use crate::client::measurement::measured::{BenchmarkReport, RepetitionResult};
use crate::client::phases::figures::{PhaseFigures, StageChart};
use crate::client::workloads::workload::Workload;
use crate::crd::{RecordLayout, RepetitionStatus};
use crate::table::{Table, format_bytes};

/// The churn's figures in the reports.
pub struct ChurnFigures;

impl PhaseFigures for ChurnFigures {
    fn table(&self, report: &BenchmarkReport) -> Option<(String, Table)> {
        churn_table(report).map(|table| ("After the load, churn (spec.churn)".to_string(), table))
    }

    fn chart(&self) -> Option<StageChart> {
        Some(StageChart {
            class: "churn",
            caption: "used_memory_rss after the load, each churn round and defragmentation (first repetition)",
        })
    }

    fn stages_of_repetition(&self, repetition: &RepetitionResult) -> Option<Vec<(String, u64)>> {
        let churn = repetition.churn.as_ref()?;
        let loaded = repetition
            .settled
            .as_ref()
            .map_or(repetition.used_memory_rss, |s| s.used_memory_rss);
        Some(stages(
            loaded,
            churn.rounds.iter().map(|r| (r.round, r.used_memory_rss)),
            churn.defrag.as_ref().map(|d| d.rss_after),
        ))
    }

    fn stages_of_status(&self, repetition: &RepetitionStatus) -> Option<Vec<(String, u64)>> {
        let churn = repetition.churn.as_ref()?;
        let loaded = repetition
            .settled_used_memory_rss
            .unwrap_or(repetition.used_memory_rss);
        Some(stages(
            loaded,
            churn.rounds.iter().map(|r| (r.round, r.used_memory_rss)),
            churn.defragmented_rss(),
        ))
    }
}

/// RSS after the load, after each round (its number, its RSS) and after defragmentation.
fn stages(
    loaded_rss: u64,
    rounds: impl Iterator<Item = (u32, u64)>,
    defragmented: Option<u64>,
) -> Vec<(String, u64)> {
    let mut points = vec![("load".to_string(), loaded_rss)];
    points.extend(rounds.map(|(round, rss)| (format!("round {round}"), rss)));
    points.extend(defragmented.map(|rss| ("defrag".to_string(), rss)));
    points
}

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
}

/// Each repetition's rounds, and its defragmentation window when there was one; `None` when the
/// run had no churn.
fn churn_table(report: &BenchmarkReport) -> Option<Table> {
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
