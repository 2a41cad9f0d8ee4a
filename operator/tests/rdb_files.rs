//! The RDB reader on files the engine store's own builds write: each engine is started, given
//! every type in its compact and full encodings (integers, TTLs, three databases, a stream
//! with a consumer group and pending entries, hash-field TTLs where the engine has them), made
//! to SAVE, and its dump read back: key counts per database and type, every key's element
//! count and elements' lengths, TTLs, stream groups and the checksum must be what was written.
//! And a damaged file (cut short, a byte flipped, compressed, a future version) fails with
//! the file, the byte offset and what to do.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use common::rdb_keyspace::{Expected, TTL_MS, run, sorted, write_keyspace};
use membench::crd::{EngineKind, EngineSpec};
use membench::rdb::{Checksum, KeyKind, Part};

fn kind_name(kind: &KeyKind) -> String {
    match kind {
        KeyKind::String => "string".into(),
        KeyKind::List => "list".into(),
        KeyKind::Set => "set".into(),
        KeyKind::Zset => "zset".into(),
        KeyKind::Hash => "hash".into(),
        KeyKind::Stream => "stream".into(),
        KeyKind::Module(name) => format!("module {name}"),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// What a dump read back as: its keys, its checksum, its header and the value types it held.
struct ReadBack {
    keys: BTreeMap<(u64, String), Expected>,
    checksum: Checksum,
    header: String,
    types: std::collections::BTreeSet<u8>,
}

/// Reads the dump at `path` into the same shape as [`Expected`].
fn read_dump(path: &Path) -> ReadBack {
    let mut reader = membench::rdb::open(path).unwrap_or_else(|e| panic!("{e}"));
    let header = format!("{}{}", reader.magic().as_str(), reader.version());
    let mut read = BTreeMap::new();
    let mut types = std::collections::BTreeSet::new();
    let started = now_ms();
    loop {
        let mut values = Vec::new();
        let mut fields = Vec::new();
        let mut scores = Vec::new();
        let mut entries = Vec::new();
        let key = reader
            .next_key(&mut |_, part, scalar| match part {
                Part::Value => values.push(scalar.length),
                Part::Field => fields.push(scalar.length),
                Part::Score => scores.push(scalar.length),
                Part::Entry { fields } => entries.push(fields),
            })
            .unwrap_or_else(|e| panic!("{e}"));
        let Some(key) = key else { break };
        types.insert(key.rdb_type);
        if let Some(at) = key.expire_at_ms {
            // Written with an hour to live a few seconds before.
            let left = at - started;
            assert!(
                left > TTL_MS - 120_000 && left <= TTL_MS,
                "{}: {left} ms left of {TTL_MS}",
                String::from_utf8_lossy(&key.name)
            );
        }
        read.insert(
            (key.db, String::from_utf8_lossy(&key.name).into_owned()),
            Expected {
                kind: kind_name(&key.kind),
                ttl: key.expire_at_ms.is_some(),
                elements: key.elements,
                values: sorted(values),
                fields: sorted(fields),
                scores: sorted(scores),
                entries: sorted(entries),
                fields_with_ttl: key.fields_with_ttl,
                stream: key.stream.map(|s| (s.groups, s.consumers, s.pending)),
            },
        );
    }
    let checksum = reader
        .facts()
        .checksum
        .expect("a file read to its end has a checksum state");
    ReadBack {
        keys: read,
        checksum,
        header,
        types,
    }
}

/// The dump file a SAVE left in `dir`.
fn dump_in(dir: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "rdb"))
        .unwrap_or_else(|| panic!("no .rdb file in {dir} after SAVE"))
}

/// Starts `engine` at `version`, writes the keyspace, saves, and checks the dump; returns
/// the dump's path (a copy in a directory of the test's own) and its header.
fn saved_dump_reads_back(
    engine: EngineKind,
    version: &str,
    field_ttls: bool,
    header: &str,
) -> PathBuf {
    let server = common::start_spec(&EngineSpec::new(engine, version));
    let mut con = common::connect(&server.address);
    let idempotent_producers = engine == EngineKind::Redis && version == "8.6.3";
    let written = write_keyspace(
        &mut con,
        field_ttls,
        idempotent_producers,
        engine == EngineKind::Dragonfly,
    );
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut con)
        .unwrap();
    if engine == EngineKind::Dragonfly {
        run(&mut con, &["SAVE", "RDB", "membench-rdb-test"]);
    } else {
        run(&mut con, &["SAVE"]);
    }
    let dump = dump_in(&dir[1]);
    let kept = std::env::temp_dir().join(format!(
        "membench-rdb-{engine}-{version}-{}.rdb",
        std::process::id()
    ));
    std::fs::copy(&dump, &kept).unwrap();
    drop(con);
    server.stop();

    let ReadBack {
        keys: read,
        checksum,
        header: found_header,
        types,
    } = read_dump(&kept);
    // Which value types the engine wrote, for the record.
    eprintln!("{engine} {version}: {found_header}, RDB value types {types:?}");
    assert_eq!(found_header, header, "the header of {}", kept.display());
    // Dragonfly 1.40 writes 8 zero bytes where the checksum goes (checksum off).
    if engine == EngineKind::Dragonfly {
        assert_eq!(checksum, Checksum::Disabled, "{}", kept.display());
    } else {
        assert!(
            matches!(checksum, Checksum::Verified(_)),
            "{}: {checksum:?}",
            kept.display()
        );
    }
    // Per database and type, then key by key.
    let census = |keys: &BTreeMap<(u64, String), Expected>| -> BTreeMap<(u64, String), usize> {
        let mut counts = BTreeMap::new();
        for ((db, _), e) in keys {
            *counts.entry((*db, e.kind.clone())).or_default() += 1;
        }
        counts
    };
    assert_eq!(
        census(&read),
        census(&written),
        "keys per database and type"
    );
    for (key, want) in &written {
        let got = read
            .get(key)
            .unwrap_or_else(|| panic!("{key:?} is not in the dump"));
        assert_eq!(got, want, "{key:?} in the {engine} {version} dump");
    }
    kept
}

