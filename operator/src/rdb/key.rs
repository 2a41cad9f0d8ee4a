//! What the reader gives of one key ([`KeyEntry`]) and of its elements ([`Part`]), the file's
//! header kind ([`Magic`]), and the file cursor the values' readers read through.

use super::error::{Problem, RdbError};
use super::kept::Kept;
pub use super::kind::{KeyHead, KeyKind};
use super::scalar::Scalar;
use super::source::ByteStream;

/// Which engine family's header the file has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Magic {
    /// `REDIS` and 4 digits: Redis, Valkey before 9, Dragonfly.
    Redis,
    /// `VALKEY` and 3 digits: Valkey 9 and later.
    Valkey,
}

impl Magic {
    pub fn as_str(self) -> &'static str {
        match self {
            Magic::Redis => "REDIS",
            Magic::Valkey => "VALKEY",
        }
    }
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
    /// Groups whose entries-read the file keeps ([`StreamGroupStart::entries_read`]).
    pub groups_entries_read: u64,
    pub consumers: u64,
    /// Pending entries over all groups.
    pub pending: u64,
    /// Pending entries owned by a consumer, over all groups (each one XCLAIM for a load).
    pub claimed: u64,
    /// The last id the stream gave (ms, seq), which later entries must exceed.
    pub last_id: (u64, u64),
    /// The largest id deleted and the entries ever added (XSETID's MAXDELETEDID and
    /// ENTRIESADDED), which RDB_TYPE_STREAM_LISTPACKS_2 and later keep; None before it.
    pub counters: Option<StreamCounters>,
    /// Each consumer group's name and last-delivered id, when values were asked for.
    pub group_starts: Vec<StreamGroupStart>,
}

/// What `XSETID ... ENTRIESADDED n MAXDELETEDID id` restores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamCounters {
    pub max_deleted_id: (u64, u64),
    pub entries_added: u64,
}

/// A consumer group as `XGROUP CREATE` recreates it: its name and last-delivered id, and its
/// consumers with the pending entries each owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamGroupStart {
    pub name: Vec<u8>,
    pub last_delivered: (u64, u64),
    /// The entries the group has read (XINFO GROUPS's entries-read, from which its lag is
    /// computed), which RDB_TYPE_STREAM_LISTPACKS_2 and later keep; None before it. -1 when
    /// the engine did not know it (after a deletion past the group's last id): restored as
    /// -1, the engine then estimates the lag from the stream as the source engine did.
    pub entries_read: Option<i64>,
    pub consumers: Vec<StreamConsumer>,
}

/// A consumer of a group and the entries delivered to it and not yet acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamConsumer {
    pub name: Vec<u8>,
    pub pending: Vec<PendingEntry>,
}

/// One entry of a group's pending entries list, as `XCLAIM ... TIME ms RETRYCOUNT n FORCE`
/// recreates it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingEntry {
    pub id: (u64, u64),
    /// When it was last delivered, Unix milliseconds.
    pub delivered_at_ms: u64,
    pub deliveries: u64,
}

/// A hash field's own expiry, when values were asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldExpiry {
    pub field: Vec<u8>,
    /// Unix milliseconds.
    pub at_ms: i64,
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
    /// Hash fields (or Dragonfly set members) that have their own TTL (HEXPIRE, SADDEX).
    pub fields_with_ttl: u64,
    /// Each hash field's expiry, when values were asked for (Redis's and Valkey's forms;
    /// Dragonfly's are counted in `fields_with_ttl` only). Holds the fields with a TTL of
    /// one key at a time.
    pub field_expiries: Vec<FieldExpiry>,
    pub stream: Option<StreamSummary>,
}

/// The file as a value's reader sees it: lengths, raw bytes, strings, and errors at the
/// offset reached.
pub trait FileCursor {
    fn length(&mut self, inside: &'static str) -> Result<u64, RdbError>;
    fn skip(&mut self, n: u64, inside: &'static str) -> Result<(), RdbError>;
    fn read_exact(&mut self, out: &mut [u8], inside: &'static str) -> Result<(), RdbError>;
    fn u8(&mut self, inside: &'static str) -> Result<u8, RdbError>;
    fn u64_le(&mut self, inside: &'static str) -> Result<u64, RdbError>;
    /// Passes over a string, returning its length.
    fn skip_string(&mut self, inside: &'static str) -> Result<u64, RdbError>;
    /// Reads a string through `read`, which sees it as a stream of bytes.
    fn string(
        &mut self,
        inside: &'static str,
        read: &mut dyn FnMut(&mut dyn ByteStream) -> Result<u64, RdbError>,
    ) -> Result<u64, RdbError>;
    /// A string as one element.
    fn scalar(&mut self, inside: &'static str) -> Result<Scalar, RdbError>;
    /// A string read whole, up to `most` bytes.
    fn bytes(&mut self, inside: &'static str, most: u64) -> Result<Vec<u8>, RdbError>;
    /// A module value in the annotated format, passed over.
    fn skip_module_items(&mut self) -> Result<(), RdbError>;
    fn offset(&self) -> u64;
    fn error_at(&self, at: u64, problem: Problem) -> RdbError;
    /// A value type byte this reader does not know, where the reading is.
    fn unknown(&self, byte: u8) -> RdbError;

    fn error(&self, problem: Problem) -> RdbError {
        self.error_at(self.offset(), problem)
    }

    /// Where each element's bytes go, when values were asked for.
    fn kept(&self) -> Option<Kept>;
}

/// The 64 characters of module type names, 6 bits each.
const MODULE_CHARSET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A module type's 9-character name from its 64-bit id (the low 10 bits are its version).
pub fn module_name(id: u64) -> String {
    (0..9)
        .map(|i| MODULE_CHARSET[((id >> (64 - 6 * (i + 1))) & 63) as usize] as char)
        .collect()
}
