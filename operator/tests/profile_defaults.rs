//! A profile is right without reading every key: a keyspace with one big key (30,000 strings
//! of 100 B, one sorted set of 60,000 members, 8,000 hashes half with a TTL) profiled with a
//! sample of 2,000 keys and rebuilt on a fresh server of the same build (Valkey 9.1) lands
//! within 1% of the source, and of where a profile that read every key lands, with five seeds
//! (the data and the rebuild); each type's keys by MEMORY USAGE within 2% of the source's. The
//! sorted set is its own group of one key with its exact member count; every group's key count
//! is the source's. A sample scaled up, as profiles were taken before, lost the sorted set or
//! counted it several times over.
//!
//! Measured, three runs of the five seeds (2026-12-05): the rebuild from the sample -0.14% to
//! +0.18% of the source, from every key -0.06% to +0.05%; by type strings +0.00% (every key
//! 128 B in both), hashes -0.39% to +0.84%, the sorted set -0.20% to +0.09%. Before the
//! profile kept each key's mean length (`keyMeanLength`) every rebuilt hash had the same mix of
//! value lengths, and its listpack the same size class, where the source's, of independently
//! drawn values, spread over four: the hashes -3.06%, the whole -0.60%. The figures this test
//! quoted then (-1.0% to -1.7%) were read with Valkey's latency tracking on, whose histograms
//! are not data (see the test): with it on, the rebuild now lands -0.16% to -0.56% (one run).

mod common;

use std::collections::BTreeMap;

use membench::crd::EngineKind;
use membench::profile::Profile;

/// The keyspace's size and the sample the profile takes of it.
struct Scale {
    strings: u64,
    members: u64,
    hashes: u64,
    /// `--sample-keys`, or `None` for the profile's default (100,000 keys).
    sample: Option<&'static str>,
}

/// In the suite, a fifth of the keyspace with a sample far below its 38,001 keys (a
/// sample scaled up would miss the sorted set or count it many times over). With
/// `MEMBENCH_PROFILE_DEFAULTS_FULL=1`, the issue's own keyspace (150,000 strings, 300,000
/// members, 40,000 hashes: 190,001 keys) profiled at the defaults, as docs/src/results/ reports
/// it (about 10 minutes here).
fn scale() -> Scale {
    if std::env::var_os("MEMBENCH_PROFILE_DEFAULTS_FULL").is_some_and(|v| v == "1") {
        Scale {
            strings: 150_000,
            members: 300_000,
            hashes: 40_000,
            sample: None,
        }
    } else {
        Scale {
            strings: 30_000,
            members: 60_000,
            hashes: 8_000,
            sample: Some("2000"),
        }
    }
}

impl Scale {
    fn sample_name(&self) -> &'static str {
        self.sample.unwrap_or("the default")
    }
}

/// The mixed keyspace, its values drawn from `seed`.
fn load_mixed(connection: &mut redis::Connection, scale: &Scale, seed: u64) {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z ^ (z >> 27)
    };
    let text = |n: u64, len: usize| {
        let mut s = format!("{n:x}");
        while s.len() < len {
            s.push_str(&format!("{n:x}"));
        }
        s.truncate(len);
        s
    };
    let mut pipe = redis::pipe();
    for i in 0..scale.strings {
        pipe.set(format!("session:{i}"), text(next(), 100)).ignore();
        if i % 1000 == 999 {
            pipe.query::<()>(connection).unwrap();
            pipe.clear();
        }
    }
    for i in 0..scale.members {
        pipe.zadd("leaderboard", format!("player:{i}"), next() % 100_000)
            .ignore();
        if i % 1000 == 999 {
            pipe.query::<()>(connection).unwrap();
            pipe.clear();
        }
    }
    for i in 0..scale.hashes {
        let fields: Vec<(String, String)> = (0..8)
            .map(|f| {
                (
                    format!("field{f}"),
                    text(next(), 8 + (next() % 24) as usize),
                )
            })
            .collect();
        pipe.hset_multiple(format!("user:{i}"), &fields).ignore();
        if i % 2 == 0 {
            pipe.expire(format!("user:{i}"), 86_400).ignore();
        }
        if i % 500 == 499 {
            pipe.query::<()>(connection).unwrap();
            pipe.clear();
        }
    }
    // Every count above is a multiple of its batch: nothing is left queued.
}

