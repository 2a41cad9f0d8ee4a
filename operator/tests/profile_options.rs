//! `membench profile`'s options and cross-checks against real engines from the engine store:
//! `--sample-keys` caps the sample and says so (its default is 100000), `INFO KEYSIZES` is
//! recorded where the server has it and its absence noted where it has not, and the progress
//! bar draws on a terminal and never on a pipe.

mod common;

use std::process::Command;

use membench::crd::EngineKind;
use membench::profile::Profile;

/// `strings` strings of 20 to 59 bytes and `hashes` hashes of 2 fields.
fn fill(connection: &mut redis::Connection, strings: u32, hashes: u32) {
    let mut pipe = redis::pipe();
    for i in 0..strings {
        pipe.cmd("SET")
            .arg(format!("session:{i}"))
            .arg("v".repeat(20 + (i % 40) as usize))
            .ignore();
    }
    for i in 0..hashes {
        pipe.cmd("HSET")
            .arg(format!("user:{i}"))
            .arg("name")
            .arg(format!("user-{i}"))
            .arg("age")
            .arg(i % 90)
            .ignore();
    }
    pipe.query::<()>(connection).expect("the data loads");
}

fn profile_of(addr: &str, extra: &[&str]) -> Profile {
    let (output, profile) = common::profile_json(addr, extra);
    assert!(output.status.success(), "{}", common::stderr(&output));
    profile.unwrap_or_else(|| panic!("no profile on stdout: {}", common::stdout(&output)))
}

#[test]
fn sample_keys_caps_the_sample_and_says_so_and_defaults_to_100000() {
    let engine = common::start(EngineKind::Valkey, &[]);
    fill(&mut common::connect(&engine.address), 400, 100);
    let profile = profile_of(&engine.address.socket_addr(), &["--sample-keys", "50"]);
    assert_eq!(profile.source.keys, 500, "DBSIZE");
    assert_eq!(profile.source.sampled_keys, 50);
    let in_groups: u64 = profile.groups.iter().map(|g| g.sampled_keys).sum();
    assert_eq!(in_groups, 50, "{:?}", profile.groups);
    // Capped as asked is complete, and the notes say how much was read.
    assert!(profile.source.complete, "{:?}", profile.source);
    let notes = profile.notes.join("\n");
    assert!(notes.contains("50 of 500 keys were sampled"), "{notes}");
    // Without the option, the whole (small) keyspace.
    let whole = profile_of(&engine.address.socket_addr(), &[]);
    assert_eq!(whole.source.sampled_keys, 500);
    assert!(!whole.notes.join("\n").contains("keys were sampled"));

    // The default, as the CLI states it: a keyspace above 100000 keys would take long here.
    let help = common::stdout(&common::membench(&["profile", "--help"]));
    let option = help
        .split("\n")
        .map(str::trim_start)
        .skip_while(|line| !line.starts_with("--sample-keys "))
        .take_while(|line| !line.starts_with("--output "))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(!option.is_empty(), "no --sample-keys in: {help}");
    assert!(option.contains("[default: 100000]"), "{option}");
}

/// The counts of an `INFO KEYSIZES` histogram (`8=1,16=2,32=2`): how many keys it holds.
fn histogram_keys(histogram: &str) -> u64 {
    histogram
        .split(',')
        .map(|bucket| {
            let (_, count) = bucket.split_once('=').expect("size=count");
            count.parse::<u64>().expect("a count")
        })
        .sum()
}

#[test]
fn info_keysizes_is_recorded_where_the_server_has_it_and_its_absence_noted() {
    let redis = common::start_spec(&common::shared_build(EngineKind::Redis, "8.6"));
    fill(&mut common::connect(&redis.address), 200, 50);
    let profile = profile_of(&redis.address.socket_addr(), &[]);
    assert_eq!(profile.source.version.as_deref(), Some("8.6.3"));
    let keysizes = &profile.source.keysizes;
    // The server's own counts of each type, beside the sampled ones.
    let strings = keysizes
        .get("db0_distrib_strings_sizes")
        .unwrap_or_else(|| panic!("no strings histogram in {keysizes:?}"));
    assert_eq!(histogram_keys(strings), 200, "{strings}");
    let hashes = keysizes
        .get("db0_distrib_hashes_items")
        .unwrap_or_else(|| panic!("no hashes histogram in {keysizes:?}"));
    assert_eq!(histogram_keys(hashes), 50, "{hashes}");
    assert!(
        !profile.notes.join("\n").contains("INFO KEYSIZES"),
        "{:?}",
        profile.notes
    );

    for engine in [
        common::start(EngineKind::Valkey, &[]),
        common::start(EngineKind::Redis, &[]),
    ] {
        fill(&mut common::connect(&engine.address), 200, 50);
        let profile = profile_of(&engine.address.socket_addr(), &[]);
        let version = profile.source.version.clone().unwrap_or_default();
        assert!(
            profile.source.keysizes.is_empty(),
            "{version}: {:?}",
            profile.source.keysizes
        );
        let notes = profile.notes.join("\n");
        assert!(
            notes.contains("the server has no INFO KEYSIZES")
                && notes.contains("source.keysizes is left out"),
            "{version}: {notes}"
        );
        // Left out of the printed profile, not printed empty.
        let (output, _) = common::profile_json(&engine.address.socket_addr(), &[]);
        assert!(
            !common::stdout(&output).contains("\"keysizes\":"),
            "{version}: {}",
            common::stdout(&output)
        );
    }
}

/// What `membench profile` prints (stdout and stderr together) when it runs on a
/// pseudo-terminal, through util-linux `script`.
fn on_a_terminal(args: &str) -> String {
    let script = common::find_on_path("script")
        .expect("this test needs util-linux `script` (apt-get install bsdutils) for a terminal");
    let command = format!("{} {args}", env!("CARGO_BIN_EXE_membench"));
    let output = Command::new(script)
        .args(["-qec", &command, "/dev/null"])
        .env("TERM", "xterm")
        .output()
        .expect("script runs");
    assert!(
        output.status.success(),
        "{}{}",
        common::stdout(&output),
        common::stderr(&output)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_progress_bar_draws_on_a_terminal_and_never_on_a_pipe() {
    let engine = common::start(EngineKind::Valkey, &[]);
    fill(&mut common::connect(&engine.address), 300, 0);
    let addr = engine.address.socket_addr();
    // At 300 commands a second the 300 keys take a few seconds: the bar is drawn many times.
    let args = format!("profile --addr {addr} --output json --max-commands-per-sec 300");
    let terminal = on_a_terminal(&args);
    assert!(
        terminal.contains("profiling ") && terminal.contains("/300 keys ["),
        "no progress bar on the terminal: {terminal:?}"
    );

    let piped = common::membench(&[
        "profile",
        "--addr",
        &addr,
        "--output",
        "json",
        "--max-commands-per-sec",
        "300",
    ]);
    assert!(piped.status.success(), "{}", common::stderr(&piped));
    let stdout = common::stdout(&piped);
    let stderr = common::stderr(&piped);
    for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(
            !text.contains("profiling ") && !text.contains('\u{1b}') && !text.contains('\r'),
            "progress bytes on {stream} of a pipe: {text:?}"
        );
    }
    let profile: Profile = serde_json::from_str(&stdout).expect("stdout is the profile alone");
    assert_eq!(profile.source.sampled_keys, 300);
}
