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
#[derive(Clone, Default)]
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

    /// Appends bytes that are already RESP (a part every command of a workload shares).
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    /// Appends `n` zero-padded to `width` digits, with no framing: the variable part of an
    /// argument whose framing is in a pre-encoded prefix (`$16\r\nkey:` + 12 digits).
    pub fn padded_digits(&mut self, n: u64, width: usize) -> &mut Self {
        // Formatted into zeros, so the padding is already in place: one copy.
        let mut digits = [b'0'; 20];
        let formatted = format_decimal(n, &mut digits).len();
        let start = digits.len() - formatted.max(width.min(digits.len()));
        self.bytes.extend_from_slice(&digits[start..]);
        self
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
        self.bulk_prefixed_digits(prefix, text)
    }

    /// Appends an argument made of `prefix` followed by `digits` already formatted (such as
    /// `m:42`, where 42 was formatted once for the score too).
    pub fn bulk_prefixed_digits(&mut self, prefix: &[u8], digits: &[u8]) -> &mut Self {
        self.bytes.push(b'$');
        push_decimal(&mut self.bytes, (prefix.len() + digits.len()) as u64);
        self.bytes.extend_from_slice(b"\r\n");
        self.bytes.extend_from_slice(prefix);
        self.bytes.extend_from_slice(digits);
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

/// "00" to "99", so that numbers are formatted two digits per division.
const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Formats `n` into the end of `buf` and returns the digits.
pub(crate) fn format_decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        buf[at] = b'0' + n as u8;
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
    /// The first error reply, without its leading `-` (at most 1 KiB of it).
    pub first_error: Option<String>,
}

impl ReplyTally {
    /// Adds an integer reply; a sum past 2^64 is an engine that is not counting items.
    fn add(&mut self, n: u64) -> io::Result<()> {
        self.integer_sum = self.integer_sum.checked_add(n).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "the engine's integer replies add up past 2^64",
            )
        })?;
        Ok(())
    }
}

/// The reply buffer's size, and so the longest reply line the load path takes. Write commands
/// answer a few bytes; a server that sends this much without ending a line is not speaking
/// RESP, and the buffer never grows to follow it.
pub const REPLY_BUFFER: usize = 256 * 1024;

