//! Tests of a spec's run plans: what each entry's plan holds, and that any spec's plans read
//! back from their JSON as they were (the client pod reads exactly what the operator wrote).

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

use super::run_plan::entry_plans;
use crate::client::measurement::plan::{RunPlan, WorkloadPlan};
use crate::stats::StabilityThresholds;
use crate::validation::spec_file::parse_specs;

fn document(yaml_spec: &str) -> String {
    format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: plans}}\nspec:\n{yaml_spec}"
    )
}

/// A spec as `membench run` reads it, checked whole.
fn spec(yaml_spec: &str) -> crate::crd::MemoryBenchmark {
    parse_specs(&document(yaml_spec)).unwrap().remove(0)
}

/// A spec as the API server could hand it over: only its schema's types, none of the checks
/// across fields.
fn unchecked(yaml_spec: &str) -> crate::crd::MemoryBenchmark {
    serde_saphyr::from_str(&document(yaml_spec)).unwrap()
}

#[test]
fn each_entry_gets_the_specs_settings_and_its_own() {
    let b = spec(
        "  instanceType: x\n  engines:\n    - {engine: valkey, version: \"9.1\", config: {hash-max-listpack-entries: \"64\", maxmemory: 32mb}}\n    - {engine: valkey, version: \"9.1\", name: plain, withoutTtl: true, config: {maxmemory: 32mb}}\n    - {engine: redis, version: \"8.2\", name: limited, config: {maxmemory: 64mb}}\n  workload: {strings: {keys: 1000, ttlSeconds: 3600, ttlShare: 0.5}}\n  pipeline: 40\n  repetitions: 4\n  settleSeconds: 3\n  peak: {snapshot: {writesPerSecond: 500}, replica: {writesPerSecond: 700}}\n  eviction: {loadTo: 2.5}\n",
    );
    let plans = entry_plans(&b.spec, StabilityThresholds::default()).unwrap();
    assert_eq!(plans.len(), 3);
    for plan in &plans {
        let s = &plan.settings;
        assert_eq!((s.pipeline, s.repetitions, s.settle_seconds), (40, 4, 3));
        assert_eq!(s.snapshot.as_ref().map(|p| p.writes_per_sec), Some(500));
        assert_eq!(s.replica.map(|r| r.writes_per_sec), Some(700));
        assert_eq!(s.eviction.as_ref().map(|e| e.load_to), Some(2.5));
        assert!(!s.refuse_existing_keys, "the engines are the run's own");
        assert_eq!(
            plan.workload,
            WorkloadPlan::Strings {
                keys: 1000,
                value_size: 100
            }
        );
    }
    let [first, plain, limited] = &plans[..] else {
        unreachable!()
    };
    assert_eq!(
        first.settings.ttl.map(|t| (t.seconds, t.share)),
        Some((3600, 0.5))
    );
    assert_eq!(plain.settings.ttl, None, "withoutTtl");
    assert_eq!(
        first.settings.read_config,
        ["hash-max-listpack-entries"],
        "maxmemory waits for the eviction, which reports it"
    );
    assert_eq!(
        first.settings.eviction.as_ref().map(|e| e.maxmemory),
        Some(32 << 20)
    );
    assert_eq!(
        limited.settings.eviction.as_ref().map(|e| e.maxmemory),
        Some(64 << 20)
    );
}

#[test]
fn a_plan_the_spec_cannot_make_names_the_field() {
    // The spec file's checks refuse it first; a plan is made from a spec however it came.
    let b = unchecked(
        "  instanceType: x\n  engines: [{engine: valkey, version: \"9.1\"}]\n  workload: {strings: {keys: 10}}\n  eviction: {loadTo: 2}\n",
    );
    let err = entry_plans(&b.spec, StabilityThresholds::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.engines[0]") && err.contains("or config.maxmemory on this engine"),
        "{err}"
    );
}

