//! What the client writes: the workloads and how their result is verified (`workload`), their
//! commands (`encoder`), the seeded draws (`draws`), keys with a TTL (`ttl`), a profile's
//! rebuild (`profile_workload`: its keys drawn in `profile_shape`, its objects in
//! `profile_objects`, its commands in `profile_encoder`), a rebuild's bytes per key by type
//! (`type_memory`), and an RDB file's keys written into the engine (`rdb_load`).
//!
//! Rank 1: it imports only `connection`.

pub mod draws;
pub mod encoder;
pub mod profile_encoder;
pub mod profile_objects;
pub mod profile_shape;
pub mod profile_workload;
pub mod rdb_load;
pub mod ttl;
pub mod type_memory;
pub mod workload;
