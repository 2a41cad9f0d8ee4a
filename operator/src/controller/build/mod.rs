//! The objects the operator creates, built without any I/O: the benchmark's pods (engine,
//! client, replica), their placement and Pod Security settings, engine images through the
//! mirror, the NetworkPolicy and the password Secret. No file here awaits or holds an API
//! handle (`layout_tests.rs` fails on one that does); [`super::write`] puts them in place.

pub mod engine_password;
pub mod engine_registry;
pub mod network_policy;
pub mod pod_defaults;
pub mod pod_security;
pub mod pods;
