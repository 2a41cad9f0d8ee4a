//! The local runner, `membench run` and `membench engines`: each engine of a spec started as a
//! local process, measured and stopped (`runner`), and the engine store's builds found for it
//! (`engine_store`).
//!
//! It may use the parts below it (`report`, `validation`, `client`, `auth`, `crd` and the
//! leaves); never the controller, its peer, and nothing below it imports it
//! (docs/src/contributing/architecture.md, `layout_tests.rs`).

pub mod engine_store;
pub mod runner;
