//! The compact encodings a value can be saved in, read element by element from a byte stream:
//! listpack, ziplist, intset and zipmap. Each calls `each` with every element's [`Scalar`] and
//! returns how many there were; no element is kept.

use super::error::RdbError;
use super::kept;
use super::scalar::{LONGEST_INTEGER, Scalar};
use super::source::ByteStream;

/// A compact encoding's reader: its bytes in, each element to the callback, the count out.
pub type Format = fn(
    &mut dyn ByteStream,
    &mut dyn FnMut(Scalar) -> Result<(), RdbError>,
) -> Result<u64, RdbError>;

/// A string element of `length` bytes: its first bytes looked at, the rest passed over (or,
/// when values were asked for, read whole up to the cap).
pub fn text(stream: &mut dyn ByteStream, length: u64) -> Result<Scalar, RdbError> {
    if let Some(kept) = stream.kept() {
        let mut kept = kept.borrow_mut();
        if length > kept.cap && kept.lenient {
            kept.bytes.clear();
            stream.skip(length)?;
            return Ok(Scalar::of_text(&[], length));
        }
        if length > kept.cap {
            return Err(stream.corrupt(format!(
                "an element is {length} bytes long, more than the {} bytes membench holds of one element while loading; load a file with values this large into the engine itself (as its dbfilename, at start)",
                kept.cap
            )));
        }
        kept.bytes.clear();
        // In pieces, so that a corrupt length allocates no more than the file holds.
        let mut piece = [0u8; 4096];
        while (kept.bytes.len() as u64) < length {
            let n = (length - kept.bytes.len() as u64).min(piece.len() as u64) as usize;
            stream.read_exact(&mut piece[..n])?;
            kept.bytes.extend_from_slice(&piece[..n]);
        }
        let head = &kept.bytes[..kept.bytes.len().min(LONGEST_INTEGER)];
        return Ok(Scalar::of_text(head, length));
    }
    if length as usize <= LONGEST_INTEGER {
        let mut head = [0u8; LONGEST_INTEGER];
        let head = &mut head[..length as usize];
        stream.read_exact(head)?;
        Ok(Scalar::of_text(head, length))
    } else {
        stream.skip(length)?;
        Ok(Scalar::of_text(&[], length))
    }
}

fn signed(bytes: &[u8]) -> i64 {
    // Little-endian, sign-extended from its width.
    let mut value: u64 = 0;
    for (i, b) in bytes.iter().enumerate() {
        value |= u64::from(*b) << (8 * i);
    }
    let bits = 8 * bytes.len() as u32;
    if bits < 64 && value & (1 << (bits - 1)) != 0 {
        value |= u64::MAX << bits;
    }
    value as i64
}

fn read_signed(stream: &mut dyn ByteStream, width: usize) -> Result<i64, RdbError> {
    let mut bytes = [0u8; 8];
    stream.read_exact(&mut bytes[..width])?;
    Ok(signed(&bytes[..width]))
}

/// The size of a listpack entry's back length, from the entry's own size.
fn backlen_size(entry: u64) -> u64 {
    match entry {
        0..=127 => 1,
        128..=16_383 => 2,
        16_384..=2_097_151 => 3,
        2_097_152..=268_435_455 => 4,
        _ => 5,
    }
}

/// An integer element, its digits kept when values were asked for.
fn integer(stream: &dyn ByteStream, value: i64) -> Scalar {
    kept::set_integer(&stream.kept(), value);
    Scalar::of_integer(value)
}

fn integer_of(stream: &mut dyn ByteStream, width: usize) -> Result<Scalar, RdbError> {
    let value = read_signed(stream, width)?;
    Ok(integer(stream, value))
}

