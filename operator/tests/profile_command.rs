//! `membench profile` against real engines from the engine store: what a profile holds (and
//! never holds), that it only reads, its rate limit and time bound, and its errors (an empty
//! server, commands an ACL refuses, a server that goes away mid-profile).

mod common;

use std::collections::BTreeMap;

use membench::crd::EngineKind;
use membench::profile::Profile;
use membench::profile::model::KeyType;
use redis::Commands;

/// Names and values no profile may contain: a value, a field name fewer than five keys have,
/// a member, and the name of a key of its own.
const SECRETS: [&str; 4] = [
    "Tartempion-Secret-Value",
    "one-off-field-name",
    "private-member-xyz",
    "unique-one-off-key",
];

/// A small keyspace of every type, with the secrets among its names and values.
fn fill(connection: &mut redis::Connection) {
    let mut pipe = redis::pipe();
    for i in 0..300 {
        pipe.hset_multiple(
            format!("flight:{i}"),
            &[
                ("carrier", "UA".to_string()),
                ("dep_delay", (i % 40).to_string()),
                ("status", SECRETS[0].to_string()),
            ],
        )
        .ignore();
        pipe.set_ex(
            format!("plane:{i}"),
            format!("{{\"year\":{}}}", 1990 + i % 30),
            86_400,
        )
        .ignore();
    }
    for i in 0..20 {
        pipe.sadd(format!("carrier:{i}:ids"), &[1, 2, 3, 4 + i])
            .ignore();
        pipe.rpush(format!("route:{i}"), &["JFK", "LAX", "private-member-xyz"])
            .ignore();
        pipe.zadd(format!("delays:{i}"), "private-member-xyz", 1.5)
            .ignore();
        pipe.zadd(format!("delays:{i}"), "b", 2).ignore();
    }
    pipe.set("unique-one-off-key", "x").ignore();
    pipe.query::<()>(connection).expect("the data loads");
}

fn group<'a>(
    profile: &'a Profile,
    template: &str,
    key_type: KeyType,
) -> &'a membench::profile::model::KeyGroup {
    profile
        .groups
        .iter()
        .find(|g| g.template == template && g.key_type == key_type)
        .unwrap_or_else(|| {
            let found: Vec<_> = profile
                .groups
                .iter()
                .map(|g| (&g.template, g.key_type))
                .collect();
            panic!("no group {template} {key_type:?}: {found:?}")
        })
}

#[test]
fn a_profile_holds_types_templates_sizes_and_ttls_and_no_name_or_value() {
    let engine = common::start(EngineKind::Valkey, &[]);
    let mut connection = common::connect(&engine.address);
    fill(&mut connection);
    // Four hashes with a field name of their own: too few to be an object's field.
    for i in 0..4 {
        let _: () = connection
            .hset(format!("sessions{i}"), SECRETS[1], i)
            .unwrap();
    }
    let addr = engine.address.socket_addr();
    let (output, profile) = common::profile_json(&addr, &[]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let profile = profile.expect("stdout is a profile");
    profile.check().expect("the profile is valid for a rebuild");
    assert_eq!(profile.source.keys, 665);
    assert_eq!(profile.source.sampled_keys, 665);
    assert!(profile.source.complete);
    assert_eq!(profile.source.engine.as_deref(), Some("valkey"));

    let flights = group(&profile, "flight:{n}", KeyType::Hash);
    assert_eq!(flights.sampled_keys, 300);
    assert_eq!(
        flights.elements.as_ref().unwrap().buckets,
        vec![[3, 3, 300]]
    );
    assert_eq!(
        flights.encodings,
        BTreeMap::from([("listpack".to_string(), 1.0)])
    );
    // Every flight has the same three fields: an object's, kept by name as a template keeps a
    // part at least five keys share.
    let names: Vec<&str> = flights
        .object_fields
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, ["carrier", "dep_delay", "status"]);
    // dep_delay is an integer, the other two values are not: a third of the values.
    assert!(
        (flights.values.integer_share - 1.0 / 3.0).abs() < 1e-9,
        "{:?}",
        flights.values
    );
    assert!(flights.ttl.is_none());

    let planes = group(&profile, "plane:{n}", KeyType::String);
    let ttl = planes.ttl.as_ref().expect("the planes have a TTL");
    assert_eq!(ttl.share, 1.0);
    let millis = ttl.millis.as_ref().unwrap();
    assert!(
        millis.max() <= 86_400_000 && millis.mean() > 86_000_000.0,
        "{millis:?}"
    );
    assert_eq!(
        planes.values.text_length.as_ref().unwrap().buckets,
        vec![[13, 13, 300]]
    );

    let sets = group(&profile, "carrier:{n}:ids", KeyType::Set);
    assert_eq!(sets.values.integer_keys, 1.0);
    assert_eq!(
        sets.encodings,
        BTreeMap::from([("intset".to_string(), 1.0)])
    );
    let zsets = group(&profile, "delays:{n}", KeyType::Zset);
    let scores = zsets.scores.as_ref().unwrap();
    assert_eq!(
        scores.integer_share, 0.5,
        "1.5 is not an integer, 2 is: {scores:?}"
    );
    group(&profile, "route:{n}", KeyType::List);
    // The one key of its kind keeps nothing of its name.
    group(&profile, "{s}", KeyType::String);

    let stdout = common::stdout(&output);
    for secret in SECRETS.iter().chain(&["UA", "JFK", "LAX", "year"]) {
        assert!(
            !stdout.contains(secret),
            "the profile holds '{secret}':\n{stdout}"
        );
    }
}

