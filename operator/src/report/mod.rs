//! Renderings of results: the published-style tables (`table`), the comparison of finished
//! benchmarks read from their status in the cluster (`cluster`), the self-contained HTML page
//! (`html`), what a local run measured (`local_run`) and the published tables that users quote
//! (`published`).
//!
//! It may use `client` (the measured results), `validation`, `crd` and the shared leaves;
//! never the controller or the local runner, which call it.

pub mod cluster;
pub mod html;
pub mod local_run;
pub mod published;
pub mod table;

// Temporary: the old path `membench::report::*` of the tables, until the tests, benches and
// the command line name `report::table`.
pub use table::*;
