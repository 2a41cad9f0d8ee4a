//! A key's value, read by its type byte: strings, lists, sets, sorted sets, hashes (with
//! their field expiries in Redis's, Valkey's and Dragonfly's forms), streams (in `stream`)
//! and module values, each element given to the caller as it is read.

use super::compact;
use super::error::{Problem, RdbError};
use super::kept;
use super::key::{FieldExpiry, FileCursor, KeyEntry, KeyKind, Magic, Part, module_name};
use super::scalar::Scalar;
use super::stream;
use super::types::*;

/// Keeps the field just read (the element the cursor holds) with its expiry, when values
/// were asked for.
fn keep_field_expiry(file: &dyn FileCursor, entry: &mut KeyEntry, at_ms: i64) {
    if let Some(kept) = file.kept() {
        entry.field_expiries.push(FieldExpiry {
            field: kept.borrow().bytes.clone(),
            at_ms,
        });
    }
}

/// A compact encoding saved as one string, its elements given to `each` in order.
fn blob(
    file: &mut dyn FileCursor,
    inside: &'static str,
    format: compact::Format,
    each: &mut dyn FnMut(Scalar) -> Result<(), RdbError>,
) -> Result<u64, RdbError> {
    file.string(inside, &mut |stream| format(stream, each))
}

