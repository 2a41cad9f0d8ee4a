//! The outputs a script and a person read, from real runs against real engines: `--output csv`
//! as one table of raw numbers under the documented header, read back by a strict CSV reader
//! (Python's `csv` module, as pandas' own reader follows it) and compared with the JSON of the
//! same results; each benchmark named in Markdown and CSV; and the published figures with the
//! difference from them in the table, Markdown, CSV and JSON whenever the spec names a
//! `publishedTable`.

mod common;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use common::membench;
use membench::client::measurement::load_options::RunSettings;
use membench::client::measurement::measure::{LoadOptions, measure};
use membench::client::workloads::workload::Workload;
use membench::crd::EngineKind;
use membench::report::csv::{BenchmarkLabels, HEADER, header, lines, rows_of_report};
use membench::report::table::ComparisonRow;
use serde_json::Value;

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("UTF-8")
}

/// `text` read by Python's csv module in strict mode: the header, then each row as a map of
/// column to cell. Fails on anything a strict reader refuses, on a row with another number of
/// cells than the header, and on a blank line.
fn read_csv(text: &str) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
    const READER: &str = r#"
import csv, io, json, sys
text = sys.stdin.read()
rows = list(csv.reader(io.StringIO(text, newline=''), strict=True))
header = rows[0]
for number, row in enumerate(rows[1:], 2):
    if len(row) != len(header):
        sys.exit(f"line {number} has {len(row)} cells, the header {len(header)}: {row}")
