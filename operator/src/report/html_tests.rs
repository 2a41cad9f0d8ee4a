//! The HTML page's tests: sections from statuses and from local runs, published marks, the
//! growth curve and the axis ticks.

use super::*;
use crate::crd::{EngineStatus, GrowthPoint, MemoryBenchmarkStatus, Phase, SummaryStatus};
use crate::validation::spec_file::parse_specs;

fn engine(name: &str, kind: &str, version: &str, bytes: Option<f64>) -> EngineStatus {
    EngineStatus {
        name: name.into(),
        engine: kind.into(),
        requested_version: version.into(),
        version: Some(version.into()),
        allocator: Some("jemalloc-5.3.0".into()),
        state: if bytes.is_some() {
            "Succeeded"
        } else {
            "Failed"
        }
        .into(),
        reason: bytes.is_none().then(|| "EngineCrashed".into()),
        message: bytes
            .is_none()
            .then(|| "exited with <signal 9> & lost".into()),
        summary: bytes.map(|b| SummaryStatus {
            items: 50_000_000,
            used_memory: (b * 5e7) as u64,
            bytes_per_item: crate::crd::SpreadStatus {
                median: b,
                min: b,
                max: b,
                cv: 0.0,
            },
            ..Default::default()
        }),
        growth: bytes.map_or_else(Vec::new, |b| {
            (1..=50)
                .map(|k| GrowthPoint {
                    items: k * 1_000_000,
                    used_memory: (b * (k * 1_000_000) as f64) as u64,
                })
                .collect()
        }),
        ..Default::default()
    }
}

fn benchmark(published: bool) -> MemoryBenchmark {
    let table = if published {
        "  publishedTable: sorted-set-50m\n"
    } else {
        ""
    };
    let mut b = parse_specs(&format!("apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: zset, namespace: bench}}\nspec:\n  instanceType: r8g.4xlarge\n{table}  engines: [{{engine: redis, version: \"8.2\"}}, {{engine: valkey, version: \"9.1\"}}, {{engine: dragonfly, version: \"1.40.0\"}}]\n  workload: {{sortedSet: {{members: 50000000}}}}\n  repetitions: 1\n")).unwrap().remove(0);
    b.status = Some(MemoryBenchmarkStatus {
        phase: Some(Phase::Failed),
        engines: vec![
            engine("redis-8.2", "redis", "8.2.3", Some(96.59)),
            engine("valkey-9.1", "valkey", "9.1.2", Some(66.82)),
            engine("dragonfly-1.40.0", "dragonfly", "1.40.0", None),
        ],
        ..Default::default()
    });
    b
}

fn count(page: &str, needle: &str) -> usize {
    page.matches(needle).count()
}

#[test]
fn every_engine_gets_a_bar_even_without_a_result() {
    let page = render_page("t", &[section_from_status(&benchmark(true))]);
    assert_eq!(count(&page, "<rect class=\"bar"), 3, "{page}");
    assert_eq!(count(&page, "<rect class=\"bar bar-missing\""), 1);
    assert!(page.contains("data-engine=\"valkey-9.1\" data-value=\"66.82\""));
}

#[test]
fn published_figures_are_marked_on_the_engines_of_their_release_line() {
    let section = section_from_status(&benchmark(true));
    let marks: Vec<Option<f64>> = section
        .bars
        .iter()
        .map(|b| b.published.as_ref().map(|p| p.bytes_per_item))
        .collect();
    // Redis 8.2.10 and Valkey 9.1.2 published 4.83 and 3.34 GB; the table has no Dragonfly.
    assert_eq!(marks, vec![Some(96.6), Some(66.8), None]);
    let page = render_page("t", &[section]);
    assert_eq!(count(&page, "<line class=\"published-mark\""), 2);
    assert!(page.contains("No published figure for dragonfly-1.40.0"));
    // The table sets the published figure beside the measured one.
    assert!(
        page.contains("<td class=\"number\">96.60 (8.2.10)</td>"),
        "{page}"
    );
    assert!(page.contains("<td class=\"number\">-0.0%</td>"), "{page}");
}

#[test]
fn without_a_published_table_nothing_is_marked() {
    let section = section_from_status(&benchmark(false));
    assert!(section.bars.iter().all(|b| b.published.is_none()));
    let page = render_page("t", &[section]);
    assert_eq!(count(&page, "<line class=\"published-mark\""), 0);
    assert!(!page.contains("<th>Published</th>"));
}

#[test]
fn the_growth_curve_is_drawn_for_each_engine_that_has_one() {
    let page = render_page("t", &[section_from_status(&benchmark(true))]);
    assert_eq!(count(&page, "<polyline class=\"growth-line\""), 2);
    assert!(page.contains("data-engine=\"redis-8.2\" data-points=\"50\""));
    let mut strings = benchmark(false);
    strings.status.as_mut().unwrap().engines[0].growth.clear();
    strings.status.as_mut().unwrap().engines[1].growth.clear();
    let page = render_page("t", &[section_from_status(&strings)]);
    assert!(page.contains("class=\"no-growth-curve\""));
}

#[test]
fn the_page_fetches_nothing() {
    let page = render_page("t", &[section_from_status(&benchmark(true))]);
    for forbidden in [
        "<script", "src=", "href=", "url(", "@import", "http:", "https:",
    ] {
        assert!(!page.contains(forbidden), "the page holds {forbidden}");
    }
}

#[test]
fn text_from_engines_and_errors_is_escaped() {
    let page = render_page("a <b> & c", &[section_from_status(&benchmark(true))]);
    assert!(page.contains("<title>a &lt;b&gt; &amp; c</title>"));
    assert!(
        page.contains("exited with &lt;signal 9&gt; &amp; lost"),
        "{page}"
    );
    assert!(!page.contains("<signal 9>"));
}

#[test]
fn ticks_are_round_numbers() {
    assert_eq!(tick_step(96.6, 5.0), 20.0);
    assert_eq!(tick_step(4.83e9, 5.0), 1e9);
    assert_eq!(tick_step(50_000_000.0, 5.0), 1e7);
    // 102.48 gets an axis to 125, not 150.
    assert_eq!(tick_step(102.48, 5.0), 25.0);
}
