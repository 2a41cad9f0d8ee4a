//! Tests of the spec checks in `validation/mod.rs`.

use super::*;

/// A spec as the API server would hand it over: parsed, not yet validated.
fn unchecked(yaml: &str) -> MemoryBenchmark {
    serde_saphyr::from_str(yaml).unwrap()
}

fn benchmark(name: &str, engines: &str) -> MemoryBenchmark {
    unchecked(&format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: {name}}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: {engines}\n  workload: {{sortedSet: {{members: 1000000}}}}\n"
    ))
}

#[test]
fn the_operator_refuses_each_local_only_engine_field_saying_it_applies_to_membench_run_only() {
    for (entry, field) in [
        ("binary: /usr/bin/redis-server", "binary"),
        ("build: redis-7.0.15-debian", "build"),
        (
            "ldPreload: /usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
            "ldPreload",
        ),
    ] {
        let spec = benchmark(
            "local",
            &format!(
                "[{{engine: redis, version: \"7.0.15\"}}, {{engine: valkey, version: \"9.1\", {entry}}}]"
            ),
        );
        validate_spec(&spec).expect("a local run takes it");
        let err = validate(&spec).expect_err(entry);
        assert!(
            err.starts_with(&format!(
                "spec.engines[1].{field} applies to membench run only"
            )),
            "{err}"
        );
    }
    // The allocator means in a cluster what it means locally: the official images have
    // jemalloc, Dragonfly never does.
    let jemalloc = |engine: &str| {
        benchmark(
            "local",
            &format!("[{{engine: {engine}, version: \"9.1\", allocator: jemalloc}}]"),
        )
    };
    validate(&jemalloc("valkey")).expect("the official image has jemalloc");
    let err = validate(&jemalloc("dragonfly")).unwrap_err();
    assert!(
        err.contains("spec.engines[0].allocator") && err.contains("mimalloc"),
        "{err}"
    );
}

