//! The local runner, `membench run` and `membench engines`: each engine of a spec started as a
//! local process, measured and stopped (`runner`), and the engine store's builds found for it
//! (`engine_store`).
//!
//! It may use `report`, `client`, `validation`, `crd` and the shared leaves; never the
//! controller, and nothing below it imports it.

pub mod engine_store;
pub mod runner;

// Temporary: the old path `membench::local::*` of the runner, until the tests, benches and the
// command line name `local::runner`.
pub use runner::*;
// Temporary: the old path of reading specs, until the command line and the tests name
// `validation::spec_file`.
pub use crate::validation::spec_file::read_specs;
