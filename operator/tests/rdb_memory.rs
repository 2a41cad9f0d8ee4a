//! The RDB reader's memory stays flat however large a value is: a generated dump holding a
//! 256 MiB string and a 64 MiB LZF-compressed one is read, checksum and all, while the
//! process's peak resident memory grows by less than 16 MiB (the reader's buffers are a
//! 64 KiB read buffer and an 8 KiB LZF window; holding either value whole would add 64 MiB or
//! more). Its own test file, so that no other test shares the process's peak.

use std::io::Read;

use membench::rdb::{Checksum, Part, RdbReader, crc64};

/// One piece of the generated file: bytes as they are, or one byte repeated.
enum Piece {
    Bytes(Vec<u8>),
    Repeat(Vec<u8>, u64),
}

/// A `Read` of the pieces, the CRC64 appended at the end, never the whole file in memory.
struct Generated {
    pieces: std::collections::VecDeque<Piece>,
    crc: u64,
    trailer: Option<Vec<u8>>,
}

impl Read for Generated {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let Some(piece) = self.pieces.front_mut() else {
                let trailer = self
                    .trailer
                    .get_or_insert_with(|| self.crc.to_le_bytes().to_vec());
                let n = trailer.len().min(out.len());
                out[..n].copy_from_slice(&trailer[..n]);
                trailer.drain(..n);
                return Ok(n);
            };
            let n = match piece {
                Piece::Bytes(bytes) => {
                    let n = bytes.len().min(out.len());
                    out[..n].copy_from_slice(&bytes[..n]);
                    bytes.drain(..n);
                    n
                }
                Piece::Repeat(unit, left) => {
                    let whole = (out.len() / unit.len()).min(*left as usize);
                    for i in 0..whole {
                        out[i * unit.len()..(i + 1) * unit.len()].copy_from_slice(unit);
                    }
                    *left -= whole as u64;
                    whole * unit.len()
                }
            };
            let done = match piece {
                Piece::Bytes(bytes) => bytes.is_empty(),
                Piece::Repeat(_, left) => *left == 0,
            };
            if done {
                self.pieces.pop_front();
            }
            if n > 0 {
                self.crc = crc64::update(self.crc, &out[..n]);
                return Ok(n);
            }
        }
    }
}

fn peak_resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

fn length(n: u64, out: &mut Vec<u8>) {
    out.push(0x80);
    out.extend((n as u32).to_be_bytes());
}

#[test]
fn a_file_of_huge_values_is_read_in_flat_memory() {
    const PLAIN: u64 = 128 << 20;
    const DECODED: u64 = 64 << 20;
    let mut head = b"REDIS0011".to_vec();
    head.extend([0xfe, 0, 0, 5]);
    head.extend(b"plain");
    length(PLAIN, &mut head);
    // The LZF string: one literal byte, then back references of 264 bytes each (the longest
    // one command makes), and a last one of 63.
    let commands = (DECODED - 1) / 264;
    let last = DECODED - 1 - commands * 264;
    assert_eq!(last, 63);
    let mut lzf_head = vec![0, 3];
    lzf_head.extend(b"lzf");
    lzf_head.push(0xc3);
    length(2 + commands * 3 + 3, &mut lzf_head);
    length(DECODED, &mut lzf_head);
    lzf_head.extend([0x00, b'a']);
    let file = Generated {
        pieces: [
            Piece::Bytes(head),
            Piece::Repeat(b"abcdefgh".to_vec(), PLAIN / 8),
            Piece::Bytes(lzf_head),
            Piece::Repeat(vec![0xe0, 0xff, 0x00], commands),
            Piece::Bytes(vec![0xe0, (last - 9) as u8, 0x00, 0xff]),
        ]
        .into(),
        crc: 0,
        trailer: None,
    };
    let before = peak_resident_kib();
    let mut reader = RdbReader::new(file, "generated.rdb").unwrap();
    let mut lengths = Vec::new();
    while let Some(key) = reader
        .next_key(&mut |_, part, s| {
            assert_eq!(part, Part::Value);
            lengths.push(s.length)
        })
        .unwrap()
    {
        assert_eq!(key.elements, *lengths.last().unwrap());
    }
    let grown_kib = peak_resident_kib().saturating_sub(before);
    assert_eq!(lengths, vec![PLAIN, DECODED]);
    assert!(matches!(
        reader.facts().checksum,
        Some(Checksum::Verified(_))
    ));
    assert!(
        grown_kib < 16 * 1024,
        "the peak resident memory grew by {grown_kib} KiB reading {} MiB of values",
        (PLAIN + DECODED) >> 20
    );
    eprintln!("peak resident memory grew by {grown_kib} KiB");
}