pub fn read_value(
    file: &mut dyn FileCursor,
    magic: Magic,
    entry: &mut KeyEntry,
    each: &mut dyn FnMut(Part, Scalar),
) -> Result<(), RdbError> {
    let ok = |_: ()| -> Result<(), RdbError> { Ok(()) };
    match entry.rdb_type {
        TYPE_STRING => {
            let scalar = file.scalar("a string value")?;
            entry.elements = scalar.length;
            each(Part::Value, scalar);
        }
        TYPE_LIST | TYPE_SET => {
            let n = file.length("a list or set")?;
            for _ in 0..n {
                let scalar = file.scalar("an element")?;
                each(Part::Value, scalar);
            }
            entry.elements = n;
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = file.length("a sorted set")?;
            // Each element given as soon as it is read: a value's bytes are held one at a
            // time.
            for _ in 0..n {
                let member = file.scalar("a sorted-set member")?;
                each(Part::Value, member);
                let score = if entry.rdb_type == TYPE_ZSET_2 {
                    f64::from_bits(file.u64_le("a score")?)
                } else {
                    text_double(file)?
                };
                kept::set_score(&file.kept(), score);
                each(Part::Score, Scalar::of_score(score));
            }
            entry.elements = n;
        }
        TYPE_HASH => {
            let n = file.length("a hash")?;
            for _ in 0..n {
                let field = file.scalar("a hash field")?;
                each(Part::Field, field);
                let value = file.scalar("a hash value")?;
                each(Part::Value, value);
            }
            entry.elements = n;
        }
        TYPE_HASH_ZIPMAP | TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => {
            let mut field = true;
            let format = match entry.rdb_type {
                TYPE_HASH_ZIPMAP => compact::zipmap,
                TYPE_HASH_ZIPLIST => compact::ziplist,
                _ => compact::listpack,
            };
            let n = blob(file, "a compact hash", format, &mut |s| {
                each(if field { Part::Field } else { Part::Value }, s);
                field = !field;
                Ok(())
            })?;
            entry.elements = n / 2;
        }
        TYPE_LIST_ZIPLIST | TYPE_SET_INTSET | TYPE_SET_LISTPACK => {
            let format = match entry.rdb_type {
                TYPE_LIST_ZIPLIST => compact::ziplist,
                TYPE_SET_INTSET => compact::intset,
                _ => compact::listpack,
            };
            entry.elements = blob(file, "a compact list or set", format, &mut |s| {
                each(Part::Value, s);
                Ok(())
            })?;
        }
        TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => {
            let format = if entry.rdb_type == TYPE_ZSET_ZIPLIST {
                compact::ziplist
            } else {
                compact::listpack
            };
            let mut member = true;
            let n = blob(file, "a compact sorted set", format, &mut |s| {
                each(if member { Part::Value } else { Part::Score }, s);
                member = !member;
                Ok(())
            })?;
            entry.elements = n / 2;
        }
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            let nodes = file.length("a quicklist")?;
            let mut items = 0;
            for _ in 0..nodes {
                let container = if entry.rdb_type == TYPE_LIST_QUICKLIST_2 {
                    file.length("a quicklist node")?
                } else {
                    QUICKLIST_PACKED
                };
                match container {
                    QUICKLIST_PLAIN => {
                        let scalar = file.scalar("a list item")?;
                        each(Part::Value, scalar);
                        items += 1;
                    }
                    QUICKLIST_PACKED => {
                        let format = if entry.rdb_type == TYPE_LIST_QUICKLIST {
                            compact::ziplist
                        } else {
                            compact::listpack
                        };
                        items += blob(file, "a quicklist node", format, &mut |s| {
                            each(Part::Value, s);
                            Ok(())
                        })?;
                    }
                    other => {
                        return Err(file.error(Problem::Corrupt {
                            detail: format!("a quicklist node has the unknown container {other}"),
                        }));
                    }
                }
            }
            entry.elements = items;
        }
        TYPE_HASH_METADATA | TYPE_HASH_METADATA_PRE_GA if magic == Magic::Redis => {
            // Redis 7.4+ saves each field's expiry as its distance from the hash's least
            // expiry, plus 1 (0 for none); its release candidates saved it absolute.
            let least = if entry.rdb_type == TYPE_HASH_METADATA {
                Some(file.u64_le("a hash's least field expiry")?)
            } else {
                None
            };
            let n = file.length("a hash")?;
            for _ in 0..n {
                let ttl = file.length("a hash field's expiry")?;
                let field = file.scalar("a hash field")?;
                each(Part::Field, field);
                if ttl != 0 {
                    entry.fields_with_ttl += 1;
                    let at = match least {
                        Some(least) => least.wrapping_add(ttl - 1),
                        None => ttl,
                    };
                    keep_field_expiry(file, entry, at as i64);
                }
                let value = file.scalar("a hash value")?;
                each(Part::Value, value);
            }
            entry.elements = n;
        }
        TYPE_HASH_LISTPACK_EX | TYPE_HASH_LISTPACK_EX_PRE_GA => {
            if entry.rdb_type == TYPE_HASH_LISTPACK_EX {
                file.u64_le("a hash's least field expiry")?;
            }
            let kept = file.kept();
            let mut position = 0u64;
            let mut field = Vec::new();
            let mut expiries = Vec::new();
            let mut with_ttl = 0;
            // Triples of field, value and absolute expiry (0 for none).
            let n = blob(file, "a compact hash", compact::listpack, &mut |s| {
                match position % 3 {
                    0 => {
                        each(Part::Field, s);
                        if let Some(kept) = &kept {
                            field.clone_from(&kept.borrow().bytes);
                        }
                    }
                    1 => each(Part::Value, s),
                    _ if s != Scalar::of_integer(0) => {
                        with_ttl += 1;
                        if let Some(kept) = &kept {
                            // Saved as an integer; its digits if a writer saved text.
                            let digits =
                                || std::str::from_utf8(&kept.borrow().bytes).ok()?.parse().ok();
                            expiries.push(FieldExpiry {
                                field: std::mem::take(&mut field),
                                at_ms: s.value.or_else(digits).unwrap_or(0),
                            });
                        }
                    }
                    _ => {}
                }
                position += 1;
                Ok(())
            })?;
            entry.fields_with_ttl = with_ttl;
            entry.field_expiries = expiries;
            entry.elements = n / 3;
        }
        // Valkey 9's hash with field expiries: field, value, 8-byte absolute expiry in ms
        // (-1 for none).
        VALKEY_TYPE_HASH_2 if magic == Magic::Valkey => {
            let n = file.length("a hash")?;
            for _ in 0..n {
                let field = file.scalar("a hash field")?;
                each(Part::Field, field);
                let field_bytes = file.kept().map(|k| k.borrow().bytes.clone());
                let value = file.scalar("a hash value")?;
                each(Part::Value, value);
                let ttl = file.u64_le("a hash field's expiry")? as i64;
                if ttl >= 0 {
                    entry.fields_with_ttl += 1;
                    if let Some(field) = field_bytes {
                        entry.field_expiries.push(FieldExpiry { field, at_ms: ttl });
                    }
                }
            }
            entry.elements = n;
        }
        // Dragonfly's hash and set whose elements have expiries: each element followed by
        // its expiry as a string (-1 for none).
        DF_TYPE_HASH_WITH_EXPIRY | DF_TYPE_SET_WITH_EXPIRY if magic == Magic::Redis => {
            let hash = entry.rdb_type == DF_TYPE_HASH_WITH_EXPIRY;
            let n = file.length("a Dragonfly hash or set")?;
            for _ in 0..n {
                if hash {
                    let field = file.scalar("a hash field")?;
                    each(Part::Field, field);
                }
                let value = file.scalar("an element")?;
                each(Part::Value, value);
                let ttl = file.bytes("an element's expiry", 32)?;
                entry.fields_with_ttl += u64::from(ttl != b"-1");
            }
            entry.elements = n;
        }
        TYPE_STREAM_LISTPACKS
        | TYPE_STREAM_LISTPACKS_2
        | TYPE_STREAM_LISTPACKS_3
        | TYPE_STREAM_LISTPACKS_4
        | TYPE_STREAM_LISTPACKS_5 => {
            let summary = stream::read(file, entry, each)?;
            entry.stream = Some(summary);
        }
        TYPE_MODULE_2 => {
            let id = file.length("a module value's type")?;
            entry.kind = KeyKind::Module(module_name(id));
            file.skip_module_items()?;
        }
        TYPE_MODULE_PRE_GA => {
            let id = file.length("a module value's type")?;
            return Err(file.error(Problem::ModuleNeedsLoader {
                module: module_name(id),
            }));
        }
        DF_TYPE_JSON if magic == Magic::Redis => {
            file.skip_string("a Dragonfly JSON value")?;
        }
        other => {
            return Err(file.unknown(other));
        }
    }
    ok(())
}

