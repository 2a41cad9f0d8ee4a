//! A progress bar on standard error while an engine loads (hidden when stderr is not a
//! terminal, so logs and JSON output stay clean).

use indicatif::{ProgressBar, ProgressStyle};

use crate::client::measure::LoadProgress;

/// Updates the bar at most this often (in commands), so drawing never slows the load.
const UPDATE_EVERY: u64 = 1 << 16;

pub struct ProgressReporter {
    bar: ProgressBar,
    repetition: u32,
    last_drawn: u64,
}

impl ProgressReporter {
    pub fn new(label: &str) -> Self {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} {msg} [{bar:30}] {human_pos}/{human_len} {per_sec} eta {eta}",
            )
            .expect("the template is valid")
            .progress_chars("=> "),
        );
        bar.set_prefix(label.to_string());
        Self {
            bar,
            repetition: 0,
            last_drawn: 0,
        }
    }

    pub fn update(&mut self, p: LoadProgress) {
        if p.repetition != self.repetition {
            self.repetition = p.repetition;
            self.bar.reset();
            self.bar.set_length(p.commands_total);
            self.bar
                .set_message(format!("rep {}/{}", p.repetition, p.repetitions));
            self.last_drawn = 0;
        }
        if p.commands_done - self.last_drawn >= UPDATE_EVERY || p.commands_done == p.commands_total
        {
            self.bar.set_position(p.commands_done);
            self.last_drawn = p.commands_done;
        }
    }

    /// Starts over for the next engine.
    pub fn relabel(&mut self, label: &str) {
        self.bar.set_prefix(label.to_string());
        self.repetition = 0;
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
