//! The formats no engine of the store writes, on files built byte by byte: module values
//! (named, skipped and counted; the pre-release format refused by name), a zipmap hash
//! (Redis before 2.6), and an unknown value type, each where it sits.

use super::crc64;
use super::{KeyKind, Part, Problem, RdbReader, module_name};

const CHARSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn module_id(name: &str, version: u64) -> u64 {
    name.bytes().enumerate().fold(version, |id, (i, c)| {
        let index = CHARSET.iter().position(|&x| x == c).unwrap() as u64;
        id | (index << (64 - 6 * (i as u64 + 1)))
    })
}

/// A length as RDB writes it (6-bit, 14-bit, 32-bit or 64-bit).
fn length(n: u64, out: &mut Vec<u8>) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16_384 {
        out.extend([0x40 | (n >> 8) as u8, n as u8]);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend((n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend(n.to_be_bytes());
    }
}

fn string(s: &[u8], out: &mut Vec<u8>) {
    length(s.len() as u64, out);
    out.extend(s);
}

/// A REDIS0009 file of `body` (after SELECTDB 0), EOF and its checksum.
fn file(body: &[u8]) -> Vec<u8> {
    let mut bytes = b"REDIS0009".to_vec();
    bytes.push(0xfa);
    string(b"redis-ver", &mut bytes);
    string(b"5.0.0", &mut bytes);
    bytes.extend([0xfe, 0]);
    bytes.extend(body);
    bytes.push(0xff);
    let crc = crc64::update(0, &bytes);
    bytes.extend(crc.to_le_bytes());
    bytes
}

/// A key as read, with each element's part and length.
type ReadKey = (super::KeyEntry, Vec<(Part, u64)>);

fn read_all(bytes: &[u8]) -> Result<Vec<ReadKey>, super::RdbError> {
    let mut reader = RdbReader::new(bytes, "test.rdb")?;
    let mut keys = Vec::new();
    loop {
        let mut parts = Vec::new();
        let Some(key) = reader.next_key(&mut |_, part, s| parts.push((part, s.length)))? else {
            break;
        };
        keys.push((key, parts));
    }
    Ok(keys)
}

#[test]
fn a_module_value_is_named_and_skipped_and_the_next_key_reads() {
    let id = module_id("ReJSON-RL", 3);
    assert_eq!(module_name(id), "ReJSON-RL");
    let mut body = vec![7];
    string(b"doc:1", &mut body);
    length(id, &mut body);
    // An unsigned integer, a string, a double, then the end of the value.
    body.extend([2, 5, 5]);
    string(b"{\"a\":1}", &mut body);
    body.push(4);
    body.extend(1.5f64.to_le_bytes());
    body.push(0);
    body.push(0);
    string(b"after", &mut body);
    string(b"value", &mut body);
    let keys = read_all(&file(&body)).unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0].0.kind, KeyKind::Module("ReJSON-RL".into()));
    assert_eq!(keys[1].0.kind, KeyKind::String);
    assert_eq!(keys[1].1, vec![(Part::Value, 5)]);
}

#[test]
fn a_pre_release_module_value_is_refused_by_its_module_s_name() {
    let mut body = vec![6];
    string(b"doc:1", &mut body);
    length(module_id("graphdata", 1), &mut body);
    let error = read_all(&file(&body)).unwrap_err();
    assert!(
        matches!(&error.problem, Problem::ModuleNeedsLoader { module } if module == "graphdata"),
        "{error}"
    );
    assert!(
        error.to_string().starts_with("test.rdb: at byte "),
        "{error}"
    );
}

#[test]
fn a_zipmap_hash_gives_its_fields_and_values() {
    // zmlen, then field "ab" = "xyz" (1 free byte), field "c" = "" , end.
    let zipmap = [
        2, 2, b'a', b'b', 3, 1, b'x', b'y', b'z', 0, 1, b'c', 0, 0, 0xff,
    ];
    let mut body = vec![9];
    string(b"h", &mut body);
    string(&zipmap, &mut body);
    let keys = read_all(&file(&body)).unwrap();
    assert_eq!(keys[0].0.kind, KeyKind::Hash);
    assert_eq!(keys[0].0.elements, 2);
    assert_eq!(
        keys[0].1,
        vec![
            (Part::Field, 2),
            (Part::Value, 3),
            (Part::Field, 1),
            (Part::Value, 0)
        ]
    );
}

#[test]
fn an_unknown_value_type_is_named_with_its_offset() {
    let bytes = file(&[99, 1, b'k']);
    let at = bytes.iter().position(|&b| b == 99).unwrap();
    let error = read_all(&bytes).unwrap_err();
    assert_eq!(error.offset, at as u64, "{error}");
    assert!(
        error
            .to_string()
            .contains("unknown opcode or value type 99 in a REDIS version 9 file"),
        "{error}"
    );
}

