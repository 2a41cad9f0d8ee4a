//! `membench` pointed at a user's server and run by a new user, against real engines and a
//! real `membench` process: a server that holds data is never flushed unless asked, what the
//! benchmark wrote is flushed at the end unless kept, a count of zero is refused as a spec
//! refuses it, and the small things a user meets (a wrong password, a broken YAML file, a
//! missing cluster, completions, exit codes, the kubectl plugin) say what to do.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use common::{membench, stderr, stdout};
use membench::crd::EngineKind;
use serde_json::Value;

/// Asserts that `output` exited with `code`, its error saying `expected`.
fn assert_failed(output: &Output, code: i32, expected: &str) {
    assert_eq!(output.status.code(), Some(code), "{}", stderr(output));
    assert!(
        stderr(output).contains(expected),
        "expected {expected:?} in: {}",
        stderr(output)
    );
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("membench-cli-safety-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn query<T: redis::FromRedisValue>(connection: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(connection).unwrap()
}

/// The calls of each command the engine has answered (`INFO commandstats`, `config|get` for a
/// subcommand).
fn command_calls(connection: &mut redis::Connection) -> BTreeMap<String, u64> {
    let stats: String = query(connection, &["INFO", "commandstats"]);
    stats
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_")?.split_once(":calls="))
        .map(|(name, rest)| {
            (
                name.to_string(),
                rest.split(',').next().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// The engine's count of writes since its last save (`rdb_changes_since_last_save`: every
/// command that changes the dataset adds to it, FLUSHALL included).
fn writes_since_save(connection: &mut redis::Connection) -> u64 {
    let info: String = query(connection, &["INFO", "persistence"]);
    info.lines()
        .find_map(|line| line.strip_prefix("rdb_changes_since_last_save:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The flags the engine gives `command` (`set`, `config|get`) in `COMMAND INFO`, in lower case.
fn command_flags(connection: &mut redis::Connection, command: &str) -> String {
    let info: redis::Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(command)
        .query(connection)
        .unwrap();
    let redis::Value::Array(entries) = info else {
        panic!("COMMAND INFO {command}: {info:?}");
    };
    let Some(redis::Value::Array(entry)) = entries.first() else {
        panic!("COMMAND INFO {command}: {entries:?}");
    };
    format!("{:?}", entry.get(2)).to_lowercase()
}

#[test]
fn load_refuses_a_server_that_holds_keys_and_leaves_them_untouched() {
    let redis = common::start(EngineKind::Redis, &[]);
    let addr = redis.address.socket_addr();
    let mut connection = common::connect(&redis.address);
    let _: () = query(&mut connection, &["SET", "precious", "data"]);
    // A key in another database counts too: FLUSHALL would empty every one.
    let _: () = query(&mut connection, &["SELECT", "3"]);
    let _: () = query(&mut connection, &["SET", "elsewhere", "too"]);
    let writes_before = writes_since_save(&mut connection);
    let calls_before = command_calls(&mut connection);
    drop(connection);
    let output = membench(&[
        "load",
        "--addr",
        &addr,
        "--workload",
        "strings",
        "--keys",
        "1000",
        "--repetitions",
        "1",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("holds 2 key(s)") && message.contains("--flush"),
        "{message}"
    );
    assert_eq!(stdout(&output), "", "nothing measured, nothing printed");
    let mut connection = common::connect(&redis.address);
    let kept: String = query(&mut connection, &["GET", "precious"]);
    assert_eq!(kept, "data");
    let _: () = query(&mut connection, &["SELECT", "3"]);
    let kept: String = query(&mut connection, &["GET", "elsewhere"]);
    assert_eq!(kept, "too");
    // Nothing was written, and membench sent only commands that neither write nor administer
    // (the test's own INFO and SELECT calls aside).
    let calls_after = command_calls(&mut connection);
    assert_eq!(
        writes_since_save(&mut connection),
        writes_before,
        "the refused server was written to; commands since: {calls_after:?}"
    );
    let mut sent = Vec::new();
    for (command, calls) in &calls_after {
        let ours = match command.as_str() {
            "info" => 3,
            "select" => 1,
            "get" => 2,
            _ => 0,
        };
        if *calls > calls_before.get(command).copied().unwrap_or(0) + ours {
            sent.push(command.clone());
        }
    }
    assert!(
        !sent.is_empty(),
        "membench sent nothing, not even its check: {calls_after:?}"
    );
    // Administrative commands that only read are fine: the settings read back, the wait to
    // be the only client.
    let reads_only = ["config|get", "client|list", "client|info"];
    for command in &sent {
        let flags = command_flags(&mut connection, command);
        assert!(
            !flags.contains("write")
                && (!flags.contains("admin") || reads_only.contains(&command.as_str())),
            "membench sent {command} ({flags}) to the server it refused (it sent {sent:?})"
        );
    }
    let help = stdout(&membench(&["load", "--help"]));
    assert!(
        help.contains("--flush") && help.contains("--keep-data"),
        "{help}"
    );
}

#[test]
fn load_with_flush_empties_the_server_and_leaves_it_empty_unless_asked_to_keep_data() {
    let redis = common::start(EngineKind::Redis, &[]);
    let addr = redis.address.socket_addr();
    // A connection per reading: one left open would count as another client's buffers.
    let dbsize = || -> u64 { query(&mut common::connect(&redis.address), &["DBSIZE"]) };
    let _: () = query(
        &mut common::connect(&redis.address),
        &["SET", "old", "data"],
    );
    let load = |extra: &[&str]| {
        let mut args = vec![
            "load",
            "--addr",
            &addr,
            "--workload",
            "strings",
            "--keys",
            "1000",
            "--repetitions",
            "2",
            "--output",
            "json",
        ];
        args.extend_from_slice(extra);
        let output = membench(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["summary"]["items"], 1000);
        report
    };
    load(&["--flush"]);
    assert_eq!(
        dbsize(),
        0,
        "what the benchmark wrote is flushed at the end"
    );
    load(&["--keep-data"]);
    assert_eq!(dbsize(), 1000, "--keep-data leaves the benchmark's keys");
    // Its own keys are still keys it did not write, for the next run.
    let refused = membench(&[
        "load",
        "--addr",
        &addr,
        "--workload",
        "strings",
        "--keys",
        "10",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("holds 1000 key(s)"));
}

#[test]
fn a_count_of_zero_is_refused_by_every_flag_and_spec_in_the_same_words() {
    // Refused before any server is touched: the address is never reached.
    for (workload, flags) in [
        ("sorted-set", "--members 0"),
        ("strings", "--keys 0"),
        ("random-strings", "--requests 0 --keyspace 10"),
        ("random-strings", "--requests 10 --keyspace 0"),
        ("records", "--records 0"),
    ] {
        let mut args = vec!["load", "--addr", "127.0.0.1:1", "--workload", workload];
        args.extend(flags.split(' '));
        let output = membench(&args);
        assert_eq!(output.status.code(), Some(2), "{flags}");
        let flag = flags.split(' ').collect::<Vec<_>>();
        let zero_flag = flag
            .chunks(2)
            .find(|pair| pair[1] == "0")
            .map(|pair| pair[0])
            .unwrap();
        assert_eq!(
            stderr(&output).trim(),
            format!("error: invalid {zero_flag}: must be at least 1"),
            "{flags}"
        );
        assert!(!stdout(&output).contains("NaN"));
    }
    let dir = scratch("zero");
    let spec = common::write_spec(
        &dir,
        "zero",
        "  engines: [{engine: redis, version: \"7.0\"}]\n  workload: {strings: {keys: 0}}\n",
    );
    let output = membench(&["run", spec.to_str().unwrap()]);
    assert_failed(
        &output,
        2,
        "invalid spec.workload.strings.keys: must be at least 1",
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_wrong_password_is_authentication_failed_saying_what_to_check() {
    let redis = common::start(EngineKind::Redis, &["--requirepass", "right"]);
    let addr = redis.address.socket_addr();
    let output = membench(&[
        "load",
        "--addr",
        &addr,
        "--password",
        "wrong",
        "--workload",
        "strings",
        "--keys",
        "10",
        "--output",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["error"]["category"], "AuthenticationFailed");
    let message = report["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("refused the password") && message.contains("--password"),
        "{message}"
    );
    // Without one it is the other error: a password is needed.
    let output = membench(&[
        "load",
        "--addr",
        &addr,
        "--workload",
        "strings",
        "--keys",
        "10",
        "--output",
        "json",
    ]);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["error"]["category"], "AuthRequired");
    // The profiler says the same with the same exit code as the load.
    let output = membench(&["profile", "--addr", &addr, "--password", "wrong"]);
    assert_eq!(output.status.code(), Some(1), "{}", common::stderr(&output));
    let stderr = common::stderr(&output);
    assert!(
        stderr.contains("refused the password") && stderr.contains("--password"),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_server_prints_the_error_and_no_empty_table_row() {
    for output_format in ["table", "markdown", "csv"] {
        let output = membench(&[
            "load",
            "--addr",
            "127.0.0.1:1",
            "--workload",
            "strings",
            "--keys",
            "10",
            "--output",
            output_format,
        ]);
        assert_failed(&output, 1, "cannot reach the engine at 127.0.0.1:1");
        assert_eq!(stdout(&output), "", "{output_format}");
    }
}

#[test]
fn a_yaml_error_names_the_file_and_says_error_once() {
    let dir = scratch("yaml");
    let spec = common::write_spec(
        &dir,
        "t",
        "  engines: [{engine: redis, version: \"7.0\"}\n  workload: {strings: {keys: 10}}\n",
    );
    let output = membench(&["run", spec.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert_eq!(message.matches("error:").count(), 1, "{message}");
    assert!(
        message.contains(&format!(" --> {}:6:11", spec.display())),
        "{message}"
    );
    assert!(!message.contains("<input>"), "{message}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_unknown_engine_lists_each_engine_of_the_spec_once() {
    let quick = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../manifests/examples/quick.yaml"
    );
    let output = membench(&["run", quick, "--engine", "nosuch"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output).trim(),
        "error: --engine nosuch: no engine of the spec has that name; its engines are redis-8.2, valkey-9.1"
    );
}

#[test]
fn an_instance_type_is_optional_for_a_local_run() {
    let dir = scratch("instance-type");
    let spec = common::write_spec(
        &dir,
        "local",
        "  engines: [{engine: redis, version: \"7.0\"}]\n  workload: {strings: {keys: 1000}}\n  repetitions: 1\n",
    );
    let output = membench(&["run", spec.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    assert!(
        table.contains("ran locally") && !table.contains("instanceType"),
        "{table}"
    );
    let output = membench(&["run", spec.to_str().unwrap(), "--output", "json"]);
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(json.get("instance_type").is_none(), "{json}");
    assert_eq!(json["engines"][0]["summary"]["items"], 1000);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn report_without_a_cluster_says_the_kubeconfig_error_once() {
    let missing =
        std::env::temp_dir().join(format!("membench-no-kubeconfig-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .arg("report")
        .env("KUBECONFIG", &missing)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert_eq!(message.matches("error:").count(), 1, "{message}");
    assert_eq!(
        message.matches(&missing.display().to_string()).count(),
        1,
        "{message}"
    );
    assert_eq!(
        message.matches("No such file or directory").count(),
        1,
        "{message}"
    );
    assert!(
        message.contains("KUBECONFIG") && message.contains("--context"),
        "{message}"
    );
}

#[test]
fn completions_are_printed_for_bash_zsh_and_fish() {
    let script = |shell: &str| {
        let output = membench(&["completions", shell]);
        assert!(output.status.success(), "{shell}: {}", stderr(&output));
        stdout(&output)
    };
    // bash: the script registers a completion that completes the subcommands and flags.
    let bash = script("bash");
    let dir = scratch("completions");
    let path = dir.join("membench.bash");
    std::fs::write(&path, &bash).unwrap();
    let complete = |words: &str, current: usize| {
        let output = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=({words}); COMP_CWORD={current}; COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; _membench membench; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                path.display()
            ))
            .output()
            .expect("bash runs");
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output)
    };
    let commands = complete("membench ''", 1);
    for command in [
        "load",
        "run",
        "report",
        "engines",
        "completions",
        "operator",
        "crd",
    ] {
        assert!(
            commands.lines().any(|l| l == command),
            "{command}: {commands}"
        );
    }
    let flags = complete("membench load --fl", 2);
    assert!(flags.lines().any(|l| l == "--flush"), "{flags}");
    // zsh and fish: their own formats, naming the commands and flags.
    let zsh = script("zsh");
    assert!(zsh.starts_with("#compdef membench"), "{zsh}");
    assert!(
        zsh.contains("--keep-data") && zsh.contains("'completions:"),
        "{zsh}"
    );
    let fish = script("fish");
    assert!(
        fish.contains("complete -c membench") && fish.contains("-l keep-data"),
        "{fish}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The exit codes, as `--help` and the book list them (both from `ExitStatus`'s docs, which
/// start a sentence: compared in lower case).
const EXIT_CODES: [(&str, &str); 5] = [
    ("0", "everything asked for was measured"),
    ("1", "a measurement failed"),
    ("2", "bad input"),
    ("130", "SIGINT"),
    ("143", "SIGTERM"),
];

#[test]
fn exit_codes_are_documented_in_help_and_the_book() {
    let helps: Vec<String> = [
        &["--help"][..],
        &["load", "--help"],
        &["run", "--help"],
        &["profile", "--help"],
        &["capacity", "--help"],
        &["report", "--help"],
    ]
    .iter()
    .map(|args| stdout(&membench(args)))
    .collect();
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/src/reference/exit-codes.md"
    ))
    .unwrap();
    for (code, meaning) in EXIT_CODES {
        for help in &helps {
            assert!(
                help.lines().any(|l| l.trim_start().starts_with(code)
                    && l.to_lowercase().contains(&meaning.to_lowercase())),
                "--help lacks exit code {code}: {help}"
            );
        }
        assert!(
            page.lines().any(|l| l.starts_with(&format!("| {code} "))
                && l.to_lowercase().contains(&meaning.to_lowercase())),
            "docs/src/reference/exit-codes.md lacks exit code {code}"
        );
    }
}

/// The kubectl the dev cluster's tools build (hack/build-tools.sh), or MEMBENCH_KUBECTL.
fn kubectl_program() -> PathBuf {
    let path = std::env::var_os("MEMBENCH_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let bin = Command::new(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../hack/build-tools.sh"
            ))
            .arg("--print-bin-dir")
            .output()
            .expect("hack/build-tools.sh runs");
            PathBuf::from(String::from_utf8_lossy(&bin.stdout).trim())
                .join("kubernetes-v1.37.2/kubectl")
        });
    assert!(
        path.is_file(),
        "no kubectl at {}: run hack/build-tools.sh (or set MEMBENCH_KUBECTL)",
        path.display()
    );
    path
}

#[test]
fn installed_as_kubectl_membench_it_runs_as_a_kubectl_plugin() {
    let dir = scratch("plugin");
    let plugin = dir.join("kubectl-membench");
    std::fs::copy(env!("CARGO_BIN_EXE_membench"), &plugin).unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = |args: &[&str]| {
        Command::new(kubectl_program())
            .args(args)
            .env("PATH", &path)
            .env("KUBECONFIG", dir.join("no-kubeconfig"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .expect("kubectl runs")
    };
    let listed = kubectl(&["plugin", "list"]);
    assert!(
        stdout(&listed).contains(&plugin.display().to_string()),
        "{}{}",
        stdout(&listed),
        stderr(&listed)
    );
    let help = kubectl(&["membench", "--help"]);
    assert!(help.status.success(), "{}", stderr(&help));
    assert!(
        stdout(&help).contains("Usage: kubectl membench <COMMAND>"),
        "{}",
        stdout(&help)
    );
    // kubectl's flags, for the commands that talk to a cluster.
    let report_help = stdout(&kubectl(&["membench", "report", "--help"]));
    assert!(
        report_help.contains("-n, --namespace") && report_help.contains("--context <NAME>"),
        "{report_help}"
    );
    let operator_help = stdout(&kubectl(&["membench", "operator", "--help"]));
    assert!(
        operator_help.contains("-n, --namespace") && operator_help.contains("--context <NAME>"),
        "{operator_help}"
    );
    // A context the kubeconfig lacks is named as such.
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: here, context: {cluster: c, user: u}}]\ncurrent-context: here\n",
    )
    .unwrap();
    let output = Command::new(kubectl_program())
        .args(["membench", "report", "--context", "elsewhere"])
        .env("PATH", &path)
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    assert_failed(
        &output,
        1,
        "cannot use the kubeconfig context \"elsewhere\"",
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_progress_bar_on_a_terminal_starts_empty_and_reads_as_numbers_for_people() {
    let redis = common::start(EngineKind::Redis, &[]);
    // `script` gives membench a terminal (the bar is hidden otherwise) and prints what it drew.
    let load = format!(
        "{} load --addr {} --workload strings --keys 300000 --repetitions 2 --output json > /dev/null",
        env!("CARGO_BIN_EXE_membench"),
        redis.address.socket_addr()
    );
    let output = Command::new("script")
        .args(["-qec", &load, "/dev/null"])
        .output()
        .expect("script (util-linux) runs");
    assert!(output.status.success(), "{}", stderr(&output));
    let drawn = stdout(&output);
    // A drawn bar ends `] eta 3s`; the line before its first progress says `starting`.
    let lines: Vec<&str> = drawn
        .split(['\r', '\n'])
        .filter(|l| l.contains("] eta"))
        .collect();
    assert!(drawn.contains("starting"), "{drawn:?}");
    assert!(!lines.is_empty(), "no bar was drawn: {drawn:?}");
    for line in &lines {
        assert!(
            line.contains("rep "),
            "a bar before the repetition's first progress (0 of 0 drawn full): {line:?}"
        );
        assert!(!line.contains(" 0/0"), "{line:?}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("rep 1/2 ") && l.contains("/300,000")),
        "counts have thousands separators: {lines:?}"
    );
    // Rates: three significant figures, as `246k/s`, `1.23M/s`; never `245678.1234/s`.
    let rates: Vec<&str> = lines
        .iter()
        .flat_map(|l| l.split_whitespace())
        .filter(|word| word.ends_with("/s"))
        .collect();
    assert!(!rates.is_empty(), "{lines:?}");
    for rate in rates {
        let number = rate.trim_end_matches("/s").trim_end_matches(['k', 'M']);
        let digits = number.chars().filter(char::is_ascii_digit).count();
        assert!(
            (1..=3).contains(&digits) && number.parse::<f64>().is_ok(),
            "{rate}"
        );
    }
}
