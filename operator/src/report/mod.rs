//! Renderings of results: the published-style tables (`table`), the capacity plan (`capacity`, and its chart
//! `capacity_chart`), every figure as one CSV table
//! of raw numbers (`csv`), the comparison of finished benchmarks read from their status in the
//! cluster (`cluster`), the self-contained HTML page (`html`) with its SVG charts (`charts`),
//! what a local run measured (`local_run`) and the published tables that users quote
//! (`published`), a sharded cluster's shards (`shards`), the peak phases in a line (`peak`), and a phase's chart of its stages (`stage_chart`, what `client::phases::PhaseFigures` gives).
//!
//! It may use the parts below it (`validation`, `client` for the measured results, `crd` and
//! the leaves); never the controller or the local runner, which call it, nor the metrics, its
//! peer (docs/src/contributing/architecture.md, `layout_tests.rs`).

pub mod capacity;
pub mod capacity_chart;
pub mod charts;
pub mod cluster;
pub mod csv;
pub mod html;
pub mod limit_chart;
pub mod local_run;
pub mod peak;
pub mod published;
pub mod shards;
pub mod stage_chart;
pub mod table;
