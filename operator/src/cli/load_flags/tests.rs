//! Every flag of `membench load` is a setting that lands in its field of the run plan, or one
//! of a short list of flags that say where things are (each with why it is not a setting): a
//! flag that does neither would make `membench load` measure what no plan says, and a plan
//! would lose it on its way to a client pod.

use clap::{Args, Command, FromArgMatches};
use serde_json::Value;

use crate::cli::LoadArgs;
use crate::cli::load::Refusal;

/// The flags that are not settings of a run, and why each is not.
const NOT_SETTINGS: [(&str, &str); 14] = [
    (
        "addr",
        "where the engines are: a pod's engine IPs are known when it is made, a local run's ports when its engines start",
    ),
    ("replica", "where the replica is, for the same reason"),
    (
        "password",
        "a secret: it comes from the Secret, never in a document the pod's spec shows",
    ),
    (
        "keep_data",
        "what the command does with the server after the run, not how the run measures",
    ),
    (
        "profile",
        "where the profile's data is read (it can outgrow an environment variable); the plan names the profile by its digest",
    ),
    ("output", "how the command prints the result"),
    ("result_file", "where the result is written"),
    ("progress_port", "where progress is served"),
    ("progress_ip", "where progress is served"),
    (
        "serve_result_seconds",
        "how long the result is served after the run",
    ),
    (
        "container_memory_marks",
        "who reads the engine's container: a handle of the machine, passed beside the plan",
    ),
    ("plan", "the plan itself"),
    ("plan_json", "the plan itself"),
    ("help", "clap's help"),
];

/// A profile for the profile workload's flags, written once for the test.
fn profile_file() -> String {
    let path = std::env::temp_dir().join(format!("membench-flags-{}.yaml", std::process::id()));
    std::fs::write(
        &path,
        "format: 1\nsource: {keys: 5}\ngroups:\n- {template: \"k:{n}\", type: string, share: 1.0, keyLength: {buckets: [[4, 4, 1]]}, values: {textLength: {buckets: [[3, 3, 1]]}}}\n",
    )
    .unwrap();
    path.display().to_string()
}