/// Specs as the API server could hand them over, with every setting a plan carries drawn:
/// each workload, and the phases on the workloads they apply to. (The checks across fields,
/// such as a churn refused beside a TTL, are the spec file's and the operator's, before any
/// plan is made; a plan carries whatever they let through.)
fn runnable_spec() -> impl Strategy<Value = String> {
    let workload = prop_oneof![
        (1u64..10_000_000, 1000u64..2_000_000).prop_map(|(members, every)| format!(
            "sortedSet: {{members: {members}, key: \"z:{members}\", sampleEvery: {every}}}"
        )),
        (1u64..1_000_000, 1u64..1_000_000, 1u32..4096, any::<u64>()).prop_map(
            |(requests, keyspace, size, seed)| format!(
                "randomStrings: {{requests: {requests}, keyspace: {keyspace}, valueSize: {size}, seed: {seed}}}"
            )
        ),
        (1u64..100_000_000, 1u32..100_000).prop_map(|(keys, size)| format!(
            "strings: {{keys: {keys}, valueSize: {size}, ttlSeconds: 86400, ttlShare: 0.125}}"
        )),
        (
            1u64..10_000_000,
            prop::sample::select(vec!["hash", "strings"]),
            prop::sample::subsequence(vec!["name", "age", "city", "score", "note"], 1..=5)
        )
            .prop_map(|(records, layout, fields)| format!(
                "records: {{records: {records}, layout: {layout}, fields: [{}]}}",
                fields.join(", ")
            )),
    ];
    let engine = (
        prop::sample::select(vec!["redis", "valkey", "dragonfly"]),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(1u32..512),
    )
        .prop_map(|(kind, without_ttl, cluster, listpack)| {
            let cluster = if cluster { ", clusterMode: true" } else { "" };
            let config = match (kind, listpack) {
                ("dragonfly", _) | (_, None) => String::new(),
                (_, Some(n)) => format!(", config: {{hash-max-listpack-entries: \"{n}\"}}"),
            };
            format!(
                "{{engine: {kind}, version: \"9.1\", withoutTtl: {without_ttl}{cluster}{config}}}"
            )
        });
    let churn = (1u32..=100, 1u32..99, 1u32..=100, 1u32..=1024, any::<bool>(), 5u32..=3600, any::<u64>())
        .prop_map(|(rounds, delete, overwrite, size, defrag, seconds, seed)| {
            format!(
                "churn: {{rounds: {rounds}, deleteShare: {}, overwriteShare: {}, overwriteValueSize: {size}, defrag: {defrag}, defragSeconds: {seconds}, seed: {seed}}}",
                f64::from(delete) / 100.0,
                f64::from(overwrite) / 100.0
            )
        });
    let snapshot = (1u32..=10_000_000, 1u32..=100).prop_map(|(rate, share)| {
        format!(
            "snapshot: {{writesPerSecond: {rate}, writeShare: {}}}",
            f64::from(share) / 100.0
        )
    });
    let replica =
        (1u32..=10_000_000).prop_map(|rate| format!("replica: {{writesPerSecond: {rate}}}"));
    let eviction = (
        prop::sample::select(vec!["1mb", "100mb", "2gb", "104857600"]),
        prop::sample::select(vec![
            "allkeys-lru",
            "allkeys-lfu",
            "volatile-ttl",
            "noeviction",
        ]),
        11u32..=200,
    )
        .prop_map(|(maxmemory, policy, load_to)| {
            format!(
                "eviction: {{maxmemory: {maxmemory}, policy: {policy}, loadTo: {}}}",
                f64::from(load_to) / 10.0
            )
        });
    (
        workload,
        prop::collection::vec(engine, 1..4),
        (1u32..=100_000, 1u32..=100, 0u32..=60),
        prop::option::of(churn),
        prop::option::of(snapshot),
        prop::option::of(replica),
        prop::option::of(eviction),
    )
        .prop_map(
            |(workload, engines, (pipeline, repetitions, settle), churn, snapshot, replica, eviction)| {
                // The phases apply to strings and records (churn to the sorted set too, when it
                // has no TTL); the draws for another workload are left out.
                let many_keys = workload.starts_with("strings") || workload.starts_with("records");
                let mut text = format!(
                    "  instanceType: x\n  engines: [{}]\n  workload: {{{workload}}}\n  pipeline: {pipeline}\n  repetitions: {repetitions}\n  settleSeconds: {settle}\n",
                    engines.join(", ")
                );
                let mut peak = Vec::new();
                if many_keys {
                    peak.extend(snapshot);
                    peak.extend(replica);
                    if let Some(churn) = churn {
                        text.push_str(&format!("  {churn}\n"));
                    }
                    if let Some(eviction) = eviction {
                        text.push_str(&format!("  {eviction}\n"));
                    }
                }
                if !peak.is_empty() {
                    text.push_str(&format!("  peak: {{{}}}\n", peak.join(", ")));
                }
                text
            },
        )
}

proptest! {
    #![proptest_config(Config {
        cases: 256,
        rng_seed: RngSeed::Fixed(0x706c_616e),
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn every_specs_plans_read_back_from_their_json_as_they_were(text in runnable_spec()) {
        let b = unchecked(&text);
        let plans = entry_plans(&b.spec, StabilityThresholds::default())
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(plans.len(), b.spec.engines.len());
        for plan in &plans {
            prop_assert_eq!(&RunPlan::from_json(&plan.to_json()).unwrap(), plan);
            prop_assert_eq!(&RunPlan::from_json(&plan.to_json_pretty()).unwrap(), plan);
            prop_assert_eq!(plan.settings.pipeline, b.spec.pipeline);
            prop_assert_eq!(plan.settings.repetitions, b.spec.repetitions);
        }
    }
}
