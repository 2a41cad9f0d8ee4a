//! `--output html` in a real browser: real engines measured (locally by `membench run`, and by
//! the operator on the dev cluster for `membench report`), the page rendered by headless
//! Chromium, its charts read back from the DOM and the layout the browser gave them, and a
//! screenshot kept under target/tmp/html-report/.
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

#[test]
fn the_run_page_renders_one_bar_per_engine_with_published_marks_and_growth_curves() {
    let dir = common::chromium::artefact_dir();
    let spec = dir.join("html-sorted-set.yaml");
    std::fs::write(&spec, SPEC).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(["run", spec.to_str().unwrap(), "--output", "html"])
        .output()
        .expect("membench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let html = String::from_utf8(output.stdout).expect("the page is UTF-8");
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");

    let rendered = common::chromium::render(&html, "run-sorted-set");
    let layout = &rendered.layout;
    println!(
        "screenshot: {} ({} bytes)",
        rendered.screenshot.display(),
        std::fs::metadata(&rendered.screenshot).unwrap().len()
    );
    assert_eq!(layout["sections"], 1, "{layout}");
    assert_eq!(layout["tableRows"], 2, "{layout}");

    // One bar per engine, drawn, and longer for the engine that used more memory.
    let bars = layout_elements(layout, "bars");
    let engines: Vec<&str> = bars.iter().map(|b| b["engine"].as_str().unwrap()).collect();
    assert_eq!(engines, ["redis-8.2", "valkey-9.1"], "{layout}");
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

    // The published figures of both release lines are marked, where they belong on the scale.
    let marks = layout_elements(layout, "marks");
    assert_eq!(marks.len(), 2, "{layout}");
    for (mark, expected) in marks.iter().zip([96.6, 66.8]) {
        assert!((value(mark) - expected).abs() < 1e-9, "{mark}");
        assert!(number(mark, "height") > 10.0, "{mark}");
    }
    let scale = number(redis, "width") / value(redis);
    let mark_offset = number(&marks[0], "left") - number(redis, "left");
    assert!(
        (mark_offset - 96.6 * scale).abs() < 4.0,
        "the 96.6 mark is {mark_offset:.1} px in, the bar scale puts it at {:.1}: {layout}",
        96.6 * scale
    );

    // A growth curve per engine, drawn across the chart.
    let curves = layout_elements(layout, "curves");
    assert_eq!(curves.len(), 2, "{layout}");
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
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_page_draws_the_growth_curves_the_operator_carried_into_status()
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
    let rendered =
        tokio::task::spawn_blocking(move || common::chromium::render(&html, "report-sorted-set"))
            .await?;
    let layout = &rendered.layout;
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
