//! What ends a profile: a connection that fails, a command the profile cannot go without
//! refused, an empty database, a server that goes away (after which what was sampled is kept),
//! an RDB file that cannot be read.

use crate::error::BenchError;

/// Why a profile could not be taken, or what ended it early.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(transparent)]
    Connect(#[from] BenchError),

    #[error(
        "the server refused {command}, which the profile cannot go without ({detail}). Grant it to the user, for example ACL SETUSER <user> +{lower}, or profile as a user who may run it",
        lower = command.to_ascii_lowercase()
    )]
    Refused { command: String, detail: String },

    #[error("the server at {address} went away after {sampled} key(s) were sampled: {detail}")]
    ServerGone {
        address: String,
        detail: String,
        sampled: u64,
    },

    #[error("database {db} at {address} is empty (DBSIZE 0): there is nothing to profile{others}")]
    Empty {
        address: String,
        db: u32,
        others: String,
    },

    #[error(
        "{address} is not a cluster node (INFO cluster: cluster_enabled is not 1): profile it without --cluster"
    )]
    NotACluster { address: String },

    #[error(transparent)]
    Rdb(#[from] crate::rdb::RdbError),

    #[error("database {db} of {file} holds no key to profile{others}")]
    EmptyFile {
        file: String,
        db: u32,
        others: String,
    },

    #[error("{detail}")]
    StoppedEarly { detail: String },

    #[error("unexpected reply to {command}: {detail}")]
    Unexpected { command: String, detail: String },
}