#[test]
fn the_operator_refuses_an_rdb_file_outside_a_claim_saying_where_to_put_it() {
    let mut spec = benchmark("local", "[{engine: valkey, version: \"9.1\"}]");
    spec.spec.workload = unchecked(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: x}\nspec:\n  engines: [{engine: valkey, version: \"9.1\"}]\n  workload: {rdb: {path: /backups/dump.rdb}}\n",
    )
    .spec
    .workload;
    let err = validate(&spec).unwrap_err();
    assert!(
        err.starts_with("spec.workload.rdb has no persistentVolumeClaim and no url, and /backups/dump.rdb is a path on the machine that runs membench run, which a client pod cannot read: put the file in a PersistentVolumeClaim") && err.contains("serve it over https and set spec.workload.rdb.url"),
        "{err}"
    );
}

#[test]
fn an_instance_type_is_optional_locally_and_required_by_the_operator() {
    let mut spec = benchmark("local", "[{engine: redis, version: \"7.0.15\"}]");
    spec.spec.instance_type = String::new();
    validate_spec(&spec).expect("a local run needs no instance type");
    let err = validate(&spec).unwrap_err();
    assert!(err.starts_with("spec.instanceType is missing"), "{err}");
    assert!(err.contains("instanceTypes"), "{err}");
    spec.spec.instance_type = "r8g 4xlarge".into();
    let err = validate_spec(&spec).unwrap_err();
    assert!(err.contains(message::INSTANCE_TYPE), "{err}");
}

#[test]
fn instance_types_and_parallelism_are_checked_as_the_schema_checks_them() {
    let mut spec = benchmark("types", "[{engine: redis, version: \"7.0.15\"}]");
    spec.spec.instance_types = vec!["r7i.4xlarge".into()];
    let err = validate_spec(&spec).unwrap_err();
    assert!(err.contains(message::BOTH_INSTANCE_TYPE_FIELDS), "{err}");
    spec.spec.instance_type = String::new();
    spec.spec.instance_types = vec!["r8g.4xlarge".into(), "r7i.4xlarge".into()];
    validate(&spec).expect("two instance types");
    spec.spec.instance_types.push("r8g.4xlarge".into());
    let err = validate_spec(&spec).unwrap_err();
    assert!(
        err.starts_with("spec.instanceTypes[2] 'r8g.4xlarge'")
            && err.contains(message::INSTANCE_TYPES_DISTINCT),
        "{err}"
    );
    spec.spec.instance_types = vec!["r8g 4xlarge".into()];
    let err = validate_spec(&spec).unwrap_err();
    assert!(err.contains(message::INSTANCE_TYPES), "{err}");
    spec.spec.instance_types = vec!["r8g.4xlarge".into()];
    spec.spec.parallelism = 0;
    let err = validate_spec(&spec).unwrap_err();
    assert!(
        err.starts_with("spec.parallelism is 0: parallelism must be at least 1"),
        "{err}"
    );
}

#[test]
fn quantities_in_binary_and_decimal_units() {
    assert_eq!(parse_memory_quantity("512Mi"), Some(512 << 20));
    assert_eq!(parse_memory_quantity("16Gi"), Some(16 << 30));
    assert_eq!(parse_memory_quantity("2G"), Some(2_000_000_000));
    assert_eq!(parse_memory_quantity("1.5Gi"), Some(3 << 29));
    assert_eq!(parse_memory_quantity("1e9"), Some(1_000_000_000));
    assert_eq!(parse_memory_quantity("100"), Some(100));
    assert_eq!(parse_memory_quantity("lots"), None);
    assert_eq!(parse_memory_quantity("12Qi"), None);
}

#[test]
fn memory_defaults_to_an_estimate_from_the_workload() {
    let valid = validate(&benchmark("zset", "[{engine: redis, version: \"7.0.15\"}]")).unwrap();
    // 1M members at 150 B, times 1.5, plus 256 MiB.
    assert_eq!(
        valid.engine_memory,
        vec![(256 << 20) + 225_000_000u64.div_ceil(1 << 20) * (1 << 20)]
    );
    let fifty_million = Workload::SortedSet {
        members: 50_000_000,
        key: "k".into(),
        sample_every: 0,
    };
    let estimate = estimated_engine_memory(&fifty_million, EngineKind::Valkey);
    assert!(estimate > 8 << 30 && estimate < 16 << 30, "{estimate}");
    assert_eq!(mebibytes(estimate), format!("{}Mi", estimate >> 20));
}

#[test]
fn an_explicit_memory_is_used_as_given() {
    let valid = validate(&benchmark(
        "zset",
        "[{engine: redis, version: \"7.0.15\", memory: 2Gi}]",
    ))
    .unwrap();
    assert_eq!(valid.engine_memory, vec![2 << 30]);
}

#[test]
fn a_bad_memory_quantity_names_the_field() {
    let err = validate(&benchmark(
        "zset",
        "[{engine: redis, version: \"7.0.15\"}, {engine: valkey, version: \"9.1.2\", memory: plenty}]",
    ))
    .unwrap_err();
    assert!(err.contains("spec.engines[1].memory"), "{err}");
    assert!(err.contains(message::MEMORY_QUANTITY), "{err}");
    let err = validate(&benchmark(
        "zset",
        "[{engine: redis, version: \"7.0.15\", memory: 1Mi}]",
    ))
    .unwrap_err();
    assert!(err.contains(message::MEMORY_MINIMUM), "{err}");
}

#[test]
fn a_name_too_long_for_pod_labels_is_rejected() {
    let long = "a".repeat(49);
    let err = validate(&benchmark(&long, "[{engine: redis, version: \"7.0.15\"}]")).unwrap_err();
    assert!(err.contains("metadata.name") && err.contains("48"), "{err}");
    let longest = "a".repeat(48);
    assert!(
        validate(&benchmark(
            &longest,
            "[{engine: redis, version: \"7.0.15\"}]"
        ))
        .is_ok()
    );
}

/// The error for a valid spec with `replace` changed to `with`.
fn rejected(replace: &str, with: &str) -> String {
    let valid = "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: zset}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{engine: redis, version: \"7.0.15\", image: \"redis:7.0.15\", memory: 1Gi}]\n  workload: {sortedSet: {members: 1000000, sampleEvery: 100000}}\n  placement:\n    nodeSelector: {pool: bench}\n    tolerations: [{key: dedicated, operator: Equal, value: bench, effect: NoSchedule}]\n";
    assert!(valid.contains(replace), "{replace}");
    validate(&unchecked(valid)).expect("the unchanged spec is valid");
    let changed = unchecked(&valid.replace(replace, with));
    validate(&changed).expect_err(with)
}

#[test]
fn every_crd_rule_is_checked_locally_with_the_same_words() {
    let cases = [
        (
            "instanceType: r8g.4xlarge",
            "instanceType: r8g 4xlarge",
            "spec.instanceType",
            message::INSTANCE_TYPE,
        ),
        (
            "image: \"redis:7.0.15\"",
            "image: \"Redis:7 x\"",
            "spec.engines[0].image",
            message::IMAGE,
        ),
        (
            "memory: 1Gi",
            "memory: plenty",
            "spec.engines[0].memory",
            message::MEMORY_QUANTITY,
        ),
        (
            "memory: 1Gi",
            "memory: 8Mi",
            "spec.engines[0].memory",
            message::MEMORY_MINIMUM,
        ),
        (
            "{pool: bench}",
            "{\"bad key\": bench}",
            "spec.placement.nodeSelector",
            message::NODE_SELECTOR_KEY,
        ),
        (
            "{pool: bench}",
            "{pool: \"bad value\"}",
            "spec.placement.nodeSelector.pool",
            message::NODE_SELECTOR_VALUE,
        ),
        (
            "key: dedicated, operator: Equal",
            "key: dedicated, operator: Lt",
            "spec.placement.tolerations[0].operator",
            "Equal, Exists",
        ),
        (
            "effect: NoSchedule",
            "effect: NoSchedul",
            "spec.placement.tolerations[0].effect",
            "NoSchedule",
        ),
        (
            "key: dedicated, operator: Equal",
            "operator: Equal",
            "spec.placement.tolerations[0].operator",
            message::TOLERATION_EMPTY_KEY,
        ),
        (
            "operator: Equal, value: bench",
            "operator: Exists, value: bench",
            "spec.placement.tolerations[0].value",
            message::TOLERATION_EXISTS_VALUE,
        ),
        (
            "effect: NoSchedule",
            "effect: NoSchedule, tolerationSeconds: 5",
            "spec.placement.tolerations[0].effect",
            message::TOLERATION_SECONDS,
        ),
        (
            "key: dedicated,",
            "key: \"bad key\",",
            "spec.placement.tolerations[0].key",
            message::TOLERATION_KEY,
        ),
        (
            "value: bench,",
            "value: \"bad value\",",
            "spec.placement.tolerations[0].value",
            message::TOLERATION_VALUE,
        ),
        (
            "sampleEvery: 100000",
            "sampleEvery: 10",
            "spec.workload.sortedSet.sampleEvery",
            message::SAMPLE_EVERY,
        ),
        (
            "members: 1000000, sampleEvery: 100000",
            "members: 200000000, sampleEvery: 1000",
            "spec.workload.sortedSet.sampleEvery",
            message::SAMPLES_PER_REPETITION,
        ),
        (
            "name: zset",
            &format!("name: {}", "z".repeat(49)),
            "metadata.name",
            message::NAME_LENGTH,
        ),
    ];
    for (replace, with, field, words) in cases {
        let err = rejected(replace, with);
        assert!(err.contains(field), "{with}: {err}");
        assert!(err.contains(words), "{with}: {err}");
    }
}

#[test]
fn a_ttl_is_refused_when_it_could_expire_before_the_final_reading_or_has_no_use() {
    let with = |workload: &str, engines: &str| {
        let yaml = format!(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: t}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: {engines}\n  workload: {workload}\n  settleSeconds: 30\n"
        );
        validate(&unchecked(&yaml))
    };
    let one = "[{engine: redis, version: \"7.0.15\"}]";
    assert!(with("{strings: {keys: 10, ttlSeconds: 90}}", one).is_ok());
    let err = with("{strings: {keys: 10, ttlSeconds: 89}}", one).unwrap_err();
    assert!(
        err.contains("spec.workload.strings.ttlSeconds: is 89") && err.contains("between 90 and"),
        "{err}"
    );
    let err = with("{records: {records: 10, ttlShare: 0.5}}", one).unwrap_err();
    assert!(
        err.contains("records.ttlShare: applies only with ttlSeconds"),
        "{err}"
    );
    let err = with(
        "{sortedSet: {members: 10, ttlSeconds: 600, ttlShare: 0.5}}",
        one,
    )
    .unwrap_err();
    assert!(err.contains("the sorted set is one key"), "{err}");
    let err = with("{strings: {keys: 10, ttlSeconds: 600, ttlShare: 0}}", one).unwrap_err();
    assert!(err.contains("above 0 and at most 1"), "{err}");
    let without = "[{engine: redis, version: \"7.0.15\"}, {engine: redis, version: \"7.0.15\", name: plain, withoutTtl: true}]";
    assert!(with("{strings: {keys: 10, ttlSeconds: 600}}", without).is_ok());
    let err = with("{strings: {keys: 10}}", without).unwrap_err();
    assert!(
        err.starts_with("spec.engines[1].withoutTtl: the workload has no ttlSeconds"),
        "{err}"
    );
}