#[test]
fn profiling_only_reads_and_never_sends_keys() {
    let engine = common::start(EngineKind::Valkey, &[]);
    let mut connection = common::connect(&engine.address);
    fill(&mut connection);
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut connection)
        .unwrap();
    let (output, _) = common::profile_json(&engine.address.socket_addr(), &[]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let called = common::commands_called(&mut connection);
    let reads = [
        "ping",
        "info",
        "dbsize",
        "scan",
        "type",
        "pttl",
        "object|encoding",
        "strlen",
        "get",
        "hlen",
        "hrandfield",
        "llen",
        "lrange",
        "scard",
        "srandmember",
        "zcard",
        "zrandmember",
        "config|resetstat",
        "hello",
        "client|setinfo",
    ];
    for name in called.keys() {
        assert!(
            reads.contains(&name.as_str()),
            "the profiler sent {name}: {called:?}"
        );
    }
    assert!(
        called.contains_key("scan") && !called.contains_key("keys"),
        "{called:?}"
    );
    // SCAN asks for at most 100 keys a call: 661 keys take at least 7 calls.
    assert!(called["scan"] >= 7, "{called:?}");
}

#[test]
fn the_rate_limit_and_the_time_bound_end_with_what_was_sampled() {
    let engine = common::start(EngineKind::Valkey, &[]);
    let mut connection = common::connect(&engine.address);
    fill(&mut connection);
    let started = std::time::Instant::now();
    let (output, profile) = common::profile_json(
        &engine.address.socket_addr(),
        &["--max-commands-per-sec", "200", "--max-seconds", "1.5"],
    );
    let elapsed = started.elapsed();
    assert!(output.status.success(), "{}", common::stderr(&output));
    let profile = profile.expect("the profile of what was sampled");
    assert!(!profile.source.complete);
    let why = profile.source.stopped_by.clone().unwrap();
    assert!(why.contains("--max-seconds 1.5"), "{why}");
    assert!(
        common::stderr(&output).contains("incomplete"),
        "{}",
        common::stderr(&output)
    );
    // 200 commands a second for 1.5 s, about 5 commands a key: some 60 keys, far from 661.
    let sampled = profile.source.sampled_keys;
    assert!((20..=120).contains(&sampled), "{sampled} keys sampled");
    assert!(elapsed.as_secs_f64() < 10.0, "{elapsed:?}");
    profile
        .check()
        .expect("a partial profile is still a valid one");
}

