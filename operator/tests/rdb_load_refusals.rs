//! `membench load --workload rdb` on bad input: a truncated file, a corrupt checksum, an RDB
//! version it does not know and a compressed file are refused before anything is written,
//! naming the file, the byte offset and what to do; a module value is skipped, named and
//! counted in the result's warnings; a file whose data exceeds the engine's maxmemory is
//! refused before loading, with the estimate.

mod common;

use std::path::PathBuf;

use membench::crd::EngineKind;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "membench-rdb-bad-{name}-{}.rdb",
        std::process::id()
    ))
}

/// A REDIS0009 file of `body` (after SELECTDB 0), EOF and its checksum.
fn file(body: &[u8]) -> Vec<u8> {
    let mut bytes = b"REDIS0009".to_vec();
    bytes.extend([0xfe, 0]);
    bytes.extend(body);
    bytes.push(0xff);
    let crc = membench::rdb::crc64::update(0, &bytes);
    bytes.extend(crc.to_le_bytes());
    bytes
}

fn string(s: &[u8], out: &mut Vec<u8>) {
    out.push(s.len() as u8);
    out.extend(s);
}

/// Two strings of 100 bytes, `a` and `b`.
fn two_strings() -> Vec<u8> {
    let mut body = Vec::new();
    for name in [b"a", b"b"] {
        body.push(0);
        string(name, &mut body);
        string(&[b'x'; 60], &mut body);
    }
    file(&body)
}

fn load(path: &std::path::Path, address: &str) -> std::process::Output {
    common::load_rdb(path, address, &[])
}

#[test]
fn a_damaged_file_is_refused_naming_the_file_the_offset_and_what_to_do() {
    let server = common::start(EngineKind::Valkey, &[]);
    let address = server.address.socket_addr();
    let good = two_strings();
    let mut flipped = good.clone();
    flipped[20] ^= 0x01;
    let mut future = good.clone();
    future[5..9].copy_from_slice(b"0099");
    let mut gzip = vec![0x1f, 0x8b, 8, 0];
    gzip.extend(&good);
    let cases: [(&str, Vec<u8>, &str, &str); 4] = [
        (
            "truncated",
            good[..good.len() - 30].to_vec(),
            "at byte",
            "it is truncated",
        ),
        ("checksum", flipped, "at byte", "the file is corrupt"),
        (
            "version",
            future,
            "at byte 5",
            "RDB version 99 is not one this membench reads",
        ),
        (
            "gzip",
            gzip,
            "at byte 0",
            "decompress it first (gunzip FILE)",
        ),
    ];
    for (name, bytes, offset, what) in cases {
        let path = temp(name);
        std::fs::write(&path, bytes).unwrap();
        let output = load(&path, &address);
        let said = format!("{}{}", common::stderr(&output), common::stdout(&output));
        assert!(!output.status.success(), "{name}: {said}");
        for part in [path.display().to_string().as_str(), offset, what] {
            assert!(said.contains(part), "{name}: {part:?} is not in: {said}");
        }
        let _ = std::fs::remove_file(path);
    }
    let mut con = common::connect(&server.address);
    let keys: u64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(keys, 0, "a refused file writes nothing");
    drop(con);
    server.stop();
}

#[test]
fn a_module_value_is_skipped_named_and_counted() {
    let server = common::start(EngineKind::Valkey, &[]);
    let mut body = Vec::new();
    // A ReJSON-RL value (module type id: its name in 6-bit characters, version 3), then a
    // string.
    let charset = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let id = b"ReJSON-RL".iter().enumerate().fold(3u64, |id, (i, c)| {
        let index = charset.iter().position(|x| x == c).unwrap() as u64;
        id | (index << (64 - 6 * (i as u64 + 1)))
    });
    body.push(7);
    string(b"doc:1", &mut body);
    body.push(0x81);
    body.extend(id.to_be_bytes());
    body.extend([5]);
    string(b"{\"a\":1}", &mut body);
    body.push(0);
    body.push(0);
    string(b"plain", &mut body);
    string(b"value", &mut body);
    let path = temp("module");
    std::fs::write(&path, file(&body)).unwrap();
    let output = load(&path, &server.address.socket_addr());
    assert!(output.status.success(), "{}", common::stderr(&output));
    let result: serde_json::Value = serde_json::from_str(&common::stdout(&output)).unwrap();
    assert_eq!(
        result["workload"]["scan"]["modules"]["ReJSON-RL"], 1,
        "{result}"
    );
    assert_eq!(result["repetitions"][0]["items"], 1, "{result}");
    let warnings = result["warnings"].to_string();
    assert!(
        warnings.contains("1 values of module type ReJSON-RL skipped"),
        "{warnings}"
    );
    let _ = std::fs::remove_file(path);
    server.stop();
}

#[test]
fn a_file_past_the_engine_s_maxmemory_is_refused_before_loading_with_the_estimate() {
    let server = common::start(EngineKind::Valkey, &["--maxmemory", "2mb"]);
    let mut body = Vec::new();
    // 20,000 strings of 60 bytes: 3,328,890 B by the estimate (128,890 B of names, 1,200,000
    // of values, 100 B a key), 3.2 MiB.
    for i in 0..20_000u32 {
        body.push(0);
        string(format!("k:{i}").as_bytes(), &mut body);
        string(&[b'v'; 60], &mut body);
    }
    let path = temp("big");
    std::fs::write(&path, file(&body)).unwrap();
    let output = load(&path, &server.address.socket_addr());
    let said = format!("{}{}", common::stderr(&output), common::stdout(&output));
    assert!(!output.status.success(), "{said}");
    for part in [
        path.display().to_string().as_str(),
        "needs about 3.2 MiB",
        "more than its maxmemory of 2.0 MiB",
        "nothing was written",
    ] {
        assert!(said.contains(part), "{part:?} is not in: {said}");
    }
    let mut con = common::connect(&server.address);
    let keys: u64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(keys, 0, "the refused file wrote nothing");
    drop(con);
    let _ = std::fs::remove_file(path);
    server.stop();
}
