use super::*;
use crate::client::measurement::measure::{ErrorReport, Summary};
use crate::client::pod_io::result::{EngineIdentity, RepetitionColumns};

/// A result of three repetitions as a client sends it.
fn three() -> ClientResult {
    let spread = |v: f64| Spread {
        median: v,
        min: v,
        max: v,
        cv: 0.0,
    };
    ClientResult {
        engine: EngineIdentity {
            name: "redis".into(),
            version: "7.0.15".into(),
            allocator: "jemalloc-5.3.0".into(),
            arch: "x86_64".into(),
            io: Some("epoll".into()),
            threads: None,
            config: [("hash-max-listpack-entries".to_string(), "512".to_string())].into(),
            config_unreported: Vec::new(),
            modules: Some(vec![crate::crd::EngineModule {
                name: "vectorset".into(),
                version: "1".into(),
            }]),
            cluster: Some(crate::crd::ClusterNodeState {
                state: "ok".into(),
                slots: 16384,
                nodes: 1,
                size: 1,
            }),
        },
        commands: 1000,
        encoding: Some("skiplist".into()),
        repetitions: RepetitionColumns {
            n: 3,
            baseline: vec![900_000],
            used: vec![1_000_000, 16, -8],
            rss: vec![4_000_000],
            items: vec![1000],
            micros: vec![5000, 10, 20],
            ..Default::default()
        },
        summary: Some(Summary {
            items: 1000,
            repetitions: 3,
            used_memory: spread(1_000_000.0),
            bytes_per_item: spread(100.0),
            commands_per_sec: spread(200_000.0),
            items_per_sec: None,
            settled_bytes_per_item: None,
            by_type: Vec::new(),
            unstable: false,
            unstable_reason: None,
            shards: None,
            peak: None,
        }),
        ..Default::default()
    }
}

fn invalid(result: &ClientResult, repetitions: u32) -> String {
    match ClientResult::read(&result.to_message(), repetitions) {
        Err(ReadError::Invalid(why)) => why,
        other => panic!("expected an invalid result, got {other:?}"),
    }
}

#[test]
fn a_result_within_the_spec_reads_back_unchanged() {
    let result = three();
    assert_eq!(ClientResult::read(&result.to_message(), 3), Ok(result));
}

#[test]
fn more_repetitions_than_the_spec_asked_for_are_refused_quoting_the_message() {
    let mut result = three();
    result.repetitions.n = 4;
    result.repetitions.baseline = vec![1];
    result.repetitions.rss = vec![1];
    result.repetitions.items = vec![1];
    result.repetitions.used = vec![1];
    result.repetitions.micros = vec![1];
    let why = invalid(&result, 3);
    assert!(why.contains("4 repetitions listed"), "{why}");
    assert!(why.contains("the message began: {"), "{why}");
}

#[test]
fn a_huge_repetition_count_allocates_nothing_and_is_refused() {
    // A one-value column with n = u32::MAX would be 32 GiB of integers if it were expanded.
    let mut result = three();
    result.repetitions.n = u32::MAX;
    result.repetitions.used = vec![1];
    result.repetitions.micros = vec![1];
    let why = invalid(&result, 100);
    assert!(why.contains("more than the 100 asked for"), "{why}");
    assert!(result.decoded_repetitions().is_empty());
}

#[test]
fn repetitions_listed_plus_omitted_may_not_exceed_the_spec() {
    let mut result = three();
    result.omitted = u32::MAX;
    assert!(invalid(&result, 3).contains("omitted"));
}

#[test]
fn a_column_neither_one_value_nor_exactly_n_long_is_refused() {
    let mut result = three();
    result.repetitions.used = vec![1, 2];
    let why = invalid(&result, 3);
    assert!(why.contains("column used has 2 values"), "{why}");
}

#[test]
fn a_difference_that_overflows_is_refused_not_wrapped() {
    let mut result = three();
    result.repetitions.used = vec![i64::MAX, 0, 1];
    let why = invalid(&result, 3);
    assert!(why.contains("overflows"), "{why}");
    assert!(result.decoded_repetitions().is_empty());
}

#[test]
fn negative_sizes_and_repetitions_without_items_are_refused() {
    let mut result = three();
    result.repetitions.rss = vec![-1];
    assert!(invalid(&result, 3).contains("negative"));
    let mut result = three();
    result.repetitions.items = vec![0];
    assert!(invalid(&result, 3).contains("column items holds 0"));
    let mut result = three();
    result.summary.as_mut().unwrap().items = 0;
    assert!(invalid(&result, 3).contains("0 items"));
}