#[test]
fn a_compact_value_stored_as_an_integer_is_refused_at_its_offset() {
    // A listpack hash whose string is the integer 5: corrupt, refused without a panic.
    let bytes = file(&[16, 1, b'h', 0xc0, 5]);
    let at = bytes.windows(2).position(|w| w == [0xc0, 5]).unwrap();
    let error = read_all(&bytes).unwrap_err();
    assert_eq!(error.offset, at as u64, "{error}");
    assert!(
        error.to_string().contains("integer-encoded string"),
        "{error}"
    );
}

/// Every key of `bytes` with each element's part and bytes, read with values.
/// Each element of a key: its part and its bytes.
type KeyValues = Vec<(Part, Vec<u8>)>;

fn read_values(bytes: &[u8], cap: u64) -> Result<Vec<KeyValues>, super::RdbError> {
    let mut reader = RdbReader::new(bytes, "test.rdb")?.with_values(cap);
    let mut keys = Vec::new();
    loop {
        let mut parts = Vec::new();
        let read = reader
            .next_key_with_values(&mut |_, part, bytes| parts.push((part, bytes.to_vec())))?;
        if read.is_none() {
            return Ok(keys);
        }
        keys.push(parts);
    }
}

/// A listpack of small strings and 7-bit integers, as RDB stores it (one string).
fn listpack(items: &[&[u8]]) -> Vec<u8> {
    let mut entries = Vec::new();
    for item in items {
        match std::str::from_utf8(item)
            .ok()
            .and_then(|s| s.parse::<u8>().ok())
        {
            Some(n) if n < 128 && n.to_string().as_bytes() == *item => entries.extend([n, 1]),
            _ => {
                entries.push(0x80 | item.len() as u8);
                entries.extend(*item);
                entries.push(1 + item.len() as u8);
            }
        }
    }
    let total = 6 + entries.len() as u32 + 1;
    let mut lp = total.to_le_bytes().to_vec();
    lp.extend((items.len() as u16).to_le_bytes());
    lp.extend(entries);
    lp.push(0xff);
    lp
}

#[test]
fn values_are_given_whole_only_when_asked_for() {
    let mut body = vec![0];
    string(b"s", &mut body);
    string(b"a plain value", &mut body);
    // An integer-encoded string: -2 as one signed byte.
    body.extend([0, 1, b'i', 0xc0, 0xfe]);
    // A listpack hash: name=Ann, age=42 (a 7-bit integer).
    body.push(16);
    string(b"h", &mut body);
    string(&listpack(&[b"name", b"Ann", b"age", b"42"]), &mut body);
    // A sorted set with binary scores: one member at 1.5, one at -inf.
    body.push(5);
    string(b"z", &mut body);
    length(2, &mut body);
    string(b"m", &mut body);
    body.extend(1.5f64.to_le_bytes());
    string(b"low", &mut body);
    body.extend(f64::NEG_INFINITY.to_le_bytes());
    let bytes = file(&body);
    let keys = read_values(&bytes, 1 << 20).unwrap();
    let owned = |parts: &[(Part, &[u8])]| -> Vec<(Part, Vec<u8>)> {
        parts.iter().map(|(p, b)| (*p, b.to_vec())).collect()
    };
    assert_eq!(keys[0], owned(&[(Part::Value, b"a plain value")]));
    assert_eq!(keys[1], owned(&[(Part::Value, b"-2")]));
    assert_eq!(
        keys[2],
        owned(&[
            (Part::Field, b"name"),
            (Part::Value, b"Ann"),
            (Part::Field, b"age"),
            (Part::Value, b"42")
        ])
    );
    assert_eq!(
        keys[3],
        owned(&[
            (Part::Value, b"m"),
            (Part::Score, b"1.5"),
            (Part::Value, b"low"),
            (Part::Score, b"-inf")
        ])
    );
    // The same file read without values gives lengths only, and no values are asked of it.
    let mut reader = RdbReader::new(&bytes[..], "test.rdb").unwrap();
    let refused = reader.next_key_with_values(&mut |_, _, _| ()).unwrap_err();
    assert!(refused.to_string().contains("with_values"), "{refused}");
    assert_eq!(read_all(&bytes).unwrap()[0].1, vec![(Part::Value, 13)]);
}

#[test]
fn an_element_past_the_cap_is_refused_naming_the_cap_and_its_offset() {
    let mut body = vec![0];
    string(b"s", &mut body);
    let at = body.len() as u64;
    string(&[b'x'; 100], &mut body);
    let bytes = file(&body);
    let error = read_values(&bytes, 99).unwrap_err();
    // The file's header (9 bytes), AUX (1 + 10 + 6) and SELECTDB (2) come before `body`.
    assert_eq!(error.offset, 28 + at, "{error}");
    let text = error.to_string();
    assert!(
        text.contains("100 bytes long, more than the 99 bytes membench holds"),
        "{text}"
    );
    assert_eq!(read_values(&bytes, 100).unwrap()[0][0].1, vec![b'x'; 100]);
}
