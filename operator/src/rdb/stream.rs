//! A stream value: its listpacks of entries (each entry's fields and values given to the
//! caller), then its length, ids, consumer groups with their pending entries and consumers,
//! and, from RDB_TYPE_STREAM_LISTPACKS_4 (Redis 8.6), its idempotent-producer state.

use std::collections::HashMap;

use super::compact;
use super::error::RdbError;
use super::kept::{self, Kept};
use super::key::{
    FileCursor, KeyEntry, Part, PendingEntry, StreamConsumer, StreamCounters, StreamGroupStart,
    StreamSummary,
};
use super::scalar::Scalar;
use super::types::*;

const FLAG_DELETED: i64 = 1;
const FLAG_SAME_FIELDS: i64 = 2;

/// Where the walk of a listpack of entries is.
enum At {
    MasterCount,
    MasterDeleted,
    MasterFieldCount,
    MasterField,
    MasterEnd,
    Flags,
    MsDiff,
    SeqDiff,
    FieldCount,
    Field,
    Value,
    LpCount,
}

/// The entries of one listpack node, given to `each`.
struct Entries<'a> {
    at: At,
    master_fields: Vec<Scalar>,
    master_left: u64,
    deleted: bool,
    same_fields: bool,
    fields: u64,
    field_index: u64,
    each: &'a mut dyn FnMut(Part, Scalar),
    /// When values were asked for: where the element read is, the node's master fields'
    /// bytes, its master id, the entry's id as its diffs arrive, and room to set a value
    /// aside while its master field is given.
    kept: Option<Kept>,
    master_field_bytes: Vec<Vec<u8>>,
    master_id: (u64, u64),
    entry_id: (u64, u64),
    set_aside: Vec<u8>,
}

impl Entries<'_> {
    fn integer(s: Scalar) -> i64 {
        s.value.unwrap_or(0)
    }

    fn begin_entry_fields(&mut self) {
        self.field_index = 0;
        if !self.deleted {
            let (ms, seq) = self.entry_id;
            kept::set(&self.kept, format!("{ms}-{seq}").as_bytes());
            (self.each)(
                Part::Entry {
                    fields: self.fields,
                },
                Scalar::of_integer(self.fields as i64),
            );
        }
        self.at = if self.fields == 0 {
            At::LpCount
        } else if self.same_fields {
            At::Value
        } else {
            At::Field
        };
    }

    fn next(&mut self, s: Scalar) {
        match self.at {
            At::MasterCount => self.at = At::MasterDeleted,
            At::MasterDeleted => self.at = At::MasterFieldCount,
            At::MasterFieldCount => {
                self.master_left = Self::integer(s).max(0) as u64;
                self.at = if self.master_left == 0 {
                    At::MasterEnd
                } else {
                    At::MasterField
                };
            }
            At::MasterField => {
                if let Some(kept) = &self.kept {
                    self.master_field_bytes.push(kept.borrow().bytes.clone());
                }
                self.master_fields.push(s);
                self.master_left -= 1;
                if self.master_left == 0 {
                    self.at = At::MasterEnd;
                }
            }
            At::MasterEnd => self.at = At::Flags,
            At::Flags => {
                let flags = Self::integer(s);
                self.deleted = flags & FLAG_DELETED != 0;
                self.same_fields = flags & FLAG_SAME_FIELDS != 0;
                self.at = At::MsDiff;
            }
            At::MsDiff => {
                self.entry_id.0 = self.master_id.0.wrapping_add(Self::integer(s) as u64);
                self.at = At::SeqDiff;
            }
            At::SeqDiff => {
                self.entry_id.1 = self.master_id.1.wrapping_add(Self::integer(s) as u64);
                if self.same_fields {
                    self.fields = self.master_fields.len() as u64;
                    self.begin_entry_fields();
                } else {
                    self.at = At::FieldCount;
                }
            }
            At::FieldCount => {
                self.fields = Self::integer(s).max(0) as u64;
                self.begin_entry_fields();
            }
            At::Field => {
                if !self.deleted {
                    (self.each)(Part::Field, s);
                }
                self.at = At::Value;
            }
            At::Value => {
                if !self.deleted {
                    if self.same_fields {
                        let index = self.field_index as usize;
                        let field = self.master_fields[index];
                        match &self.kept {
                            // The value read is set aside while its field is given.
                            Some(kept) => {
                                std::mem::swap(&mut kept.borrow_mut().bytes, &mut self.set_aside);
                                kept::set(&self.kept, &self.master_field_bytes[index]);
                                (self.each)(Part::Field, field);
                                std::mem::swap(&mut kept.borrow_mut().bytes, &mut self.set_aside);
                            }
                            None => (self.each)(Part::Field, field),
                        }
                    }
                    (self.each)(Part::Value, s);
                }
                self.field_index += 1;
                self.at = if self.field_index == self.fields {
                    At::LpCount
                } else if self.same_fields {
                    At::Value
                } else {
                    At::Field
                };
            }
            At::LpCount => self.at = At::Flags,
        }
    }
}

