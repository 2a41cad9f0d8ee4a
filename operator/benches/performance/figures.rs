//! Paired measurements and how they are printed: a warm-up of each client thrown away, then
//! rounds with the order of the two alternating, medians with min and max, and every figure
//! beside its target and a verdict. A missed target is printed as such; nothing here fails.

use membench::report::table::Table;
use membench::stats::Spread;

use crate::clients::ClientRun;

/// The runs of two clients measured against each other.
pub struct Pair {
    pub peer: Vec<ClientRun>,
    pub ours: Vec<ClientRun>,
}

/// One warm-up run of each client, thrown away, then `rounds` rounds, the peer first in even
/// rounds and membench first in odd ones, so that neither always meets a server the other has
/// just warmed. `before_each` runs before every client run (a FLUSHALL).
pub fn alternate(
    rounds: usize,
    before_each: &mut dyn FnMut(),
    peer: &mut dyn FnMut() -> ClientRun,
    ours: &mut dyn FnMut() -> ClientRun,
) -> Pair {
    before_each();
    peer();
    before_each();
    ours();
    let mut pair = Pair {
        peer: Vec::new(),
        ours: Vec::new(),
    };
    for round in 0..rounds {
        if round % 2 == 0 {
            before_each();
            pair.peer.push(peer());
            before_each();
            pair.ours.push(ours());
        } else {
            before_each();
            pair.ours.push(ours());
            before_each();
            pair.peer.push(peer());
        }
    }
    pair
}

pub fn spread(runs: &[ClientRun], figure: fn(&ClientRun) -> f64) -> Spread {
    Spread::of(&runs.iter().map(figure).collect::<Vec<_>>()).expect("at least one round")
}

/// `median (min-max)` of a figure, scaled by `unit` (1e3 for thousands).
pub fn median_min_max(s: &Spread, unit: f64, decimals: usize) -> String {
    format!(
        "{:.*} ({:.*}-{:.*})",
        decimals,
        s.median / unit,
        decimals,
        s.min / unit,
        decimals,
        s.max / unit
    )
}

/// Which way a target points.
#[derive(Clone, Copy)]
pub enum Target {
    AtLeast(f64),
    AtMost(f64),
}

impl Target {
    pub fn describe(self) -> String {
        match self {
            Target::AtLeast(t) => format!(">= {t:.2}"),
            Target::AtMost(t) => format!("<= {t:.2}"),
        }
    }

    /// `met`, or `MISSED by x%`: how far the value is from the target, relative to it.
    pub fn verdict(self, value: f64) -> String {
        let (met, off) = match self {
            Target::AtLeast(t) => (value >= t, (t - value) / t),
            Target::AtMost(t) => (value <= t, (value - t) / t),
        };
        if met {
            "met".to_string()
        } else {
            format!("MISSED by {:.1}%", off * 100.0)
        }
    }
}

/// A table whose rows end in a ratio, its target and the verdict.
pub struct VerdictTable {
    table: Table,
    pub missed: Vec<String>,
}

impl VerdictTable {
    /// `columns` are the headers before the ratio, target and verdict columns.
    pub fn new(columns: &[&str], ratio: &str) -> Self {
        let mut headers = columns.to_vec();
        headers.extend([ratio, "target", "verdict"]);
        Self {
            table: Table::new(&headers),
            missed: Vec::new(),
        }
    }

    pub fn push(&mut self, mut cells: Vec<String>, ratio: f64, target: Target) {
        let verdict = target.verdict(ratio);
        if verdict != "met" {
            // Engine, command or members, and depth name the row.
            let row = cells.iter().take(3).cloned().collect::<Vec<_>>().join(" ");
            self.missed.push(format!("{row}: {ratio:.2}, {verdict}"));
        }
        cells.extend([format!("{ratio:.2}"), target.describe(), verdict]);
        self.table.push(cells);
    }

    pub fn render(&self) -> String {
        self.table.to_text()
    }
}
