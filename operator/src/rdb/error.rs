//! What can be wrong with an RDB file, each with the byte offset where it shows and what to do.

/// An RDB file that cannot be read: the file, the byte offset, what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{file}: at byte {offset}: {problem}")]
pub struct RdbError {
    pub file: String,
    pub offset: u64,
    pub problem: Problem,
}

/// What is wrong, each message ending with what to do.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("cannot read the file ({0}); check that it exists and is readable")]
    Io(std::io::Error),

    #[error(
        "the file ends inside {inside}: it is truncated (a copy cut short, or a save still under way); copy the dump again, or run SAVE (BGSAVE and wait for it) and read the new file"
    )]
    Truncated { inside: &'static str },

    #[error(
        "the CRC64 checksum at the end of the file is {stored:#018x}, but the file's bytes give {computed:#018x}: the file is corrupt; copy it again from the server, or run SAVE and read the new file"
    )]
    Checksum { stored: u64, computed: u64 },

    #[error(
        "the file is {format}-compressed, not an RDB file: decompress it first ({command}) and read the result"
    )]
    Compressed {
        format: &'static str,
        command: &'static str,
    },

    #[error(
        "the file does not start with REDIS or VALKEY (its first bytes are {found}): it is not an RDB file, or it is encrypted; decrypt it (for example an export encrypted at rest) or pass the dump file the server wrote"
    )]
    NotRdb { found: String },

    #[error(
        "{magic} RDB version {version} is not one this membench reads (REDIS 1 to 13: Redis up to 8.6; VALKEY 80: Valkey 9): it was written by a newer engine; save it from an engine this membench knows, or update membench"
    )]
    UnknownVersion { magic: &'static str, version: u32 },

    #[error(
        "unknown opcode or value type {byte} in a {magic} version {version} file: written by an engine or module this membench does not know, or the file is corrupt; check the file with the engine's own redis-check-rdb / valkey-check-rdb"
    )]
    UnknownType {
        byte: u8,
        magic: &'static str,
        version: u32,
    },

    #[error(
        "a value of module type {module} is in the old format (RDB_TYPE_MODULE_PRE_GA) that only the module itself can read: load the file into an engine with that module and save it again"
    )]
    ModuleNeedsLoader { module: String },

    #[error("{what}")]
    Unsupported { what: String },

    #[error(
        "the file is corrupt: {detail}; copy it again from the server, or check it with redis-check-rdb / valkey-check-rdb"
    )]
    Corrupt { detail: String },
}
