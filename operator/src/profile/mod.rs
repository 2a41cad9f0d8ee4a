//! A profile: the shape of a keyspace (types, shares, key-name templates, length and size
//! distributions, TTL shares) without any key name, field name or value. `model` is the data
//! and its rules, `templates` turns key names into templates and templates back into names,
//! `merge` makes one profile of several (a cluster's primaries).
//! `membench profile` (`profiler/`) writes one from a live server; the `profile` workload
//! (`client/workloads/profile_workload.rs`) rebuilds the data from it. A leaf below the CRD, which
//! embeds the model in a spec.

pub mod merge;
pub mod model;
pub mod templates;

pub use model::{PROFILE_FORMAT, Profile};
