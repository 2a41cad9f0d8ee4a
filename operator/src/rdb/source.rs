//! The bytes of an RDB file as they are read: a bounded buffer over any `Read`, the offset of
//! every byte (for errors) and the running CRC64 of the bytes consumed. Values are read
//! through [`ByteStream`]s: a window of the file, or an LZF-compressed one decoded as it is
//! read, so that no value is ever held whole.

use std::io::Read;

use super::crc64;
use super::error::{Problem, RdbError};
use super::kept::Kept;

/// The read buffer: a file is read in pieces of this size.
const BUFFER: usize = 64 * 1024;

/// The file: its bytes, their offset and checksum.
pub struct Source<R: Read> {
    input: R,
    file: String,
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    /// The offset of `buffer[start]` in the file.
    offset: u64,
    crc: u64,
    /// Where each element's bytes go when values were asked for.
    pub kept: Option<Kept>,
}

impl<R: Read> Source<R> {
    pub fn new(input: R, file: &str) -> Self {
        Self {
            input,
            file: file.to_string(),
            buffer: vec![0; BUFFER],
            start: 0,
            end: 0,
            offset: 0,
            crc: 0,
            kept: None,
        }
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    pub fn crc(&self) -> u64 {
        self.crc
    }

    pub fn error(&self, problem: Problem) -> RdbError {
        self.error_at(self.offset, problem)
    }

    pub fn error_at(&self, offset: u64, problem: Problem) -> RdbError {
        RdbError {
            file: self.file.clone(),
            offset,
            problem,
        }
    }

    /// Refills the buffer; false at the end of the input.
    fn fill(&mut self) -> Result<bool, RdbError> {
        if self.start < self.end {
            return Ok(true);
        }
        loop {
            match self.input.read(&mut self.buffer) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.start = 0;
                    self.end = n;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.error(Problem::Io(e))),
            }
        }
    }

    fn consume(&mut self, n: usize) {
        self.crc = crc64::update(self.crc, &self.buffer[self.start..self.start + n]);
        self.start += n;
        self.offset += n as u64;
    }

    /// Reads `out.len()` bytes; `inside` names what is being read for a truncated file.
    pub fn read_exact(&mut self, out: &mut [u8], inside: &'static str) -> Result<(), RdbError> {
        let mut done = 0;
        while done < out.len() {
            if !self.fill()? {
                return Err(self.error(Problem::Truncated { inside }));
            }
            let n = (self.end - self.start).min(out.len() - done);
            out[done..done + n].copy_from_slice(&self.buffer[self.start..self.start + n]);
            self.consume(n);
            done += n;
        }
        Ok(())
    }

    /// Passes over `n` bytes (still counted in the checksum).
    pub fn skip(&mut self, mut n: u64, inside: &'static str) -> Result<(), RdbError> {
        while n > 0 {
            if !self.fill()? {
                return Err(self.error(Problem::Truncated { inside }));
            }
            let step = ((self.end - self.start) as u64).min(n) as usize;
            self.consume(step);
            n -= step as u64;
        }
        Ok(())
    }

    pub fn u8(&mut self, inside: &'static str) -> Result<u8, RdbError> {
        let mut b = [0u8; 1];
        self.read_exact(&mut b, inside)?;
        Ok(b[0])
    }

    pub fn u32_le(&mut self, inside: &'static str) -> Result<u32, RdbError> {
        let mut b = [0u8; 4];
        self.read_exact(&mut b, inside)?;
        Ok(u32::from_le_bytes(b))
    }

    pub fn u64_le(&mut self, inside: &'static str) -> Result<u64, RdbError> {
        let mut b = [0u8; 8];
        self.read_exact(&mut b, inside)?;
        Ok(u64::from_le_bytes(b))
    }

    /// The first bytes of the input without consuming them (the header check).
    pub fn peek(&mut self, n: usize) -> Result<Vec<u8>, RdbError> {
        while self.end - self.start < n {
            if self.start > 0 {
                self.buffer.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let read = loop {
                match self.input.read(&mut self.buffer[self.end..]) {
                    Ok(read) => break read,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(self.error(Problem::Io(e))),
                }
            };
            if read == 0 {
                break;
            }
            self.end += read;
        }
        Ok(self.buffer[self.start..self.end.min(self.start + n)].to_vec())
    }
}

/// The bytes of one value: read in order, each byte once.
pub trait ByteStream {
    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), RdbError>;
    fn skip(&mut self, n: u64) -> Result<(), RdbError>;
    /// Bytes left in the value.
    fn remaining(&self) -> u64;
    /// The error of a value that does not parse, at the value's offset.
    fn corrupt(&self, detail: String) -> RdbError;
    /// Where the element read goes, when values were asked for.
    fn kept(&self) -> Option<Kept> {
        None
    }

    fn u8(&mut self) -> Result<u8, RdbError> {
        let mut b = [0u8; 1];
        self.read_exact(&mut b)?;
        Ok(b[0])
    }
}