/// The longest error reply kept (the rest of the line is read and dropped).
const MAX_ERROR_TEXT: usize = 1024;

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
                        input: vec![0; REPLY_BUFFER],
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
        loop {
            let (consumed, replies) = scan_replies(
                &self.input[self.consumed..self.filled],
                remaining,
                &mut tally,
            )?;
            self.consumed += consumed;
            remaining -= replies;
            if remaining == 0 {
                return Ok(tally);
            }
            self.fill()?;
        }
    }

    /// Reads more bytes, first moving any partial line to the front of the buffer.
    fn fill(&mut self) -> io::Result<()> {
        if self.consumed == self.filled {
            // Everything was read: start over at the front, nothing to move.
            self.consumed = 0;
            self.filled = 0;
        } else if self.consumed > 0 {
            self.input.copy_within(self.consumed..self.filled, 0);
            self.filled -= self.consumed;
            self.consumed = 0;
        }
        if self.filled == self.input.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the engine sent a reply line longer than {} KiB without ending it: not a reply to a write command",
                    REPLY_BUFFER / 1024
                ),
            ));
        }
        let read = loop {
            match self.stream.read(&mut self.input[self.filled..]) {
                // A signal (the client's SIGTERM) landed during the read: the replies still come.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
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

/// The longest bulk reply a load accepts: a stream entry ID is two 64-bit numbers and a dash
/// (at most 41 bytes).
const MAX_BULK_REPLY: usize = 64;

/// Counts up to `wanted` complete replies at the start of `window` into `tally`, and returns
/// how many bytes and replies that took; a partial reply at the end is left for the next read.
/// The replies a load expects, `+OK` and `:1`/`:0`, are recognised by their five or four bytes
/// without searching for the line's end; XADD's entry IDs are short bulk strings.
pub(crate) fn scan_replies(
    window: &[u8],
    wanted: usize,
    tally: &mut ReplyTally,
) -> io::Result<(usize, usize)> {
    let mut at = 0;
    let mut replies = 0;
    while replies < wanted {
        let rest = &window[at..];
        if rest.starts_with(b"+OK\r\n") {
            at += 5;
        } else if rest.len() >= 4
            && rest[0] == b':'
            && rest[2..4] == *b"\r\n"
            && rest[1].is_ascii_digit()
        {
            tally.add(u64::from(rest[1] - b'0'))?;
            at += 4;
        } else {
            let Some(newline) = rest.iter().position(|&b| b == b'\n') else {
                break;
            };
            let line = rest[..newline]
                .strip_suffix(b"\r")
                .unwrap_or(&rest[..newline]);
            match line.first() {
                Some(b'+') => {}
                Some(b':') => tally.add(parse_integer(&line[1..])?)?,
                Some(b'-') => {
                    if tally.first_error.is_none() {
                        let text = &line[1..line.len().min(MAX_ERROR_TEXT + 1)];
                        tally.first_error = Some(String::from_utf8_lossy(text).into_owned());
                    }
                }
                // XADD's entry ID (`$15\r\n1764-0\r\n`): a short bulk string, skipped whole.
                Some(b'$') if line.len() > 1 && line.len() <= 4 => {
                    let length = parse_integer(&line[1..])? as usize;
                    if length > MAX_BULK_REPLY {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "unexpected reply '{}': a bulk string longer than the {MAX_BULK_REPLY} bytes of a stream entry ID",
                                String::from_utf8_lossy(line)
                            ),
                        ));
                    }
                    let end = newline + 1 + length + 2;
                    if rest.len() < end {
                        break;
                    }
                    at += end;
                    replies += 1;
                    continue;
                }
                // XCLAIM ... JUSTID's ids and HPEXPIREAT's per-field codes: a short array
                // of integers and short bulk strings, one reply, counted as none.
                Some(b'*') if line.len() > 1 && line.len() <= 3 => {
                    let Some(length) = short_array(rest, &line[1..], newline + 1)? else {
                        break;
                    };
                    at += length;
                    replies += 1;
                    continue;
                }
                _ => {
                    let shown = &line[..line.len().min(80)];
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("unexpected reply '{}'", String::from_utf8_lossy(shown)),
                    ));
                }
            }
            at += newline + 1;
        }
        replies += 1;
    }
    Ok((at, replies))
}

/// The length of the array reply at the start of `rest` of `count_digits` elements, whose
/// header line ends at `start` (at most 99 elements, each an integer or a bulk string of at
/// most [`MAX_BULK_REPLY`] bytes), or None while it has not all arrived.
fn short_array(rest: &[u8], count_digits: &[u8], start: usize) -> io::Result<Option<usize>> {
    let count = parse_integer(count_digits)?;
    let mut at = start;
    for _ in 0..count {
        let Some(newline) = rest[at..].iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        let line = &rest[at..at + newline];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match line.first() {
            Some(b':') => at += newline + 1,
            Some(b'$') if line.len() > 1 && line.len() <= 4 => {
                let length = parse_integer(&line[1..])? as usize;
                if length > MAX_BULK_REPLY {
                    return Err(unexpected(line));
                }
                at += newline + 1 + length + 2;
                if rest.len() < at {
                    return Ok(None);
                }
            }
            _ => return Err(unexpected(line)),
        }
    }
    Ok(Some(at))
}

fn unexpected(line: &[u8]) -> io::Error {
    let shown = &line[..line.len().min(80)];
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "unexpected reply '{}' in an array reply",
            String::from_utf8_lossy(shown)
        ),
    )
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
                    String::from_utf8_lossy(&digits[..digits.len().min(40)])
                ),
            ));
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "integer reply ':{}' does not fit in 64 bits",
                        String::from_utf8_lossy(&digits[..digits.len().min(40)])
                    ),
                )
            })?;
    }
    Ok(n)
}

