//! The file, opcode by opcode: the header, AUX fields, databases, expiries, module and function
//! records, and every key with its value read by the type's own reader, to the checksum.

use std::collections::BTreeMap;
use std::io::Read;

use super::compact;
use super::error::{Problem, RdbError};
use super::kept::{self, Kept};
use super::key::{FileCursor, KeyEntry, KeyHead, KeyKind, Magic, Part, module_name};
use super::scalar::Scalar;
use super::source::{ByteStream, Lzf, Source, Window};
use super::types::*;
use super::values;

/// How the file's checksum came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checksum {
    /// Stored and equal to the bytes' CRC64.
    Verified(u64),
    /// The engine saved without one (`rdbchecksum no`: stored as 0).
    Disabled,
    /// RDB versions before 5 have none.
    Absent,
}

/// What the file holds besides keys, known once it is read to its end.
#[derive(Clone, Debug, Default)]
pub struct FileFacts {
    /// AUX fields (`redis-ver`, `used-mem`, ...), values of at most 1 KiB.
    pub aux: BTreeMap<String, String>,
    /// RESIZEDB hints by database: (keys, keys with an expiry).
    pub resize_hints: BTreeMap<u64, (u64, u64)>,
    /// Module auxiliary records skipped, by module type name.
    pub module_aux: BTreeMap<String, u64>,
    /// Function libraries (FUNCTION2 records).
    pub function_libraries: u64,
    pub checksum: Option<Checksum>,
}

/// What [`RdbReader::next_key_with_bytes`] calls with each element: its key's kind, its part,
/// the element, and its bytes as far as the reader keeps them.
pub type ElementWithBytes<'a> = dyn FnMut(&KeyKind, Part, Scalar, &[u8]) + 'a;

/// A reader of one RDB file from any `Read`, in bounded memory.
pub struct RdbReader<R: Read> {
    source: Source<R>,
    magic: Magic,
    version: u32,
    db: u64,
    facts: FileFacts,
    done: bool,
}

/// The longest AUX value kept (longer ones are passed over).
const AUX_KEPT: u64 = 1024;

/// A string's header: stored as an integer, as it is, or LZF-compressed.
enum StringHead {
    Integer(i64),
    Plain(u64),
    Lzf { compressed: u64, length: u64 },
}

/// A length, or the special encoding of a string.
enum Length {
    Plain(u64),
    Encoded(u8),
}

