//! A progress bar on standard error while an engine loads (hidden when stderr is not a
//! terminal, so logs and JSON output stay clean). The bar appears with the first progress of a
//! repetition (before it, an engine starting or a flush is not 0 of 0 done); counts have
//! thousands separators and the rate three significant figures.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use crate::client::measurement::measure::LoadProgress;

/// Updates the bar at most this often (in commands), so drawing never slows the load.
const UPDATE_EVERY: u64 = 1 << 16;

pub struct ProgressReporter {
    bar: ProgressBar,
    repetition: u32,
    last_drawn: u64,
    /// The first report of the repetition under way and its count, for the rate.
    started: (Instant, u64),
}

/// Before the first progress of an engine: its name, and what it waits for.
fn waiting_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix} {msg}").expect("the template is valid")
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix} {msg} [{bar:30}] eta {eta}")
        .expect("the template is valid")
        .progress_chars("=> ")
}

impl ProgressReporter {
    pub fn new(label: &str) -> Self {
        let bar = ProgressBar::new(0);
        bar.set_style(waiting_style());
        bar.set_prefix(label.to_string());
        bar.set_message("starting");
        Self {
            bar,
            repetition: 0,
            last_drawn: 0,
            started: (Instant::now(), 0),
        }
    }

    pub fn update(&mut self, p: LoadProgress) {
        if p.repetition != self.repetition {
            let first = self.repetition == 0;
            self.repetition = p.repetition;
            self.bar.reset();
            self.bar.set_length(p.commands_total);
            self.bar.set_position(p.commands_done);
            self.bar.set_message(progress_message(&p, None));
            // The bar appears only now that it has a length: before, 0 of 0 would draw full.
            if first {
                self.bar.set_style(bar_style());
            }
            self.last_drawn = p.commands_done;
            // The first report comes after the first batches: the rate counts from it.
            self.started = (Instant::now(), p.commands_done);
            return;
        }
        if p.commands_done - self.last_drawn >= UPDATE_EVERY || p.commands_done == p.commands_total
        {
            let (at, done_then) = self.started;
            let rate = (p.commands_done - done_then) as f64 / at.elapsed().as_secs_f64();
            self.bar.set_position(p.commands_done);
            self.bar
                .set_message(progress_message(&p, Some(rate).filter(|r| r.is_finite())));
            self.last_drawn = p.commands_done;
        }
    }

    /// Starts over for the next engine.
    pub fn relabel(&mut self, label: &str) {
        self.bar.set_style(waiting_style());
        self.bar.set_prefix(label.to_string());
        self.bar.set_message("starting");
        self.repetition = 0;
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// `rep 2/10 1,234,567/2,000,000 1.23M/s`: where the repetition stands and how fast it goes
/// (once there is a rate to tell).
fn progress_message(p: &LoadProgress, rate: Option<f64>) -> String {
    let rate = rate
        .map(|r| format!(" {}", per_second(r)))
        .unwrap_or_default();
    format!(
        "rep {}/{} {}/{}{rate}",
        p.repetition,
        p.repetitions,
        with_separators(p.commands_done),
        with_separators(p.commands_total)
    )
}

/// `1234567` as `1,234,567`.
pub fn with_separators(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A rate to three significant figures: `842/s`, `84.2k/s`, `1.23M/s`.
pub fn per_second(rate: f64) -> String {
    let (value, unit) = if rate >= 1e6 {
        (rate / 1e6, "M")
    } else if rate >= 1e3 {
        (rate / 1e3, "k")
    } else {
        (rate, "")
    };
    let decimals = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.decimals$}{unit}/s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(with_separators(0), "0");
        assert_eq!(with_separators(999), "999");
        assert_eq!(with_separators(1_000), "1,000");
        assert_eq!(with_separators(1_234_567), "1,234,567");
    }

    #[test]
    fn rates_have_three_significant_figures() {
        assert_eq!(per_second(842.0), "842/s");
        assert_eq!(per_second(84_213.456), "84.2k/s");
        assert_eq!(per_second(1_234_567.891), "1.23M/s");
        assert_eq!(per_second(5.5), "5.50/s");
    }

    #[test]
    fn the_message_says_where_the_repetition_stands() {
        let p = LoadProgress {
            repetition: 2,
            repetitions: 10,
            commands_done: 1_000_000,
            commands_total: 2_000_000,
        };
        assert_eq!(
            progress_message(&p, Some(500_000.0)),
            "rep 2/10 1,000,000/2,000,000 500k/s"
        );
        assert_eq!(progress_message(&p, None), "rep 2/10 1,000,000/2,000,000");
    }
}
