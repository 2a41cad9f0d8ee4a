//! A profile's rebuild at another size, on real engines from the engine store: `elementScale`
//! (`--element-scale`) grows the elements inside the same keys, and `--scale` grows the keys
//! while the client's own memory stays flat (the rebuild is streamed, never held).

mod common;

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use membench::client::connection::engine::EngineAddress;
use membench::crd::EngineKind;

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "membench-profile-scale-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Hashes, sets, sorted sets and lists of varied sizes, and some strings.
fn fill_containers(connection: &mut redis::Connection) {
    let mut pipe = redis::pipe();
    for i in 0..60u32 {
        let mut hset = redis::cmd("HSET");
        hset.arg(format!("user:{i}"));
        for f in 0..(2 + i % 9) {
            hset.arg(format!("field{f}"))
                .arg(format!("value-{}", i * f));
        }
        pipe.add_command(hset).ignore();
        let members: Vec<String> = (0..(3 + i % 17)).map(|m| format!("m{m}-{i}")).collect();
        pipe.cmd("SADD")
            .arg(format!("group:{i}"))
            .arg(&members)
            .ignore();
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(format!("rank:{i}"));
        for m in 0..(4 + i % 11) {
            zadd.arg(m * 5).arg(format!("player-{m}"));
        }
        pipe.add_command(zadd).ignore();
        pipe.cmd("RPUSH")
            .arg(format!("queue:{i}"))
            .arg(
                (0..(1 + i % 7))
                    .map(|j| format!("job-{j}"))
                    .collect::<Vec<_>>(),
            )
            .ignore();
        pipe.cmd("SET")
            .arg(format!("counter:{i}"))
            .arg(i * 3)
            .ignore();
    }
    pipe.query::<()>(connection).expect("the data loads");
}

/// Every key the engine holds, with its type and its element count (1 for a string).
fn keys_and_elements(address: &EngineAddress) -> BTreeMap<String, (String, u64)> {
    let mut connection = common::connect(address);
    let names: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut connection).unwrap();
    names
        .into_iter()
        .map(|name| {
            let key_type: String = redis::cmd("TYPE")
                .arg(&name)
                .query(&mut connection)
                .unwrap();
            let size = match key_type.as_str() {
                "hash" => "HLEN",
                "set" => "SCARD",
                "zset" => "ZCARD",
                "list" => "LLEN",
                _ => "",
            };
            let elements = if size.is_empty() {
                1
            } else {
                redis::cmd(size).arg(&name).query(&mut connection).unwrap()
            };
            (name, (key_type, elements))
        })
        .collect()
}