impl<R: Read> RdbReader<R> {
    /// Reads the header; `file` names the file in errors.
    pub fn new(input: R, file: &str) -> Result<Self, RdbError> {
        let mut source = Source::new(input, file);
        let head = source.peek(9)?;
        if head.starts_with(&[0x1f, 0x8b]) {
            return Err(source.error(Problem::Compressed {
                format: "gzip",
                command: "gunzip FILE",
            }));
        }
        if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            return Err(source.error(Problem::Compressed {
                format: "zstd",
                command: "zstd -d FILE",
            }));
        }
        if head.starts_with(b"BZh") {
            return Err(source.error(Problem::Compressed {
                format: "bzip2",
                command: "bunzip2 FILE",
            }));
        }
        if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z']) {
            return Err(source.error(Problem::Compressed {
                format: "xz",
                command: "unxz FILE",
            }));
        }
        if head.starts_with(&[0x04, 0x22, 0x4d, 0x18]) {
            return Err(source.error(Problem::Compressed {
                format: "lz4",
                command: "lz4 -d FILE",
            }));
        }
        let digits = |bytes: &[u8]| -> Option<u32> {
            (!bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit))
                .then(|| std::str::from_utf8(bytes).ok()?.parse().ok())
                .flatten()
        };
        let (magic, version) = if head.len() == 9 && head.starts_with(b"REDIS") {
            (Magic::Redis, digits(&head[5..9]))
        } else if head.len() == 9 && head.starts_with(b"VALKEY") {
            (Magic::Valkey, digits(&head[6..9]))
        } else {
            if head.len() < 9 && (b"REDIS".starts_with(&head) || head.starts_with(b"REDIS")) {
                return Err(source.error_at(
                    head.len() as u64,
                    Problem::Truncated {
                        inside: "the header",
                    },
                ));
            }
            let found = head
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ");
            return Err(source.error(Problem::NotRdb { found }));
        };
        let Some(version) = version else {
            return Err(source.error_at(
                5,
                Problem::NotRdb {
                    found: String::from_utf8_lossy(&head).into_owned(),
                },
            ));
        };
        let known = match magic {
            Magic::Redis => (1..=13).contains(&version),
            Magic::Valkey => version == 80,
        };
        if !known {
            return Err(source.error_at(
                5,
                Problem::UnknownVersion {
                    magic: magic.as_str(),
                    version,
                },
            ));
        }
        source.skip(9, "the header")?;
        Ok(Self {
            source,
            magic,
            version,
            db: 0,
            facts: FileFacts::default(),
            done: false,
        })
    }

    /// The same reader, giving each element's bytes to [`RdbReader::next_key_with_values`],
    /// one element at a time, each up to `cap` bytes (a longer one is refused at its offset,
    /// naming the cap). A reader without it never holds a value, as a profile needs.
    pub fn with_values(mut self, cap: u64) -> Self {
        self.source.kept = Some(kept::new(cap));
        self
    }

    /// The same reader, giving [`RdbReader::next_key_with_bytes`] the bytes of each element
    /// of up to `cap` bytes, and none of a longer one (passed over, never refused).
    pub fn with_short_values(mut self, cap: u64) -> Self {
        self.source.kept = Some(kept::lenient(cap));
        self
    }

    pub fn magic(&self) -> Magic {
        self.magic
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    /// The byte offset reached.
    pub fn offset(&self) -> u64 {
        self.source.offset()
    }

    /// What the file held besides keys; complete once `next_key` returned None.
    pub fn facts(&self) -> &FileFacts {
        &self.facts
    }

    fn unknown(&self, byte: u8, at: u64) -> RdbError {
        self.source.error_at(
            at,
            Problem::UnknownType {
                byte,
                magic: self.magic.as_str(),
                version: self.version,
            },
        )
    }

    fn length_or_encoding(&mut self, inside: &'static str) -> Result<Length, RdbError> {
        let first = self.source.u8(inside)?;
        Ok(match first >> 6 {
            0 => Length::Plain(u64::from(first & 0x3f)),
            1 => {
                let low = self.source.u8(inside)?;
                Length::Plain((u64::from(first & 0x3f) << 8) | u64::from(low))
            }
            2 => match first {
                0x80 => {
                    let mut b = [0u8; 4];
                    self.source.read_exact(&mut b, inside)?;
                    Length::Plain(u64::from(u32::from_be_bytes(b)))
                }
                0x81 => {
                    let mut b = [0u8; 8];
                    self.source.read_exact(&mut b, inside)?;
                    Length::Plain(u64::from_be_bytes(b))
                }
                other => {
                    return Err(self.source.error_at(
                        self.source.offset() - 1,
                        Problem::Corrupt {
                            detail: format!("{inside} has the unknown length prefix {other:#04x}"),
                        },
                    ));
                }
            },
            _ => Length::Encoded(first & 0x3f),
        })
    }

    fn length(&mut self, inside: &'static str) -> Result<u64, RdbError> {
        match self.length_or_encoding(inside)? {
            Length::Plain(n) => Ok(n),
            Length::Encoded(e) => Err(self.source.error_at(
                self.source.offset() - 1,
                Problem::Corrupt {
                    detail: format!("{inside} should be a length but is a string encoding ({e})"),
                },
            )),
        }
    }

    fn string_head(&mut self, inside: &'static str) -> Result<StringHead, RdbError> {
        Ok(match self.length_or_encoding(inside)? {
            Length::Plain(n) => StringHead::Plain(n),
            Length::Encoded(0) => StringHead::Integer(i64::from(self.source.u8(inside)? as i8)),
            Length::Encoded(1) => {
                let mut b = [0u8; 2];
                self.source.read_exact(&mut b, inside)?;
                StringHead::Integer(i64::from(i16::from_le_bytes(b)))
            }
            Length::Encoded(2) => {
                StringHead::Integer(i64::from(self.source.u32_le(inside)? as i32))
            }
            Length::Encoded(3) => {
                let compressed = self.length(inside)?;
                let length = self.length(inside)?;
                StringHead::Lzf { compressed, length }
            }
            Length::Encoded(other) => {
                return Err(self.source.error_at(
                    self.source.offset() - 1,
                    Problem::Corrupt {
                        detail: format!("{inside} has the unknown string encoding {other}"),
                    },
                ));
            }
        })
    }

    /// Reads a string value through `read`, which sees its bytes as a stream (decoded when
    /// compressed); an integer-encoded string is given as its digits.
    fn with_string<T>(
        &mut self,
        inside: &'static str,
        read: &mut dyn FnMut(&mut dyn ByteStream) -> Result<T, RdbError>,
    ) -> Result<T, RdbError> {
        let started_at = self.source.offset();
        match self.string_head(inside)? {
            StringHead::Integer(value) => {
                let digits = value.to_string().into_bytes();
                let mut stream = Digits {
                    bytes: digits,
                    at: 0,
                    file: self.source.file().to_string(),
                    offset: started_at,
                    kept: self.source.kept.clone(),
                };
                read(&mut stream)
            }
            StringHead::Plain(length) => {
                let mut window = Window {
                    source: &mut self.source,
                    remaining: length,
                    started_at,
                    inside,
                };
                let value = read(&mut window)?;
                let left = window.remaining;
                window.skip(left)?;
                Ok(value)
            }
            StringHead::Lzf { compressed, length } => {
                let window = Window {
                    source: &mut self.source,
                    remaining: compressed,
                    started_at,
                    inside,
                };
                let mut lzf = Lzf::new(window, length);
                let value = read(&mut lzf)?;
                let left = lzf.remaining();
                lzf.skip(left)?;
                lzf.finish()?;
                Ok(value)
            }
        }
    }

    /// A string as one element.
    fn scalar(&mut self, inside: &'static str) -> Result<Scalar, RdbError> {
        self.with_string(inside, &mut |stream| {
            let length = stream.remaining();
            compact::text(stream, length)
        })
    }

    /// A string read whole, up to `most` bytes (longer ones are an error).
    fn bytes(&mut self, inside: &'static str, most: u64) -> Result<Vec<u8>, RdbError> {
        self.with_string(inside, &mut |stream| {
            let length = stream.remaining();
            if length > most {
                return Err(stream.corrupt(format!(
                    "{inside} is {length} bytes long, more than the {most} this reader keeps"
                )));
            }
            // In pieces, so that a corrupt length allocates no more than the file holds.
            let mut bytes = Vec::new();
            let mut piece = [0u8; 4096];
            while (bytes.len() as u64) < length {
                let n = (length - bytes.len() as u64).min(piece.len() as u64) as usize;
                stream.read_exact(&mut piece[..n])?;
                bytes.extend_from_slice(&piece[..n]);
            }
            Ok(bytes)
        })
    }

    /// A string passed over, returning its length.
    fn skip_string(&mut self, inside: &'static str) -> Result<u64, RdbError> {
        self.with_string(inside, &mut |stream| Ok(stream.remaining()))
    }

    /// A module value or auxiliary record in the annotated (v2) format: typed items up to
    /// RDB_MODULE_OPCODE_EOF.
    fn skip_module_items(&mut self) -> Result<(), RdbError> {
        loop {
            let at = self.source.offset();
            match self.length("a module value")? {
                0 => return Ok(()),
                1 | 2 => {
                    self.length("a module value")?;
                }
                3 => self.source.skip(4, "a module value")?,
                4 => self.source.skip(8, "a module value")?,
                5 => {
                    self.skip_string("a module value")?;
                }
                other => {
                    return Err(self.source.error_at(
                        at,
                        Problem::Corrupt {
                            detail: format!("a module value has the unknown item opcode {other}"),
                        },
                    ));
                }
            }
        }
    }

    /// The next key, its elements given to `each` (with the key's kind) as they are read;
    /// None at the end of the file, after the checksum was verified.
    pub fn next_key(
        &mut self,
        each: &mut dyn FnMut(&KeyKind, Part, Scalar),
    ) -> Result<Option<KeyEntry>, RdbError> {
        if self.done {
            return Ok(None);
        }
        let mut expire_at_ms: Option<i64> = None;
        loop {
            let at = self.source.offset();
            let kind = self.source.u8("an opcode")?;
            match kind {
                OPCODE_EOF => {
                    self.finish()?;
                    return Ok(None);
                }
                OPCODE_SELECTDB => self.db = self.length("SELECTDB")?,
                OPCODE_RESIZEDB => {
                    let keys = self.length("RESIZEDB")?;
                    let expires = self.length("RESIZEDB")?;
                    self.facts.resize_hints.insert(self.db, (keys, expires));
                }
                OPCODE_EXPIRETIME_MS => {
                    expire_at_ms = Some(self.source.u64_le("an expiry")? as i64);
                }
                OPCODE_EXPIRETIME => {
                    expire_at_ms = Some(i64::from(self.source.u32_le("an expiry")? as i32) * 1000);
                }
                OPCODE_IDLE => {
                    self.length("an LRU idle time")?;
                }
                OPCODE_FREQ => {
                    self.source.u8("an LFU frequency")?;
                }
                OPCODE_AUX => {
                    let name = self.bytes("an AUX field's name", 1 << 20)?;
                    let value = self.with_string("an AUX field's value", &mut |stream| {
                        let length = stream.remaining();
                        if length > AUX_KEPT {
                            stream.skip(length)?;
                            return Ok(None);
                        }
                        let mut bytes = vec![0u8; length as usize];
                        stream.read_exact(&mut bytes)?;
                        Ok(Some(bytes))
                    })?;
                    if let Some(value) = value {
                        self.facts.aux.insert(
                            String::from_utf8_lossy(&name).into_owned(),
                            String::from_utf8_lossy(&value).into_owned(),
                        );
                    }
                }
                OPCODE_MODULE_AUX => {
                    let id = self.length("a module auxiliary record")?;
                    self.length("a module auxiliary record")?;
                    self.length("a module auxiliary record")?;
                    self.skip_module_items()?;
                    *self.facts.module_aux.entry(module_name(id)).or_default() += 1;
                }
                OPCODE_FUNCTION2 => {
                    self.skip_string("a function library")?;
                    self.facts.function_libraries += 1;
                }
                OPCODE_FUNCTION_PRE_GA => {
                    return Err(self.source.error_at(
                        at,
                        Problem::Unsupported {
                            what: "the file holds functions in the format of Redis 7.0's release candidates (RDB_OPCODE_FUNCTION_PRE_GA), which this membench does not read: load it into Redis 7.0 GA or later and save it again".into(),
                        },
                    ));
                }
                OPCODE_SLOT_INFO => {
                    for _ in 0..3 {
                        self.length("SLOT_INFO")?;
                    }
                }
                // Redis 8.6's key metadata (module metadata classes): a count, then per class
                // its 4-byte id and an annotated value.
                OPCODE_KEY_META if self.magic == Magic::Redis && self.version >= 13 => {
                    let classes = self.length("key metadata")?;
                    for _ in 0..classes {
                        self.source.skip(4, "key metadata")?;
                        self.skip_module_items()?;
                    }
                }
                DF_OPCODE_MASK if self.magic == Magic::Redis => {
                    let mask = self.source.u32_le("a Dragonfly key mask")?;
                    if mask & DF_MASK_MC_FLAGS != 0 {
                        self.source.u32_le("a Dragonfly key mask")?;
                    }
                }
                DF_OPCODE_JOURNAL_OFFSET | DF_OPCODE_FULLSYNC_END if self.magic == Magic::Redis => {
                    self.source.skip(8, "a Dragonfly replication record")?;
                }
                DF_OPCODE_COMPRESSED_ZSTD | DF_OPCODE_COMPRESSED_LZ4
                    if self.magic == Magic::Redis =>
                {
                    return Err(self.source.error_at(
                        at,
                        Problem::Unsupported {
                            what: "the file holds Dragonfly's compressed blocks (a .dfs snapshot or a replication stream, not SAVE RDB's output): save it with SAVE RDB, or start Dragonfly with --compression_mode=0 or 1".into(),
                        },
                    ));
                }
                value_type => {
                    let key = self.key(value_type, at, expire_at_ms, each)?;
                    return Ok(Some(key));
                }
            }
        }
    }

    /// The next key as [`RdbReader::next_key`] reads it, each element given with its key's
    /// head and its bytes (a score as the shortest text that reads back as the same double, a
    /// stream entry's [`Part::Entry`] as its id `ms-seq`). Needs [`RdbReader::with_values`].
    pub fn next_key_with_values(
        &mut self,
        each: &mut dyn FnMut(&KeyHead, Part, &[u8]),
    ) -> Result<Option<KeyEntry>, RdbError> {
        let Some(kept) = self.source.kept.clone() else {
            return Err(self.source.error(Problem::Unsupported {
                what: "values were asked of a reader made without with_values (a bug in membench)"
                    .into(),
            }));
        };
        self.next_key(&mut |_, part, _| {
            let kept = kept.borrow();
            each(&kept.head, part, &kept.bytes)
        })
    }

    /// The next key as [`RdbReader::next_key`] reads it, each element given with its bytes
    /// ([`ElementWithBytes`]) as far as the reader keeps them ([`RdbReader::with_short_values`]: none past its cap;
    /// none at all from a reader made without it).
    pub fn next_key_with_bytes(
        &mut self,
        each: &mut ElementWithBytes<'_>,
    ) -> Result<Option<KeyEntry>, RdbError> {
        let kept = self.source.kept.clone();
        self.next_key(&mut |kind, part, scalar| match &kept {
            Some(kept) => each(kind, part, scalar, &kept.borrow().bytes),
            None => each(kind, part, scalar, &[]),
        })
    }

    fn finish(&mut self) -> Result<(), RdbError> {
        self.done = true;
        if self.version < 5 {
            self.facts.checksum = Some(Checksum::Absent);
            return Ok(());
        }
        let computed = self.source.crc();
        let at = self.source.offset();
        let stored = self.source.u64_le("the checksum")?;
        self.facts.checksum = Some(if stored == 0 {
            Checksum::Disabled
        } else if stored == computed {
            Checksum::Verified(stored)
        } else {
            return Err(self
                .source
                .error_at(at, Problem::Checksum { stored, computed }));
        });
        Ok(())
    }

    fn key(
        &mut self,
        value_type: u8,
        at: u64,
        expire_at_ms: Option<i64>,
        each: &mut dyn FnMut(&KeyKind, Part, Scalar),
    ) -> Result<KeyEntry, RdbError> {
        let Some(kind) = values::kind_of(value_type, self.magic) else {
            return Err(self.unknown(value_type, at));
        };
        let of_kind = kind.clone();
        let each = &mut |part, scalar| each(&of_kind, part, scalar);
        let name = self.bytes("a key name", 512 << 20)?;
        if let Some(kept) = &self.source.kept {
            kept.borrow_mut().head = KeyHead {
                db: self.db,
                name: name.clone(),
                kind: Some(of_kind.clone()).filter(|k| !matches!(k, KeyKind::Module(_))),
                expire_at_ms,
            };
        }
        let mut entry = KeyEntry {
            db: self.db,
            name,
            kind,
            rdb_type: value_type,
            expire_at_ms,
            elements: 0,
            fields_with_ttl: 0,
            field_expiries: Vec::new(),
            stream: None,
        };
        let magic = self.magic;
        values::read_value(self, magic, &mut entry, each)?;
        Ok(entry)
    }
}

