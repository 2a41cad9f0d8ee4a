//! Which keys of a file are written and with how many commands: the one rule the file's scan
//! counts by and the encoder writes by, so that the load sends exactly the commands it
//! announced. A collection goes in chunks (at most [`CHUNK_ELEMENTS`] elements or about
//! [`CHUNK_BYTES`] bytes a command), a stream one XADD per entry, then its groups, last id,
//! consumers and pending entries ([`commands_after_elements`]), a hash's fields' own expiries
//! where the engine takes them, and one PEXPIREAT for a key with a TTL. The keys go type by
//! type, one pass over the file each ([`PASS_ORDER`]), so that the load can read used_memory
//! at the end of each type and report bytes per key by type, as a profile's rebuild does.

use crate::rdb::{KeyEntry, KeyKind, Part};

/// The most elements (pairs for hashes and sorted sets) one write command carries.
pub const CHUNK_ELEMENTS: u64 = 128;
/// A command stops taking elements once it carries this many bytes of them.
pub const CHUNK_BYTES: u64 = 256 * 1024;

/// Keys expiring within this long of the load's reference time are skipped with the expired
/// ones: written, they could expire during the load and spoil the count it verifies.
pub const EXPIRY_GUARD_MS: i64 = 5 * 60 * 1000;

/// The types in the order their passes load them.
pub const PASS_ORDER: [KeyKind; 6] = [
    KeyKind::String,
    KeyKind::List,
    KeyKind::Set,
    KeyKind::Zset,
    KeyKind::Hash,
    KeyKind::Stream,
];

/// What becomes of one key of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disposition {
    Write,
    /// Expired (or expiring within [`EXPIRY_GUARD_MS`]) at the reference time.
    Expired,
    /// A module's value: no command writes it without the module.
    Module(String),
}

pub fn disposition(
    kind: Option<&KeyKind>,
    expire_at_ms: Option<i64>,
    reference_ms: i64,
) -> Disposition {
    match kind {
        Some(KeyKind::Module(name)) => return Disposition::Module(name.clone()),
        None => return Disposition::Module(String::new()),
        Some(_) => {}
    }
    match expire_at_ms {
        Some(at) if at <= reference_ms.saturating_add(EXPIRY_GUARD_MS) => Disposition::Expired,
        _ => Disposition::Write,
    }
}

/// The write command of a type, and whether its elements go in pairs.
pub fn write_command(kind: &KeyKind) -> &'static [u8] {
    match kind {
        KeyKind::String => b"SET",
        KeyKind::List => b"RPUSH",
        KeyKind::Set => b"SADD",
        KeyKind::Zset => b"ZADD",
        KeyKind::Hash => b"HSET",
        KeyKind::Stream => b"XADD",
        KeyKind::Module(_) => b"",
    }
}

/// Where a key's elements are in its chunks.
#[derive(Debug, Default)]
pub struct Chunker {
    in_command: u64,
    bytes: u64,
    /// Write commands begun.
    pub commands: u64,
}

impl Chunker {
    /// Takes the element `part` of `length` bytes; true when it begins a new command (the
    /// one before it, if any, is then complete). A pair is decided at its first half.
    pub fn begins_command(&mut self, kind: &KeyKind, part: Part, length: u64) -> bool {
        let first_of_unit = match (kind, part) {
            (KeyKind::Stream, Part::Entry { .. }) => {
                self.commands += 1;
                return true;
            }
            (KeyKind::Stream, _) => return false,
            (KeyKind::Hash, Part::Field) => true,
            (KeyKind::Hash, _) => false,
            (KeyKind::Zset, Part::Value) => true,
            (KeyKind::Zset, _) => false,
            _ => true,
        };
        if !first_of_unit {
            self.bytes += length;
            return false;
        }
        let begins = self.commands == 0
            || self.in_command == CHUNK_ELEMENTS
            || self.bytes + length > CHUNK_BYTES;
        if begins {
            self.commands += 1;
            self.in_command = 0;
            self.bytes = 0;
        }
        self.in_command += 1;
        self.bytes += length;
        begins
    }
}

/// Commands a written key takes after its elements, whatever the engine: a stream's consumer
/// groups (XGROUP CREATE), its last id (one XSETID), its consumers (XGROUP CREATECONSUMER)
/// and their pending entries (one XCLAIM each); the key's TTL. Hash fields' own expiries
/// ([`carried_field_ttls`]) are counted apart, as only some engines take them.
pub fn commands_after_elements(entry: &KeyEntry) -> u64 {
    let stream = entry
        .stream
        .as_ref()
        .map_or(0, |s| s.groups + 1 + s.consumers + s.claimed);
    stream + u64::from(entry.expire_at_ms.is_some())
}

/// Hash fields whose own expiry the reader gives (Redis's and Valkey's forms), one
/// HPEXPIREAT each on an engine that has it. Dragonfly's element expiries are counted by the
/// reader only, and never carried.
pub fn carried_field_ttls(entry: &KeyEntry) -> u64 {
    if entry.kind == KeyKind::Hash && entry.rdb_type != crate::rdb::DF_TYPE_HASH_WITH_EXPIRY {
        entry.fields_with_ttl
    } else {
        0
    }
}

/// The name `TYPE` answers for a kind.
pub fn type_name(kind: &KeyKind) -> &'static str {
    match kind {
        KeyKind::String => "string",
        KeyKind::List => "list",
        KeyKind::Set => "set",
        KeyKind::Zset => "zset",
        KeyKind::Hash => "hash",
        KeyKind::Stream => "stream",
        KeyKind::Module(_) => "module",
    }
}
