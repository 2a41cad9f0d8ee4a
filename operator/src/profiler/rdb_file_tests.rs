//! The file profile against the profile it replaced, on a dump a real engine wrote: the
//! reference below is the former `profile_rdb_file`, which held every key's name and elements
//! until the end and grouped them as the live profiler groups a walk. The two-pass profile must
//! give the same groups, counts and distributions.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::client::workloads::draws::KeyGenerator;
use crate::profile::model::{KeyType, Profile};

use super::groups::{self, PlannedGroup};
use super::key_sample::{KeyObservation, elements_per_key};
use super::rdb_file::{
    Observed, RdbProfileOptions, keep_elements, observe_next_key, profile_rdb_file,
};
use super::walk::WalkedKey;

/// The former file profile's groups: every key walked and observed, then planned, split and
/// tallied at the end.
fn groups_holding_every_key(path: &Path, options: &RdbProfileOptions) -> Profile {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut reader = crate::rdb::open(path)
        .unwrap()
        .with_short_values(super::rdb_file::FIELD_NAME_HELD);
    let mut walked: Vec<WalkedKey> = Vec::new();
    let mut observations: Vec<KeyObservation> = Vec::new();
    let mut generator = KeyGenerator::new(0x0005_eed0_f4db);
    let db = u64::from(options.db);
    while let Some(next) =
        observe_next_key(&mut reader, db, now_ms, options, &mut generator).unwrap()
    {
        let Observed::Profiled {
            key,
            key_type,
            observation,
        } = next
        else {
            continue;
        };
        walked.push(WalkedKey {
            name: key.name,
            key_type,
            size: Some(key.elements),
        });
        observations.push(observation);
    }
    let (mut plan, _) = groups::plan_by_template(&walked);
    groups::split_big_keys(&mut plan, &walked);
    let per_key = elements_per_key((walked.len() as u64).min(options.sample_keys));
    for (_, _, big_key, keys) in &plan {
        if !big_key {
            for &i in keys {
                keep_elements(&mut observations[i], per_key);
            }
        }
    }
    let planned: Vec<PlannedGroup<'_>> = plan
        .iter()
        .map(|(template, key_type, big_key, keys)| PlannedGroup {
            template: template.clone(),
            key_type: *key_type,
            big_key: *big_key,
            keys: keys.iter().map(|&i| &walked[i]).collect(),
            sampled: keys.iter().map(|&i| &observations[i]).collect(),
        })
        .collect();
    let mut profile = profile_rdb_file(path, options, &mut |_| {})
        .unwrap()
        .profile;
    profile.groups = groups::groups_of(&planned);
    profile.source.keys = walked.len() as u64;
    profile
}

fn send(con: &mut redis::Connection, pipe: &redis::Pipeline) {
    let _: redis::Value = pipe.query(con).unwrap();
}

/// Every type and the cases grouping treats apart: a namespace, names whose first part is
/// rare, one big key beside its group's other keys, one alone in its group, two big keys that
/// are all of their group,
/// TTLs, a large group read 16 elements deep, and keys of another database.
fn write_keyspace(con: &mut redis::Connection) {
    let mut pipe = redis::pipe();
    for i in 0..15_000u64 {
        let field = |name: &str, length: u64| (name.to_string(), "v".repeat(length as usize));
        pipe.cmd("HSET")
            .arg(format!("user:{i}"))
            .arg(&[
                field("name", 3 + i % 9),
                field("email", 12 + i % 30),
                field("bio", 40 + i % 200),
            ])
            .ignore();
        if i % 3 == 0 {
            pipe.cmd("SET")
                .arg(format!("session:{:016x}", i * 0x9e37_79b9))
                .arg("s".repeat(20 + (i % 50) as usize))
                .arg("PX")
                .arg(3_600_000)
                .ignore();
        }
        if i % 500 == 0 {
            send(con, &pipe);
            pipe = redis::pipe();
        }
    }
    for i in 0..40u64 {
        pipe.cmd("RPUSH").arg(format!("queue:{i}")).arg(
            (0..(5 + i * 7))
                .map(|j| format!("job-{}", "j".repeat((j % 40) as usize)))
                .collect::<Vec<_>>(),
        );
        pipe.cmd("SADD")
            .arg(format!("tags:{i}"))
            .arg((0..(3 + i * 5)).map(|j| j * 17).collect::<Vec<_>>());
        pipe.cmd("XADD")
            .arg(format!("events:{i}"))
            .arg("*")
            .arg("kind")
            .arg("k".repeat(1 + i as usize % 7))
            .arg("at")
            .arg(1000 + i);
        pipe.cmd("SET").arg(format!("word{i}x")).arg(i);
    }
    for name in ["alpha", "beta", "gamma"] {
        pipe.cmd("SET").arg(name).arg("x");
    }
    // One big sorted set among small ones, and two big lists that are their group.
    for i in 0..30u64 {
        pipe.cmd("ZADD").arg(format!("board:{i}")).arg(
            (0..20)
                .flat_map(|j| [j.to_string(), format!("p{j}")])
                .collect::<Vec<_>>(),
        );
    }
    pipe.cmd("ZADD").arg("board:1000").arg(
        (0..60_000)
            .flat_map(|j| [j.to_string(), format!("member-{j}-{}", "m".repeat(j % 13))])
            .collect::<Vec<_>>(),
    );
    pipe.cmd("SADD")
        .arg("index")
        .arg((0..5000).collect::<Vec<_>>());
    for name in ["archive:1", "archive:2"] {
        pipe.cmd("RPUSH")
            .arg(name)
            .arg((0..40_000).map(|j| "a".repeat(j % 29)).collect::<Vec<_>>());
    }
    pipe.cmd("SELECT").arg(3).cmd("SET").arg("elsewhere").arg(1);
    send(con, &pipe);
}