#[test]
fn numbers_that_are_not_finite_are_refused() {
    let mut result = three();
    result.summary.as_mut().unwrap().bytes_per_item.cv = f64::INFINITY;
    let why = result.check(3).unwrap_err();
    assert!(why.contains("summary.bytes_per_item"), "{why}");
    // JSON cannot carry infinity; a number beyond f64 fails to parse.
    let message = three().to_message().replace("\"cv\":0.0", "\"cv\":1e999");
    assert!(matches!(
        ClientResult::read(&message, 3),
        Err(ReadError::Invalid(_))
    ));
}

#[test]
fn bytes_per_key_by_type_names_known_types_once_each() {
    let by_type = |key_type: &str, keys: u64| crate::client::workloads::type_memory::TypeSummary {
        key_type: key_type.into(),
        keys,
        bytes_per_key: 80.0,
    };
    let mut result = three();
    result.summary.as_mut().unwrap().by_type = vec![by_type("string", 10), by_type("hash", 5)];
    assert_eq!(
        ClientResult::read(&result.to_message(), 3).unwrap().summary,
        result.summary
    );
    result.summary.as_mut().unwrap().by_type = vec![by_type("bitmap", 10)];
    assert!(invalid(&result, 3).contains("'bitmap'"));
    result.summary.as_mut().unwrap().by_type = vec![by_type("hash", 1), by_type("hash", 2)];
    assert!(invalid(&result, 3).contains("hash twice"));
    result.summary.as_mut().unwrap().by_type = vec![by_type("set", 0)];
    assert!(invalid(&result, 3).contains("set has no keys"));
}

#[test]
fn strings_longer_than_a_client_sends_are_refused() {
    let mut result = three();
    result.engine.version = "9".repeat(65);
    assert!(invalid(&result, 3).contains("engine.version"));
    let mut result = three();
    result.warnings = vec!["w".into(); 4];
    assert!(invalid(&result, 3).contains("4 warnings"));
    let mut result = three();
    result
        .engine
        .config
        .insert("hash-max-listpack-value".into(), "6".repeat(100));
    assert!(invalid(&result, 3).contains("an engine.config setting"));
    let mut result = three();
    result.engine.config_unreported = (0..40).map(|i| format!("s{i}")).collect();
    assert!(invalid(&result, 3).contains("engine.config has 41 settings"));
    let module = |name: String| crate::crd::EngineModule {
        name,
        version: "1".into(),
    };
    let mut result = three();
    result.engine.modules = Some((0..9).map(|i| module(format!("m{i}"))).collect());
    assert!(invalid(&result, 3).contains("engine.modules has 9 modules"));
    let mut result = three();
    result.engine.modules = Some(vec![module("m".repeat(100))]);
    assert!(invalid(&result, 3).contains("an engine.modules name"));
    let mut result = three();
    result.engine.cluster = Some(crate::crd::ClusterNodeState {
        state: "o".repeat(100),
        slots: 16384,
        nodes: 1,
        size: 1,
    });
    assert!(invalid(&result, 3).contains("engine.cluster.state"));
}

