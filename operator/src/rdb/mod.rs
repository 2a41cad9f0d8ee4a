//! Reading RDB files, the dumps Redis, Valkey and Dragonfly save: every key with its type,
//! expiry, element count and each element's length (never a value past this module unless
//! asked: [`RdbReader::with_values`] gives each element's bytes, one element at a time, up to
//! a cap, for the `rdb` workload's load), in bounded memory from any `std::io::Read`, the
//! CRC64 checksum verified at the end. Pure parsing: no engine is involved. `membench profile
//! --rdb` reads a file through it without values.
//!
//! What it reads: RDB versions 1 to 13 with the `REDIS` header (Redis up to 8.6, Valkey
//! before 9, Dragonfly's `SAVE RDB`, which writes `REDIS0009` with types and opcodes of its
//! own), and version 80 with Valkey 9's `VALKEY` header (which adds `RDB_TYPE_HASH_2`, type
//! 22, for hashes with field expiries). Strings plain, integer-encoded and LZF-compressed
//! (decoded as they are read, through an 8 KiB window); lists as plain lists, ziplists and
//! quicklists of ziplists or listpacks; sets plain, as intsets and as listpacks; sorted sets
//! with text and binary scores, as ziplists and listpacks; hashes plain, as zipmaps, ziplists
//! and listpacks, and with field expiries (Redis 7.4+'s HASH_METADATA and HASH_LISTPACK_EX,
//! Valkey 9's HASH_2, Dragonfly's hashes and sets with expiries); streams with consumer
//! groups and pending entries (STREAM_LISTPACKS 1 to 3, Redis 8.6's 4 with its IDMP state);
//! module values in the annotated format, skipped and counted by the module type's name;
//! module auxiliary records, functions, AUX fields, SELECTDB, RESIZEDB, both expiry opcodes,
//! IDLE, FREQ, SLOT_INFO, Redis 8.6's key metadata, and Dragonfly's key masks.
//!
//! Why our own and not a crate: the `rdb` crate (0.3, a fork of badboy/rdb-rs, "RDB parsing,
//! formatting, analyzing") parses through a formatter that receives whole values, documents
//! RDB versions up to 12, and knows neither Valkey's `VALKEY080` header nor Redis 8.6's
//! version 13 (stream type 26, key metadata) nor Dragonfly's types; `librdb` wraps Redis's
//! own C parser (a C build, Redis's own formats only, no `VALKEY080`). A profile needs
//! lengths and counts, not values, from files of all three engines, so this module reads
//! every format above into counts and lengths, and says what it cannot read.

mod compact;
pub mod crc64;
mod error;
#[cfg(test)]
mod format_tests;
mod kept;
mod key;
mod kind;
mod reader;
mod scalar;
mod source;
mod stream;
mod types;
mod values;

pub use error::{Problem, RdbError};
pub use kept::LARGEST_ELEMENT_HELD;
pub use key::{
    FieldExpiry, KeyEntry, KeyHead, KeyKind, Magic, Part, PendingEntry, StreamConsumer,
    StreamCounters, StreamGroupStart, StreamSummary, module_name,
};
pub use reader::{Checksum, FileFacts, RdbReader};
pub use scalar::{Scalar, holds_integer};
pub use types::DF_TYPE_HASH_WITH_EXPIRY;

/// Opens the file at `path` for reading.
pub fn open(path: &std::path::Path) -> Result<RdbReader<std::fs::File>, RdbError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| RdbError {
        file: name.clone(),
        offset: 0,
        problem: Problem::Io(e),
    })?;
    RdbReader::new(file, &name)
}