/// A stream id saved raw: 16 bytes, ms and seq big-endian.
fn read_id(reader: &mut dyn FileCursor, inside: &'static str) -> Result<(u64, u64), RdbError> {
    let mut id = [0u8; 16];
    reader.read_exact(&mut id, inside)?;
    let half = |b: &[u8]| u64::from_be_bytes(b.try_into().expect("8 bytes"));
    Ok((half(&id[..8]), half(&id[8..])))
}

pub fn read(
    reader: &mut dyn FileCursor,
    entry: &mut KeyEntry,
    each: &mut dyn FnMut(Part, Scalar),
) -> Result<StreamSummary, RdbError> {
    let version = entry.rdb_type;
    let kept = reader.kept();
    let nodes = reader.length("a stream")?;
    for _ in 0..nodes {
        // The node's master id (ms and seq, big-endian), which its entries' ids are diffs of.
        let master_id = if kept.is_some() {
            let id = reader.bytes("a stream node's id", 16)?;
            if id.len() != 16 {
                return Err(reader.error(super::error::Problem::Corrupt {
                    detail: format!("a stream node's id is {} bytes, not 16", id.len()),
                }));
            }
            let half = |b: &[u8]| u64::from_be_bytes(b.try_into().expect("8 bytes"));
            (half(&id[..8]), half(&id[8..]))
        } else {
            reader.skip_string("a stream node's id")?;
            (0, 0)
        };
        let mut entries = Entries {
            at: At::MasterCount,
            master_fields: Vec::new(),
            master_left: 0,
            deleted: false,
            same_fields: false,
            fields: 0,
            field_index: 0,
            each: &mut *each,
            kept: kept.clone(),
            master_field_bytes: Vec::new(),
            master_id,
            entry_id: (0, 0),
            set_aside: Vec::new(),
        };
        reader.string("a stream node", &mut |stream| {
            compact::listpack(stream, &mut |s| {
                entries.next(s);
                Ok(())
            })
        })?;
    }
    entry.elements = reader.length("a stream's length")?;
    let mut summary = StreamSummary {
        last_id: (
            reader.length("a stream's last id")?,
            reader.length("a stream's last id")?,
        ),
        ..StreamSummary::default()
    };
    // Then the first id, the largest deleted id and the entries ever added.
    if version >= TYPE_STREAM_LISTPACKS_2 {
        reader.length("a stream's first id")?;
        reader.length("a stream's first id")?;
        let max_deleted_id = (
            reader.length("a stream's largest deleted id")?,
            reader.length("a stream's largest deleted id")?,
        );
        let entries_added = reader.length("a stream's entries added")?;
        summary.counters = Some(StreamCounters {
            max_deleted_id,
            entries_added,
        });
    }
    let groups = reader.length("a stream's consumer groups")?;
    for _ in 0..groups {
        let name = if kept.is_some() {
            Some(reader.bytes("a consumer group's name", 1 << 20)?)
        } else {
            reader.skip_string("a consumer group's name")?;
            None
        };
        let last_delivered = (
            reader.length("a consumer group's last id")?,
            reader.length("a consumer group's last id")?,
        );
        // -1 (unknown to the engine) is saved as a length of all ones: the cast gives it back.
        let entries_read = if version >= TYPE_STREAM_LISTPACKS_2 {
            Some(reader.length("a consumer group's entries read")? as i64)
        } else {
            None
        };
        summary.groups_entries_read += u64::from(entries_read.is_some());
        let pending = reader.length("a consumer group's pending entries")?;
        // Each: a 16-byte id (big-endian ms and seq), an 8-byte delivery time (little-endian
        // ms), a delivery count. Held by id only for a load, which claims each for its
        // consumer: a group's pending entries, not the file, bound that memory.
        let mut delivered: HashMap<(u64, u64), (u64, u64)> = HashMap::new();
        for _ in 0..pending {
            if kept.is_some() {
                let id = read_id(reader, "a pending entry's id")?;
                let at = reader.u64_le("a pending entry's delivery time")?;
                let count = reader.length("a pending entry's delivery count")?;
                delivered.insert(id, (at, count));
            } else {
                reader.skip(24, "a pending entry")?;
                reader.length("a pending entry's delivery count")?;
            }
        }
        summary.pending += pending;
        let consumer_count = reader.length("a consumer group's consumers")?;
        let mut consumers = Vec::new();
        for _ in 0..consumer_count {
            let consumer_name = if kept.is_some() {
                Some(reader.bytes("a consumer's name", 1 << 20)?)
            } else {
                reader.skip_string("a consumer's name")?;
                None
            };
            reader.skip(8, "a consumer's seen time")?;
            if version >= TYPE_STREAM_LISTPACKS_3 {
                reader.skip(8, "a consumer's active time")?;
            }
            let owned = reader.length("a consumer's pending entries")?;
            summary.claimed += owned;
            match consumer_name {
                Some(consumer_name) => {
                    let mut entries = Vec::new();
                    for _ in 0..owned {
                        let id = read_id(reader, "a consumer's pending entry")?;
                        // An id the group's list lacks would be a corrupt file; it is
                        // claimed as delivered once, now, rather than dropped.
                        let (at, count) = delivered.get(&id).copied().unwrap_or((0, 1));
                        entries.push(PendingEntry {
                            id,
                            delivered_at_ms: at,
                            deliveries: count,
                        });
                    }
                    consumers.push(StreamConsumer {
                        name: consumer_name,
                        pending: entries,
                    });
                }
                None => reader.skip(16 * owned, "a consumer's pending entries")?,
            }
        }
        summary.consumers += consumer_count;
        if let Some(name) = name {
            summary.group_starts.push(StreamGroupStart {
                name,
                last_delivered,
                entries_read,
                consumers,
            });
        }
        if version >= TYPE_STREAM_LISTPACKS_5 {
            let nacked = reader.length("a consumer group's NACKed entries")?;
            reader.skip(16 * nacked, "a consumer group's NACKed entries")?;
        }
    }
    summary.groups = groups;
    if version >= TYPE_STREAM_LISTPACKS_4 {
        // The idempotent-producer settings (duration, most entries); per producer its name
        // and its entries (an idempotency id and the stream id it added: ms and seq); then
        // the ids added and the duplicates refused (as Redis 8.6.3 writes them).
        reader.length("a stream's IDMP duration")?;
        reader.length("a stream's IDMP size")?;
        let producers = reader.length("a stream's IDMP producers")?;
        for _ in 0..producers {
            reader.skip_string("an IDMP producer's name")?;
            let entries = reader.length("an IDMP producer's entries")?;
            for _ in 0..entries {
                reader.skip_string("an IDMP entry's id")?;
                reader.length("an IDMP entry's stream id")?;
                reader.length("an IDMP entry's stream id")?;
            }
        }
        reader.length("a stream's IDMP counters")?;
        reader.length("a stream's IDMP counters")?;
    }
    Ok(summary)
}