/// A listpack: a 6-byte header, entries, 0xFF.
pub fn listpack(
    stream: &mut dyn ByteStream,
    each: &mut dyn FnMut(Scalar) -> Result<(), RdbError>,
) -> Result<u64, RdbError> {
    let mut header = [0u8; 6];
    stream.read_exact(&mut header)?;
    let mut count = 0;
    loop {
        let first = stream.u8()?;
        let (scalar, size) = match first {
            0xff => break,
            b if b & 0x80 == 0 => (integer(stream, i64::from(b & 0x7f)), 1),
            b if b & 0xc0 == 0x80 => {
                let length = u64::from(b & 0x3f);
                (text(stream, length)?, 1 + length)
            }
            b if b & 0xe0 == 0xc0 => {
                let low = stream.u8()?;
                let mut value = (i64::from(b & 0x1f) << 8) | i64::from(low);
                if value >= 1 << 12 {
                    value -= 1 << 13;
                }
                (integer(stream, value), 2)
            }
            b if b & 0xf0 == 0xe0 => {
                let low = stream.u8()?;
                let length = (u64::from(b & 0x0f) << 8) | u64::from(low);
                (text(stream, length)?, 2 + length)
            }
            0xf0 => {
                let mut bytes = [0u8; 4];
                stream.read_exact(&mut bytes)?;
                let length = u64::from(u32::from_le_bytes(bytes));
                (text(stream, length)?, 5 + length)
            }
            0xf1 => (integer_of(stream, 2)?, 3),
            0xf2 => (integer_of(stream, 3)?, 4),
            0xf3 => (integer_of(stream, 4)?, 5),
            0xf4 => (integer_of(stream, 8)?, 9),
            other => {
                return Err(stream.corrupt(format!(
                    "a listpack entry has the unknown encoding byte {other:#04x}"
                )));
            }
        };
        stream.skip(backlen_size(size))?;
        each(scalar)?;
        count += 1;
    }
    if stream.remaining() != 0 {
        return Err(stream.corrupt(format!(
            "a listpack ends {} bytes before its string does",
            stream.remaining()
        )));
    }
    Ok(count)
}

/// A ziplist: a 10-byte header, entries each after the previous one's length, 0xFF.
pub fn ziplist(
    stream: &mut dyn ByteStream,
    each: &mut dyn FnMut(Scalar) -> Result<(), RdbError>,
) -> Result<u64, RdbError> {
    let mut header = [0u8; 10];
    stream.read_exact(&mut header)?;
    let mut count = 0;
    loop {
        let prevlen = stream.u8()?;
        if prevlen == 0xff {
            break;
        }
        if prevlen == 0xfe {
            stream.skip(4)?;
        }
        let encoding = stream.u8()?;
        let scalar = match encoding >> 6 {
            0 => text(stream, u64::from(encoding & 0x3f))?,
            1 => {
                let low = stream.u8()?;
                text(stream, (u64::from(encoding & 0x3f) << 8) | u64::from(low))?
            }
            2 => {
                let mut bytes = [0u8; 4];
                stream.read_exact(&mut bytes)?;
                text(stream, u64::from(u32::from_be_bytes(bytes)))?
            }
            _ => {
                let value = match encoding {
                    0xc0 => read_signed(stream, 2)?,
                    0xd0 => read_signed(stream, 4)?,
                    0xe0 => read_signed(stream, 8)?,
                    0xf0 => read_signed(stream, 3)?,
                    0xfe => read_signed(stream, 1)?,
                    0xf1..=0xfd => i64::from(encoding & 0x0f) - 1,
                    other => {
                        return Err(stream.corrupt(format!(
                            "a ziplist entry has the unknown encoding byte {other:#04x}"
                        )));
                    }
                };
                integer(stream, value)
            }
        };
        each(scalar)?;
        count += 1;
    }
    Ok(count)
}

/// An intset: its width (2, 4 or 8 bytes), its length, the integers.
pub fn intset(
    stream: &mut dyn ByteStream,
    each: &mut dyn FnMut(Scalar) -> Result<(), RdbError>,
) -> Result<u64, RdbError> {
    let mut header = [0u8; 8];
    stream.read_exact(&mut header)?;
    let width = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let length = u64::from(u32::from_le_bytes([
        header[4], header[5], header[6], header[7],
    ]));
    if !matches!(width, 2 | 4 | 8) {
        return Err(stream.corrupt(format!("an intset has the width {width}")));
    }
    for _ in 0..length {
        let value = read_signed(stream, width)?;
        each(integer(stream, value))?;
    }
    Ok(length)
}

/// A zipmap (Redis before 2.6): a count byte, then length-prefixed keys and values.
pub fn zipmap(
    stream: &mut dyn ByteStream,
    each: &mut dyn FnMut(Scalar) -> Result<(), RdbError>,
) -> Result<u64, RdbError> {
    fn length(stream: &mut dyn ByteStream) -> Result<Option<u64>, RdbError> {
        match stream.u8()? {
            0xff => Ok(None),
            254 => {
                let mut bytes = [0u8; 4];
                stream.read_exact(&mut bytes)?;
                Ok(Some(u64::from(u32::from_le_bytes(bytes))))
            }
            n => Ok(Some(u64::from(n))),
        }
    }
    stream.u8()?;
    let mut count = 0;
    while let Some(field) = length(stream)? {
        each(text(stream, field)?)?;
        let Some(value) = length(stream)? else {
            return Err(stream.corrupt("a zipmap ends between a field and its value".into()));
        };
        let free = stream.u8()?;
        each(text(stream, value)?)?;
        stream.skip(u64::from(free))?;
        count += 2;
    }
    Ok(count)
}
