//! What a phase adds to the reports beyond the comparison's columns: a table of its own under
//! an engine's repetitions (`membench load`), and a chart on the HTML page of each engine's
//! memory at the phase's stages. A phase's folder implements [`PhaseFigures`] and
//! [`FIGURES`](super::FIGURES) lists it; the reports read the phases through the trait and
//! never name one.

use crate::client::measurement::measured::{BenchmarkReport, RepetitionResult};
use crate::crd::RepetitionStatus;
use crate::table::Table;

/// A chart of memory at a phase's stages, a line per engine. Its elements carry the class
/// names `figure.<class>`, `svg.<class>-chart`, `polyline.<class>-line[data-engine]` and
/// `text.<class>-stage`, so a test can read them back from the page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageChart {
    /// The class name the chart's elements are named by.
    pub class: &'static str,
    /// What the chart shows, above it.
    pub caption: &'static str,
}

/// One engine's line on a [`StageChart`]: each stage's name and the bytes measured after it.
#[derive(Clone, Debug, PartialEq)]
pub struct StageLine {
    pub engine: String,
    pub points: Vec<(String, u64)>,
}

/// What one phase adds to the reports. Every method has a default that adds nothing, so a
/// phase writes only what it shows.
pub trait PhaseFigures: Sync {
    /// Its table of one engine's repetitions, with the heading printed above it; `None` when
    /// the run did not measure the phase.
    fn table(&self, _report: &BenchmarkReport) -> Option<(String, Table)> {
        None
    }

    /// Its chart on the HTML page, when it draws one.
    fn chart(&self) -> Option<StageChart> {
        None
    }

    /// The chart's stages in a repetition of a local run; `None` when it did not run the phase.
    fn stages_of_repetition(&self, _repetition: &RepetitionResult) -> Option<Vec<(String, u64)>> {
        None
    }

    /// The same from a repetition in a benchmark's status (`membench report`).
    fn stages_of_status(&self, _repetition: &RepetitionStatus) -> Option<Vec<(String, u64)>> {
        None
    }
}