/// The names and values of a reply that is a flat list of them (RESP2) or a map (RESP3).
pub fn named_entries(value: &redis::Value) -> Vec<(String, redis::Value)> {
    let named = |name: &redis::Value, value: &redis::Value| {
        Some((redis::from_redis_value(name.clone()).ok()?, value.clone()))
    };
    match value {
        redis::Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| match pair {
                [name, value] => named(name, value),
                _ => None,
            })
            .collect(),
        redis::Value::Map(items) => items.iter().filter_map(|(n, v)| named(n, v)).collect(),
        _ => Vec::new(),
    }
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
    fn decimals_are_formatted_exactly_at_every_digit_count() {
        let mut digits = [0u8; 20];
        let mut n = 0u64;
        for _ in 0..20 {
            for probe in [n, n.saturating_sub(1), n + 1, n.saturating_mul(7) / 3] {
                assert_eq!(
                    format_decimal(probe, &mut digits),
                    probe.to_string().as_bytes()
                );
            }
            n = n.saturating_mul(10).max(1);
        }
        assert_eq!(
            format_decimal(u64::MAX, &mut digits),
            u64::MAX.to_string().as_bytes()
        );
    }

    #[test]
    fn replies_are_tallied_and_a_partial_one_is_left_for_the_next_read() {
        let mut tally = ReplyTally::default();
        let window = b"+OK\r\n:1\r\n:0\r\n:12\r\n-OOM command not allowed\r\n+QUEUED\r\n:1\r";
        let (consumed, replies) = scan_replies(window, 10, &mut tally).unwrap();
        assert_eq!(replies, 6);
        assert_eq!(consumed, window.len() - 3, "the unfinished ':1\\r' stays");
        assert_eq!(tally.integer_sum, 13);
        assert_eq!(
            tally.first_error.as_deref(),
            Some("OOM command not allowed")
        );
        let mut tally = ReplyTally::default();
        assert_eq!(
            scan_replies(b"+OK\r\n+OK\r\n", 1, &mut tally).unwrap(),
            (5, 1)
        );
        // XADD answers the entry's ID; a partial one waits for the next read.
        let ids = b"$15\r\n1764000000000-0\r\n$15\r\n1764000000000-1\r";
        assert_eq!(
            scan_replies(ids, 2, &mut tally).unwrap(),
            (22, 1),
            "the second ID is not complete"
        );
        let bulk = scan_replies(b"$65\r\nabc\r\n", 1, &mut tally).unwrap_err();
        // XCLAIM JUSTID's ids and HPEXPIREAT's codes: one reply each, no count; a partial
        // array waits for its rest.
        let arrays = b"*1\r\n$3\r\n1-0\r\n*1\r\n:-2\r\n*0\r\n*1\r\n$3\r\n1-";
        let mut array_tally = ReplyTally::default();
        assert_eq!(scan_replies(arrays, 4, &mut array_tally).unwrap(), (26, 3));
        assert_eq!(array_tally.integer_sum, 0);
        assert_eq!(bulk.kind(), io::ErrorKind::InvalidData);
        assert!(
            bulk.to_string().contains("longer than the 64 bytes"),
            "{bulk}"
        );
    }

    #[test]
    fn a_server_that_never_ends_a_line_fails_the_read_without_growing_the_buffer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let (mut peer, _) = listener.accept().unwrap();
            // 4 MiB of a reply that never ends; stops when the client hangs up.
            let chunk = [b'+'; 64 * 1024];
            for _ in 0..64 {
                if peer.write_all(&chunk).is_err() {
                    break;
                }
            }
        });
        let mut connection =
            PipelinedConnection::connect(&address, Duration::from_secs(5)).unwrap();
        let error = connection.read_replies(1).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("longer than 256 KiB"), "{error}");
        assert_eq!(
            connection.input.len(),
            REPLY_BUFFER,
            "the buffer never grew"
        );
        drop(connection);
        server.join().unwrap();
    }

    #[test]
    fn integer_replies_past_64_bits_are_an_error_not_a_wrap() {
        let mut tally = ReplyTally::default();
        let long = scan_replies(b":99999999999999999999999\r\n", 1, &mut tally).unwrap_err();
        assert_eq!(long.kind(), io::ErrorKind::InvalidData);
        assert!(long.to_string().contains("64 bits"), "{long}");
        let mut tally = ReplyTally::default();
        let sum = scan_replies(b":18446744073709551615\r\n:1\r\n", 2, &mut tally).unwrap_err();
        assert!(sum.to_string().contains("past 2^64"), "{sum}");
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
