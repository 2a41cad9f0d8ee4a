use super::*;

fn entry(engine: EngineKind, config: &[(&str, &str)], args: &[&str]) -> EngineSpec {
    let mut entry = EngineSpec::new(engine, "9.1");
    entry.config = config
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    entry.args = args.iter().map(|a| a.to_string()).collect();
    entry
}

fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

#[test]
fn memory_layout_settings_of_each_engine_are_taken_with_values_of_their_form() {
    let valkey = entry(
        EngineKind::Valkey,
        &[
            ("hash-max-listpack-entries", "512"),
            ("list-max-listpack-size", "-2"),
            ("activedefrag", "yes"),
            ("lazyfree-lazy-user-del", "no"),
            ("maxmemory", "8gb"),
            ("maxmemory-policy", "allkeys-lru"),
            ("active-defrag-threshold-lower", "10"),
        ],
        &[],
    );
    assert_eq!(check_config(0, &valkey, false), Ok(()));
    let dragonfly = entry(
        EngineKind::Dragonfly,
        &[
            ("list_max_listpack_size", "-3"),
            ("mem_defrag_threshold", "0.5"),
            ("cache_mode", "true"),
        ],
        &[],
    );
    assert_eq!(check_config(0, &dragonfly, false), Ok(()));
}

#[test]
fn a_setting_outside_the_allowlist_is_refused_naming_it_and_what_is_allowed() {
    for (engine, name) in [
        (EngineKind::Redis, "dir"),
        (EngineKind::Redis, "dbfilename"),
        (EngineKind::Valkey, "enable-debug-command"),
        (EngineKind::Valkey, "enable-anything-command"),
        (EngineKind::Redis, "protected-mode"),
        (EngineKind::Redis, "bind"),
        (EngineKind::Redis, "loadmodule"),
        (EngineKind::Redis, "io-threads"),
        (EngineKind::Dragonfly, "admin_nopass"),
        (EngineKind::Dragonfly, "hash-max-listpack-entries"),
        (EngineKind::Valkey, "list_max_listpack_size"),
    ] {
        let err = check_config(2, &entry(engine, &[(name, "1")], &[]), false).unwrap_err();
        assert!(
            err.starts_with(&format!(
                "spec.engines[2].config.{name}: membench does not let a benchmark change {name}"
            )),
            "{err}"
        );
        assert!(err.contains("config takes"), "{err}");
    }
    let err = check_config(0, &entry(EngineKind::Redis, &[("dir", "/")], &[]), false).unwrap_err();
    assert!(
        err.contains("would open the engine: it moves where"),
        "{err}"
    );
}

#[test]
fn a_value_not_of_the_settings_form_is_refused_saying_what_it_takes() {
    for (name, value, takes) in [
        ("hash-max-listpack-entries", "many", "a whole number"),
        (
            "hash-max-listpack-entries",
            "-1",
            "a whole number, 0 or more",
        ),
        ("activedefrag", "true", "yes or no"),
        ("active-defrag-cycle-max", "150", "from 0 to 100"),
        ("maxmemory-policy", "lru", "one of noeviction"),
        ("maxmemory", "8 gb", "bytes"),
    ] {
        let err =
            check_config(0, &entry(EngineKind::Valkey, &[(name, value)], &[]), false).unwrap_err();
        assert!(
            err.contains(&format!("config.{name}: invalid value '{value}'")) && err.contains(takes),
            "{name} {value}: {err}"
        );
    }
    let err = check_config(
        0,
        &entry(EngineKind::Dragonfly, &[("mem_defrag_threshold", "2")], &[]),
        false,
    )
    .unwrap_err();
    assert!(err.contains("from 0 to 1"), "{err}");
}