/// A window of `remaining` bytes of the file: a value stored as it is.
pub struct Window<'a, R: Read> {
    pub source: &'a mut Source<R>,
    pub remaining: u64,
    pub started_at: u64,
    pub inside: &'static str,
}

impl<R: Read> ByteStream for Window<'_, R> {
    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), RdbError> {
        if out.len() as u64 > self.remaining {
            return Err(self.corrupt(format!(
                "{} reads past its own length of bytes",
                self.inside
            )));
        }
        self.source.read_exact(out, self.inside)?;
        self.remaining -= out.len() as u64;
        Ok(())
    }

    fn skip(&mut self, n: u64) -> Result<(), RdbError> {
        if n > self.remaining {
            return Err(self.corrupt(format!(
                "{} reads past its own length of bytes",
                self.inside
            )));
        }
        self.source.skip(n, self.inside)?;
        self.remaining -= n;
        Ok(())
    }

    fn remaining(&self) -> u64 {
        self.remaining
    }

    fn corrupt(&self, detail: String) -> RdbError {
        self.source
            .error_at(self.started_at, Problem::Corrupt { detail })
    }

    fn kept(&self) -> Option<Kept> {
        self.source.kept.clone()
    }
}

/// LZF refers back at most this far (13 bits of offset, plus one).
const LZF_WINDOW: usize = 8192;

/// An LZF-compressed value, decoded as it is read: the last 8 KiB of output are kept for the
/// back references, nothing more.
pub struct Lzf<'a, R: Read> {
    input: Window<'a, R>,
    /// Bytes of output still to come.
    remaining: u64,
    history: Box<[u8; LZF_WINDOW]>,
    written: u64,
    literal: usize,
    copy: usize,
    copy_from: u64,
}

impl<'a, R: Read> Lzf<'a, R> {
    pub fn new(input: Window<'a, R>, decoded_length: u64) -> Self {
        Self {
            input,
            remaining: decoded_length,
            history: Box::new([0; LZF_WINDOW]),
            written: 0,
            literal: 0,
            copy: 0,
            copy_from: 0,
        }
    }

    fn next_byte(&mut self) -> Result<u8, RdbError> {
        loop {
            if self.literal > 0 {
                self.literal -= 1;
                return self.input.u8();
            }
            if self.copy > 0 {
                self.copy -= 1;
                let b = self.history[(self.copy_from % LZF_WINDOW as u64) as usize];
                self.copy_from += 1;
                return Ok(b);
            }
            let control = self.input.u8()?;
            if control < 32 {
                self.literal = usize::from(control) + 1;
            } else {
                let mut length = usize::from(control >> 5);
                if length == 7 {
                    length += usize::from(self.input.u8()?);
                }
                let back = (usize::from(control & 0x1f) << 8) + usize::from(self.input.u8()?) + 1;
                if back as u64 > self.written {
                    return Err(self
                        .input
                        .corrupt("an LZF-compressed string refers back before its start".into()));
                }
                self.copy = length + 2;
                self.copy_from = self.written - back as u64;
            }
        }
    }

    fn put(&mut self, b: u8) {
        self.history[(self.written % LZF_WINDOW as u64) as usize] = b;
        self.written += 1;
    }

    /// Checks that the compressed input was used up exactly.
    pub fn finish(self) -> Result<(), RdbError> {
        if self.input.remaining > 0 || self.literal > 0 || self.copy > 0 {
            return Err(self.input.corrupt(format!(
                "an LZF-compressed string does not decode to its stated length ({} compressed bytes left over)",
                self.input.remaining
            )));
        }
        Ok(())
    }
}

impl<R: Read> ByteStream for Lzf<'_, R> {
    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), RdbError> {
        if out.len() as u64 > self.remaining {
            return Err(self.corrupt("a compressed value reads past its own length".into()));
        }
        for slot in out.iter_mut() {
            let b = self.next_byte()?;
            self.put(b);
            *slot = b;
        }
        self.remaining -= out.len() as u64;
        Ok(())
    }

    fn skip(&mut self, n: u64) -> Result<(), RdbError> {
        if n > self.remaining {
            return Err(self.corrupt("a compressed value reads past its own length".into()));
        }
        for _ in 0..n {
            let b = self.next_byte()?;
            self.put(b);
        }
        self.remaining -= n;
        Ok(())
    }

    fn remaining(&self) -> u64 {
        self.remaining
    }

    fn corrupt(&self, detail: String) -> RdbError {
        self.input.corrupt(detail)
    }

    fn kept(&self) -> Option<Kept> {
        self.input.kept()
    }
}
