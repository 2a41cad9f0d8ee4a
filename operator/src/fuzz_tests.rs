//! Fuzzing of everything that reads input membench did not write: the termination-message
//! reader, the load path's reply scanner, INFO parsing and spec validation. `cargo fuzz` needs a
//! nightly toolchain, so these are proptest properties with a fixed seed and a fixed number of
//! cases: the same inputs on every run (a failure reproduces), a bounded pass of a few seconds
//! in the normal test suite, and a long pass on demand:
//!
//! ```sh
//! MEMBENCH_FUZZ_CASES=1000000 cargo test --release -p membench --lib fuzz_
//! MEMBENCH_FUZZ_SEED=7 MEMBENCH_FUZZ_CASES=100000 cargo test -p membench --lib fuzz_   # other inputs
//! ```
//!
//! Each property says what must hold for any input: no panic, and bounds on what comes out.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::{Value, json};

use crate::client::connection::engine::{MAX_INFO_FIELDS, MemoryInfo, parse_info};
use crate::client::connection::resp::{ReplyTally, scan_replies};
use crate::client::measurement::plan::{RunPlan, RunSettings, WorkloadPlan};
use crate::client::pod_io::result::{ClientResult, MAX_REPETITIONS, ReadError};
use crate::controller::build::pods::{PodSettings, client_pod, engine_pod, plan_of_client_pod};
use crate::controller::decide::results::absorb;
use crate::crd::{EngineStatus, MemoryBenchmark};
use crate::error::BenchError;
use crate::validation::validate;

/// Cases per property in the normal suite: a few seconds for all of them in a debug build.
const DEFAULT_CASES: u32 = 512;

/// The fixed seed, unless `MEMBENCH_FUZZ_SEED` names another.
const DEFAULT_SEED: u64 = 0x6d65_6d62_656e_6368;

fn config() -> Config {
    let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    Config {
        cases: number("MEMBENCH_FUZZ_CASES")
            .map_or(DEFAULT_CASES, |n| n.min(u32::MAX.into()) as u32),
        rng_seed: RngSeed::Fixed(number("MEMBENCH_FUZZ_SEED").unwrap_or(DEFAULT_SEED)),
        failure_persistence: None,
        ..Config::default()
    }
}

/// Integers where bugs live: the edges of i64, small values and zero.
fn edgy_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MAX),
        Just(i64::MIN),
        Just(0i64),
        Just(-1i64),
        -5i64..5,
        any::<i64>(),
    ]
}

fn edgy_u64() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(u64::MAX)),
        Just(json!(u32::MAX)),
        Just(json!(0)),
        (0u64..200).prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        Just(json!(-1)),
        Just(json!(1e300)),
    ]
}

/// Pieces of a reply stream: what an engine sends, cut and garbled anywhere.
fn reply_piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"+OK\r\n".to_vec()),
        Just(b":1\r\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b":18446744073709551615\r\n".to_vec()),
        "[-+:$*]?[0-9A-Za-z ]{0,30}\r?\n?".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..40),
    ]
}

fn column() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(edgy_i64(), 0..6)
}

fn spread() -> impl Strategy<Value = Value> {
    (any::<f64>(), any::<f64>(), any::<f64>(), any::<f64>()).prop_map(|(a, b, c, d)| {
        // JSON has no NaN or infinity: serde_json writes them as null, which must be refused too.
        json!({"median": a, "min": b, "max": c, "cv": d})
    })
}

/// Results shaped like a client's, with every number and length drawn from the edges.
fn result_message() -> impl Strategy<Value = String> {
    let columns = (
        edgy_u64(),
        column(),
        column(),
        column(),
        column(),
        column(),
        column(),
    );
    let summary = (
        edgy_u64(),
        edgy_u64(),
        spread(),
        spread(),
        spread(),
        ".{0,500}",
    );
    (
        columns,
        prop::option::of(summary),
        edgy_u64(),
        edgy_u64(),
        ".{0,80}",
        prop::option::of(("[A-Za-z ]{0,70}", ".{0,600}")),
        prop::collection::vec(".{0,450}", 0..5),
    )
        .prop_map(
            |((n, baseline, used, rss, items, micros, frag), summary, commands, omitted, version, error, warnings)| {
                let mut result = json!({
                    "engine": {"name": "redis", "version": version, "allocator": "libc", "arch": "x86_64"},
                    "commands": commands,
                    "omitted": omitted,
                    "repetitions": {"n": n, "baseline": baseline, "used": used, "rss": rss,
                                    "items": items, "micros": micros, "frag": frag},
                    "warnings": warnings,
                });
                if let Some((items, repetitions, used, bytes, rate, reason)) = summary {
                    result["summary"] = json!({"items": items, "repetitions": repetitions,
                        "used_memory": used, "bytes_per_item": bytes, "commands_per_sec": rate,
                        "unstable": false, "unstable_reason": reason});
                }
                if let Some((category, message)) = error {
                    result["error"] = json!({"category": category, "message": message});
                }
                result.to_string()
            },
        )
}

