//! `membench profile --rdb FILE` against `membench profile --addr`: the same data profiled
//! from a live server and from the dump that server SAVEd gives the same groups, counts and
//! distributions (every key is read by both at the defaults; a big sorted set, read in part
//! by both, has members and scores of one length each, so any draw of them agrees), and
//! TTLs that differ only by the seconds between the two profiles.

mod common;

use std::path::PathBuf;

use membench::crd::{EngineKind, EngineSpec};
use membench::profile::Profile;
use membench::profile::model::KeyGroup;
use redis::Connection;

fn run(con: &mut Connection, args: &[String]) {
    let mut c = redis::cmd(&args[0]);
    for a in &args[1..] {
        c.arg(a);
    }
    let _: redis::Value = c
        .query(con)
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")));
}

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// An application-shaped keyspace: user hashes, sessions with TTLs, counters, queues, tag
/// sets, leaderboards, event streams, one big sorted set, and keys in another database.
fn write_keyspace(con: &mut Connection) {
    for i in 0..60 {
        let name = "n".repeat(3 + (i * 7) % 10);
        let email = format!("{}@example.org", "e".repeat(5 + (i * 3) % 20));
        let age = (18 + i % 60).to_string();
        let balance = if i % 4 == 0 {
            format!("-{}", i * 13)
        } else {
            format!("{}.5", i)
        };
        run(
            con,
            &words(&[
                "HSET",
                &format!("user:{i}"),
                "name",
                &name,
                "email",
                &email,
                "age",
                &age,
                "balance",
                &balance,
            ]),
        );
    }
    for i in 0..40 {
        let id = format!("{:016x}", 0xabcdef0123u64 * (i + 1));
        run(
            con,
            &words(&[
                "SET",
                &format!("session:{id}"),
                &"s".repeat(20 + (i as usize % 30)),
                "PX",
                "3600000",
            ]),
        );
    }
    for i in 0..30 {
        run(
            con,
            &words(&[
                "SET",
                &format!("counter:{i}"),
                &(i * 1000 - 3000).to_string(),
            ]),
        );
    }
    for i in 0..6 {
        let mut args = words(&["RPUSH", &format!("queue:{i}")]);
        for j in 0..(5 + i * 2) {
            args.push(format!("job-{}", "j".repeat(j % 9)));
        }
        run(con, &args);
    }
    for i in 0..10 {
        let mut args = words(&["SADD", &format!("tags:{i}")]);
        for j in 0..(3 + i) {
            args.push(if i % 2 == 0 {
                (j * 17).to_string()
            } else {
                format!("tag{}", "t".repeat(j))
            });
        }
        run(con, &args);
    }
    for i in 0..5 {
        let mut args = words(&["ZADD", &format!("board:{i}")]);
        for j in 0..10 {
            args.push(format!("{}.{}", j * 3, j % 4 + 1));
            args.push(format!("player-{}", "p".repeat(j + i)));
        }
        run(con, &args);
    }
    for i in 0..3 {
        for j in 0..(3 + i * 2) {
            run(
                con,
                &words(&[
                    "XADD",
                    &format!("events:{i}"),
                    "*",
                    "kind",
                    &"k".repeat(1 + j),
                    "at",
                    &(1000 + j).to_string(),
                ]),
            );
        }
    }
    // One big key (past 4096 elements and 1% of the keyspace's): read in part by both.
    let mut args = words(&["ZADD", "ranking"]);
    for j in 0..5000 {
        args.push((10_000 + j).to_string());
        args.push(format!("m{j:05}"));
    }
    run(con, &args);
    run(con, &words(&["SELECT", "3"]));
    run(con, &words(&["SET", "elsewhere", "1"]));
    run(con, &words(&["SELECT", "0"]));
}

fn by_group(profile: &Profile) -> Vec<KeyGroup> {
    let mut groups = profile.groups.clone();
    groups.sort_by(|a, b| {
        (&a.template, a.key_type, a.big_key).cmp(&(&b.template, b.key_type, b.big_key))
    });
    groups
}