macro_rules! engine_test {
    ($name:ident, $engine:expr, $version:expr, $field_ttls:expr, $header:expr) => {
        #[test]
        fn $name() {
            let kept = saved_dump_reads_back($engine, $version, $field_ttls, $header);
            let _ = std::fs::remove_file(kept);
        }
    };
}

engine_test!(
    redis_6_2_dump_reads_back,
    EngineKind::Redis,
    "6.2.14",
    false,
    "REDIS9"
);
engine_test!(
    redis_7_0_dump_reads_back,
    EngineKind::Redis,
    "7.0.15",
    false,
    "REDIS10"
);
engine_test!(
    redis_7_4_dump_reads_back,
    EngineKind::Redis,
    "7.4.1",
    true,
    "REDIS12"
);
engine_test!(
    redis_8_0_dump_reads_back,
    EngineKind::Redis,
    "8.0.6",
    true,
    "REDIS12"
);
engine_test!(
    redis_8_2_dump_reads_back,
    EngineKind::Redis,
    "8.2.3",
    true,
    "REDIS12"
);
engine_test!(
    redis_8_6_dump_reads_back,
    EngineKind::Redis,
    "8.6.3",
    true,
    "REDIS13"
);
engine_test!(
    valkey_7_2_dump_reads_back,
    EngineKind::Valkey,
    "7.2.13",
    false,
    "REDIS11"
);
engine_test!(
    valkey_8_0_dump_reads_back,
    EngineKind::Valkey,
    "8.0.9",
    false,
    "REDIS11"
);
engine_test!(
    valkey_8_1_dump_reads_back,
    EngineKind::Valkey,
    "8.1.7",
    false,
    "REDIS11"
);
engine_test!(
    valkey_9_0_dump_reads_back,
    EngineKind::Valkey,
    "9.0.4",
    true,
    "VALKEY80"
);
engine_test!(
    valkey_9_1_dump_reads_back,
    EngineKind::Valkey,
    "9.1.2",
    true,
    "VALKEY80"
);
engine_test!(
    dragonfly_1_40_dump_reads_back,
    EngineKind::Dragonfly,
    "1.40.0",
    true,
    "REDIS9"
);

/// The error reading `bytes` (written to a file of the test's own) ends with.
fn error_of(bytes: &[u8], name: &str) -> (String, String) {
    let path = std::env::temp_dir().join(format!("membench-rdb-{name}-{}.rdb", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let result = (|| {
        let mut reader = membench::rdb::open(&path)?;
        while reader.next_key(&mut |_, _, _| {})?.is_some() {}
        Ok::<_, membench::rdb::RdbError>(())
    })();
    let _ = std::fs::remove_file(&path);
    let error = result.expect_err("a damaged file must not read");
    (error.to_string(), path.display().to_string())
}

#[test]
fn a_damaged_dump_fails_naming_the_file_the_offset_and_what_to_do() {
    let kept = saved_dump_reads_back(EngineKind::Valkey, "9.1.2", true, "VALKEY80");
    let whole = std::fs::read(&kept).unwrap();
    let _ = std::fs::remove_file(&kept);

    // Cut short in the middle: the end of what is there is the offset.
    let cut = whole.len() / 2;
    let (message, path) = error_of(&whole[..cut], "cut");
    assert!(
        message.starts_with(&format!("{path}: at byte {cut}: the file ends inside")),
        "{message}"
    );
    assert!(
        message.contains("truncated") && message.contains("run SAVE"),
        "{message}"
    );

    // One byte of a key name flipped: the file parses, the checksum (at the end) differs.
    let at = whole
        .windows(7)
        .position(|w| w == b"h:small")
        .expect("the dump holds the key h:small");
    let mut flipped = whole.clone();
    flipped[at] ^= 0x20;
    let (message, path) = error_of(&flipped, "flipped");
    let checksum_at = whole.len() - 8;
    assert!(
        message.starts_with(&format!(
            "{path}: at byte {checksum_at}: the CRC64 checksum"
        )),
        "{message}"
    );
    assert!(
        message.contains("corrupt") && message.contains("copy it again"),
        "{message}"
    );

    // A compressed dump, and a version from the future.
    let (message, _) = error_of(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3], "gzip");
    assert!(
        message.contains("at byte 0: the file is gzip-compressed") && message.contains("gunzip"),
        "{message}"
    );
    let mut future = whole.clone();
    future[..9].copy_from_slice(b"REDIS0099");
    let (message, _) = error_of(&future, "future");
    assert!(
        message.contains("at byte 5: REDIS RDB version 99 is not one this membench reads"),
        "{message}"
    );
    let (message, _) = error_of(b"not an rdb file at all", "text");
    assert!(
        message.contains("at byte 0: the file does not start with REDIS or VALKEY"),
        "{message}"
    );
}
