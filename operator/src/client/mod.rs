//! The benchmark client's load path, the code that also runs inside the client pod
//! (`membench load`). It is five groups, each a folder, by rank (lowest first):
//!
//! - `connection` (0): how the client talks to an engine: the wire protocol, the control
//!   connection, a sharded cluster's join and routing, and the stop flag every batch loop
//!   consults.
//! - `workloads` (1): what the client writes: the workloads, their commands, the seeded draws,
//!   keys with a TTL, a profile's rebuild and an RDB file's keys.
//! - `measurement` (2): how a run is measured: the protocol of every repetition, what it
//!   records, the run's plan and options, and the memory a phase reads.
//! - `phases` (2): the measurements a repetition runs after its readings, a folder each.
//! - `pod_io` (3): what the client pod shows the outside: its progress, its leaving on SIGINT
//!   and SIGTERM, and its result in the termination message.
//!
//! A group imports only its own and lower-ranked groups. `measurement` and `phases` share a
//! rank and import each other: the repetition's record and the plan's settings hold each
//! phase's report and settings, and each phase runs with the load options and writes into the
//! record. No file sits directly in this folder but this one.
//!
//! It may use only `crd` and the leaves (`stats`, `formats`, `error`, `text`, `table`,
//! `profile`, `rdb`, `words`): nothing in it knows
//! about the validation, the reports, the controller or the local runner
//! (docs/src/contributing/architecture.md, `layout_tests.rs`).

pub mod connection;
pub mod measurement;
pub mod phases;
pub mod pod_io;
pub mod workloads;