#[test]
fn maxmemory_policy_needs_a_maxmemory_and_a_setting_may_not_be_in_config_and_args() {
    let err = check_config(
        0,
        &entry(
            EngineKind::Redis,
            &[("maxmemory-policy", "allkeys-lru")],
            &[],
        ),
        false,
    )
    .unwrap_err();
    assert!(err.contains("set config.maxmemory too"), "{err}");
    // With spec.eviction a policy alone is that phase's, at its maxmemory.
    let policy_alone = entry(
        EngineKind::Redis,
        &[("maxmemory-policy", "allkeys-lru")],
        &[],
    );
    assert_eq!(check_config(0, &policy_alone, true), Ok(()));
    let with_arg = entry(
        EngineKind::Redis,
        &[("maxmemory-policy", "allkeys-lru")],
        &["--maxmemory", "1gb"],
    );
    assert_eq!(check_config(0, &with_arg, false), Ok(()));
    let twice = entry(
        EngineKind::Redis,
        &[("hash-max-listpack-entries", "64")],
        &["--hash-max-listpack-entries", "128"],
    );
    let err = check_config(0, &twice, false).unwrap_err();
    assert!(err.contains("set in both config and args"), "{err}");
}

#[test]
fn args_are_read_in_every_form_each_engine_takes() {
    let dragonfly = settings_in_args(
        EngineKind::Dragonfly,
        &words(&[
            "-requirepass=x",
            "--admin_port",
            "7000",
            "--cache_mode=true",
            "-list_max_listpack_size",
            "-2",
        ]),
    )
    .unwrap();
    let names: Vec<&str> = dragonfly.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "requirepass",
            "admin_port",
            "cache_mode",
            "list_max_listpack_size"
        ]
    );
    assert_eq!(dragonfly[1].values, ["7000"]);
    assert_eq!(dragonfly[3].values, ["-2"]);
    let redis = settings_in_args(
        EngineKind::Redis,
        &words(&["--save", "", "--rename-command", "CONFIG", "x"]),
    )
    .unwrap();
    assert_eq!(redis[1].values, ["CONFIG", "x"]);
    let err = settings_in_args(EngineKind::Redis, &words(&["-requirepass", "x"])).unwrap_err();
    assert!(err.contains("single-dash"), "{err}");
    let err = settings_in_args(EngineKind::Valkey, &words(&["/etc/valkey.conf"])).unwrap_err();
    assert!(err.contains("comes before any setting"), "{err}");
}

#[test]
fn args_take_only_allowlisted_settings_and_name_the_one_refused() {
    let opening = [
        (EngineKind::Dragonfly, "-requirepass=x"),
        (EngineKind::Dragonfly, "--admin_nopass"),
        (EngineKind::Dragonfly, "--admin_port=7000"),
        (EngineKind::Dragonfly, "-memcached_port=11211"),
        (EngineKind::Dragonfly, "--flagfile=/tmp/f"),
        (EngineKind::Dragonfly, "--dir=/tmp"),
        (EngineKind::Redis, "--Enable_Debug_Command=yes"),
        (EngineKind::Redis, "--bind"),
    ];
    for (engine, arg) in opening {
        match check_args(engine, &words(&[arg, "x"])) {
            Err(ArgsRefusal::Opening { written, .. }) => assert!(written.starts_with(arg)),
            other => panic!("{arg}: {other:?}"),
        }
    }
    match check_args(
        EngineKind::Redis,
        &words(&["--hz", "100", "--io-threads", "4"]),
    ) {
        Err(ArgsRefusal::NotAllowed { written, allowed }) => {
            assert_eq!(written, "--io-threads 4");
            assert!(allowed.contains("hash-max-listpack-entries"), "{allowed}");
        }
        other => panic!("{other:?}"),
    }
    match check_args(EngineKind::Redis, &words(&["--maxmemory", "8gb", "1gb"])) {
        Err(ArgsRefusal::BadValue { takes, .. }) => assert!(takes.starts_with("one value")),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        check_args(
            EngineKind::Dragonfly,
            &words(&[
                "--proactor_threads=4",
                "-list_max_listpack_size",
                "-2",
                "--maxmemory=2G"
            ])
        ),
        Ok(())
    );
    assert_eq!(
        check_args(
            EngineKind::Valkey,
            &words(&["--maxmemory", "8gb", "--hash-max-listpack-entries", "0"])
        ),
        Ok(())
    );
}