/// Rebuilds `profile` into `address` and leaves the data there.
fn rebuild_and_keep(address: &EngineAddress, profile: &Path, extra: &[&str]) {
    let mut args = common::rebuild_args(&address.socket_addr(), profile, 1, "json");
    args.push("--keep-data".into());
    args.extend(extra.iter().map(|a| a.to_string()));
    let output = common::membench(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(output.status.success(), "{}", common::stderr(&output));
}

fn elements_by_type(keys: &BTreeMap<String, (String, u64)>) -> BTreeMap<String, u64> {
    let mut sums = BTreeMap::new();
    for (key_type, elements) in keys.values() {
        if key_type != "string" {
            *sums.entry(key_type.clone()).or_default() += elements;
        }
    }
    sums
}

#[test]
fn element_scale_3_stores_three_times_the_elements_in_the_same_keys() {
    let engine = common::start(EngineKind::Valkey, &[]);
    fill_containers(&mut common::connect(&engine.address));
    let dir = tempdir("elements");
    let path = dir.join("containers.json");
    let (output, profile) = common::profile_json(&engine.address.socket_addr(), &[]);
    assert!(profile.is_some(), "{}", common::stderr(&output));
    std::fs::write(&path, &output.stdout).unwrap();

    let flush = || {
        redis::cmd("FLUSHALL")
            .query::<()>(&mut common::connect(&engine.address))
            .unwrap()
    };
    flush();
    rebuild_and_keep(&engine.address, &path, &[]);
    let plain = keys_and_elements(&engine.address);
    flush();
    rebuild_and_keep(&engine.address, &path, &["--element-scale", "3"]);
    let grown = keys_and_elements(&engine.address);

    assert_eq!(plain.len(), 300, "the profile's 300 keys");
    let names = |keys: &BTreeMap<String, (String, u64)>| -> Vec<(String, String)> {
        keys.iter()
            .map(|(k, (t, _))| (k.clone(), t.clone()))
            .collect()
    };
    assert!(
        names(&plain) == names(&grown),
        "element scale changed the keys or their types"
    );
    let (plain_sums, grown_sums) = (elements_by_type(&plain), elements_by_type(&grown));
    eprintln!("elements by type: scale 1 {plain_sums:?}, elementScale 3 {grown_sums:?}");
    assert_eq!(
        plain_sums.keys().collect::<Vec<_>>(),
        ["hash", "list", "set", "zset"]
    );
    for (key_type, plain) in &plain_sums {
        let grown = grown_sums[key_type];
        // Each key's count is its drawn count times 3, rounded: exactly 3x.
        assert_eq!(
            grown,
            plain * 3,
            "{key_type}: {plain} elements, then {grown}"
        );
    }
}

/// A profile of 2000 strings of 1000 bytes: 2 MB of data, 40 MB at scale 20.
const STRINGS_PROFILE: &str = "format: 1\nsource: {keys: 2000}\ngroups:\n- {template: \"page:{n}\", type: string, share: 1.0, keyLength: {buckets: [[9, 10, 1]]}, values: {textLength: {buckets: [[1000, 1000, 1]]}}}\n";

/// Runs `membench load` rebuilding `profile` at `scale`; returns the client process's peak
/// resident memory in bytes (its own rusage, from wait4) and the data it stored (used_memory
/// minus the empty server's).
fn rebuild_peak_rss(address: &EngineAddress, profile: &Path, scale: &str) -> (u64, f64) {
    let mut args = common::rebuild_args(&address.socket_addr(), profile, 1, "json");
    args.extend(["--scale".to_string(), scale.to_string()]);
    // Reaped by wait4 below, which std's wait cannot do: it gives the child's own rusage.
    #[allow(clippy::zombie_processes)]
    let mut child = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("membench runs");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let mut report = Vec::new();
    stdout.read_to_end(&mut report).unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills; the child is ours and not yet reaped.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "{}", std::io::Error::last_os_error());
    let stderr = err_reader.join().unwrap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&report).expect("a JSON report");
    let repetition = &report["repetitions"][0];
    let data = repetition["used_memory"].as_f64().unwrap()
        - repetition["baseline_used_memory"].as_f64().unwrap();
    // ru_maxrss is in KiB on Linux.
    (usage.ru_maxrss as u64 * 1024, data)
}

#[test]
fn the_clients_memory_stays_flat_while_the_rebuild_grows_twenty_times() {
    let engine = common::start(EngineKind::Valkey, &[]);
    let dir = tempdir("flat");
    let path = dir.join("strings.yaml");
    std::fs::write(&path, STRINGS_PROFILE).unwrap();
    let (small_rss, small_data) = rebuild_peak_rss(&engine.address, &path, "1");
    let (large_rss, large_data) = rebuild_peak_rss(&engine.address, &path, "20");
    let mib = |b: f64| b / (1 << 20) as f64;
    eprintln!(
        "client peak RSS: scale 1 {:.1} MiB ({:.1} MiB of data), scale 20 {:.1} MiB ({:.1} MiB of data)",
        mib(small_rss as f64),
        mib(small_data),
        mib(large_rss as f64),
        mib(large_data)
    );
    let data_growth = large_data - small_data;
    assert!(
        large_data > 15.0 * small_data && data_growth > 30.0 * (1 << 20) as f64,
        "the data did not grow 20x: {small_data} B, then {large_data} B"
    );
    // The margin: 2 MiB, a twentieth of the 38 MiB the data grew by. A client that kept what
    // it sent would exceed it twenty times over, and one that kept even 56 bytes per key (38,000
    // keys more) would exceed it; what does not grow with the keys (the pipeline window, the
    // allocator's arenas) is the same at both scales (measured: 25.3 and 25.4 MiB).
    let growth = large_rss as f64 - small_rss as f64;
    assert!(
        growth < 2.0 * (1 << 20) as f64,
        "the client's peak RSS grew {:.1} MiB while the data grew {:.1} MiB",
        mib(growth),
        mib(data_growth)
    );
}
