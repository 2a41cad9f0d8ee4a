//! Tests of reading a plan: what a client refuses, and how it names what is wrong.

use super::*;
use crate::crd::RecordLayout;

/// A plan with a phase's settings nested in it (the churn's, as a client pod reads them), so
/// that a field deep inside can be broken.
fn plan() -> RunPlan {
    let mut plan = serde_json::to_value(RunPlan::new(
        WorkloadPlan::Records {
            records: 1000,
            layout: RecordLayout::Hash,
            fields: vec!["name".into(), "age".into()],
        },
        RunSettings {
            read_config: vec!["maxmemory".into(), "hash-max-listpack-entries".into()],
            ..RunSettings::default()
        },
    ))
    .unwrap();
    plan["settings"]["churn"] = serde_json::json!({
        "rounds": 3,
        "delete_share": 0.2,
        "overwrite_share": null,
        "overwrite_value_size": 0,
        "defrag": false,
        "defrag_seconds": 60,
        "seed": 7,
    });
    let plan = RunPlan::from_json(&plan.to_string()).unwrap();
    assert!(
        plan.settings.churn.is_some(),
        "the churn's settings were not read"
    );
    plan
}

/// The plan's JSON with `change` applied to it as a JSON value.
fn edited(change: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut value = serde_json::to_value(plan()).unwrap();
    change(&mut value);
    serde_json::to_string_pretty(&value).unwrap()
}

fn refusal(text: &str) -> (String, String) {
    match RunPlan::from_json(text) {
        Err(BenchError::InvalidPlan { field, message }) => (field, message),
        other => panic!("expected the plan to be refused, got {other:?}"),
    }
}

#[test]
fn a_plan_reads_back_as_it_was_written() {
    let plan = plan();
    assert_eq!(RunPlan::from_json(&plan.to_json()).unwrap(), plan);
    assert_eq!(RunPlan::from_json(&plan.to_json_pretty()).unwrap(), plan);
}

#[test]
fn a_plan_of_a_newer_format_is_refused_naming_the_field_and_both_versions() {
    // A newer membench's plan: a format this client does not read, and a setting it does
    // not know, which must not be what it is refused for.
    let newer = edited(|v| {
        v["format"] = (PLAN_FORMAT + 1).into();
        v["written_by"] = "9.4.0".into();
        v["settings"]["fragmentation_probe"] = serde_json::json!({"every": 5});
    });
    let (field, message) = refusal(&newer);
    assert_eq!(field, "format");
    for said in [
        format!("is {}", PLAN_FORMAT + 1),
        "written by membench 9.4.0".to_string(),
        format!("membench {MEMBENCH_VERSION}"),
        format!("up to {PLAN_FORMAT}"),
    ] {
        assert!(message.contains(&said), "{said:?} missing from: {message}");
    }
    let error = RunPlan::from_json(&newer).unwrap_err();
    assert_eq!(error.category(), "InvalidPlan");
    assert!(
        error.to_string().starts_with("the run plan's format is"),
        "{error}"
    );
}

#[test]
fn a_plan_that_does_not_parse_is_refused_naming_the_field() {
    let cases: [(String, &str, &str); 6] = [
        (
            edited(|v| v["settings"]["churn"]["rounds"] = "three".into()),
            "settings.churn.rounds",
            "invalid type: string \"three\"",
        ),
        (
            edited(|v| {
                v["settings"].as_object_mut().unwrap().remove("pipeline");
            }),
            "settings.pipeline",
            "missing field `pipeline`",
        ),
        (
            edited(|v| v["settings"]["pipelin"] = 5.into()),
            "settings.pipelin",
            "unknown field `pipelin`",
        ),
        (
            edited(|v| v["settings"]["read_config"][1] = 8.into()),
            "settings.read_config[1]",
            "invalid type: integer `8`",
        ),
        (
            edited(|v| v["workload"]["kind"] = "hashes".into()),
            "workload.kind",
            "unknown variant `hashes`",
        ),
        (
            "{\"format\": 1, \"settings\": ".into(),
            "settings",
            "is not JSON",
        ),
    ];
    for (text, field, says) in cases {
        let (named, message) = refusal(&text);
        assert_eq!(named, field, "{message}");
        assert!(message.contains(says), "{field}: {message}");
        if !says.starts_with("is not JSON") {
            // The versions are said with every refusal, for a plan from another membench.
            assert!(
                message.contains(&format!("this client, membench {MEMBENCH_VERSION}")),
                "{message}"
            );
        }
    }
}

#[test]
fn a_plan_without_a_format_or_with_settings_out_of_range_is_refused_naming_the_setting() {
    let (field, message) = refusal(&edited(|v| {
        v.as_object_mut().unwrap().remove("format");
    }));
    assert_eq!(field, "format");
    assert!(message.contains("is missing"), "{message}");
    let (field, message) = refusal(&edited(|v| {
        v["settings"]["pipeline"] = (u64::from(crate::crd::MAX_PIPELINE) + 1).into();
    }));
    assert_eq!(field, "settings.pipeline");
    assert!(message.contains("between 1 and 100000"), "{message}");
    let (field, _) = refusal(&edited(|v| v["settings"]["batches_in_flight"] = 0.into()));
    assert_eq!(field, "settings.batches_in_flight");
}

#[test]
fn a_profiles_plan_runs_only_the_profile_it_names() {
    let profile = |keys: u64| {
        crate::profile::Profile::parse(&format!(
            "format: 1\nsource: {{keys: {keys}}}\ngroups:\n- {{template: \"k:{{n}}\", type: string, share: 1.0, keyLength: {{buckets: [[4, 4, 1]]}}, values: {{textLength: {{buckets: [[3, 3, 1]]}}}}}}\n"
        ))
        .unwrap()
    };
    let planned = WorkloadPlan::Profile {
        scale: 2.0,
        element_scale: 1.0,
        seed: 5,
        profile_digest: crate::client::workloads::profile_workload::profile_digest(&profile(10)),
    };
    let workload = planned
        .workload(Some((profile(10), "--profile p.yaml".into())))
        .unwrap();
    assert_eq!(WorkloadPlan::of(&workload), planned);
    assert_eq!(workload.intended_items(), Some(20));
    match planned.workload(Some((profile(11), "--profile q.yaml".into()))) {
        Err(BenchError::InvalidPlan { field, message }) => {
            assert_eq!(field, "workload.profile_digest");
            assert!(
                message.contains("--profile q.yaml is another profile"),
                "{message}"
            );
        }
        other => panic!("another profile was accepted: {other:?}"),
    }
    match planned.workload(None) {
        Err(BenchError::InvalidPlan { message, .. }) => {
            assert!(message.contains("pass --profile FILE"), "{message}");
        }
        other => panic!("a profile plan ran without its profile: {other:?}"),
    }
}
