//! The page's two charts as inline SVG: bytes per item per engine as bars (the published
//! figure marked on them), and used_memory during the load as a line per engine. Each is drawn
//! in a coordinate system of its own (`viewBox`) [`CHART_WIDTH`] units wide and scales with the
//! page down to a phone's width (CSS `width: 100%` up to `max-width`), so bar lengths stay in
//! proportion at any width. Labels are whole, wrapped onto as many lines as they need within
//! the chart's width, never shortened; a bar's label sits on its own lines above it, so the
//! bars can use the chart's whole width.
//!
//! An engine has the same colour wherever it is drawn: by its kind (Redis red, Valkey blue,
//! Dragonfly green), in lighter and darker shades for a second or third entry of the same
//! kind, never by its position in the spec.
//!
//! The elements carry class names and `data-` attributes (`rect.bar[data-engine]`,
//! `line.published-mark`, `polyline.growth-line`) so a test can read them back from the DOM.

use std::fmt::Write as _;

use crate::client::measurement::measure::MemorySample;
use crate::report::published::thousands;
use crate::report::table::format_bytes;

/// Width of each chart's coordinate system, and the most it is drawn wide (CSS px).
pub const CHART_WIDTH: f64 = 560.0;
/// Size of chart text in chart units (scaled with the chart: about 10 px on a 420 px phone).
pub const FONT_SIZE: f64 = 14.0;
/// Height of a line of chart text.
pub(super) const LINE_HEIGHT: f64 = 18.0;

/// One engine's bar.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// The entry's name (`engines[].name`, or `<engine>-<version>`).
    pub engine: String,
    /// The engine's kind (`redis`, `valkey`, `dragonfly`), which picks its colour.
    pub kind: String,
    /// Engine, version and allocator, under the name.
    pub detail: String,
    /// Median bytes per item; `None` when the engine has no result.
    pub bytes_per_item: Option<f64>,
    /// The published figure of the engine's row, and which release it was published for.
    pub published: Option<PublishedMark>,
}

/// A published figure marked on a bar.
#[derive(Clone, Debug, PartialEq)]
pub struct PublishedMark {
    pub bytes_per_item: f64,
    /// The release the table measured (`8.1.9`), or empty when it names none.
    pub version: String,
}

/// One engine's growth curve: used_memory during the first repetition's load, starting from
/// the empty server's (at 0 items) when that is known.
#[derive(Clone, Debug, PartialEq)]
pub struct Curve {
    pub engine: String,
    pub points: Vec<MemorySample>,
}

impl Curve {
    pub fn new(engine: &str, baseline: Option<u64>, samples: Vec<MemorySample>) -> Self {
        let empty = baseline.map(|used_memory| MemorySample {
            items: 0,
            used_memory,
        });
        Self {
            engine: engine.to_string(),
            points: empty.into_iter().chain(samples).collect(),
        }
    }
}

/// Shades of each kind's colour, readable on white: the first entry of a kind gets the first.
const REDIS: [&str; 3] = ["#d62728", "#8c1d1d", "#f08080"];
const VALKEY: [&str; 3] = ["#1f5fb4", "#0b2e66", "#6fa0dc"];
const DRAGONFLY: [&str; 3] = ["#2a9d3a", "#15602a", "#7bc67e"];
const OTHER: [&str; 3] = ["#7f7f7f", "#4d4d4d", "#b0b0b0"];

/// Each bar's colour: its kind's, in the shade of its place among the entries of that kind.
pub fn colours(bars: &[Bar]) -> Vec<&'static str> {
    bars.iter()
        .enumerate()
        .map(|(i, bar)| {
            let shades = match bar.kind.as_str() {
                "redis" => &REDIS,
                "valkey" => &VALKEY,
                "dragonfly" => &DRAGONFLY,
                _ => &OTHER,
            };
            let same_kind_before = bars[..i].iter().filter(|b| b.kind == bar.kind).count();
            shades[same_kind_before % shades.len()]
        })
        .collect()
}

/// Text made safe for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// How wide `text` is drawn at most, in chart units: 0.64 of the font size a character,
/// generous for the digits and letters of sans-serif fonts.
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * FONT_SIZE * 0.64
}

