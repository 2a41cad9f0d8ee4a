//! The benchmark client's load path, the code that also runs inside the client pod
//! (`membench load`): the wire protocol (`resp`), the workloads (`workload`) and their commands (`encoder`), the measurement
//! protocol (`measure`), every setting of one engine's run as data (`plan`), what a run needs beside it (`load_options`) and the phases after its readings (`phases`) and what it reports (`measured`), a sharded cluster's join and routing (`shards`, `slots`), a profile's rebuild (`profile_workload`, its keys drawn in `profile_shape`, its commands in `profile_encoder`), the seeded draws (`draws`), the control commands to an engine (`engine`), progress on a terminal
//! (`progress`) and on the pod's HTTP endpoint (`progress_endpoint`), keys with a TTL (`ttl`), the measurement phases after a repetition's readings, a folder each (`phases`: a snapshot under writes, a replica's full sync under writes, deletes and overwrites with the defragmentation after them, a load past maxmemory), the paced writes the snapshot and the replica run (`paced_writes`), and the engine's process tree it reads (`process_tree`), a rebuild's bytes per key by type (`type_memory`), leaving on SIGINT
//! and SIGTERM (`stop`, `stop_request`), and the result in the container's termination message (`result`).
//!
//! It may use only `crd` and the leaves (`stats`, `formats`, `error`, `profile`): nothing in it knows
//! about the validation, the reports, the controller or the local runner
//! (docs/src/contributing/architecture.md, `layout_tests.rs`).

pub mod cluster_node;
pub mod container_memory;
pub mod draws;
pub mod encoder;
pub mod engine;
pub mod load_options;
pub mod measure;
pub mod measured;
pub mod paced_writes;
pub mod phase_kind;
pub mod phase_memory;
pub mod phases;
pub mod plan;
pub mod process_tree;
pub mod profile_encoder;
pub mod profile_objects;
pub mod profile_shape;
pub mod profile_workload;
pub mod progress;
pub mod progress_endpoint;
pub mod rdb_load;
pub mod resp;
pub mod result;
pub mod shards;
pub mod slots;
pub mod stop;
pub mod stop_request;
pub mod ttl;
pub mod type_memory;
pub mod workload;
