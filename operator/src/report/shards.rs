//! A sharded cluster's shards in the reports: each shard's used_memory before and after the
//! load, what the load added, its keys and its share of them, as a table (`membench load` and
//! `membench run` print it under the comparison; the HTML page shows it in the benchmark's
//! section), and the one-line account of how even the spread was that the comparison's note
//! carries (`ShardSpread::describe`).

use crate::client::measurement::measure::BenchmarkReport;
use crate::report::table::{Table, format_bytes};

/// Each shard's median figures over the repetitions, one row per shard; `None` for one engine.
pub fn shards_table(report: &BenchmarkReport) -> Option<Table> {
    let spread = report.summary.as_ref()?.shards.as_ref()?;
    let addresses: Vec<String> = report
        .repetitions
        .last()
        .map(|r| r.shards.iter().map(|s| s.address.clone()).collect())
        .unwrap_or_default();
    let mut table = Table::new(&[
        "Shard",
        "Address",
        "Baseline",
        "used_memory",
        "Data",
        "Keys",
        "Share of keys",
    ]);
    let shares = spread.key_shares();
    for (index, share) in shares.iter().enumerate() {
        let baseline = spread.baseline_used_memory[index];
        let used = spread.used_memory[index];
        table.rows.push(vec![
            index.to_string(),
            addresses.get(index).cloned().unwrap_or_default(),
            format_bytes(baseline as f64),
            format_bytes(used as f64),
            format_bytes(used as f64 - baseline as f64),
            spread.keys[index].to_string(),
            format!("{:.1}%", share * 100.0),
        ]);
    }
    Some(table)
}

/// The shard tables of the sharded engines of a comparison, each with its heading.
pub fn shard_tables(reports: &[BenchmarkReport]) -> Vec<(String, Table)> {
    reports
        .iter()
        .filter_map(|report| {
            let table = shards_table(report)?;
            let spread = report.summary.as_ref()?.shards.as_ref()?;
            Some((
                format!(
                    "{}: each shard's median over the repetitions ({})",
                    report.name,
                    spread.describe()
                ),
                table,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::client::measurement::measure::ShardSpread;

    #[test]
    fn the_note_gives_each_shards_share_and_the_ratios() {
        let spread = ShardSpread::from_medians(
            vec![3_000_000, 3_000_000, 3_000_000],
            vec![5_100_000, 5_000_000, 5_100_000],
            vec![10_022, 9_957, 10_021],
        );
        let note = spread.describe();
        assert!(
            note.starts_with("3 shards, keys 33.4% / 33.2% / 33.4%"),
            "{note}"
        );
        assert!(note.contains("most over fewest 1.007"), "{note}");
        assert!(note.contains("data most over least 1.050"), "{note}");
        let empty_shard = ShardSpread::from_medians(vec![1, 1], vec![5, 1], vec![4, 0]);
        assert!(empty_shard.describe().contains("a shard got none"));
    }
}