#[test]
fn config_becomes_each_engines_command_line_and_is_read_back_with_allowlisted_args() {
    let valkey = entry(
        EngineKind::Valkey,
        &[("hash-max-listpack-entries", "0"), ("activedefrag", "no")],
        &["--maxmemory", "1gb"],
    );
    assert_eq!(
        config_args(EngineKind::Valkey, &valkey.config),
        ["--activedefrag", "no", "--hash-max-listpack-entries", "0"]
    );
    assert_eq!(
        settings_to_read_back(&valkey),
        ["activedefrag", "hash-max-listpack-entries", "maxmemory"]
    );
    let dragonfly = entry(EngineKind::Dragonfly, &[("cache_mode", "true")], &[]);
    assert_eq!(
        config_args(EngineKind::Dragonfly, &dragonfly.config),
        ["--cache_mode=true"]
    );
}

#[test]
fn a_dragonfly_entry_starts_with_its_defrag_flags_only_when_a_defrag_window_is_asked_and_never_over_its_own()
 {
    let spec_with = |defrag: Option<bool>| -> MemoryBenchmarkSpec {
        let mut spec: MemoryBenchmarkSpec = serde_json::from_value(serde_json::json!({
            "instanceType": "r7i.large",
            "engines": [{"engine": "dragonfly", "version": "1.40"}],
            "workload": {"strings": {"keys": 1000}}
        }))
        .unwrap();
        spec.churn = defrag.map(|defrag| {
            serde_json::from_value(
                serde_json::json!({"rounds": 1, "deleteShare": 0.5, "defrag": defrag}),
            )
            .unwrap()
        });
        spec
    };
    let dragonfly = entry(EngineKind::Dragonfly, &[], &[]);
    let started = started_entry(&dragonfly, &spec_with(Some(true)));
    assert_eq!(
        config_args(EngineKind::Dragonfly, &started.config),
        [
            "--mem_defrag_check_sec_interval=1",
            "--mem_defrag_waste_threshold=0.05"
        ]
    );
    // No window, no churn, or not Dragonfly: the entry as it is.
    assert_eq!(
        *started_entry(&dragonfly, &spec_with(Some(false))),
        dragonfly
    );
    assert_eq!(*started_entry(&dragonfly, &spec_with(None)), dragonfly);
    let valkey = entry(EngineKind::Valkey, &[], &[]);
    assert_eq!(*started_entry(&valkey, &spec_with(Some(true))), valkey);
    // What the entry sets itself, in config or in args, is left to it.
    let own = entry(
        EngineKind::Dragonfly,
        &[("mem_defrag_waste_threshold", "0.3")],
        &["--mem_defrag_check_sec_interval=5"],
    );
    let started = started_entry(&own, &spec_with(Some(true)));
    assert_eq!(started.config, own.config, "{started:?}");
}

#[test]
fn with_an_eviction_phase_an_entrys_own_maxmemory_waits_for_it_and_is_not_read_back() {
    let mut spec: MemoryBenchmarkSpec = serde_json::from_value(serde_json::json!({
        "instanceType": "r7i.large",
        "engines": [{"engine": "valkey", "version": "9.1"}],
        "workload": {"strings": {"keys": 1000}}
    }))
    .unwrap();
    let valkey = entry(
        EngineKind::Valkey,
        &[
            ("maxmemory", "64mb"),
            ("maxmemory-policy", "allkeys-lfu"),
            ("hash-max-listpack-entries", "64"),
        ],
        &[],
    );
    // Without spec.eviction they are the engine's from its start.
    assert_eq!(*started_entry(&valkey, &spec), valkey);
    assert_eq!(settings_read_back_in(&valkey, &spec).len(), 3);
    spec.eviction = Some(serde_json::from_value(serde_json::json!({"loadTo": 2})).unwrap());
    let started = started_entry(&valkey, &spec);
    assert_eq!(
        config_args(EngineKind::Valkey, &started.config),
        ["--hash-max-listpack-entries", "64"]
    );
    assert_eq!(
        settings_read_back_in(&valkey, &spec),
        ["hash-max-listpack-entries"]
    );
}
