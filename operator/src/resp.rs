//! The wire protocol of the load path: RESP commands encoded straight into a reusable buffer,
//! and replies scanned without building values.
//!
//! The `redis` crate serves the few control commands (INFO, FLUSHALL, DBSIZE); the load itself
//! goes through here because building a `redis::Cmd` per item would make the client, not the
//! engine, set the pace.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Appends commands in RESP to a buffer. Each command is an array of bulk strings.
#[derive(Default)]
pub struct CommandBuffer {
    bytes: Vec<u8>,
}

impl CommandBuffer {
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(capacity),
        }
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Starts a command of `args` arguments (the command name counts as one).
    pub fn array(&mut self, args: usize) -> &mut Self {
        self.bytes.push(b'*');
        push_decimal(&mut self.bytes, args as u64);
        self.bytes.extend_from_slice(b"\r\n");
        self
    }

    /// Appends one argument.
    pub fn bulk(&mut self, arg: &[u8]) -> &mut Self {
        self.bytes.push(b'$');
        push_decimal(&mut self.bytes, arg.len() as u64);
        self.bytes.extend_from_slice(b"\r\n");
        self.bytes.extend_from_slice(arg);
        self.bytes.extend_from_slice(b"\r\n");
        self
    }

    /// Appends an argument that is a decimal number.
    pub fn bulk_decimal(&mut self, n: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let text = format_decimal(n, &mut digits);
        self.bulk(text)
    }

    /// Appends an argument made of `prefix` followed by `n` in decimal (such as `m:42`).
    pub fn bulk_prefixed_decimal(&mut self, prefix: &[u8], n: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let text = format_decimal(n, &mut digits);
        self.bytes.push(b'$');
        push_decimal(&mut self.bytes, (prefix.len() + text.len()) as u64);
        self.bytes.extend_from_slice(b"\r\n");
        self.bytes.extend_from_slice(prefix);
        self.bytes.extend_from_slice(text);
        self.bytes.extend_from_slice(b"\r\n");
        self
    }

    /// Appends an argument made of `prefix` and `n` zero-padded to `width` digits, the key
    /// naming of redis-benchmark and valkey-benchmark (`key:000000000042`).
    pub fn bulk_padded_decimal(&mut self, prefix: &[u8], n: u64, width: usize) -> &mut Self {
        let mut digits = [0u8; 20];
        let text = format_decimal(n, &mut digits);
        let pad = width.saturating_sub(text.len());
        self.bytes.push(b'$');
        push_decimal(&mut self.bytes, (prefix.len() + pad + text.len()) as u64);
        self.bytes.extend_from_slice(b"\r\n");
        self.bytes.extend_from_slice(prefix);
        self.bytes.resize(self.bytes.len() + pad, b'0');
        self.bytes.extend_from_slice(text);
        self.bytes.extend_from_slice(b"\r\n");
        self
    }
}

/// Formats `n` into the end of `buf` and returns the digits.
fn format_decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[at..]
}

/// Appends `n` in decimal, without formatting machinery (it runs once per command).
pub(crate) fn push_decimal(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    out.extend_from_slice(format_decimal(n, &mut digits));
}

/// What a batch of replies held.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReplyTally {
    /// The sum of integer replies (`:n`): for `ZADD NX` the members added, for `HSET` the
    /// fields added.
    pub integer_sum: u64,
    /// The first error reply, without its leading `-`.
    pub first_error: Option<String>,
}

/// A connection used only for pipelined loading.
pub struct PipelinedConnection {
    stream: TcpStream,
    input: Vec<u8>,
    /// Bytes of `input` already consumed.
    consumed: usize,
    /// Bytes of `input` filled by reads.
    filled: usize,
}

