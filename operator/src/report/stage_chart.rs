//! A phase's chart on the page (`client::phases::PhaseFigures`): bytes after each of the
//! phase's stages, a line per engine in its bar's colour, from the first repetition. The phase
//! names the stages and the chart's class; this draws any of them the same way.

use std::fmt::Write as _;

use super::charts::{
    Bar, CHART_WIDTH, bytes_grid, close_line_chart, colours, escape, open_svg, tick_step,
};
use crate::client::phases::{StageChart, StageLine};

/// Draws a phase's chart, a line per engine in its bar's colour (nothing when no engine ran the
/// phase).
pub fn render_stages(page: &mut String, chart: &StageChart, lines: &[StageLine], bars: &[Bar]) {
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
    let class = chart.class;
    let _ = writeln!(
        page,
        "<figure class=\"{}\">\n<figcaption>{}</figcaption>",
        escape(class),
        escape(chart.caption)
    );
    open_svg(
        page,
        &format!("{class}-chart"),
        bottom + 30.0,
        &format!("data-lines=\"{}\"", lines.len()),
    );
    bytes_grid(page, LEFT, plot_width, y_max, y_step, &y);
    let longest = lines
        .iter()
        .max_by_key(|l| l.points.len())
        .expect("lines is not empty");
    for (stage, (name, _)) in longest.points.iter().enumerate() {
        let _ = writeln!(
            page,
            "<text class=\"{}-stage\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            escape(class),
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
            "<polyline class=\"stage-line {}-line\" data-engine=\"{}\" data-points=\"{}\" stroke=\"{}\" fill=\"none\" points=\"{}\"><title>{}</title></polyline>",
            escape(class),
            escape(&line.engine),
            line.points.len(),
            colour_of(&line.engine),
            points.join(" "),
            escape(&line.engine),
        );
    }
    close_line_chart(page, lines.iter().map(|l| l.engine.as_str()), colour_of);
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHART: StageChart = StageChart {
        class: "churn",
        caption: "used_memory_rss after each stage",
    };

    #[test]
    fn a_line_per_engine_with_a_point_per_stage() {
        let lines = vec![
            StageLine {
                engine: "valkey-9.1".into(),
                points: vec![
                    ("load".into(), 180_000_000),
                    ("round 1".into(), 221_000_000),
                    ("defrag".into(), 95_000_000),
                ],
            },
            StageLine {
                engine: "dragonfly-1.40".into(),
                points: vec![
                    ("load".into(), 168_000_000),
                    ("round 1".into(), 208_000_000),
                ],
            },
        ];
        let mut page = String::new();
        render_stages(&mut page, &CHART, &lines, &[]);
        assert!(page.starts_with("<figure class=\"churn\">"), "{page}");
        assert!(page.contains("<figcaption>used_memory_rss after each stage</figcaption>"));
        assert!(page.contains("class=\"chart churn-chart\""), "{page}");
        assert!(page.contains("data-lines=\"2\""), "{page}");
        assert!(page.contains(
            "class=\"stage-line churn-line\" data-engine=\"valkey-9.1\" data-points=\"3\""
        ));
        assert!(page.contains("data-engine=\"dragonfly-1.40\" data-points=\"2\""));
        assert!(page.contains("<text class=\"churn-stage\""), "{page}");
        assert!(page.contains(">defrag</text>"));
        let mut empty = String::new();
        render_stages(&mut empty, &CHART, &[], &[]);
        assert!(empty.is_empty());
    }
}