#[test]
fn an_empty_database_is_refused_naming_the_ones_that_hold_keys() {
    let engine = common::start(EngineKind::Valkey, &[]);
    let mut connection = common::connect(&engine.address);
    let _: () = redis::cmd("SELECT").arg(3).query(&mut connection).unwrap();
    let _: () = connection.set("k", "v").unwrap();
    let (output, profile) = common::profile_json(&engine.address.socket_addr(), &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(profile.is_none());
    let stderr = common::stderr(&output);
    assert!(
        stderr.contains("database 0") && stderr.contains("empty") && stderr.contains("--db 3"),
        "{stderr}"
    );
    let (output, profile) = common::profile_json(&engine.address.socket_addr(), &["--db", "3"]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    assert_eq!(profile.unwrap().source.keys, 1);
}

fn acl_user(connection: &mut redis::Connection, name: &str, rules: &[&str]) {
    let mut command = redis::cmd("ACL");
    command
        .arg("SETUSER")
        .arg(name)
        .arg("on")
        .arg(">secret-pass")
        .arg("~*");
    for rule in rules {
        command.arg(*rule);
    }
    let _: () = command.query(connection).unwrap();
}

/// `membench profile` as the default user, whose password the test set.
fn profile_with_password(addr: &str) -> (std::process::Output, Option<Profile>) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(["profile", "--addr", addr, "--output", "json"])
        .env("MEMBENCH_PASSWORD", "secret-pass")
        .output()
        .unwrap();
    let profile = serde_json::from_slice(&output.stdout).ok();
    (output, profile)
}

#[test]
fn commands_an_acl_refuses_are_left_out_and_named() {
    // membench authenticates with a password only, as the default user: its ACL is the
    // restricted one.
    let engine = common::start(EngineKind::Valkey, &[]);
    let mut connection = common::connect(&engine.address);
    fill(&mut connection);
    acl_user(
        &mut connection,
        "default",
        &["+@all", "-object", "-hrandfield", "-info"],
    );
    let addr = engine.address.socket_addr();
    let (output, profile) = profile_with_password(&addr);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let profile = profile.unwrap();
    let notes = profile.notes.join("\n");
    assert!(
        notes.contains("OBJECT refused by the server's ACL")
            && notes.contains("encodings are left out"),
        "{notes}"
    );
    assert!(
        notes.contains("HRANDFIELD refused") && notes.contains("HSCAN instead"),
        "{notes}"
    );
    assert!(notes.contains("INFO refused"), "{notes}");
    assert!(profile.groups.iter().all(|g| g.encodings.is_empty()));
    assert!(profile.source.engine.is_none() && profile.source.used_memory.is_none());
    // HSCAN read the hashes instead.
    let flights = group(&profile, "flight:{n}", KeyType::Hash);
    assert!(flights.fields.as_ref().unwrap().text_length.is_some());

    // Without TYPE there is no profile: the message names the command.
    acl_user(&mut connection, "default", &["-type"]);
    let (output, profile) = profile_with_password(&addr);
    assert_eq!(output.status.code(), Some(1));
    assert!(profile.is_none());
    let stderr = common::stderr(&output);
    assert!(
        stderr.contains("refused TYPE") && stderr.contains("+type"),
        "{stderr}"
    );
}

#[test]
fn a_server_that_goes_away_mid_profile_leaves_the_profile_of_what_was_sampled() {
    let engine = common::start(EngineKind::Valkey, &[]);
    let mut connection = common::connect(&engine.address);
    fill(&mut connection);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_membench"))
        .args([
            "profile",
            "--addr",
            &engine.address.socket_addr(),
            "--output",
            "json",
            "--max-commands-per-sec",
            "300",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    engine.stop();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", common::stderr(&output));
    let stderr = common::stderr(&output);
    assert!(
        stderr.contains("went away after")
            && stderr.contains("the profile printed is marked incomplete"),
        "{stderr}"
    );
    let profile: Profile =
        serde_json::from_slice(&output.stdout).expect("the profile of what was sampled");
    assert!(!profile.source.complete);
    assert!(
        profile.source.sampled_keys > 10 && profile.source.sampled_keys < 661,
        "{}",
        profile.source.sampled_keys
    );
    assert!(profile.source.stopped_by.unwrap().contains("went away"));
}

#[test]
fn dragonfly_is_profiled_without_object_and_says_so() {
    let engine = common::start_spec(&common::shared_build(EngineKind::Dragonfly, "1"));
    let mut connection = common::connect(&engine.address);
    fill(&mut connection);
    let (output, profile) = common::profile_json(&engine.address.socket_addr(), &[]);
    assert!(output.status.success(), "{}", common::stderr(&output));
    let profile = profile.expect("a profile");
    profile.check().expect("a valid profile");
    assert_eq!(profile.source.engine.as_deref(), Some("dragonfly"));
    assert_eq!(profile.source.sampled_keys, 661);
    let notes = profile.notes.join("\n");
    assert!(notes.contains("OBJECT unknown to this server"), "{notes}");
    let flights = group(&profile, "flight:{n}", KeyType::Hash);
    assert_eq!(
        flights.elements.as_ref().unwrap().buckets,
        vec![[3, 3, 300]]
    );
}