/// A score of the first sorted-set format: a length byte and the text (253 nan, 254 inf,
/// 255 -inf).
fn text_double(file: &mut dyn FileCursor) -> Result<f64, RdbError> {
    let at = file.offset();
    let length = file.u8("a score")?;
    Ok(match length {
        253 => f64::NAN,
        254 => f64::INFINITY,
        255 => f64::NEG_INFINITY,
        n => {
            let mut text = vec![0u8; usize::from(n)];
            file.read_exact(&mut text, "a score")?;
            std::str::from_utf8(&text)
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| {
                    file.error_at(
                        at,
                        Problem::Corrupt {
                            detail: format!(
                                "a score is not a number: {:?}",
                                String::from_utf8_lossy(&text)
                            ),
                        },
                    )
                })?
        }
    })
}

/// The data type a value type byte holds, in a file of this magic.
pub fn kind_of(value_type: u8, magic: Magic) -> Option<KeyKind> {
    Some(match value_type {
        TYPE_STRING => KeyKind::String,
        TYPE_LIST | TYPE_LIST_ZIPLIST | TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            KeyKind::List
        }
        TYPE_SET | TYPE_SET_INTSET | TYPE_SET_LISTPACK => KeyKind::Set,
        TYPE_ZSET | TYPE_ZSET_2 | TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => KeyKind::Zset,
        TYPE_HASH | TYPE_HASH_ZIPMAP | TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => KeyKind::Hash,
        TYPE_STREAM_LISTPACKS
        | TYPE_STREAM_LISTPACKS_2
        | TYPE_STREAM_LISTPACKS_3
        | TYPE_STREAM_LISTPACKS_4
        | TYPE_STREAM_LISTPACKS_5 => KeyKind::Stream,
        // Type 22 is Redis 7.4's pre-release hash with field expiries, and Valkey 9's.
        TYPE_HASH_METADATA_PRE_GA => KeyKind::Hash,
        TYPE_HASH_LISTPACK_EX_PRE_GA | TYPE_HASH_METADATA | TYPE_HASH_LISTPACK_EX
            if magic == Magic::Redis =>
        {
            KeyKind::Hash
        }
        TYPE_MODULE_2 | TYPE_MODULE_PRE_GA => KeyKind::Module(String::new()),
        DF_TYPE_HASH_WITH_EXPIRY if magic == Magic::Redis => KeyKind::Hash,
        DF_TYPE_SET_WITH_EXPIRY if magic == Magic::Redis => KeyKind::Set,
        DF_TYPE_JSON if magic == Magic::Redis => KeyKind::Module("dragonfly-json".into()),
        _ => return None,
    })
}
