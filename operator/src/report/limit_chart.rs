//! The page's recommended memory limits: per engine, a bar stacked from the limit's terms
//! (`capacity::recommend`), each term's width its bytes, a default drawn lighter than a
//! measurement, and a line at maxmemory, so a reader sees what the reserve above maxmemory is
//! made of.
//!
//! Elements carry class names and `data-` attributes (`rect.limit-term[data-engine][data-term]
//! [data-source]`, `line.maxmemory[data-engine]`) so a test can read them back from the DOM.

use std::fmt::Write as _;

use crate::capacity::recommend::{Recommended, TermSource};
use crate::crd::RecommendedStatus;

use super::capacity::format_gib;
use super::charts::{CHART_WIDTH, LINE_HEIGHT, escape, open_svg, text_lines, wrap};

/// One term of a limit: its name, bytes and whether this run measured it.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitTerm {
    pub name: String,
    pub bytes: u64,
    pub measured: bool,
}

/// One engine's recommended limit.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitBar {
    pub engine: String,
    pub maxmemory: u64,
    pub limit: u64,
    pub reserve_percent: f64,
    pub terms: Vec<LimitTerm>,
}

impl LimitBar {
    pub fn from_plan(engine: &str, r: &Recommended) -> Self {
        Self::from_status(engine, &RecommendedStatus::from(r))
    }

    pub fn from_status(engine: &str, r: &RecommendedStatus) -> Self {
        Self {
            engine: engine.to_string(),
            maxmemory: r.maxmemory_bytes,
            limit: r.memory_limit_bytes,
            reserve_percent: r.reserve_percent,
            terms: r
                .terms
                .iter()
                .map(|t| LimitTerm {
                    name: t.name.clone(),
                    bytes: t.bytes,
                    measured: t.source == TermSource::Measured.as_str(),
                })
                .collect(),
        }
    }
}

/// A colour per term name, in the order the terms come.
fn term_colour(name: &str) -> &'static str {
    match name {
        "empty_rss" => "#6b6b6b",
        "data_rss" => "#1f5fb4",
        "copy_on_write" | "save_peak" => "#d62728",
        "replication_backlog" => "#9467bd",
        "replica_output_buffer" => "#8c564b",
        "eviction_overshoot" => "#ff7f0e",
        "client_buffers" => "#2a9d3a",
        _ => "#7f7f7f",
    }
}

/// The chart, or nothing when no engine has a recommendation.
pub fn render_limits(page: &mut String, limits: &[LimitBar], items: u64, item: &str) {
    if limits.is_empty() {
        return;
    }
    const BAR_HEIGHT: f64 = 18.0;
    const GAP: f64 = 14.0;
    let largest = limits.iter().map(|l| l.limit).max().unwrap_or(1).max(1) as f64;
    let scale_width = CHART_WIDTH - 20.0;
    let x = |bytes: f64| bytes / largest * scale_width;
    let labels: Vec<Vec<String>> = limits
        .iter()
        .map(|l| {
            wrap(
                &format!(
                    "{}: limit {}, maxmemory {}, reserve {:.1}%",
                    l.engine,
                    format_gib(l.limit),
                    format_gib(l.maxmemory),
                    l.reserve_percent
                ),
                CHART_WIDTH,
                true,
            )
        })
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for term in limits.iter().flat_map(|l| &l.terms) {
        if !names.contains(&term.name.as_str()) {
            names.push(&term.name);
        }
    }
    let legend = wrap(
        &format!(
            "Left to right: {}. Lighter: a default, not measured. The line: maxmemory.",
            names.join(", ")
        ),
        CHART_WIDTH,
        false,
    );
    let bars_height: f64 = labels
        .iter()
        .map(|l| l.len() as f64 * LINE_HEIGHT + BAR_HEIGHT + GAP)
        .sum();
    let height = bars_height + LINE_HEIGHT * legend.len() as f64 + 6.0;
    let _ = writeln!(
        page,
        "<figure class=\"limits\">\n<figcaption>The recommended memory limit at {items} {}s, as the sum of its terms</figcaption>",
        escape(item)
    );
    open_svg(
        page,
        "limit-chart",
        height,
        &format!("data-bars=\"{}\"", limits.len()),
    );
    let mut y = 0.0;
    for (bar, label) in limits.iter().zip(&labels) {
        y = text_lines(page, label, y, r#"class="limit-label" font-weight="bold""#);
        let mut at = 0.0;
        for term in bar.terms.iter().filter(|t| t.bytes > 0) {
            let width = x(term.bytes as f64);
            let _ = writeln!(
                page,
                "<rect class=\"limit-term\" data-engine=\"{}\" data-term=\"{}\" data-value=\"{}\" data-source=\"{}\" x=\"{at:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"{BAR_HEIGHT}\" fill=\"{}\" fill-opacity=\"{}\"><title>{}: {} ({})</title></rect>",
                escape(&bar.engine),
                escape(&term.name),
                term.bytes,
                if term.measured { "measured" } else { "default" },
                term_colour(&term.name),
                if term.measured { "1" } else { "0.45" },
                escape(&term.name),
                format_gib(term.bytes),
                if term.measured { "measured" } else { "default" },
            );
            at += width;
        }
        let line = x(bar.maxmemory as f64);
        let _ = writeln!(
            page,
            "<line class=\"maxmemory\" data-engine=\"{}\" data-value=\"{}\" x1=\"{line:.1}\" y1=\"{:.1}\" x2=\"{line:.1}\" y2=\"{:.1}\" stroke=\"#000\" stroke-width=\"2\"><title>maxmemory {}</title></line>",
            escape(&bar.engine),
            bar.maxmemory,
            y - 3.0,
            y + BAR_HEIGHT + 3.0,
            format_gib(bar.maxmemory),
        );
        y += BAR_HEIGHT + GAP;
    }
    text_lines(
        page,
        &legend,
        bars_height,
        r##"class="limit-legend" fill="#555""##,
    );
    page.push_str("</svg>\n</figure>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_term_is_a_segment_as_wide_as_its_bytes_with_defaults_drawn_lighter() {
        let bar = LimitBar {
            engine: "valkey-9.1".into(),
            maxmemory: 1 << 30,
            limit: 2 << 30,
            reserve_percent: 50.0,
            terms: vec![
                LimitTerm {
                    name: "data_rss".into(),
                    bytes: 1 << 30,
                    measured: true,
                },
                LimitTerm {
                    name: "copy_on_write".into(),
                    bytes: 1 << 30,
                    measured: false,
                },
                LimitTerm {
                    name: "eviction_overshoot".into(),
                    bytes: 0,
                    measured: false,
                },
            ],
        };
        let mut page = String::new();
        render_limits(&mut page, &[bar], 1000, "key");
        assert_eq!(page.matches("<rect class=\"limit-term\"").count(), 2);
        // Two halves of the scale: the second starts where the first ends.
        assert!(page.contains("data-term=\"data_rss\" data-value=\"1073741824\" data-source=\"measured\" x=\"0.0\""), "{page}");
        assert!(page.contains("data-term=\"copy_on_write\" data-value=\"1073741824\" data-source=\"default\" x=\"270.0\""), "{page}");
        assert_eq!(page.matches("width=\"270.0\"").count(), 2, "{page}");
        assert!(page.contains("fill-opacity=\"0.45\""));
        assert!(page.contains("<line class=\"maxmemory\" data-engine=\"valkey-9.1\" data-value=\"1073741824\" x1=\"270.0\""));
    }
}
