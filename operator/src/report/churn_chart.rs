//! The page's churn chart (`spec.churn`): used_memory_rss after the load, after each round and
//! after defragmentation, a line per engine in its bar's colour, from the first repetition.
//! What a reader sees: which engine keeps the memory its deleted data held, and which gives it
//! back.
//!
//! Elements carry class names and `data-` attributes (`polyline.churn-line[data-engine]`,
//! `data-points`, `text.churn-stage`) so a test can read them back from the DOM.

use std::fmt::Write as _;

use crate::client::phases::churn::ChurnReport;
use crate::crd::ChurnStatus;
use crate::report::table::format_bytes;

use super::charts::{Bar, CHART_WIDTH, FONT_SIZE, colours, escape, open_svg, tick_step};

/// One engine's RSS at each stage of its first repetition.
#[derive(Clone, Debug, PartialEq)]
pub struct ChurnLine {
    pub engine: String,
    /// (stage, used_memory_rss): `load`, `round 1`, …, `defrag`.
    pub points: Vec<(String, u64)>,
}

impl ChurnLine {
    /// RSS after the load, after each round (its number, its RSS) and after defragmentation.
    fn new(
        engine: &str,
        loaded_rss: u64,
        rounds: impl Iterator<Item = (u32, u64)>,
        defragmented: Option<u64>,
    ) -> Self {
        let mut points = vec![("load".to_string(), loaded_rss)];
        points.extend(rounds.map(|(round, rss)| (format!("round {round}"), rss)));
        points.extend(defragmented.map(|rss| ("defrag".to_string(), rss)));
        Self {
            engine: engine.into(),
            points,
        }
    }

    /// From a local report's first repetition (its RSS after the load, then the churn's).
    pub fn of_report(engine: &str, loaded_rss: u64, churn: &ChurnReport) -> Self {
        Self::new(
            engine,
            loaded_rss,
            churn.rounds.iter().map(|r| (r.round, r.used_memory_rss)),
            churn.defrag.as_ref().map(|d| d.rss_after),
        )
    }

    /// The same from a status's first repetition.
    pub fn of_status(engine: &str, loaded_rss: u64, churn: &ChurnStatus) -> Self {
        Self::new(
            engine,
            loaded_rss,
            churn.rounds.iter().map(|r| (r.round, r.used_memory_rss)),
            churn.defragmented_rss(),
        )
    }
}

/// Draws the lines (nothing when no engine churned).
pub fn render_churn(page: &mut String, lines: &[ChurnLine], bars: &[Bar]) {
    let Some(stages) = lines.iter().map(|l| l.points.len()).max() else {
        return;
    };
    const TOP: f64 = 12.0;
    const PLOT_HEIGHT: f64 = 220.0;
    const LEFT: f64 = 84.0;
    const RIGHT: f64 = 36.0;
    let max_rss = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let y_step = tick_step(max_rss, 5.0);
    let y_max = (max_rss / y_step).ceil() * y_step;
    let plot_width = CHART_WIDTH - LEFT - RIGHT;
    let x = |stage: usize| LEFT + stage as f64 / (stages.max(2) - 1) as f64 * plot_width;
    let y = |rss: f64| TOP + PLOT_HEIGHT - rss / y_max * PLOT_HEIGHT;
    let bottom = TOP + PLOT_HEIGHT;
    let colours = colours(bars);
    let colour_of = |engine: &str| {
        bars.iter()
            .position(|b| b.engine == engine)
            .map_or("#7f7f7f", |i| colours[i])
    };
    page.push_str("<figure class=\"churn\">\n<figcaption>used_memory_rss after the load, each churn round and defragmentation (first repetition)</figcaption>\n");
    open_svg(
        page,
        "churn-chart",
        bottom + 30.0,
        &format!("data-lines=\"{}\"", lines.len()),
    );
    let mut tick = 0.0;
    while tick <= y_max + y_step / 2.0 {
        let _ = writeln!(
            page,
            "<line class=\"grid\" x1=\"{LEFT:.1}\" y1=\"{at:.1}\" x2=\"{:.1}\" y2=\"{at:.1}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + plot_width,
            LEFT - 6.0,
            (y(tick) + 5.0).max(FONT_SIZE),
            escape(&format_bytes(tick)),
            at = y(tick),
        );
        tick += y_step;
    }
    let longest = lines
        .iter()
        .max_by_key(|l| l.points.len())
        .expect("lines is not empty");
    for (stage, (name, _)) in longest.points.iter().enumerate() {
        let _ = writeln!(
            page,
            "<text class=\"churn-stage\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x(stage),
            bottom + 20.0,
            escape(name)
        );
    }
    for line in lines {
        let points: Vec<String> = line
            .points
            .iter()
            .enumerate()
            .map(|(stage, (_, rss))| format!("{:.1},{:.1}", x(stage), y(*rss as f64)))
            .collect();
        let _ = writeln!(
            page,
            "<polyline class=\"churn-line\" data-engine=\"{}\" data-points=\"{}\" stroke=\"{}\" fill=\"none\" points=\"{}\"><title>{}</title></polyline>",
            escape(&line.engine),
            line.points.len(),
            colour_of(&line.engine),
            points.join(" "),
            escape(&line.engine),
        );
    }
    page.push_str("</svg>\n<div class=\"legend\">");
    for line in lines {
        let _ = write!(
            page,
            "<span><i style=\"background:{}\"></i>{}</span>",
            colour_of(&line.engine),
            escape(&line.engine)
        );
    }
    page.push_str("</div>\n</figure>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_per_engine_with_a_point_per_stage() {
        let lines = vec![
            ChurnLine {
                engine: "valkey-9.1".into(),
                points: vec![
                    ("load".into(), 180_000_000),
                    ("round 1".into(), 221_000_000),
                    ("defrag".into(), 95_000_000),
                ],
            },
            ChurnLine {
                engine: "dragonfly-1.40".into(),
                points: vec![
                    ("load".into(), 168_000_000),
                    ("round 1".into(), 208_000_000),
                ],
            },
        ];
        let mut page = String::new();
        render_churn(&mut page, &lines, &[]);
        assert!(page.contains("data-lines=\"2\""), "{page}");
        assert!(page.contains("data-engine=\"valkey-9.1\" data-points=\"3\""));
        assert!(page.contains("data-engine=\"dragonfly-1.40\" data-points=\"2\""));
        assert!(page.contains(">defrag</text>"));
        let mut empty = String::new();
        render_churn(&mut empty, &[], &[]);
        assert!(empty.is_empty());
    }
}