#[test]
fn a_dragonfly_memory_limit_too_small_for_its_threads_is_refused_naming_the_minimum() {
    let error = validate(&benchmark(
        "df",
        "[{engine: dragonfly, version: \"1.40.0\", memory: 512Mi}]",
    ))
    .unwrap_err();
    assert!(
        error.contains("engines[0].memory is 512Mi")
            && error.contains("with 2 threads the limit must be at least 640Mi"),
        "{error}"
    );
    assert!(
        validate(&benchmark(
            "df",
            "[{engine: dragonfly, version: \"1.40.0\", memory: 640Mi}]"
        ))
        .is_ok()
    );
    // More threads need more; with no memory given, the estimate makes room for them.
    let eight =
        "[{engine: dragonfly, version: \"1.40.0\", args: [--proactor_threads=8], memory: 1Gi}]";
    assert!(
        validate(&benchmark("df", eight))
            .unwrap_err()
            .contains("8 threads")
    );
    let estimated = validate(&benchmark(
        "df",
        "[{engine: dragonfly, version: \"1.40.0\", args: [--proactor_threads=16]}]",
    ))
    .unwrap();
    assert!(estimated.engine_memory[0] >= dragonfly_memory::minimum_limit(16));
}

#[test]
fn a_snapshot_peak_of_a_sharded_entry_is_refused_naming_the_entry() {
    let spec = |shards: &str| {
        unchecked(&format!(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: peak}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{{engine: valkey, version: \"9.1\"}}, {{engine: valkey, version: \"9.1\", name: sharded{shards}}}]\n  workload: {{strings: {{keys: 1000}}}}\n  peak: {{snapshot: {{writesPerSecond: 1000}}}}\n"
        ))
    };
    validate_spec(&spec("")).expect("one engine each: each save is measured");
    let err = validate_spec(&spec(", shards: 3")).unwrap_err();
    assert!(
        err.contains("spec.engines[1] is a sharded cluster whose shards each fork on their own"),
        "{err}"
    );
}

/// A spec with `peak: {replica: ...}` over two Valkey entries, the second with `second`.
fn replica_peak(second: &str, workload: &str, rate: u32) -> MemoryBenchmark {
    unchecked(&format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: peak}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{{engine: valkey, version: \"9.1\"}}, {{engine: valkey, version: \"9.1\", name: second{second}}}]\n  workload: {workload}\n  peak: {{replica: {{writesPerSecond: {rate}}}}}\n"
    ))
}

#[test]
fn a_replica_peak_is_taken_by_membench_run_and_by_the_operator() {
    let spec = replica_peak("", "{strings: {keys: 1000}}", 1000);
    validate_spec(&spec).expect("membench run takes it");
    validate(&spec).expect("the operator takes it: it starts a replica pod");
}

#[test]
fn the_operator_still_refuses_a_replica_peak_of_a_sharded_entry() {
    let err = validate(&replica_peak(
        ", shards: 3",
        "{strings: {keys: 1000}}",
        1000,
    ))
    .unwrap_err();
    assert!(
        err.contains("spec.engines[1] runs in cluster mode or with shards"),
        "{err}"
    );
}

#[test]
fn a_replica_peak_is_refused_for_a_sharded_entry_a_sorted_set_or_a_rate_out_of_range() {
    let sharded = validate_spec(&replica_peak(
        ", shards: 3",
        "{strings: {keys: 1000}}",
        1000,
    ));
    assert!(
        sharded
            .unwrap_err()
            .contains("spec.engines[1] runs in cluster mode or with shards"),
        "a sharded entry"
    );
    let sorted = validate_spec(&replica_peak("", "{sortedSet: {members: 1000}}", 1000));
    assert!(sorted.unwrap_err().contains("not to sorted-set"));
    for rate in [0, 10_000_001] {
        let err = validate_spec(&replica_peak("", "{strings: {keys: 1000}}", rate)).unwrap_err();
        assert!(
            err.contains("spec.peak.replica.writesPerSecond") && err.contains(&rate.to_string()),
            "{err}"
        );
    }
}
