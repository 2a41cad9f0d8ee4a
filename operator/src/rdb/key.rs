//! What the reader gives of one key ([`KeyEntry`]) and of its elements ([`Part`]), and the
//! file cursor a value's own reader (the stream's) reads through.

use super::error::RdbError;
use super::source::ByteStream;

/// The data types a key can hold, as `TYPE` answers them, and module values by name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyKind {
    String,
    List,
    Set,
    Zset,
    Hash,
    Stream,
    /// A module's value, by the module type's 9-character name (`ReJSON-RL`), or a type of
    /// Dragonfly's own (`dragonfly-json`).
    Module(String),
}

/// The role of an element within its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// A string's value, a list item, a set member, a sorted-set member, a hash value, a
    /// stream entry's value.
    Value,
    /// A hash field or a stream entry's field name.
    Field,
    /// A sorted-set score.
    Score,
    /// A stream entry begins, with this many fields.
    Entry { fields: u64 },
}

/// What the file says of one stream beyond its entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamSummary {
    pub groups: u64,
    pub consumers: u64,
    /// Pending entries over all groups.
    pub pending: u64,
}

/// One key as read: everything but its elements, which went to the caller one by one.
#[derive(Clone, Debug)]
pub struct KeyEntry {
    pub db: u64,
    pub name: Vec<u8>,
    pub kind: KeyKind,
    /// The value type byte the file stores (the encoding it was saved in).
    pub rdb_type: u8,
    /// The absolute expiry in Unix milliseconds.
    pub expire_at_ms: Option<i64>,
    /// A string's length in bytes, else the elements (HLEN, LLEN, SCARD, ZCARD, XLEN).
    pub elements: u64,
    /// Hash fields that have their own TTL (HEXPIRE).
    pub fields_with_ttl: u64,
    pub stream: Option<StreamSummary>,
}

/// The file as a value's reader sees it: lengths, skipped bytes and strings.
pub trait FileCursor {
    fn length(&mut self, inside: &'static str) -> Result<u64, RdbError>;
    fn skip(&mut self, n: u64, inside: &'static str) -> Result<(), RdbError>;
    /// Passes over a string, returning its length.
    fn skip_string(&mut self, inside: &'static str) -> Result<u64, RdbError>;
    /// Reads a string through `read`, which sees it as a stream of bytes.
    fn string(
        &mut self,
        inside: &'static str,
        read: &mut dyn FnMut(&mut dyn ByteStream) -> Result<u64, RdbError>,
    ) -> Result<u64, RdbError>;
}