#[test]
fn the_two_pass_profile_of_a_valkey_dump_is_the_one_that_held_every_key() {
    let engine = ValkeyOnSocket::start();
    let mut con = engine.connect();
    write_keyspace(&mut con);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut con)
        .unwrap();
    let dump = Path::new(&dir[1]).join("dump.rdb");
    let options = RdbProfileOptions {
        db: 0,
        sample_keys: 100_000,
    };
    let streamed = profile_rdb_file(&dump, &options, &mut |_| {})
        .unwrap()
        .profile;
    let held = groups_holding_every_key(&dump, &options);
    drop(con);
    drop(engine);

    // The cases this keyspace was written for are there.
    let group = |template: &str| {
        streamed
            .groups
            .iter()
            .filter(|g| g.template == template)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        streamed.source.keys,
        15_000 + 5000 + 4 * 40 + 3 + 31 + 1 + 2
    );
    let keys_and_big = |template: &str| {
        let mut found: Vec<(KeyType, u64, bool)> = group(template)
            .iter()
            .map(|g| (g.key_type, g.keys, g.big_key))
            .collect();
        found.sort();
        found
    };
    assert_eq!(
        keys_and_big("board:{n}"),
        [(KeyType::Zset, 1, true), (KeyType::Zset, 30, false)]
    );
    assert_eq!(keys_and_big("{s}:{n}"), [(KeyType::List, 2, false)]);
    assert_eq!(
        keys_and_big("{s}"),
        [(KeyType::String, 3, false), (KeyType::Set, 1, true)]
    );
    assert_eq!(keys_and_big("word{n}x"), [(KeyType::String, 40, false)]);
    // ... and every group, count and distribution is the former profile's.
    assert_eq!(streamed.source.keys, held.source.keys);
    assert_eq!(streamed.groups.len(), held.groups.len());
    for (s, h) in streamed.groups.iter().zip(&held.groups) {
        // TTLs differ by the milliseconds between the two readings of the file.
        let (mut s, mut h) = (s.clone(), h.clone());
        assert_eq!(s.ttl.is_some(), h.ttl.is_some(), "{}", s.template);
        s.ttl = None;
        h.ttl = None;
        assert_eq!(s, h);
    }
}

/// The engine store's Valkey 9.1.2 on a Unix socket of its own (no TCP port, so no port race),
/// in a directory of its own, killed on drop. Started from the store directly: the local runner
/// (`crate::local`) ranks above the profiler.
struct ValkeyOnSocket {
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl ValkeyOnSocket {
    fn start() -> Self {
        let store = membench_enginestore::EngineStore::open_default()
            .unwrap_or_else(|e| panic!("the engine store: {e} (run hack/install-engines.sh)"));
        let selection = store
            .select(&membench_enginestore::Request {
                engine: "valkey",
                version: "9.1.2",
                arch: membench_enginestore::HOST_ARCH,
                build: None,
                jemalloc: false,
            })
            .unwrap_or_else(|e| panic!("Valkey 9.1.2: {e} (run hack/install-engines.sh)"));
        let dir = std::env::temp_dir().join(format!(
            "membench-rdb-file-tests-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let child = selection
            .build
            .command()
            .args(["--port", "0", "--unixsocket"])
            .arg(dir.join("valkey.sock"))
            .arg("--dir")
            .arg(&dir)
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", selection.build.path.display()));
        let engine = ValkeyOnSocket { child, dir };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !engine.dir.join("valkey.sock").exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "Valkey 9.1.2 made no socket in {} within 20 s",
                engine.dir.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        engine
    }

    fn connect(&self) -> redis::Connection {
        let socket = self.dir.join("valkey.sock");
        redis::Client::open(format!("unix://{}", socket.display()))
            .and_then(|client| client.get_connection())
            .unwrap_or_else(|e| panic!("{}: {e}", socket.display()))
    }
}

impl Drop for ValkeyOnSocket {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
