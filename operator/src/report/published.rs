//! The published tables that users quote (the project's seeds), as data: which workload each
//! measured, at what size, and each row's figure. A spec names one in `spec.publishedTable`;
//! every output then sets each engine's published figure and the difference from it beside the
//! measured one (the tables, JSON and CSV as columns, `--output html` also as a mark on the
//! bar), and docs/src/results/ sets the full-size runs beside them.
//!
//! A row applies to an engine of the same kind and release line (`8.1.9` published applies to
//! a measured `8.1.7`): the tables were measured on patch releases this machine may not have,
//! and within a release line the data structures these workloads exercise do not change.

use serde::Serialize;

use crate::client::workloads::workload::Workload;
use crate::crd::{EngineKind, PublishedTableName, RecordLayout};

/// One published table.
#[derive(Clone, Debug, PartialEq)]
pub struct PublishedTable {
    pub name: &'static str,
    /// Who published it and how it was measured, in a line.
    pub source: &'static str,
    /// The workload kind it measured (`sorted-set`, `random-strings`, `strings`, `records`).
    pub workload_kind: &'static str,
    /// The items per run it measured (members, requests, keys or records).
    pub items: u64,
    pub rows: &'static [PublishedRow],
}

/// One published figure.
#[derive(Clone, Debug, PartialEq)]
pub struct PublishedRow {
    pub engine: EngineKind,
    /// The release measured; empty when the table names none.
    pub version: &'static str,
    /// For the records table: which layout the row is.
    pub layout: Option<RecordLayout>,
    /// Bytes per item as published, or, for the sorted set, derived from the published
    /// used_memory (the table gives bytes per member only as `~97`).
    pub bytes_per_item: f64,
    /// The memory the table published (the sorted set's used_memory, the records' total), in
    /// bytes.
    pub used_memory: Option<f64>,
}

const fn sorted_set_row(engine: EngineKind, version: &'static str, gb: f64) -> PublishedRow {
    PublishedRow {
        engine,
        version,
        layout: None,
        bytes_per_item: gb * 1e9 / 50_000_000.0,
        used_memory: Some(gb * 1e9),
    }
}

const fn row(engine: EngineKind, version: &'static str, bytes_per_item: f64) -> PublishedRow {
    PublishedRow {
        engine,
        version,
        layout: None,
        bytes_per_item,
        used_memory: None,
    }
}

use EngineKind::{Dragonfly, Redis, Valkey};

static SORTED_SET_50M: [PublishedRow; 11] = [
    sorted_set_row(Redis, "7.4.11", 4.83),
    sorted_set_row(Redis, "8.0.6", 4.83),
    sorted_set_row(Redis, "8.2.10", 4.83),
    sorted_set_row(Redis, "8.4.7", 4.83),
    sorted_set_row(Redis, "8.6.7", 3.73),
    sorted_set_row(Redis, "8.10.2", 3.73),
    sorted_set_row(Valkey, "7.2.14", 4.83),
    sorted_set_row(Valkey, "8.0.11", 4.83),
    sorted_set_row(Valkey, "8.1.10", 3.77),
    sorted_set_row(Valkey, "9.0.6", 3.77),
    sorted_set_row(Valkey, "9.1.2", 3.34),
];

static VALKEY_STRINGS_16B: [PublishedRow; 5] = [
    row(Valkey, "7.2.14", 102.48),
    row(Valkey, "8.0.10", 94.49),
    row(Valkey, "8.1.9", 71.98),
    row(Valkey, "9.0.5", 71.99),
    row(Valkey, "9.1.1", 64.02),
];

static STRINGS_100B_1M: [PublishedRow; 3] = [
    row(Dragonfly, "", 146.1),
    row(Redis, "8.2", 165.3),
    row(Valkey, "8.1", 168.7),
];

/// One MiB in bytes: Percona's "MB" are used_memory_human's MiB (61.78 "MB" over 632,181 keys
/// is their 102.48 bytes per key only in MiB).
const MIB: f64 = 1_048_576.0;

static RECORDS_HASH_VS_STRINGS: [PublishedRow; 2] = [
    PublishedRow {
        layout: Some(RecordLayout::Hash),
        used_memory: Some(100.0 * MIB),
        ..row(Valkey, "", 100.0 * MIB / 1_000_000.0)
    },
    PublishedRow {
        layout: Some(RecordLayout::Strings),
        used_memory: Some(220.0 * MIB),
        ..row(Valkey, "", 220.0 * MIB / 1_000_000.0)
    },
];