#[test]
fn a_message_longer_than_the_kubelet_keeps_is_refused() {
    let mut message = three().to_message();
    message.pop();
    message.push_str(&format!(",\"padding\":\"{}\"}}", "p".repeat(5000)));
    match ClientResult::read(&message, 3) {
        Err(ReadError::Invalid(why)) => {
            assert!(why.contains("more than a termination message holds"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn log_lines_are_no_result_rather_than_an_invalid_one() {
    let logs = "thread 'main' panicked at src/main.rs:1:1";
    assert!(matches!(
        ClientResult::read(logs, 3),
        Err(ReadError::NoResult(_))
    ));
}

#[test]
fn a_quote_is_the_first_200_bytes_with_control_characters_escaped() {
    let text = format!("{{\"a\":\"\u{1b}[31m\n{}", "é".repeat(300));
    let quoted = quote(&text);
    assert!(quoted.starts_with(r#"{"a":"\u{1b}[31m\n"#), "{quoted}");
    assert!(!quoted.contains('\n') && !quoted.contains('\u{1b}'));
    assert!(quoted.ends_with('…'));
    // 200 bytes of the original at most (escaping lengthens what it shows).
    let shown: usize = quoted.chars().filter(|c| *c == 'é').count() * 2;
    assert!(shown <= QUOTED_BYTES, "{shown}");
}

#[test]
fn a_whole_result_is_held_to_the_same_bounds_as_a_termination_message_but_its_size() {
    let report = crate::client::pod_io::result::tests::report(100, true);
    let whole = ClientResult::whole(&report).to_message();
    assert!(
        whole.len() > TERMINATION_MESSAGE_LIMIT,
        "{} bytes",
        whole.len()
    );
    // Too large for a termination message, as it is for the kubelet.
    assert!(matches!(
        ClientResult::read(&whole, 100),
        Err(ReadError::Invalid(_))
    ));
    let read = ClientResult::read_whole(&whole, 100).unwrap();
    assert_eq!(read.omitted, 0);
    assert_eq!(read.decoded_repetitions().len(), 100);
    assert_eq!(
        read.growth.as_ref().unwrap().points(),
        report.repetitions[0].samples
    );
    // The same checks: more repetitions than the spec asked for are refused.
    match ClientResult::read_whole(&whole, 99) {
        Err(ReadError::Invalid(why)) => {
            assert!(why.contains("more than the 99 asked for"), "{why}");
            assert!(why.contains("the served result began: {"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    // And a bound on its size.
    let mut padded = whole.clone();
    padded.pop();
    padded.push_str(&format!(
        ",\"padding\":\"{}\"}}",
        "p".repeat(WHOLE_RESULT_LIMIT)
    ));
    match ClientResult::read_whole(&padded, 100) {
        Err(ReadError::Invalid(why)) => {
            assert!(
                why.contains("more than a served result may have (65536)"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ClientResult::read_whole("", 100),
        Err(ReadError::NoResult(_))
    ));
}

#[test]
fn an_error_category_this_release_does_not_know_is_kept_and_is_not_retried() {
    // A newer client's word, and a hostile one: neither panics, both are kept as read.
    for word in ["SomethingNewer", "Evil reason with spaces"] {
        let json = serde_json::json!({"category": word, "message": "x"});
        let error: ErrorReport = serde_json::from_value(json).unwrap();
        assert_eq!(
            error.category,
            crate::error::ErrorCategory::Unknown(word.into())
        );
        assert!(!error.category.is_retryable());
        assert_eq!(serde_json::to_value(&error).unwrap()["category"], word);
    }
    // Every known word reads back as itself, as the strings a current release writes.
    for category in crate::error::ErrorCategory::KNOWN {
        let json = serde_json::to_value(ErrorReport {
            category: category.clone(),
            message: "x".into(),
            phase: None,
        })
        .unwrap();
        assert_eq!(json["category"], category.as_str());
        let back: ErrorReport = serde_json::from_value(json).unwrap();
        assert_eq!(&back.category, category);
    }
}

#[test]
fn a_newer_clients_category_is_accepted_but_one_no_reason_could_be_is_refused() {
    let failed = |category: &str, phase: &str| {
        let mut result = three();
        result.error = Some(ErrorReport {
            category: crate::error::ErrorCategory::parse(category),
            message: "x".into(),
            phase: Some(crate::client::measurement::measured::FailedPhase {
                name: crate::client::measurement::phase_kind::PhaseKind::parse(phase),
                repetition: 1,
            }),
        });
        result
    };
    let newer = failed("DiskFull", "hibernate");
    let read = ClientResult::read(&newer.to_message(), 3).unwrap();
    assert_eq!(read.error.as_ref().unwrap().category, "DiskFull");
    // Re-emitted (`membench report`, `capacity` on a saved result), the words are unchanged.
    let saved = serde_json::to_string(&newer.error).unwrap();
    assert!(
        saved.contains("\"DiskFull\"") && saved.contains("\"hibernate\""),
        "{saved}"
    );
    let back: Option<ErrorReport> = serde_json::from_str(&saved).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), saved);
    // The API server takes a condition's reason only as a CamelCase word.
    assert!(invalid(&failed("Evil reason with spaces", "snapshot"), 3).contains("error.category"));
    assert!(invalid(&failed(&"A".repeat(65), "snapshot"), 3).contains("error.category"));
    assert!(invalid(&failed("lowercase", "snapshot"), 3).contains("error.category"));
    assert!(invalid(&failed("DiskFull", "two words"), 3).contains("error.phase.name"));
}

/// A client that refuses its plan sends the error alone: a long message (a file in a claim
/// that cannot be read says the claim, the mount and what to check) is cut as every result's
/// text is, and the operator takes it as sent. Whole, a 410-byte message was refused as an
/// invalid result, hiding why the client stopped.
#[test]
fn a_refused_plans_long_error_reads_back_cut_to_what_a_client_sends() {
    let error = crate::error::BenchError::InvalidArgument {
        field: "workload.path".into(),
        message: "x".repeat(1_000),
    };
    let whole = ClientResult {
        error: Some((&error).into()),
        ..ClientResult::default()
    };
    assert!(
        invalid(&whole, 3).starts_with("error.message has 1023 bytes"),
        "{}",
        invalid(&whole, 3)
    );
    let refused = ClientResult::refused(&error);
    let read = ClientResult::read(&refused.to_message(), 3).expect("a refusal reads back");
    let message = read.error.expect("the error").message;
    assert!(
        message.starts_with("invalid workload.path: xxx") && message.ends_with('…'),
        "{message}"
    );
}
