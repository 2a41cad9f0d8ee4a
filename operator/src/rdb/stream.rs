//! A stream value: its listpacks of entries (each entry's fields and values given to the
//! caller), then its length, ids, consumer groups with their pending entries and consumers,
//! and, from RDB_TYPE_STREAM_LISTPACKS_4 (Redis 8.6), its idempotent-producer state.

use super::compact;
use super::error::RdbError;
use super::key::{FileCursor, KeyEntry, Part, StreamSummary};
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
}

impl Entries<'_> {
    fn integer(s: Scalar) -> i64 {
        s.value.unwrap_or(0)
    }

    fn begin_entry_fields(&mut self) {
        self.field_index = 0;
        if !self.deleted {
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
            At::MsDiff => self.at = At::SeqDiff,
            At::SeqDiff => {
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
                        let field = self.master_fields[self.field_index as usize];
                        (self.each)(Part::Field, field);
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

pub fn read(
    reader: &mut dyn FileCursor,
    entry: &mut KeyEntry,
    each: &mut dyn FnMut(Part, Scalar),
) -> Result<StreamSummary, RdbError> {
    let version = entry.rdb_type;
    let nodes = reader.length("a stream")?;
    for _ in 0..nodes {
        reader.skip_string("a stream node's id")?;
        let mut entries = Entries {
            at: At::MasterCount,
            master_fields: Vec::new(),
            master_left: 0,
            deleted: false,
            same_fields: false,
            fields: 0,
            field_index: 0,
            each: &mut *each,
        };
        reader.string("a stream node", &mut |stream| {
            compact::listpack(stream, &mut |s| {
                entries.next(s);
                Ok(())
            })
        })?;
    }
    entry.elements = reader.length("a stream's length")?;
    // The last id; then the first id, the largest deleted id and the entries ever added.
    let ids = if version >= TYPE_STREAM_LISTPACKS_2 {
        7
    } else {
        2
    };
    for _ in 0..ids {
        reader.length("a stream's ids")?;
    }
    let mut summary = StreamSummary::default();
    let groups = reader.length("a stream's consumer groups")?;
    for _ in 0..groups {
        reader.skip_string("a consumer group's name")?;
        reader.length("a consumer group's last id")?;
        reader.length("a consumer group's last id")?;
        if version >= TYPE_STREAM_LISTPACKS_2 {
            reader.length("a consumer group's entries read")?;
        }
        let pending = reader.length("a consumer group's pending entries")?;
        // Each: a 16-byte id, an 8-byte delivery time, a delivery count.
        for _ in 0..pending {
            reader.skip(24, "a pending entry")?;
            reader.length("a pending entry's delivery count")?;
        }
        summary.pending += pending;
        let consumers = reader.length("a consumer group's consumers")?;
        for _ in 0..consumers {
            reader.skip_string("a consumer's name")?;
            reader.skip(8, "a consumer's seen time")?;
            if version >= TYPE_STREAM_LISTPACKS_3 {
                reader.skip(8, "a consumer's active time")?;
            }
            let owned = reader.length("a consumer's pending entries")?;
            reader.skip(16 * owned, "a consumer's pending entries")?;
        }
        summary.consumers += consumers;
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