static TABLES: [PublishedTable; 4] = [
    PublishedTable {
        name: "sorted-set-50m",
        source: "Momento's sorted-set benchmark: 50,000,000 members m:{i} by pipelined ZADD NX into one sorted set, official images on an r8g.4xlarge (Graviton4), ten repetitions, used_memory in decimal GB",
        workload_kind: "sorted-set",
        items: 50_000_000,
        rows: &SORTED_SET_50M,
    },
    PublishedTable {
        name: "valkey-strings-16b",
        source: "Percona (Lucas Yang): valkey-benchmark -t set -n 1000000 -r 1000000 -d 16 on Valkey built from source with jemalloc 5.3.0, empty-instance baseline subtracted, bytes per key",
        workload_kind: "random-strings",
        items: 1_000_000,
        rows: &VALKEY_STRINGS_16B,
    },
    PublishedTable {
        name: "strings-100b-1m",
        source: "Sunny Sahijwani's memory footprint post: 1,000,000 keys x 100-byte values, empty-server baseline subtracted, bytes per key (the post names minor versions only, and no Dragonfly version)",
        workload_kind: "strings",
        items: 1_000_000,
        rows: &STRINGS_100B_1M,
    },
    PublishedTable {
        name: "records-hash-vs-strings",
        source: "Percona (Lucas Yang): 1,000,000 user records of four fields, 220 MB as string keys and 100 MB as hashes, read as MiB like the article's other figures (the post names no Valkey version for this comparison)",
        workload_kind: "records",
        items: 1_000_000,
        rows: &RECORDS_HASH_VS_STRINGS,
    },
];

impl PublishedTableName {
    pub fn as_str(self) -> &'static str {
        self.table().name
    }

    /// The table's data.
    pub fn table(self) -> &'static PublishedTable {
        match self {
            PublishedTableName::SortedSet50m => &TABLES[0],
            PublishedTableName::ValkeyStrings16b => &TABLES[1],
            PublishedTableName::Strings100b1m => &TABLES[2],
            PublishedTableName::RecordsHashVsStrings => &TABLES[3],
        }
    }
}

/// The published figure that applies to one measured engine, and the difference from it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PublishedFigure {
    /// The table's name (`spec.publishedTable`).
    pub table: &'static str,
    /// Bytes per item as published (for the sorted set, derived from its used_memory).
    pub bytes_per_item: f64,
    /// The release the table measured (`8.1.9`), or empty when it names none.
    pub version: &'static str,
    /// The measured median against the published figure, in percent (negative: smaller);
    /// `None` without a measured figure.
    pub difference_percent: Option<f64>,
}

/// Whether two versions are of one release line (`8.1.9` and `8.1.7`; `8.2` and `8.2.3`).
pub fn same_release_line(a: &str, b: &str) -> bool {
    fn line(v: &str) -> Vec<&str> {
        v.split('.').take(2).collect()
    }
    !a.is_empty() && line(a) == line(b)
}