impl<R: Read> FileCursor for RdbReader<R> {
    fn length(&mut self, inside: &'static str) -> Result<u64, RdbError> {
        RdbReader::length(self, inside)
    }

    fn skip(&mut self, n: u64, inside: &'static str) -> Result<(), RdbError> {
        self.source.skip(n, inside)
    }

    fn skip_string(&mut self, inside: &'static str) -> Result<u64, RdbError> {
        RdbReader::skip_string(self, inside)
    }

    fn string(
        &mut self,
        inside: &'static str,
        read: &mut dyn FnMut(&mut dyn ByteStream) -> Result<u64, RdbError>,
    ) -> Result<u64, RdbError> {
        self.with_string(inside, read)
    }

    fn read_exact(&mut self, out: &mut [u8], inside: &'static str) -> Result<(), RdbError> {
        self.source.read_exact(out, inside)
    }

    fn u8(&mut self, inside: &'static str) -> Result<u8, RdbError> {
        self.source.u8(inside)
    }

    fn u64_le(&mut self, inside: &'static str) -> Result<u64, RdbError> {
        self.source.u64_le(inside)
    }

    fn scalar(&mut self, inside: &'static str) -> Result<Scalar, RdbError> {
        RdbReader::scalar(self, inside)
    }

    fn bytes(&mut self, inside: &'static str, most: u64) -> Result<Vec<u8>, RdbError> {
        RdbReader::bytes(self, inside, most)
    }