/// Reads a message, then does with it what the operator does: decode and absorb.
fn read_and_absorb(message: &str, repetitions: u32) -> Result<(), TestCaseError> {
    match ClientResult::read(message, repetitions) {
        Ok(result) => {
            let decoded = result.decoded_repetitions();
            prop_assert_eq!(decoded.len(), result.repetitions.n as usize);
            prop_assert!(decoded.len() as u32 <= repetitions);
            prop_assert!(decoded.iter().all(|r| r.items > 0));
            let mut engine = EngineStatus::default();
            absorb(&mut engine, &result, repetitions);
            prop_assert!(engine.repetitions.len() as u32 <= repetitions);
        }
        Err(ReadError::Invalid(why)) => {
            // The quote is at most 200 bytes of the message (plus the ellipsis).
            let quoted = why.rsplit("the message began: ").next().unwrap_or_default();
            prop_assert!(quoted.len() <= 4 * 200 + 3, "{} bytes quoted", quoted.len());
        }
        Err(ReadError::NoResult(_)) => {}
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_termination_messages_of_any_bytes_never_panic(message in ".{0,5000}", repetitions in 1u32..=MAX_REPETITIONS) {
        read_and_absorb(&message, repetitions)?;
    }

    #[test]
    fn fuzz_result_shaped_messages_are_read_within_the_spec_or_refused(message in result_message(), repetitions in 1u32..=MAX_REPETITIONS) {
        read_and_absorb(&message, repetitions)?;
    }

    #[test]
    fn fuzz_reply_scanning_of_any_bytes_never_panics_and_consumes_within_the_window(
        pieces in prop::collection::vec(reply_piece(), 0..64),
        wanted in 0usize..100,
    ) {
        let window = pieces.concat();
        let mut tally = ReplyTally::default();
        if let Ok((consumed, replies)) = scan_replies(&window, wanted, &mut tally) {
            prop_assert!(consumed <= window.len());
            prop_assert!(replies <= wanted);
            prop_assert!(tally.first_error.as_ref().is_none_or(|e| e.len() <= 4 * 1024));
        }
    }

    #[test]
    fn fuzz_well_formed_replies_are_tallied_exactly(
        replies in prop::collection::vec(prop_oneof![
            Just(None),
            (0u64..1_000_000_000).prop_map(Some),
        ], 1..200),
        split in any::<prop::sample::Index>(),
    ) {
        let mut bytes = Vec::new();
        let mut sum = 0u64;
        for reply in &replies {
            match reply {
                None => bytes.extend_from_slice(b"+OK\r\n"),
                Some(n) => {
                    sum += n;
                    bytes.extend_from_slice(format!(":{n}\r\n").as_bytes());
                }
            }
        }
        // Two reads, split anywhere: the first leaves its partial reply for the second.
        let at = split.index(bytes.len() + 1);
        let mut tally = ReplyTally::default();
        let (consumed, first) = scan_replies(&bytes[..at], replies.len(), &mut tally).unwrap();
        let (_, second) = scan_replies(&bytes[consumed..], replies.len() - first, &mut tally).unwrap();
        prop_assert_eq!(first + second, replies.len());
        prop_assert_eq!(tally.integer_sum, sum);
    }

    #[test]
    fn fuzz_plans_of_any_text_are_read_or_refused_naming_a_field_and_never_panic(
        text in prop_oneof![".{0,2000}".boxed(), broken_plan().boxed()],
    ) {
        match RunPlan::from_json(&text) {
            Ok(plan) => prop_assert_eq!(RunPlan::from_json(&plan.to_json()).ok(), Some(plan)),
            Err(BenchError::InvalidPlan { field, message }) => {
                prop_assert!(!field.is_empty() && !message.is_empty());
            }
            Err(other) => prop_assert!(false, "refused as {other:?}, not as a plan"),
        }
    }

    #[test]
    fn fuzz_info_of_any_text_gives_bounded_fields_and_never_panics(text in ".{0,4000}") {
        let fields = parse_info(&text);
        prop_assert!(fields.len() <= MAX_INFO_FIELDS);
        if let Ok(memory) = MemoryInfo::from_info(&fields) {
            prop_assert!(memory.mem_fragmentation_ratio.is_none_or(f64::is_finite));
        }
    }

    #[test]
    fn fuzz_info_memory_figures_round_trip(used in any::<u64>(), rss in any::<u64>(), ratio in any::<f64>()) {
        let text = format!("# Memory\r\nused_memory:{used}\r\nused_memory_rss:{rss}\r\nmem_fragmentation_ratio:{ratio}\r\n");
        let memory = MemoryInfo::from_info(&parse_info(&text)).unwrap();
        prop_assert_eq!((memory.used_memory, memory.used_memory_rss), (used, rss));
        prop_assert_eq!(memory.mem_fragmentation_ratio, ratio.is_finite().then_some(ratio));
    }

    #[test]
    fn fuzz_spec_validation_never_panics_and_what_it_accepts_builds_pods(spec in benchmark_spec()) {
        let Ok(mut benchmark) = serde_json::from_value::<MemoryBenchmark>(spec) else {
            return Ok(());
        };
        benchmark.metadata.uid = Some("uid-fuzz".into());
        if let Ok(valid) = validate(&benchmark) {
            prop_assert_eq!(valid.engine_memory.len(), benchmark.spec.engines.len());
            for (index, memory) in valid.engine_memory.iter().enumerate() {
                prop_assert!(*memory >= 16 << 20);
                engine_pod(&benchmark, index, *memory, Some("node-0"), &PodSettings::default());
                let client = client_pod(&benchmark, index, 1, &valid.plans, "127.0.0.1", &PodSettings::default());
                // The plan its client reads is the one its entry was given, whatever the spec.
                let carried = plan_of_client_pod(&client).map(|read| read.map_err(|e| e.to_string()));
                prop_assert_eq!(carried, Some(Ok(valid.plans[benchmark.spec.entry_of_run(index)].clone())));
            }
        }
    }
}

/// A plan's JSON with one of its characters replaced, deleted or doubled: the plans a
/// truncated environment or a hand edit leaves.
fn broken_plan() -> impl Strategy<Value = String> {
    let plan = RunPlan::new(
        WorkloadPlan::Strings {
            keys: 1000,
            value_size: 100,
        },
        RunSettings {
            read_config: vec!["maxmemory".into()],
            ..RunSettings::default()
        },
    )
    .to_json_pretty();
    let length = plan.chars().count();
    (0..length, any::<char>(), 0..3u8).prop_map(move |(at, with, how)| {
        let mut chars: Vec<char> = plan.chars().collect();
        match how {
            0 => chars[at] = with,
            1 => {
                chars.remove(at);
            }
            _ => chars.insert(at, chars[at]),
        }
        chars.into_iter().collect()
    })
}

/// Specs as the API server could hand them over, valid or not: every field drawn from values
/// that pass and values that must not.
fn benchmark_spec() -> impl Strategy<Value = Value> {
    let text = || prop_oneof![".{0,70}", "[a-z0-9.-]{1,20}"];
    let engine = (
        prop_oneof![Just("redis"), Just("valkey"), Just("dragonfly")],
        prop_oneof!["[0-9]{1,2}(\\.[0-9]{1,2}){0,3}", ".{0,12}"],
        prop::option::of(prop_oneof![
            "[a-z]{1,8}(/[a-z]{1,8})?:[0-9.]{1,8}",
            ".{0,40}"
        ]),
        prop::option::of(prop_oneof![
            "[0-9]{1,12}(\\.[0-9])?(Mi|Gi|G|k|e9|Qi)?",
            ".{0,12}"
        ]),
        prop::collection::vec(prop_oneof!["--[a-z-]{1,20}", ".{0,20}"], 0..4),
        prop::option::of("[a-z0-9.-]{0,45}"),
    )
        .prop_map(|(engine, version, image, memory, args, name)| {
            let mut entry = json!({"engine": engine, "version": version, "args": args});
            if let Some(image) = image {
                entry["image"] = json!(image);
            }
            if let Some(memory) = memory {
                entry["memory"] = json!(memory);
            }
            if let Some(name) = name {
                entry["name"] = json!(name);
            }
            entry
        });
    let toleration = (
        prop::option::of(text()),
        prop::option::of(prop_oneof![Just("Equal"), Just("Exists"), Just("Lt")]),
        prop::option::of(text()),
        prop::option::of(prop_oneof![
            Just(""),
            Just("NoSchedule"),
            Just("NoExecute"),
            Just("x")
        ]),
        prop::option::of(any::<i64>()),
    )
        .prop_map(|(key, operator, value, effect, seconds)| {
            json!({"key": key, "operator": operator, "value": value, "effect": effect,
                   "tolerationSeconds": seconds})
        });
    let workload = prop_oneof![
        (edgy_u64(), edgy_u64()).prop_map(|(members, every)| json!({"sortedSet": {"members": members, "sampleEvery": every}})),
        (edgy_u64(), edgy_u64(), 0u32..100_000).prop_map(|(requests, keyspace, size)| json!({"randomStrings": {"requests": requests, "keyspace": keyspace, "valueSize": size}})),
        (edgy_u64(), 0u32..100_000).prop_map(|(keys, size)| json!({"strings": {"keys": keys, "valueSize": size}})),
        (edgy_u64(), prop::collection::vec("[a-z]{0,8}", 0..6)).prop_map(|(records, fields)| json!({"records": {"records": records, "fields": fields}})),
    ];
    (
        "[a-z0-9-]{1,60}",
        text(),
        prop::collection::vec(engine, 1..4),
        workload,
        (edgy_u64(), edgy_u64(), edgy_u64()),
        prop::collection::btree_map(text(), text(), 0..3),
        prop::collection::vec(toleration, 0..3),
    )
        .prop_map(
            |(
                name,
                instance_type,
                engines,
                workload,
                (repetitions, pipeline, settle),
                selector,
                tolerations,
            )| {
                json!({
                    "apiVersion": "membench.io/v1alpha1",
                    "kind": "MemoryBenchmark",
                    "metadata": {"name": name, "namespace": "fuzz"},
                    "spec": {
                        "instanceType": instance_type,
                        "engines": engines,
                        "workload": workload,
                        "repetitions": repetitions,
                        "pipeline": pipeline,
                        "settleSeconds": settle,
                        "placement": {"nodeSelector": selector, "tolerations": tolerations},
                    }
                })
            },
        )
}

/// A small valid dump: strings (one integer-encoded), a listpack hash, an intset, a quicklist
/// of one listpack, an expiry, and its checksum.
fn small_dump() -> Vec<u8> {
    let mut bytes = b"REDIS0011".to_vec();
    bytes.extend([0xfe, 0, 0xfb, 4, 1]);
    bytes.extend([0, 1, b'a', 5]);
    bytes.extend(b"hello");
    bytes.extend([0xfc]);
    bytes.extend(1_900_000_000_000u64.to_le_bytes());
    bytes.extend([0, 1, b'n', 0xc0, 0x7b]);
    // A listpack hash {f: v, n: 7}.
    let listpack = [
        12, 0, 0, 0, 4, 0, 0x81, b'f', 2, 0x81, b'v', 2, 0x81, b'n', 2, 7, 1, 0xff,
    ];
    let mut hash = listpack.to_vec();
    hash[0] = listpack.len() as u8;
    bytes.extend([16, 1, b'h', hash.len() as u8]);
    bytes.extend(&hash);
    bytes.extend([11, 1, b's', 12, 2, 0, 0, 0, 2, 0, 0, 0, 1, 0, 9, 0]);
    bytes.extend([18, 1, b'l', 1, 2, hash.len() as u8]);
    bytes.extend(&hash);
    bytes.push(0xff);
    let crc = crate::rdb::crc64::update(0, &bytes);
    bytes.extend(crc.to_le_bytes());
    bytes
}

/// Reads `bytes` to the end or to its first error; the keys read.
fn read_dump(bytes: &[u8]) -> Result<u64, crate::rdb::RdbError> {
    let mut reader = crate::rdb::RdbReader::new(bytes, "fuzz.rdb")?;
    let mut keys = 0;
    while reader.next_key(&mut |_, _, _| {})?.is_some() {
        keys += 1;
    }
    Ok(keys)
}

#[test]
fn the_small_dump_reads_whole() {
    assert_eq!(read_dump(&small_dump()).unwrap(), 5);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_rdb_of_any_bytes_never_panics(body in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let mut bytes = b"REDIS0011".to_vec();
        bytes.extend(body);
        let _ = read_dump(&bytes);
    }

    #[test]
    fn fuzz_rdb_with_changed_bytes_never_panics_and_is_refused(
        changes in proptest::collection::vec((any::<usize>(), 1u8..=255), 1..6)
    ) {
        let mut bytes = small_dump();
        for (at, xor) in changes {
            let at = 9 + at % (bytes.len() - 9);
            bytes[at] ^= xor;
        }
        // Any change past the header is refused: by the parse or by the checksum.
        prop_assert!(read_dump(&bytes).is_err());
    }
}
