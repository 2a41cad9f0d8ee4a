//! The page's capacity chart: the node memory each engine needs at the planned size, as bars
//! against the instance sizes of the families looked in (a line at each size's memory, named
//! for it), so a reader sees which size holds which engine and with how much room.
//!
//! Elements carry class names and `data-` attributes (`rect.capacity-bar[data-engine]`,
//! `line.instance-size[data-instance-size]`) so a test can read them back from the DOM.

use std::fmt::Write as _;

use crate::capacity::{CapacityPlan, instance_types};
use crate::crd::{CapacityStatus, InstanceFamily};

use super::capacity::format_gib;
use super::charts::{Bar, CHART_WIDTH, LINE_HEIGHT, colours, escape, open_svg, text_lines, wrap};
pub use super::limit_chart::LimitBar;
use super::limit_chart::render_limits;

const GIB: f64 = (1u64 << 30) as f64;

/// One engine's need.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityBar {
    pub engine: String,
    pub required_node_memory: u64,
    pub smallest_instance_type: Option<String>,
}

/// What the chart draws: the planned size, the families, each engine's need.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityChart {
    pub items: u64,
    pub families: Vec<String>,
    pub bars: Vec<CapacityBar>,
    /// Each engine's recommended memory limit, as its terms (`super::limit_chart`).
    pub limits: Vec<LimitBar>,
}

impl CapacityChart {
    pub fn from_plan(plan: &CapacityPlan) -> Self {
        Self {
            items: plan.items,
            families: plan
                .instance_families
                .iter()
                .map(|f| f.to_string())
                .collect(),
            bars: bars_of(
                plan.engines
                    .iter()
                    .map(|e| (&e.name, e.required_node_memory, &e.smallest_instance_type)),
            ),
            limits: plan
                .engines
                .iter()
                .filter_map(|e| Some(LimitBar::from_plan(&e.name, e.recommended.as_ref()?)))
                .collect(),
        }
    }

    pub fn from_status(status: &CapacityStatus) -> Self {
        Self {
            items: status.items,
            families: status.instance_families.clone(),
            bars: bars_of(
                status
                    .engines
                    .iter()
                    .map(|e| (&e.name, e.required_node_memory, &e.smallest_instance_type)),
            ),
            limits: status
                .engines
                .iter()
                .filter_map(|e| Some(LimitBar::from_status(&e.name, e.recommended.as_ref()?)))
                .collect(),
        }
    }
}

/// One bar per (engine, required node memory, smallest instance type).
fn bars_of<'a>(
    engines: impl Iterator<Item = (&'a String, u64, &'a Option<String>)>,
) -> Vec<CapacityBar> {
    engines
        .map(|(engine, required, smallest)| CapacityBar {
            engine: engine.clone(),
            required_node_memory: required,
            smallest_instance_type: smallest.clone(),
        })
        .collect()
}

/// The instance sizes drawn: every size of the table up to the first that holds the largest
/// need (the families share their sizes' memory), as (size name, bytes).
fn sizes(largest_need: u64) -> Vec<(String, u64)> {
    let mut drawn = Vec::new();
    for t in instance_types::of_family(InstanceFamily::R8g) {
        let size = t.name.split('.').nth(1).unwrap_or_default().to_string();
        drawn.push((size, t.memory_bytes()));
        if t.memory_bytes() >= largest_need {
            break;
        }
    }
    drawn
}