/// An RDB file of no keys (`REDIS0009`, EOF, its checksum) at a path of `name`, for the rdb
/// workload's flag.
fn rdb_file(name: &str) -> String {
    let path =
        std::env::temp_dir().join(format!("membench-flags-{name}-{}.rdb", std::process::id()));
    let mut bytes = b"REDIS0009\xff".to_vec();
    let crc = membench::rdb::crc64::update(0, &bytes);
    bytes.extend(crc.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

/// Each setting flag (clap's id): the arguments without it, with it, and the part of the plan
/// (a JSON pointer) that it changes, which nothing else may.
fn settings() -> Vec<(&'static str, Vec<String>, Vec<String>, &'static str)> {
    let words = |text: &str| -> Vec<String> { text.split(' ').map(String::from).collect() };
    let profile = format!("--workload profile --profile {}", profile_file());
    let base = [
        ("strings", "--workload strings --keys 10"),
        ("sorted", "--workload sorted-set --members 10"),
        (
            "random",
            "--workload random-strings --requests 10 --keyspace 10",
        ),
        ("records", "--workload records --records 10"),
        ("profile", profile.as_str()),
        (
            "churn",
            "--workload strings --keys 10 --churn-rounds 2 --delete-share 0.5",
        ),
        (
            "overwrite",
            "--workload strings --keys 10 --churn-rounds 2 --overwrite-share 0.5 --overwrite-value-size 10",
        ),
        (
            "snapshot",
            "--workload strings --keys 10 --snapshot-writes-per-sec 100",
        ),
        ("eviction", "--workload strings --keys 10 --maxmemory 100mb"),
        ("ttl", "--workload strings --keys 10 --ttl-seconds 3600"),
        (
            "replica",
            "--workload strings --keys 10 --replica 127.0.0.1:2",
        ),
    ];
    let of = |name: &str| base.iter().find(|(n, _)| *n == name).unwrap().1.to_string();
    let row = |flag: &'static str, on: &str, extra: &str, pointer: &'static str| {
        (
            flag,
            words(&of(on)),
            words(&format!("{} {extra}", of(on))),
            pointer,
        )
    };
    vec![
        (
            "workload",
            words(&of("strings")),
            words(&of("records")),
            "/workload",
        ),
        (
            "members",
            words(&of("sorted")),
            words("--workload sorted-set --members 11"),
            "/workload/members",
        ),
        row("key", "sorted", "--key other", "/workload/key"),
        row(
            "sample_every",
            "sorted",
            "--sample-every 5000",
            "/workload/sample_every",
        ),
        (
            "requests",
            words(&of("random")),
            words("--workload random-strings --requests 11 --keyspace 10"),
            "/workload/requests",
        ),
        (
            "keyspace",
            words(&of("random")),
            words("--workload random-strings --requests 10 --keyspace 11"),
            "/workload/keyspace",
        ),
        row("seed", "random", "--seed 3", "/workload/seed"),
        row("scale", "profile", "--scale 2", "/workload/scale"),
        row(
            "element_scale",
            "profile",
            "--element-scale 2",
            "/workload/element_scale",
        ),
        (
            "keys",
            words(&of("strings")),
            words("--workload strings --keys 11"),
            "/workload/keys",
        ),
        row(
            "value_size",
            "strings",
            "--value-size 7",
            "/workload/value_size",
        ),
        (
            "records",
            words(&of("records")),
            words("--workload records --records 11"),
            "/workload/records",
        ),
        row("layout", "records", "--layout strings", "/workload/layout"),
        (
            "rdb",
            words(&format!("--workload rdb --rdb {}", rdb_file("a"))),
            words(&format!("--workload rdb --rdb {}", rdb_file("b"))),
            "/workload/path",
        ),
        (
            "rdb_credentials",
            words("--workload rdb --rdb https://backups.example/dump.rdb"),
            words("--workload rdb --rdb https://backups.example/dump.rdb --rdb-credentials /creds"),
            "/workload/credentials",
        ),
        row("fields", "records", "--fields a,b", "/workload/fields"),
        row(
            "flush",
            "strings",
            "--flush",
            "/settings/refuse_existing_keys",
        ),
        row(
            "ttl_seconds",
            "strings",
            "--ttl-seconds 3600",
            "/settings/ttl",
        ),
        row("ttl_share", "ttl", "--ttl-share 0.5", "/settings/ttl/share"),
        (
            "churn_rounds",
            words(&of("churn")),
            words("--workload strings --keys 10 --churn-rounds 3 --delete-share 0.5"),
            "/settings/churn/rounds",
        ),
        row(
            "delete_share",
            "overwrite",
            "--delete-share 0.3",
            "/settings/churn/delete_share",
        ),
        row(
            "overwrite_share",
            "churn",
            "--overwrite-share 0.5 --overwrite-value-size 10",
            "/settings/churn",
        ),
        (
            "overwrite_value_size",
            words(&of("overwrite")),
            words(
                "--workload strings --keys 10 --churn-rounds 2 --overwrite-share 0.5 --overwrite-value-size 20",
            ),
            "/settings/churn/overwrite_value_size",
        ),
        row("defrag", "churn", "--defrag", "/settings/churn/defrag"),
        row(
            "defrag_seconds",
            "churn",
            "--defrag-seconds 30",
            "/settings/churn/defrag_seconds",
        ),
        row(
            "churn_seed",
            "churn",
            "--churn-seed 4",
            "/settings/churn/seed",
        ),
        row(
            "snapshot_writes_per_sec",
            "strings",
            "--snapshot-writes-per-sec 100",
            "/settings/snapshot",
        ),
        row(
            "snapshot_write_share",
            "snapshot",
            "--snapshot-write-share 0.5",
            "/settings/snapshot/write_share",
        ),
        row(
            "replica_writes_per_sec",
            "replica",
            "--replica-writes-per-sec 100",
            "/settings/replica",
        ),
        row(
            "maxmemory",
            "strings",
            "--maxmemory 100mb",
            "/settings/eviction",
        ),
        row(
            "maxmemory_policy",
            "eviction",
            "--maxmemory-policy allkeys-lfu",
            "/settings/eviction/policy",
        ),
        row(
            "load_to",
            "eviction",
            "--load-to 2",
            "/settings/eviction/load_to",
        ),
        row(
            "own_all_slots",
            "strings",
            "--own-all-slots",
            "/settings/own_all_slots",
        ),
        row(
            "read_config",
            "strings",
            "--read-config maxmemory",
            "/settings/read_config",
        ),
        row("pipeline", "strings", "--pipeline 7", "/settings/pipeline"),
        row(
            "batches_in_flight",
            "strings",
            "--batches-in-flight 2",
            "/settings/batches_in_flight",
        ),
        row(
            "repetitions",
            "strings",
            "--repetitions 3",
            "/settings/repetitions",
        ),
        row(
            "settle_seconds",
            "strings",
            "--settle-seconds 2",
            "/settings/settle_seconds",
        ),
        row(
            "other_clients_timeout",
            "strings",
            "--other-clients-timeout 3",
            "/settings/other_clients_timeout_ms",
        ),
        row(
            "max_memory_cv",
            "strings",
            "--max-memory-cv 0.5",
            "/settings/thresholds/bytes_per_item_cv",
        ),
        row(
            "max_rate_cv",
            "strings",
            "--max-rate-cv 0.5",
            "/settings/thresholds/rate_cv",
        ),
    ]
}

fn command() -> Command {
    LoadArgs::augment_args(Command::new("load"))
}

/// `membench load --addr 127.0.0.1:1 ARGS` as parsed.
fn parsed(args: &[String]) -> Result<LoadArgs, clap::Error> {
    let argv = ["load", "--addr", "127.0.0.1:1"]
        .into_iter()
        .map(String::from)
        .chain(args.iter().cloned());
    command()
        .try_get_matches_from(argv)
        .and_then(|matches| LoadArgs::from_arg_matches(&matches))
}

/// The plan `membench load --addr 127.0.0.1:1 ARGS` runs, as JSON.
fn plan_of(args: &[String]) -> Value {
    let parsed = parsed(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    match parsed.plan() {
        Ok((plan, _)) => serde_json::to_value(plan).unwrap(),
        Err(Refusal::Usage(message)) => panic!("{args:?}: {message}"),
        Err(Refusal::Plan(e)) => panic!("{args:?}: {e}"),
    }
}

#[test]
fn every_flag_of_load_is_a_setting_of_the_plan_or_says_where_things_are() {
    let mut command = command();
    command.build();
    let settings = settings();
    let unmapped: Vec<String> = command
        .get_arguments()
        .map(|arg| arg.get_id().as_str().to_string())
        .filter(|id| {
            !NOT_SETTINGS.iter().any(|(n, _)| n == id) && !settings.iter().any(|(n, ..)| n == id)
        })
        .collect();
    assert!(
        unmapped.is_empty(),
        "flags that are neither a setting mapped to its field of the plan (add them to settings() with the field they change, and to the plan) nor in NOT_SETTINGS (with why they are not a setting): {unmapped:?}"
    );
    // And the lists name no flag that is gone.
    for name in NOT_SETTINGS
        .iter()
        .map(|(n, _)| *n)
        .chain(settings.iter().map(|(n, ..)| *n))
    {
        assert!(
            command.get_arguments().any(|a| a.get_id() == name),
            "{name} is no flag of load"
        );
    }
}

#[test]
fn every_setting_flag_changes_its_field_of_the_plan_and_nothing_else() {
    for (id, without, with, pointer) in settings() {
        let flag = id.replace('_', "-");
        let (mut before, mut after) = (plan_of(&without), plan_of(&with));
        let (old, new) = (before.pointer(pointer), after.pointer(pointer));
        assert!(
            old != new && new.is_some(),
            "--{flag}: {pointer} is {old:?} without it and {new:?} with it"
        );
        // The field taken out of both (a field left out when unset is absent from one).
        let (parent, last) = pointer.rsplit_once('/').unwrap();
        for plan in [&mut before, &mut after] {
            if let Some(Value::Object(fields)) = plan.pointer_mut(parent) {
                fields.remove(last);
            }
        }
        assert_eq!(before, after, "--{flag} changed more than {pointer}");
    }
}

#[test]
fn a_plan_given_whole_takes_no_setting_flag_beside_it() {
    for (id, _, with, _) in settings() {
        let flag = id.replace('_', "-");
        // The arguments that only name the workload are settings too.
        let mut args = vec!["--plan".to_string(), "plan.json".to_string()];
        args.extend(with);
        let error = parsed(&args)
            .err()
            .unwrap_or_else(|| panic!("--{flag} was taken beside --plan"));
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::ArgumentConflict,
            "--{flag}: {error}"
        );
    }
    // Without a setting flag, the plan is all it takes.
    let args = [
        "--plan",
        "plan.json",
        "--replica",
        "127.0.0.1:2",
        "--keep-data",
    ]
    .map(String::from);
    parsed(&args).expect("a plan and where things are");
}