    fn skip_module_items(&mut self) -> Result<(), RdbError> {
        RdbReader::skip_module_items(self)
    }

    fn offset(&self) -> u64 {
        self.source.offset()
    }

    fn error_at(&self, at: u64, problem: Problem) -> RdbError {
        self.source.error_at(at, problem)
    }

    fn unknown(&self, byte: u8) -> RdbError {
        RdbReader::unknown(self, byte, self.source.offset())
    }

    fn kept(&self) -> Option<Kept> {
        self.source.kept.clone()
    }
}

/// An integer-encoded string's digits as a stream.
struct Digits {
    bytes: Vec<u8>,
    at: usize,
    /// The file and the offset of the string, for errors.
    file: String,
    offset: u64,
    kept: Option<Kept>,
}

impl ByteStream for Digits {
    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), RdbError> {
        if out.len() as u64 > self.remaining() {
            return Err(self.corrupt(
                "an integer-encoded string is read as an encoded value longer than its digits"
                    .into(),
            ));
        }
        out.copy_from_slice(&self.bytes[self.at..self.at + out.len()]);
        self.at += out.len();
        Ok(())
    }

    fn skip(&mut self, n: u64) -> Result<(), RdbError> {
        if n > self.remaining() {
            return Err(self.corrupt(
                "an integer-encoded string is read as an encoded value longer than its digits"
                    .into(),
            ));
        }
        self.at += n as usize;
        Ok(())
    }

    fn remaining(&self) -> u64 {
        (self.bytes.len() - self.at) as u64
    }

    fn corrupt(&self, detail: String) -> RdbError {
        RdbError {
            file: self.file.clone(),
            offset: self.offset,
            problem: Problem::Corrupt { detail },
        }
    }

    fn kept(&self) -> Option<Kept> {
        self.kept.clone()
    }
}