/// The chart, or nothing when no engine was projected.
pub fn render_capacity(page: &mut String, chart: &CapacityChart, bars: &[Bar], item: &str) {
    if chart.bars.is_empty() {
        return;
    }
    const BAR_HEIGHT: f64 = 16.0;
    const GAP: f64 = 14.0;
    let largest = chart
        .bars
        .iter()
        .map(|b| b.required_node_memory)
        .max()
        .unwrap_or(0);
    let sizes = sizes(largest);
    let axis_max = sizes.last().map_or(largest, |s| s.1).max(largest).max(1) as f64;
    let scale_width = CHART_WIDTH - 20.0;
    let x = |bytes: f64| bytes / axis_max * scale_width;
    let palette = colours(bars);
    let colour_of = |engine: &str| {
        bars.iter()
            .position(|b| b.engine == engine)
            .map_or("#7f7f7f", |i| palette[i])
    };
    let labels: Vec<Vec<String>> = chart
        .bars
        .iter()
        .map(|b| {
            let fits = b.smallest_instance_type.as_deref().map_or_else(
                || "no instance type holds it".to_string(),
                |t| format!("fits {t}"),
            );
            wrap(
                &format!(
                    "{}: {} ({fits})",
                    b.engine,
                    format_gib(b.required_node_memory)
                ),
                CHART_WIDTH,
                true,
            )
        })
        .collect();
    // The sizes' names are listed under the bars.
    let bars_height: f64 = labels
        .iter()
        .map(|l| l.len() as f64 * LINE_HEIGHT + BAR_HEIGHT + GAP)
        .sum();
    let size_lines = wrap(
        &format!(
            "Dashed lines, left to right: {}",
            sizes
                .iter()
                .map(|(size, bytes)| format!("{size} {:.0} GiB", *bytes as f64 / GIB))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        CHART_WIDTH,
        false,
    );
    let height = bars_height + LINE_HEIGHT * size_lines.len() as f64 + 6.0;
    let _ = writeln!(
        page,
        "<figure class=\"capacity\">\n<figcaption>Node memory needed at {} {}s, against the instance sizes of {}</figcaption>",
        chart.items,
        escape(item),
        escape(&chart.families.join(", "))
    );
    open_svg(
        page,
        "capacity-chart",
        height,
        &format!("data-bars=\"{}\"", chart.bars.len()),
    );
    for (size, bytes) in &sizes {
        let at = x(*bytes as f64);
        let _ = writeln!(
            page,
            "<line class=\"instance-size\" data-instance-size=\"{}\" data-value=\"{bytes}\" x1=\"{at:.1}\" y1=\"0\" x2=\"{at:.1}\" y2=\"{bars_height:.1}\" stroke=\"#888\" stroke-dasharray=\"4 3\"><title>{} ({})</title></line>",
            escape(size),
            escape(size),
            format_gib(*bytes),
        );
    }
    let mut y = 0.0;
    for (bar, label) in chart.bars.iter().zip(&labels) {
        y = text_lines(
            page,
            label,
            y,
            r#"class="capacity-label" font-weight="bold""#,
        );
        let _ = writeln!(
            page,
            "<rect class=\"capacity-bar\" data-engine=\"{}\" data-value=\"{}\" x=\"0\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{BAR_HEIGHT}\" fill=\"{}\"><title>{}</title></rect>",
            escape(&bar.engine),
            bar.required_node_memory,
            x(bar.required_node_memory as f64),
            colour_of(&bar.engine),
            escape(&label.join(" ")),
        );
        y += BAR_HEIGHT + GAP;
    }
    text_lines(
        page,
        &size_lines,
        bars_height,
        r##"class="instance-size-label" fill="#555""##,
    );
    page.push_str("</svg>\n</figure>\n");
    render_limits(page, &chart.limits, chart.items, item);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_drawn_up_to_the_first_that_holds_the_largest_need() {
        let drawn = sizes(40 * (1 << 30));
        let names: Vec<&str> = drawn.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(names, ["large", "xlarge", "2xlarge"]);
        let mut page = String::new();
        let chart = CapacityChart {
            items: 50_000_000,
            families: vec!["r8g".into()],
            bars: vec![CapacityBar {
                engine: "valkey-9.1".into(),
                required_node_memory: 40 << 30,
                smallest_instance_type: Some("r8g.2xlarge".into()),
            }],
            limits: Vec::new(),
        };
        render_capacity(&mut page, &chart, &[], "member");
        assert_eq!(page.matches("<line class=\"instance-size\"").count(), 3);
        assert!(page.contains("data-engine=\"valkey-9.1\" data-value=\"42949672960\""));
        assert!(page.contains("fits r8g.2xlarge"));
    }
}