/// `text` broken at spaces into lines of at most `width` chart units, estimating each
/// character at 0.62 of the font size (0.68 in bold): generous for sans-serif fonts, so a
/// line never runs past the chart. A word longer than a line is broken where it must be.
pub(super) fn wrap(text: &str, width: f64, bold: bool) -> Vec<String> {
    let per_char = FONT_SIZE * if bold { 0.68 } else { 0.62 };
    let max_chars = ((width / per_char).floor() as usize).max(8);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > max_chars {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            lines.push(word.drain(..max_chars).collect());
        }
        let word: String = word.into_iter().collect();
        let needed = line.chars().count() + usize::from(!line.is_empty()) + word.chars().count();
        if needed > max_chars && !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// A round step for axis ticks: 1, 2, 2.5 or 5 times a power of ten, giving about `ticks`
/// ticks.
pub fn tick_step(max: f64, ticks: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let raw = max / ticks;
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power)
}

pub(super) fn format_tick(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

/// The opening tag of a chart that scales with the page.
pub(super) fn open_svg(page: &mut String, class: &str, height: f64, data: &str) {
    let _ = writeln!(
        page,
        "<svg class=\"chart {class}\" role=\"img\" viewBox=\"0 0 {CHART_WIDTH} {height:.0}\" width=\"{CHART_WIDTH}\" height=\"{height:.0}\" {data}>"
    );
}

/// Writes `lines` as text from the chart's left edge, one under the other from `top`, each
/// `<text>` with `attributes`; returns where the next line would start.
pub(super) fn text_lines(page: &mut String, lines: &[String], top: f64, attributes: &str) -> f64 {
    let mut y = top;
    for line in lines {
        y += LINE_HEIGHT;
        let _ = writeln!(
            page,
            "<text {attributes} x=\"0\" y=\"{:.1}\">{}</text>",
            y - 4.0,
            escape(line)
        );
    }
    y
}

/// The bar chart of bytes per item, with the published figures marked.
pub fn render_bars(page: &mut String, bars: &[Bar], item: &str) {
    const BAR_HEIGHT: f64 = 16.0;
    const GAP: f64 = 14.0;
    const AXIS: f64 = 24.0;
    // The bars' scale leaves room at the right for the last tick's label.
    let scale_width = CHART_WIDTH - 20.0;
    let max = bars
        .iter()
        .flat_map(|b| {
            [
                b.bytes_per_item,
                b.published.as_ref().map(|p| p.bytes_per_item),
            ]
        })
        .flatten()
        .fold(0.0f64, f64::max);
    let step = tick_step(max, 5.0);
    let axis_max = (max / step).ceil().max(1.0) * step;
    let x = |value: f64| value / axis_max * scale_width;
    let colours = colours(bars);

    // Each bar's label lines: the name with its figure, then engine, version and allocator.
    let labels: Vec<(Vec<String>, Vec<String>)> = bars
        .iter()
        .map(|bar| {
            let mut heading = format!("{}: ", bar.engine);
            match bar.bytes_per_item {
                Some(b) => {
                    let _ = write!(heading, "{b:.2} B/{item}");
                }
                None => heading.push_str("no result"),
            }
            if let Some(mark) = &bar.published {
                let _ = write!(heading, " (published {:.2})", mark.bytes_per_item);
            }
            (
                wrap(&heading, CHART_WIDTH, true),
                wrap(&bar.detail, CHART_WIDTH, false),
            )
        })
        .collect();
    let row_height = |(heading, detail): &(Vec<String>, Vec<String>)| {
        (heading.len() + detail.len()) as f64 * LINE_HEIGHT + BAR_HEIGHT + GAP
    };
    let bars_height: f64 = labels.iter().map(row_height).sum();
    let height = bars_height + AXIS;
    let _ = writeln!(
        page,
        "<figure class=\"bytes-per-item\">\n<figcaption>Bytes per {} (median over the repetitions)</figcaption>",
        escape(item)
    );
    open_svg(
        page,
        "bar-chart",
        height,
        &format!("data-bars=\"{}\"", bars.len()),
    );
    let mut tick = 0.0;
    while tick <= axis_max + step / 2.0 {
        let at = x(tick);
        let anchor = if tick == 0.0 { "start" } else { "middle" };
        let _ = writeln!(
            page,
            "<line class=\"grid\" x1=\"{at:.1}\" y1=\"0\" x2=\"{at:.1}\" y2=\"{bars_height:.1}\"/><text x=\"{at:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>",
            bars_height + 16.0,
            format_tick(tick),
        );
        tick += step;
    }
    let mut y = 0.0;
    for ((bar, label), colour) in bars.iter().zip(&labels).zip(&colours) {
        let (heading, detail) = label;
        y = text_lines(page, heading, y, r#"class="bar-label" font-weight="bold""#);
        y = text_lines(page, detail, y, r##"class="bar-detail" fill="#555""##);
        let (width, class) = match bar.bytes_per_item {
            Some(b) => (x(b), "bar"),
            None => (0.0, "bar bar-missing"),
        };
        let _ = writeln!(
            page,
            "<rect class=\"{class}\" data-engine=\"{}\" data-value=\"{}\" x=\"0\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"{BAR_HEIGHT}\" fill=\"{colour}\"><title>{}</title></rect>",
            escape(&bar.engine),
            bar.bytes_per_item.map_or(String::new(), |b| format!("{b}")),
            escape(&heading.join(" ")),
        );
        if let Some(mark) = &bar.published {
            let at = x(mark.bytes_per_item);
            let release = if mark.version.is_empty() {
                String::new()
            } else {
                format!(" ({})", mark.version)
            };
            let _ = writeln!(
                page,
                "<line class=\"published-mark\" data-engine=\"{}\" data-value=\"{}\" x1=\"{at:.1}\" y1=\"{:.1}\" x2=\"{at:.1}\" y2=\"{:.1}\"><title>published{}: {:.2}</title></line>",
                escape(&bar.engine),
                mark.bytes_per_item,
                y - 3.0,
                y + BAR_HEIGHT + 3.0,
                escape(&release),
                mark.bytes_per_item,
            );
        }
        y += BAR_HEIGHT + GAP;
    }
    page.push_str("</svg>\n");
    if bars.iter().any(|b| b.published.is_some()) {
        page.push_str("<div class=\"legend\"><span><i style=\"background:#000;width:3px\"></i>published figure of the engine's release line</span></div>\n");
    }
    page.push_str("</figure>\n");
}

/// The growth chart: used_memory against items loaded, a line per engine in its bar's colour.
pub fn render_curves(page: &mut String, curves: &[Curve], bars: &[Bar], item: &str) {
    if curves.is_empty() {
        let _ = writeln!(
            page,
            "<p class=\"no-growth-curve\">No growth curve: the load read no used_memory (a sorted set with <code>sampleEvery: 0</code>, or a result from before every workload sampled).</p>"
        );
        return;
    }
    const TOP: f64 = 12.0;
    const PLOT_HEIGHT: f64 = 260.0;
    let max_items = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.items))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let max_used = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.used_memory))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let x_step = tick_step(max_items, 4.0);
    let y_step = tick_step(max_used, 5.0);
    let x_max = (max_items / x_step).ceil() * x_step;
    let y_max = (max_used / y_step).ceil() * y_step;
    // Room for the widest used_memory label at the left, half the last count at the right.
    let widest_y = (0..=(y_max / y_step).round() as u64)
        .map(|k| text_width(&format_bytes(k as f64 * y_step)))
        .fold(0.0, f64::max);
    let left = widest_y + 10.0;
    let right = text_width(&thousands(x_max as u64)) / 2.0 + 4.0;
    let plot_width = CHART_WIDTH - left - right;
    let x = |items: f64| left + items / x_max * plot_width;
    let y = |used: f64| TOP + PLOT_HEIGHT - used / y_max * PLOT_HEIGHT;
    let height = TOP + PLOT_HEIGHT + 48.0;
    let colours = colours(bars);
    let colour_of = |engine: &str| {
        bars.iter()
            .position(|b| b.engine == engine)
            .map_or(OTHER[0], |i| colours[i])
    };
    page.push_str("<figure class=\"growth\">\n<figcaption>used_memory during the load (first repetition)</figcaption>\n");
    open_svg(
        page,
        "growth-chart",
        height,
        &format!("data-curves=\"{}\"", curves.len()),
    );
    let bottom = TOP + PLOT_HEIGHT;
    bytes_grid(page, left, plot_width, y_max, y_step, &y);
    let mut tick = 0.0;
    while tick <= x_max + x_step / 2.0 {
        let _ = writeln!(
            page,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x(tick),
            bottom + 18.0,
            thousands(tick as u64),
        );
        tick += x_step;
    }
    let _ = write!(
        page,
        "<line class=\"axis\" x1=\"{left:.1}\" y1=\"{bottom}\" x2=\"{:.1}\" y2=\"{bottom}\"/><line class=\"axis\" x1=\"{left:.1}\" y1=\"{TOP}\" x2=\"{left:.1}\" y2=\"{bottom}\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}s loaded</text>\n",
        left + plot_width,
        left + plot_width / 2.0,
        bottom + 40.0,
        escape(item),
    );
    for curve in curves {
        let points: Vec<String> = curve
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", x(p.items as f64), y(p.used_memory as f64)))
            .collect();
        let _ = writeln!(
            page,
            "<polyline class=\"growth-line\" data-engine=\"{}\" data-points=\"{}\" stroke=\"{}\" points=\"{}\"><title>{}</title></polyline>",
            escape(&curve.engine),
            curve.points.len(),
            colour_of(&curve.engine),
            points.join(" "),
            escape(&curve.engine),
        );
    }
    close_line_chart(page, curves.iter().map(|c| c.engine.as_str()), colour_of);
}