json.dump({"header": header, "rows": [dict(zip(header, row)) for row in rows[1:]]}, sys.stdout)
"#;
    let python = common::find_on_path("python3").expect("python3 on PATH (Debian's python3)");
    let mut child = Command::new(python)
        .args(["-c", READER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "a strict CSV reader refuses it: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!text.contains("\n\n"), "a blank line in the CSV:\n{text}");
    let parsed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let header = serde_json::from_value(parsed["header"].clone()).unwrap();
    let rows = serde_json::from_value(parsed["rows"].clone()).unwrap();
    (header, rows)
}

/// A cell as the number it holds (the cell must be a plain number: no unit, no separator).
fn number(row: &BTreeMap<String, String>, column: &str) -> f64 {
    let cell = &row[column];
    cell.parse()
        .unwrap_or_else(|_| panic!("{column} is not a number: {cell:?} in {row:?}"))
}

/// `cell` holds exactly the JSON's number (both print the shortest form that reads back the
/// same, so equal numbers give equal text and any difference is a different figure).
fn assert_same(row: &BTreeMap<String, String>, column: &str, json: &Value) {
    let expected = json
        .as_f64()
        .unwrap_or_else(|| panic!("{column}: the JSON has {json}"));
    assert_eq!(number(row, column), expected, "{column} in {row:?}");
}

#[test]
fn csv_is_one_table_of_the_json_figures_in_base_units() {
    let valkey = common::start(EngineKind::Valkey, &[]);
    let workload = Workload::SortedSet {
        members: 20_000,
        key: "membench:zset".into(),
        sample_every: 0,
    };
    let options = LoadOptions::of(RunSettings {
        repetitions: 3,
        ..RunSettings::default()
    });
    let report = measure(&valkey.address, &workload, &options, &mut |_| {});
    assert!(report.error.is_none(), "{:?}", report.error);
    // What `membench load --output json` prints, and what `--output csv` prints.
    let json = serde_json::to_value(&report).unwrap();
    let row = ComparisonRow::from_report(&report, None);
    let labels = BenchmarkLabels {
        benchmark: "zset".into(),
        ..Default::default()
    };
    let csv = header() + &lines(rows_of_report(&labels, &report, &row));

    let (columns, rows) = read_csv(&csv);
    assert_eq!(columns, HEADER);
    assert_eq!(rows.len(), 4, "three repetitions and the summary: {csv}");
    for (row, rep) in rows.iter().zip(json["repetitions"].as_array().unwrap()) {
        assert_eq!(row["row"], "repetition");
        assert_eq!(row["benchmark"], "zset");
        assert_eq!(row["engine"], "valkey");
        assert_same(row, "repetition", &rep["repetition"]);
        for (column, field) in [
            ("items", "items"),
            ("commands", "commands"),
            ("baseline_used_memory_bytes", "baseline_used_memory"),
            ("used_memory_bytes", "used_memory"),
            ("used_memory_rss_bytes", "used_memory_rss"),
            ("bytes_per_item", "bytes_per_item"),
            ("items_per_sec", "items_per_sec"),
            ("commands_per_sec", "commands_per_sec"),
            ("seconds", "seconds"),
        ] {
            assert_same(row, column, &rep[field]);
        }
    }
    let summary = &rows[3];
    assert_eq!(summary["row"], "summary");
    assert_eq!(summary["repetition"], "");
    assert_same(summary, "repetitions", &json["summary"]["repetitions"]);
    assert_same(summary, "items", &json["summary"]["items"]);
    assert_same(
        summary,
        "used_memory_bytes",
        &json["summary"]["used_memory"]["median"],
    );
    for figure in ["bytes_per_item", "items_per_sec", "commands_per_sec"] {
        assert_same(summary, figure, &json["summary"][figure]["median"]);
        assert_same(
            summary,
            &format!("{figure}_min"),
            &json["summary"][figure]["min"],
        );
        assert_same(
            summary,
            &format!("{figure}_max"),
            &json["summary"][figure]["max"],
        );
    }
    assert_eq!(
        summary["unstable"],
        json["summary"]["unstable"].to_string(),
        "{summary:?}"
    );
}

#[test]
fn load_csv_has_no_title_line_and_reads_as_numbers() {
    let redis = common::start(EngineKind::Redis, &[]);
    let csv = stdout(&membench(&[
        "load",
        "--addr",
        &redis.address.socket_addr(),
        "--workload",
        "strings",
        "--keys",
        "5000",
        "--repetitions",
        "2",
        "--output",
        "csv",
    ]));
    assert!(csv.starts_with("benchmark,namespace,entry,"), "{csv}");
    let (columns, rows) = read_csv(&csv);
    assert_eq!(columns, HEADER);
    assert_eq!(rows.len(), 3, "{csv}");
    for row in &rows[..2] {
        // Raw bytes and counts: bytes per item is what they give.
        let added = number(row, "used_memory_bytes") - number(row, "baseline_used_memory_bytes");
        let per_item = added / number(row, "items");
        assert!(
            (number(row, "bytes_per_item") - per_item).abs() < 1e-9 * per_item,
            "{row:?}"
        );
        assert_eq!(number(row, "items"), 5000.0);
        number(row, "items_per_sec");
    }
    assert_eq!(rows[2]["row"], "summary");
    assert_eq!(rows[2]["engine"], "redis");
}

const TWO_BENCHMARKS: &str = "apiVersion: membench.io/v1alpha1
kind: MemoryBenchmark
metadata: {name: sorted-set-small}
spec:
  instanceType: r8g.4xlarge
  publishedTable: sorted-set-50m
  engines:
    - {engine: redis, version: \"8.2\"}
    - {engine: valkey, version: \"9.1\", allocator: jemalloc}
  workload: {sortedSet: {members: 20000, sampleEvery: 0}}
  repetitions: 2
---
apiVersion: membench.io/v1alpha1
kind: MemoryBenchmark
metadata: {name: strings-small}
spec:
  instanceType: r8g.4xlarge
  engines:
    - {engine: valkey, version: \"9.1\"}
  workload: {strings: {keys: 5000}}
  repetitions: 2
";

/// What `membench run --output <output>` prints for [`TWO_BENCHMARKS`], from a spec file of
/// its own (the tests run in parallel).
fn run_two_benchmarks(output: &str) -> String {
    let spec = std::env::temp_dir().join(format!(
        "membench-outputs-{output}-{}.yaml",
        std::process::id()
    ));
    std::fs::write(&spec, TWO_BENCHMARKS).unwrap();
    let printed = stdout(&membench(&[
        "run",
        spec.to_str().unwrap(),
        "--output",
        output,
    ]));
    std::fs::remove_file(spec).unwrap();
    printed
}

#[test]
fn run_csv_is_one_table_naming_each_benchmark_with_the_published_figures() {
    let csv = run_two_benchmarks("csv");
    let (columns, rows) = read_csv(&csv);
    assert_eq!(columns, HEADER);
    // Two engines and one, each with two repetitions and a summary.
    assert_eq!(rows.len(), 9, "{csv}");
    let of = |benchmark: &str| -> Vec<&BTreeMap<String, String>> {
        rows.iter()
            .filter(|r| r["benchmark"] == benchmark)
            .collect()
    };
    assert_eq!(of("sorted-set-small").len(), 6, "{csv}");
    assert_eq!(of("strings-small").len(), 3, "{csv}");
    // Published 4.83 GB (Redis 8.2.10) and 3.34 GB (Valkey 9.1.2) over 50,000,000 members.
    let summaries: Vec<_> = of("sorted-set-small")
        .into_iter()
        .filter(|r| r["row"] == "summary")
        .collect();
    for (summary, (published, version)) in summaries.iter().zip([(96.6, "8.2.10"), (66.8, "9.1.2")])
    {
        assert!((number(summary, "published_bytes_per_item") - published).abs() < 1e-9);
        assert_eq!(summary["published_version"], version);
        let difference = (number(summary, "bytes_per_item") / published - 1.0) * 100.0;
        assert!((number(summary, "vs_published_percent") - difference).abs() < 1e-9);
    }
    // No published table for the strings benchmark: the columns stay empty.
    let strings = of("strings-small");
    assert_eq!(strings[2]["published_bytes_per_item"], "");
}

#[test]
fn markdown_names_each_benchmark_and_sets_the_published_figure_beside_the_measured_one() {
    let markdown = run_two_benchmarks("markdown");
    let headings: Vec<&str> = markdown.lines().filter(|l| l.starts_with("### ")).collect();
    assert_eq!(
        headings,
        ["### sorted-set-small", "### strings-small"],
        "{markdown}"
    );
    let (sorted_set, strings) = markdown.split_once("### strings-small").unwrap();
    let header = sorted_set
        .lines()
        .find(|l| l.starts_with("| Engine"))
        .unwrap();
    assert!(header.contains("| Published | vs published |"), "{header}");
    assert!(sorted_set.contains("| 96.60 (8.2.10) | +"), "{sorted_set}");
    assert!(!strings.contains("Published"), "{strings}");
}

#[test]
fn json_and_the_table_carry_the_published_figure_and_the_difference() {
    let json: Value = serde_json::from_str(&run_two_benchmarks("json")).unwrap();
    assert_eq!(json[0]["published_table"], "sorted-set-50m");
    assert!(json[1].get("published_table").is_none(), "{}", json[1]);
    let engines = json[0]["engines"].as_array().unwrap();
    for (engine, (published, version)) in engines.iter().zip([(96.6, "8.2.10"), (66.8, "9.1.2")]) {
        let figure = &engine["published"];
        assert_eq!(figure["table"], "sorted-set-50m", "{engine}");
        assert_eq!(figure["version"], version);
        assert!((figure["bytes_per_item"].as_f64().unwrap() - published).abs() < 1e-9);
        let measured = engine["summary"]["bytes_per_item"]["median"]
            .as_f64()
            .unwrap();
        let difference = figure["difference_percent"].as_f64().unwrap();
        assert!((difference - (measured / published - 1.0) * 100.0).abs() < 1e-9);
    }
    assert!(
        json[1]["engines"][0].get("published").is_none(),
        "{}",
        json[1]
    );
    let text = run_two_benchmarks("table");
    let header = text.lines().find(|l| l.starts_with("Engine")).unwrap();
    assert!(
        header.contains("Published") && header.contains("vs published"),
        "{text}"
    );
    assert!(text.contains("96.60 (8.2.10)"), "{text}");
}
