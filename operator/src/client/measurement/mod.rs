//! How a run is measured: the protocol of every repetition (`measure`), what it records
//! (`measured`), every setting of one engine's run as data (`plan`), what a run needs beside it
//! (`load_options`), the paced writes the snapshot and the replica run (`paced_writes`), the
//! memory a phase reads (`phase_memory`: the engine's process tree in `process_tree`, else its
//! container's in `container_memory`), and the phases' names (`phase_kind`).
//!
//! Rank 2: it imports `connection` and `workloads`. It shares its rank with `phases`, and the
//! two import each other: the repetition's record (`measured`) and the plan's settings hold each
//! phase's report and settings, and each phase runs with the load options and writes into the
//! record. That is the one known cycle between the groups.

pub mod container_memory;
pub mod load_options;
pub mod measure;
pub mod measured;
pub mod paced_writes;
pub mod phase_kind;
pub mod phase_memory;
pub mod plan;
pub mod process_tree;