/// Draws a chart's horizontal grid: a line and a label in bytes every `y_step` from 0 to
/// `y_max`, across `width` from `left`, at the heights `y` gives.
pub(super) fn bytes_grid(
    page: &mut String,
    left: f64,
    width: f64,
    y_max: f64,
    y_step: f64,
    y: &dyn Fn(f64) -> f64,
) {
    let mut tick = 0.0;
    while tick <= y_max + y_step / 2.0 {
        let _ = writeln!(
            page,
            "<line class=\"grid\" x1=\"{left:.1}\" y1=\"{at:.1}\" x2=\"{:.1}\" y2=\"{at:.1}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + width,
            left - 6.0,
            (y(tick) + 5.0).max(FONT_SIZE),
            escape(&format_bytes(tick)),
            at = y(tick),
        );
        tick += y_step;
    }
}

/// Ends a chart of a line per engine: closes its SVG, writes the legend (each engine in its
/// line's colour) and closes its figure.
pub(super) fn close_line_chart<'e>(
    page: &mut String,
    engines: impl Iterator<Item = &'e str>,
    colour_of: impl Fn(&str) -> &'static str,
) {
    page.push_str("</svg>\n<div class=\"legend\">");
    for engine in engines {
        let _ = write!(
            page,
            "<span><i style=\"background:{}\"></i>{}</span>",
            colour_of(engine),
            escape(engine)
        );
    }
    page.push_str("</div>\n</figure>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(engine: &str, kind: &str) -> Bar {
        Bar {
            engine: engine.into(),
            kind: kind.into(),
            detail: String::new(),
            bytes_per_item: Some(1.0),
            published: None,
        }
    }

    #[test]
    fn an_engine_keeps_its_colour_wherever_it_stands() {
        let redis = colours(&[bar("redis-8.2", "redis"), bar("valkey-9.1", "valkey")])[0];
        let moved = colours(&[
            bar("dragonfly-1.40", "dragonfly"),
            bar("valkey-9.1", "valkey"),
            bar("redis-8.2", "redis"),
        ]);
        assert_eq!(moved[2], redis);
        assert_eq!(moved[1], VALKEY[0]);
        // A second Redis is a shade of Redis's colour, not another engine's.
        let two = colours(&[bar("redis-7.0", "redis"), bar("redis-8.2", "redis")]);
        assert_eq!(two, [REDIS[0], REDIS[1]]);
    }

    #[test]
    fn labels_wrap_whole_within_the_chart() {
        let detail = "dragonfly 1.40.0-87-gf8eca6d0b, (not reported)";
        let lines = wrap(detail, 200.0, false);
        assert!(lines.len() > 1, "{lines:?}");
        assert_eq!(lines.join(" "), detail);
        assert!(
            lines
                .iter()
                .all(|l| l.chars().count() as f64 * FONT_SIZE * 0.62 <= 200.0)
        );
        assert_eq!(wrap("short", CHART_WIDTH, true), ["short"]);
    }

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(tick_step(96.6, 5.0), 20.0);
        assert_eq!(tick_step(4.83e9, 5.0), 1e9);
        assert_eq!(tick_step(50_000_000.0, 5.0), 1e7);
        // 102.48 gets an axis to 125, not 150.
        assert_eq!(tick_step(102.48, 5.0), 25.0);
    }
}