impl PublishedTable {
    /// The row that applies to an engine of `engine` at `version` (what the engine reported,
    /// or the spec's version) running `workload`.
    pub fn row_for(
        &self,
        engine: EngineKind,
        version: &str,
        workload: &Workload,
    ) -> Option<&'static PublishedRow> {
        let layout = match workload {
            Workload::Records { layout, .. } => Some(*layout),
            _ => None,
        };
        self.rows.iter().find(|row| {
            row.engine == engine
                && (row.version.is_empty() || same_release_line(row.version, version))
                && (row.layout.is_none() || row.layout == layout)
        })
    }

    /// The published figure for an engine of kind `engine` (`redis`) at `version`, measured at
    /// `bytes_per_item`: `None` when the table has no row of its kind and release line.
    pub fn figure_for(
        &self,
        engine: &str,
        version: &str,
        workload: &Workload,
        bytes_per_item: Option<f64>,
    ) -> Option<PublishedFigure> {
        let kind: EngineKind = engine.parse().ok()?;
        let row = self.row_for(kind, version, workload)?;
        Some(PublishedFigure {
            table: self.name,
            bytes_per_item: row.bytes_per_item,
            version: row.version,
            difference_percent: bytes_per_item.map(|b| (b / row.bytes_per_item - 1.0) * 100.0),
        })
    }

    /// Checks that a spec's workload is the one this table measured.
    pub fn check_workload(&self, workload: &Workload) -> Result<(), String> {
        if workload.kind() == self.workload_kind {
            return Ok(());
        }
        Err(format!(
            "spec.publishedTable '{}' is a {} table, but spec.workload is {}: name the table of this workload ({}) or leave publishedTable out",
            self.name,
            self.workload_kind,
            workload.kind(),
            TABLES
                .iter()
                .filter(|t| t.workload_kind == workload.kind())
                .map(|t| t.name)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// What a reader must know when a run is smaller or larger than the published one: bytes
    /// per item depend on size, since hash tables grow in steps.
    pub fn size_note(&self, workload: &Workload) -> Option<String> {
        let (items, noun) = run_size(workload);
        let same = items == self.items
            && match workload {
                Workload::RandomStrings { keyspace, .. } => *keyspace == self.items,
                _ => true,
            };
        (!same).then(|| {
            format!(
                "the published figures are for {} {noun}s; this run loaded {}: bytes per {} change with size (hash tables grow in steps), so the marks are a reference, not a target",
                thousands(self.items),
                thousands(items),
                workload.item_noun()
            )
        })
    }
}

/// How big a run is, in the unit its published table counts: members, SET requests (over a
/// key space as large), keys or records.
fn run_size(workload: &Workload) -> (u64, &'static str) {
    match workload {
        Workload::SortedSet { members, .. } => (*members, "member"),
        Workload::RandomStrings { requests, .. } => (*requests, "request"),
        Workload::Strings { keys, .. } => (*keys, "key"),
        Workload::Records { records, .. } => (*records, "record"),
        Workload::Profile(profile) => (profile.keys, "key"),
        Workload::Rdb(load) => (load.scan.keys_written(), "key"),
    }
}

/// 50000000 as `50,000,000`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted_set(members: u64) -> Workload {
        Workload::SortedSet {
            members,
            key: "k".into(),
            sample_every: 0,
        }
    }

    fn records(layout: RecordLayout) -> Workload {
        Workload::Records {
            records: 1_000_000,
            layout,
            fields: vec!["name".into()],
        }
    }

    #[test]
    fn a_row_applies_to_its_release_line_only() {
        let table = PublishedTableName::SortedSet50m.table();
        let row = table.row_for(Valkey, "8.1.7", &sorted_set(50_000_000));
        assert_eq!(row.map(|r| r.version), Some("8.1.10"));
        assert_eq!(row.unwrap().used_memory, Some(3.77e9));
        assert!((row.unwrap().bytes_per_item - 75.4).abs() < 1e-9);
        assert!(
            table
                .row_for(Redis, "8.4.1", &sorted_set(1))
                .is_some_and(|r| r.version == "8.4.7")
        );
        // 8.1 is not 8.10, and no row is Dragonfly.
        assert_eq!(
            table
                .row_for(Redis, "8.1.0", &sorted_set(1))
                .map(|r| r.version),
            None
        );
        assert!(table.row_for(Dragonfly, "1.40.0", &sorted_set(1)).is_none());
    }

    #[test]
    fn a_row_without_a_version_applies_to_any_release() {
        let table = PublishedTableName::Strings100b1m.table();
        let strings = Workload::Strings {
            keys: 1_000_000,
            value_size: 100,
        };
        assert_eq!(
            table
                .row_for(Dragonfly, "1.40.0", &strings)
                .map(|r| r.bytes_per_item),
            Some(146.1)
        );
        assert_eq!(
            table
                .row_for(Redis, "8.2.3", &strings)
                .map(|r| r.bytes_per_item),
            Some(165.3)
        );
        assert!(table.row_for(Redis, "7.0.15", &strings).is_none());
    }

    #[test]
    fn record_rows_are_told_apart_by_layout() {
        let table = PublishedTableName::RecordsHashVsStrings.table();
        let figure = |layout| {
            table
                .row_for(Valkey, "9.1.2", &records(layout))
                .map(|r| r.bytes_per_item)
        };
        // 100 and 220 "MB" over a million records, in MiB as the article's other figures.
        assert_eq!(figure(RecordLayout::Hash), Some(104.8576));
        assert_eq!(figure(RecordLayout::Strings), Some(230.68672));
    }

    #[test]
    fn a_table_of_another_workload_is_refused_with_the_right_one_named() {
        let err = PublishedTableName::SortedSet50m
            .table()
            .check_workload(&records(RecordLayout::Hash))
            .unwrap_err();
        assert!(
            err.contains("'sorted-set-50m' is a sorted-set table")
                && err.contains("records-hash-vs-strings"),
            "{err}"
        );
        assert!(
            PublishedTableName::SortedSet50m
                .table()
                .check_workload(&sorted_set(10))
                .is_ok()
        );
    }

    #[test]
    fn a_smaller_run_is_told_that_the_marks_are_a_reference() {
        let table = PublishedTableName::SortedSet50m.table();
        let note = table.size_note(&sorted_set(200_000)).unwrap();
        assert!(
            note.contains("50,000,000 members") && note.contains("loaded 200,000"),
            "{note}"
        );
        assert_eq!(table.size_note(&sorted_set(50_000_000)), None);
    }

    #[test]
    fn every_table_is_reachable_by_its_name() {
        for name in [
            PublishedTableName::SortedSet50m,
            PublishedTableName::ValkeyStrings16b,
            PublishedTableName::Strings100b1m,
            PublishedTableName::RecordsHashVsStrings,
        ] {
            let serialized = serde_json::to_value(name).unwrap();
            assert_eq!(serialized, name.as_str());
        }
    }
}