impl PipelinedConnection {
    pub fn connect(addr: &str, timeout: Duration) -> io::Result<Self> {
        let mut last_error = None;
        for resolved in std::net::ToSocketAddrs::to_socket_addrs(addr)? {
            match TcpStream::connect_timeout(&resolved, timeout) {
                Ok(stream) => {
                    stream.set_nodelay(true)?;
                    // A reply that takes this long means the engine is stuck or gone.
                    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
                    return Ok(Self {
                        stream,
                        input: vec![0; 256 * 1024],
                        consumed: 0,
                        filled: 0,
                    });
                }
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "address resolved to nothing")
        }))
    }

    /// Sends a batch of encoded commands.
    pub fn send(&mut self, commands: &CommandBuffer) -> io::Result<()> {
        self.stream.write_all(commands.as_bytes())
    }

    /// Reads `count` replies. Only the reply types of write commands are expected (status,
    /// error, integer); anything else is an I/O error of kind `InvalidData`.
    pub fn read_replies(&mut self, count: usize) -> io::Result<ReplyTally> {
        let mut tally = ReplyTally::default();
        let mut remaining = count;
        while remaining > 0 {
            match self.next_line()? {
                Some(range) => {
                    let line = &self.input[range];
                    match line.first() {
                        Some(b'+') => {}
                        Some(b':') => tally.integer_sum += parse_integer(&line[1..])?,
                        Some(b'-') => {
                            if tally.first_error.is_none() {
                                tally.first_error =
                                    Some(String::from_utf8_lossy(&line[1..]).into_owned());
                            }
                        }
                        _ => {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("unexpected reply '{}'", String::from_utf8_lossy(line)),
                            ));
                        }
                    }
                    remaining -= 1;
                }
                None => self.fill()?,
            }
        }
        Ok(tally)
    }

    /// The next complete line (without CRLF) in the input buffer, if there is one.
    fn next_line(&mut self) -> io::Result<Option<std::ops::Range<usize>>> {
        let window = &self.input[self.consumed..self.filled];
        match window.iter().position(|&b| b == b'\n') {
            Some(newline) => {
                let start = self.consumed;
                let end = start + newline;
                self.consumed = end + 1;
                let end = if end > start && self.input[end - 1] == b'\r' {
                    end - 1
                } else {
                    end
                };
                Ok(Some(start..end))
            }
            None => Ok(None),
        }
    }

    /// Reads more bytes, first moving any partial line to the front of the buffer.
    fn fill(&mut self) -> io::Result<()> {
        if self.consumed > 0 {
            self.input.copy_within(self.consumed..self.filled, 0);
            self.filled -= self.consumed;
            self.consumed = 0;
        }
        if self.filled == self.input.len() {
            let grown = self.input.len() * 2;
            self.input.resize(grown, 0);
        }
        let read = self.stream.read(&mut self.input[self.filled..])?;
        if read == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the engine closed the connection",
            ));
        }
        self.filled += read;
        Ok(())
    }
}

fn parse_integer(digits: &[u8]) -> io::Result<u64> {
    // Write commands answer non-negative counts; a negative one would be a protocol surprise.
    let mut n: u64 = 0;
    if digits.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "empty integer reply",
        ));
    }
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "unexpected integer reply ':{}'",
                    String::from_utf8_lossy(digits)
                ),
            ));
        }
        n = n * 10 + u64::from(d - b'0');
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_a_zadd_exactly_as_resp() {
        let mut buf = CommandBuffer::default();
        buf.array(5)
            .bulk(b"ZADD")
            .bulk(b"z")
            .bulk(b"NX")
            .bulk_decimal(42)
            .bulk_prefixed_decimal(b"m:", 42);
        assert_eq!(
            buf.as_bytes(),
            b"*5\r\n$4\r\nZADD\r\n$1\r\nz\r\n$2\r\nNX\r\n$2\r\n42\r\n$4\r\nm:42\r\n"
        );
    }

    #[test]
    fn pads_keys_like_redis_benchmark() {
        let mut buf = CommandBuffer::default();
        buf.bulk_padded_decimal(b"key:", 7, 12);
        assert_eq!(buf.as_bytes(), b"$16\r\nkey:000000000007\r\n");
        buf.clear();
        buf.bulk_decimal(0);
        assert_eq!(buf.as_bytes(), b"$1\r\n0\r\n");
    }
}