/// The data's bytes on a server: used_memory above the empty server's, and by type.
struct Reading {
    bytes: f64,
    by_type: BTreeMap<String, u64>,
}

/// `membench load --workload profile` of `profile` on a fresh server of `spec` with `seed`.
fn rebuild(
    spec: &membench::crd::EngineSpec,
    profile: &std::path::Path,
    seed: u64,
    keys: u64,
) -> Reading {
    let target = common::start_spec(spec);
    let report = common::rebuild_keeping_data(
        &target.address,
        profile,
        keys,
        &["--seed", &seed.to_string()],
    );
    let rep = &report["repetitions"][0];
    Reading {
        bytes: (rep["used_memory"].as_u64().unwrap()
            - rep["baseline_used_memory"].as_u64().unwrap()) as f64,
        by_type: common::memory_by_type(&target.address),
    }
}

/// One round with `seed`: the source's bytes, and the profiles at the scale's sample and with
/// every key read, rebuilt with `seed`.
struct Round {
    source: Reading,
    sampled: Reading,
    /// The rebuild of a profile that read every key (the first round only).
    every_key: Option<Reading>,
    profile: Profile,
}

fn round(
    spec: &membench::crd::EngineSpec,
    dir: &std::path::Path,
    scale: &Scale,
    seed: u64,
    every: bool,
) -> Round {
    let source = common::start_spec(spec);
    let empty = common::used_memory(&source.address);
    load_mixed(&mut common::connect(&source.address), scale, seed);
    let keys: u64 = redis::cmd("DBSIZE")
        .query(&mut common::connect(&source.address))
        .unwrap();
    // The loading connections are closed; their buffers are gone.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let source_data = Reading {
        bytes: (common::used_memory(&source.address) - empty) as f64,
        // Before the profile, whose reads move the sorted set's table out of a rehash.
        by_type: common::memory_by_type(&source.address),
    };
    let mut profiles = Vec::new();
    let mut samples = vec![scale.sample];
    if every {
        samples.push(Some("1000000"));
    }
    for sample in samples {
        let mut args = vec!["--max-commands-per-sec", "1000000"];
        if let Some(sample) = sample {
            args.extend(["--sample-keys", sample]);
        }
        let (output, profile) = common::profile_json(&source.address.socket_addr(), &args);
        assert!(output.status.success(), "{}", common::stderr(&output));
        let path = dir.join(format!("mixed-{seed}-{}.json", sample.unwrap_or("default")));
        std::fs::write(&path, &output.stdout).unwrap();
        profiles.push((path, profile.expect("the profile parses")));
    }
    drop(source);
    let sampled = rebuild(spec, &profiles[0].0, seed, keys);
    let every_key = every.then(|| rebuild(spec, &profiles[1].0, seed, keys));
    let off = |reading: &Reading| (reading.bytes / source_data.bytes - 1.0) * 100.0;
    let by_type = |reading: &Reading| {
        reading
            .by_type
            .iter()
            .map(|(t, b)| {
                let source = source_data.by_type.get(t).copied().unwrap_or(0) as f64;
                format!("{t} {b} ({:+.2}%)", (*b as f64 / source - 1.0) * 100.0)
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    eprintln!(
        "seed {seed}: source {} B (MEMORY USAGE by type {:?}); sample of {}: rebuilt {} B ({:+.2}% of the source; {}){}",
        source_data.bytes,
        source_data.by_type,
        scale.sample_name(),
        sampled.bytes,
        off(&sampled),
        by_type(&sampled),
        every_key
            .as_ref()
            .map_or(String::new(), |every_key| format!(
                "; every key read: {} B ({:+.2}%; {})",
                every_key.bytes,
                off(every_key),
                by_type(every_key)
            )),
    );
    Round {
        source: source_data,
        sampled,
        every_key,
        profile: profiles.swap_remove(0).1,
    }
}

/// How many seeded samples the test rebuilds: `MB_SEEDS`, 5 unless set. Zero or a word is
/// refused: a run of no seed would check nothing and pass.
fn seeds() -> u64 {
    match std::env::var("MB_SEEDS") {
        Err(_) => 5,
        Ok(value) => match value.parse::<u64>() {
            Ok(seeds) if seeds >= 1 => seeds,
            _ => panic!(
                "MB_SEEDS={value:?}: the number of seeded samples to rebuild must be a whole \
                 number of at least 1 (unset it for the default of 5)"
            ),
        },
    }
}

#[test]
fn a_keyspace_with_one_big_key_rebuilt_from_a_small_sample_lands_within_one_percent_of_the_source_in_every_run()
 {
    let mut spec = common::shared_build(EngineKind::Valkey, "9.1");
    // Without latency tracking: its per-command histograms (24,688 B each on Valkey 9.1, made
    // at a command's first use) are not data, and the source's load and the rebuild's make
    // different ones (INFO, SET, ZADD, HMSET, EXPIRE and DBSIZE after the source's empty
    // reading; SET, HSET, ZADD, PEXPIRE and MEMORY STATS after the rebuild's baseline). With
    // it on, the rebuild lands about 0.4% lower than with it off, one histogram's 0.21% of it
    // explained.
    spec.args = vec!["--latency-tracking".into(), "no".into()];
    let dir =
        std::env::temp_dir().join(format!("membench-profile-defaults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scale = scale();
    let mut errors = Vec::new();
    // The rebuild's own error on this data: a profile that read every key, rebuilt.
    let mut own = 0.0;
    let seeds = seeds();
    for seed in 1..=seeds {
        let Round {
            source,
            sampled,
            every_key,
            profile,
        } = round(&spec, &dir, &scale, seed, seed == 1);
        if let Some(every_key) = every_key {
            own = every_key.bytes / source.bytes - 1.0;
        }
        errors.push(sampled.bytes / source.bytes - 1.0);
        // Each type's keys, as MEMORY USAGE counts them, are within 2% of the source's (the
        // hashes were 3.0% short when every rebuilt hash got the same mix of value lengths;
        // the strings are byte for byte the source's; the hashes, read about 640 of 8,000,
        // move by 0.4% from one sample to the next).
        for (key_type, bytes) in &source.by_type {
            let rebuilt = sampled.by_type.get(key_type).copied().unwrap_or(0) as f64;
            let off = rebuilt / *bytes as f64 - 1.0;
            assert!(
                off.abs() <= 0.02,
                "seed {seed}: the rebuild's {key_type} keys take {rebuilt} B by MEMORY USAGE, {:+.2}% off the source's {bytes} B",
                off * 100.0
            );
        }
        // The walk counted every group; the sorted set is one key with its exact size.
        let zsets: Vec<_> = profile
            .groups
            .iter()
            .filter(|g| g.key_type == membench::profile::model::KeyType::Zset)
            .collect();
        assert_eq!(zsets.len(), 1, "{:?}", profile.groups);
        assert_eq!(zsets[0].keys, 1);
        assert_eq!(
            zsets[0].elements.as_ref().unwrap().buckets,
            vec![[scale.members, scale.members, 1]]
        );
        let keys_of = |t| {
            profile
                .groups
                .iter()
                .filter(|g| g.key_type == t)
                .map(|g| g.keys)
                .sum::<u64>()
        };
        assert_eq!(
            keys_of(membench::profile::model::KeyType::String),
            scale.strings
        );
        assert_eq!(
            keys_of(membench::profile::model::KeyType::Hash),
            scale.hashes
        );
        for group in &profile.groups {
            let share = group
                .sampled_share
                .expect("every group states its sampled share");
            assert!(
                group.sampled_keys >= 400.min(group.keys),
                "{}: {} of {} keys read",
                group.template,
                group.sampled_keys,
                group.keys
            );
            assert!(share > 0.0 && share <= 1.0, "{share}");
            assert!(group.size_error.is_some(), "{}", group.template);
        }
    }
    if std::env::var_os("MEMBENCH_KEEP").is_none() {
        std::fs::remove_dir_all(&dir).ok();
    }
    eprintln!(
        "the rebuild from every key read: {:+.2}% of the source; from a sample of {}: {}",
        own * 100.0,
        scale.sample_name(),
        errors
            .iter()
            .map(|e| format!("{:+.2}%", e * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert_eq!(
        errors.len() as u64,
        seeds,
        "every seed's rebuild was measured"
    );
    assert!(
        own.abs() <= 0.01,
        "the rebuild of a profile that read every key is {:+.2}% off the source",
        own * 100.0
    );
    for (seed, error) in errors.iter().enumerate() {
        // Within 1% of the source in every run, and of where reading every key lands.
        assert!(
            error.abs() <= 0.01,
            "seed {}: the rebuild from a sample is {:+.2}% off the source: {errors:?}",
            seed + 1,
            error * 100.0
        );
        assert!(
            (error - own).abs() <= 0.01,
            "seed {}: the rebuild from a sample is {:+.2}% off the source, the one from every key {:+.2}%: {errors:?}",
            seed + 1,
            error * 100.0,
            own * 100.0
        );
    }
}

/// `membench profile` stopped by `signal` mid-sample: its exit code, and the profile printed.
fn profile_stopped_by(signal: libc::c_int) -> (Option<i32>, String, Option<Profile>) {
    let engine = common::start(EngineKind::Valkey, &[]);
    let mut connection = common::connect(&engine.address);
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.set(format!("k:{i}"), "value").ignore();
    }
    pipe.query::<()>(&mut connection).unwrap();
    // About 600 commands a second: the walk, then the keys sampled one by one (each with a
    // PTTL) for about 15 s.
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_membench"))
        .args([
            "profile",
            "--addr",
            &engine.address.socket_addr(),
            "--output",
            "json",
        ])
        .args(["--max-commands-per-sec", "600"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The signal goes once a few keys have been sampled, however long the start and the walk
    // took on a busy machine (the engine counts the profiler's PTTLs), within 60 s.
    let pttls = |connection: &mut redis::Connection| -> u64 {
        common::commands_called(connection)
            .get("pttl")
            .copied()
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while pttls(&mut connection) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "membench profile sampled no 3 keys within 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    common::send_signal(child.id(), signal).unwrap();
    let output = child.wait_with_output().unwrap();
    let profile = serde_json::from_slice(&output.stdout).ok();
    (output.status.code(), common::stderr(&output), profile)
}

#[test]
fn sigint_and_sigterm_during_a_profile_print_what_was_read_marked_incomplete() {
    for (signal, name, code) in [
        (libc::SIGINT, "SIGINT", 130),
        (libc::SIGTERM, "SIGTERM", 143),
    ] {
        let (exit, stderr, profile) = profile_stopped_by(signal);
        assert_eq!(exit, Some(code), "{name}: {stderr}");
        let profile = profile.unwrap_or_else(|| panic!("{name}: no profile printed: {stderr}"));
        assert!(!profile.source.complete, "{name}");
        let why = profile.source.stopped_by.clone().unwrap_or_default();
        assert!(
            why.contains(&format!("{name} stopped the profile after"))
                && why.contains("keys to sample"),
            "{name}: {why}"
        );
        assert!(
            profile.source.sampled_keys > 0 && profile.source.sampled_keys < 3000,
            "{name}: {} keys sampled",
            profile.source.sampled_keys
        );
        assert!(
            stderr.contains("the profile is incomplete")
                && stderr.contains("keys read in full of 3000"),
            "{stderr}"
        );
        // What was read rebuilds: its groups' counts are the walk's.
        profile.check().unwrap();
        assert_eq!(profile.groups[0].keys, 3000);
    }
}