fn profiles_from_server_and_dump_agree(engine: EngineKind, version: &str) {
    let server = common::start_spec(&EngineSpec::new(engine, version));
    let mut con = common::connect(&server.address);
    write_keyspace(&mut con);
    let addr = server.address.socket_addr().to_string();
    let (output, live) = common::profile_json(&addr, &[]);
    let live = live.unwrap_or_else(|| panic!("no live profile: {}", common::stderr(&output)));
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut con)
        .unwrap();
    if engine == EngineKind::Dragonfly {
        run(&mut con, &words(&["SAVE", "RDB", "membench-profile-test"]));
    } else {
        run(&mut con, &words(&["SAVE"]));
    }
    let dump: PathBuf = std::fs::read_dir(&dir[1])
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "rdb"))
        .expect("a dump after SAVE");
    let output = common::membench(&[
        "profile",
        "--rdb",
        dump.to_str().unwrap(),
        "--output",
        "json",
    ]);
    let from_file: Profile = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no file profile ({e}): {}", common::stderr(&output)));
    drop(con);
    server.stop();

    assert_eq!(from_file.source.keys, live.source.keys, "keys");
    assert_eq!(
        from_file.source.sampled_keys, live.source.sampled_keys,
        "keys read"
    );
    let (live_groups, file_groups) = (by_group(&live), by_group(&from_file));
    eprintln!("{:<24} {:>6} {:>9} {:>9}", "group", "type", "live", "file");
    for (l, f) in live_groups.iter().zip(&file_groups) {
        eprintln!(
            "{:<24} {:>6} {:>9} {:>9}",
            l.template,
            l.key_type.as_str(),
            l.keys,
            f.keys
        );
    }
    assert_eq!(
        live_groups.len(),
        file_groups.len(),
        "{live_groups:#?}\n{file_groups:#?}"
    );
    assert!(
        live_groups.iter().any(|g| g.big_key),
        "the big sorted set is its own group"
    );
    // The users are objects: their four fields by name, in both profiles.
    for groups in [&live_groups, &file_groups] {
        let users = groups.iter().find(|g| g.template == "user:{n}").unwrap();
        let names: Vec<&str> = users
            .object_fields
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(names, ["age", "balance", "email", "name"]);
    }
    for (l, f) in live_groups.iter().zip(&file_groups) {
        let at = format!("{} {}", l.template, l.key_type.as_str());
        assert_eq!(
            (&f.template, f.key_type, f.big_key, f.keys, f.sampled_keys),
            (&l.template, l.key_type, l.big_key, l.keys, l.sampled_keys),
            "{at}"
        );
        assert_eq!(f.share, l.share, "{at}: share");
        assert_eq!(f.key_length, l.key_length, "{at}: key lengths");
        assert_eq!(f.elements, l.elements, "{at}: elements per key");
        assert_eq!(f.entry_fields, l.entry_fields, "{at}: fields per entry");
        assert_eq!(f.fields, l.fields, "{at}: fields");
        assert_eq!(f.values, l.values, "{at}: values");
        assert_eq!(f.scores, l.scores, "{at}: scores");
        assert_eq!(f.size_error, l.size_error, "{at}: size error");
        assert_eq!(f.object_fields, l.object_fields, "{at}: object fields");
        // TTLs: the same share; the remaining times differ by the seconds between the two
        // profiles (the file's are read after the live profile), well under a minute.
        assert_eq!(f.ttl.is_some(), l.ttl.is_some(), "{at}: TTL");
        if let (Some(ft), Some(lt)) = (&f.ttl, &l.ttl) {
            assert_eq!(ft.share, lt.share, "{at}: TTL share");
            let (fm, lm) = (ft.millis.as_ref().unwrap(), lt.millis.as_ref().unwrap());
            assert_eq!(fm.observations(), lm.observations(), "{at}");
            assert!(
                (lm.mean() - fm.mean()).abs() < 60_000.0,
                "{at}: TTL means {} and {} ms",
                lm.mean(),
                fm.mean()
            );
        }
    }
}

#[test]
fn valkey_9_1_profiles_from_server_and_dump_agree() {
    profiles_from_server_and_dump_agree(EngineKind::Valkey, "9.1.2");
}

#[test]
fn redis_8_6_profiles_from_server_and_dump_agree() {
    profiles_from_server_and_dump_agree(EngineKind::Redis, "8.6.3");
}

#[test]
fn dragonfly_profiles_from_server_and_dump_agree() {
    profiles_from_server_and_dump_agree(EngineKind::Dragonfly, "1.40.0");
}

#[test]
fn a_file_profile_says_what_is_wrong_and_what_to_do() {
    // A missing file: exit 1, the file named.
    let output = common::membench(&["profile", "--rdb", "/nonexistent/dump.rdb"]);
    assert_eq!(output.status.code(), Some(1), "{}", common::stderr(&output));
    assert!(
        common::stderr(&output).contains("/nonexistent/dump.rdb: at byte 0: cannot read the file"),
        "{}",
        common::stderr(&output)
    );
    // A database with no keys: exit 2, naming the one that has them.
    let server = common::start_spec(&EngineSpec::new(EngineKind::Valkey, "9.1.2"));
    let mut con = common::connect(&server.address);
    run(&mut con, &words(&["SELECT", "3"]));
    run(&mut con, &words(&["SET", "only", "1"]));
    run(&mut con, &words(&["SAVE"]));
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut con)
        .unwrap();
    let dump = PathBuf::from(&dir[1]).join("dump.rdb");
    let output = common::membench(&["profile", "--rdb", dump.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", common::stderr(&output));
    assert!(
        common::stderr(&output).contains("holds no key to profile; db3 holds 1 keys (--db 3)"),
        "{}",
        common::stderr(&output)
    );
    // A file and a server at once is a usage error.
    let output = common::membench(&[
        "profile",
        "--rdb",
        dump.to_str().unwrap(),
        "--addr",
        "127.0.0.1:1",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", common::stderr(&output));
    drop(con);
    server.stop();
}
