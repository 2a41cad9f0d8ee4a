//! An RDB backup at an https URL (`membench load --rdb URL`, `workload.rdb.url`): a dump the
//! engine store's Valkey saved, served by an https server of this test (a CA and a server
//! certificate made for it, on 127.0.0.1) that wants basic authentication, loaded into
//! another Valkey with the credentials of a directory laid out as a mounted Secret: every key
//! arrives, the fetched copy is gone afterwards, and a presigned URL's query is never shown.
//! `membench run` fetches a spec's URL the same way, and `membench profile --rdb URL` reads it. A URL that cannot be fetched (no or wrong
//! credentials, an untrusted server, no file there, plain http) is refused, saying why, and
//! nothing is written; a server failing for a while (503) is a failure worth retrying. A stop
//! signal while the file is downloaded ends `membench load` and `membench profile` at once,
//! with the signal's exit code, and removes the partial copy; a stopped load that cannot
//! return (its engine holds its writes) exits at its deadline and removes its copy too.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::https_server::{PASSWORD, USER, saved_dump, serve};
use membench::client::connection::engine::EngineAddress;
use membench::crd::EngineKind;

/// The keys by type of each database of the server at `address`.
fn keys_by_type(address: &EngineAddress) -> BTreeMap<u64, BTreeMap<String, u64>> {
    let mut con = common::connect(address);
    let mut found = BTreeMap::new();
    for db in 0..16u64 {
        let _: () = redis::cmd("SELECT").arg(db).query(&mut con).unwrap();
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
        for key in keys {
            let kind: String = redis::cmd("TYPE").arg(&key).query(&mut con).unwrap();
            *found
                .entry(db)
                .or_insert_with(BTreeMap::new)
                .entry(kind)
                .or_insert(0) += 1;
        }
    }
    found
}

/// A fresh directory of this test.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("membench-rdb-url-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A credentials directory as a mounted Secret lays it out: `files` (name, content).
fn credentials(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = fresh_dir(name);
    for (file, content) in files {
        std::fs::write(dir.join(file), content).unwrap();
    }
    dir
}

/// `membench ARGS` with TMPDIR at `tmp` (and SSL_CERT_FILE when given), run off the runtime.
async fn membench_in(
    args: Vec<String>,
    tmp: PathBuf,
    cert_file: Option<PathBuf>,
) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_membench"));
        command
            .args(&args)
            .env("TMPDIR", &tmp)
            .env_remove("SSL_CERT_FILE");
        if let Some(file) = cert_file {
            command.env("SSL_CERT_FILE", file);
        }
        command.output().unwrap()
    })
    .await
    .unwrap()
}

/// `membench load` of the file at `url`, keeping the keys, with the credentials of `credentials`.
fn load_args(url: &str, address: &str, credentials: Option<&Path>) -> Vec<String> {
    let dir = credentials.map(|d| d.display().to_string());
    let mut extra = vec!["--keep-data"];
    if let Some(dir) = &dir {
        extra.extend(["--rdb-credentials", dir.as_str()]);
    }
    common::load_rdb_args(url, address, &extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_at_an_https_url_loads_with_its_credentials_and_leaves_no_copy() {
    let (dump, types) = saved_dump();
    let server = serve(dump).await;
    let target = common::start(EngineKind::Valkey, &[]);
    let address = target.address.socket_addr();
    let creds = credentials(
        "ok",
        &[
            ("username", &format!("{USER}\n")),
            ("password", PASSWORD),
            ("ca.crt", &server.ca_pem),
        ],
    );
    let tmp = fresh_dir("tmp");
    let url = format!(
        "https://127.0.0.1:{}/dump.rdb?X-Amz-Signature=deadbeef",
        server.address.port()
    );
    let output = membench_in(load_args(&url, &address, Some(&creds)), tmp.clone(), None).await;
    let (stdout, stderr) = (common::stdout(&output), common::stderr(&output));
    assert!(output.status.success(), "{stderr}\n{stdout}");
    assert_eq!(keys_by_type(&target.address), types, "{stdout}");
    // The server was asked with the Secret's credentials.
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [(
            "/dump.rdb".to_string(),
            Some("Basic YmFja3VwLXJlYWRlcjpzM2NyZXQgcGFzcw==".to_string())
        )]
    );
    // The copy is gone, and the presigned query is in no output.
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(
        left.is_empty(),
        "the fetched copy stayed in TMPDIR: {left:?}"
    );
    for text in [&stdout, &stderr] {
        assert!(
            !text.contains("deadbeef"),
            "the URL's query is shown: {text}"
        );
    }
    assert!(
        stdout.contains(&format!(
            "https://127.0.0.1:{}/dump.rdb",
            server.address.port()
        )),
        "the result does not say where the file came from: {stdout}"
    );
    target.stop();

    // membench profile reads the same URL without a server, and names the URL, not its copy.
    let args = [
        "profile",
        "--rdb",
        &url,
        "--rdb-credentials",
        &creds.display().to_string(),
        "--output",
        "json",
    ]
    .map(String::from)
    .to_vec();
    let output = membench_in(args, tmp.clone(), None).await;
    let (stdout, stderr) = (common::stdout(&output), common::stderr(&output));
    assert!(output.status.success(), "{stderr}");
    let profile: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        profile["source"]["keys"], 202,
        "db 0 holds 200 strings, a hash and a list: {stdout}"
    );
    let said = format!("{stdout}{stderr}");
    assert!(
        said.contains(&format!(
            "https://127.0.0.1:{}/dump.rdb?…",
            server.address.port()
        )) && !said.contains("membench-rdb-")
            && !said.contains("deadbeef"),
        "the profile names the copy or the URL's query: {said}"
    );
    assert!(
        std::fs::read_dir(&tmp).unwrap().next().is_none(),
        "profile left its copy"
    );

    // membench run fetches a spec's URL once for its two entries (a public file behind a
    // redirect, the server trusted through SSL_CERT_FILE), and removes its copy.
    server.seen.lock().unwrap().clear();
    let dir = fresh_dir("run");
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &server.ca_pem).unwrap();
    let spec = common::write_spec(
        &dir,
        "from-url",
        &format!(
            "  engines: [{{engine: valkey, version: \"9.1\"}}, {{engine: redis, version: \"7.0\"}}]\n  workload: {{rdb: {{url: \"https://127.0.0.1:{}/moved\"}}}}\n  repetitions: 1\n",
            server.address.port()
        ),
    );
    let result = dir.join("result.json");
    let args = [
        "run",
        spec.to_str().unwrap(),
        "--result-file",
        result.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let output = membench_in(args, tmp.clone(), Some(ca_file)).await;
    assert!(output.status.success(), "{}", common::stderr(&output));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    for entry in 0..2 {
        let written = &json["engines"][entry]["repetitions"][0]["items"];
        assert_eq!(written.as_u64(), Some(204), "entry {entry}: {json:#}");
    }
    let paths: Vec<String> = server
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(
        paths,
        ["/moved", "/public.rdb"],
        "one fetch for both entries"
    );
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "membench run left its copy: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_that_cannot_be_fetched_is_refused_saying_why_and_writes_nothing() {
    let (dump, _) = saved_dump();
    let server = serve(dump).await;
    let target = common::start(EngineKind::Valkey, &[]);
    let address = target.address.socket_addr();
    let port = server.address.port();
    let trusted = credentials("trust", &[("ca.crt", &server.ca_pem)]);
    let wrong = credentials(
        "wrong",
        &[
            ("username", USER),
            ("password", "nope"),
            ("ca.crt", &server.ca_pem),
        ],
    );
    let untrusting = credentials("untrusting", &[("username", USER), ("password", PASSWORD)]);
    let tmp = fresh_dir("refused");
    let cases: [(String, Option<&Path>, &str); 5] = [
        (
            format!("https://127.0.0.1:{port}/dump.rdb"),
            Some(&trusted),
            "answered 401 Unauthorized: the server wants credentials",
        ),
        (
            format!("https://127.0.0.1:{port}/dump.rdb"),
            Some(&wrong),
            "answered 401 Unauthorized: the server refused the credentials of",
        ),
        (
            format!("https://127.0.0.1:{port}/dump.rdb"),
            Some(&untrusting),
            "the server's certificate is not trusted: put the CA that signed it in",
        ),
        (
            format!("https://127.0.0.1:{port}/nothing.rdb"),
            Some(&trusted),
            "answered 404 Not Found: no file there",
        ),
        (
            format!("http://127.0.0.1:{port}/dump.rdb"),
            None,
            "over https only",
        ),
    ];
    for (url, creds, expected) in cases {
        let output = membench_in(load_args(&url, &address, creds), tmp.clone(), None).await;
        let said = format!("{}{}", common::stderr(&output), common::stdout(&output));
        assert!(!output.status.success(), "{url}: {said}");
        assert!(
            said.contains(expected),
            "{url}: {expected:?} is not in: {said}"
        );
    }
    // A server failing for a while is worth another attempt: its category says so (in the
    // result file a client pod reports through), where a refusal's does not.
    let result = tmp.with_extension("json");
    for (path, category) in [
        ("busy", "SourceUnavailable"),
        ("nothing.rdb", "InvalidSpec"),
    ] {
        let mut args = load_args(
            &format!("https://127.0.0.1:{port}/{path}"),
            &address,
            Some(&trusted),
        );
        args.extend(["--result-file".to_string(), result.display().to_string()]);
        let output = membench_in(args, tmp.clone(), None).await;
        assert!(!output.status.success());
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
        assert_eq!(written["error"]["category"], category, "{path}: {written}");
    }
    let said = std::fs::read_to_string(&result).unwrap();
    let _ = std::fs::remove_file(&result);
    assert!(said.contains("404"), "{said}");
    // A directory without the Secret's password.
    let _ = std::fs::remove_file(wrong.join("password"));
    let output = membench_in(
        load_args(
            &format!("https://127.0.0.1:{port}/dump.rdb"),
            &address,
            Some(&wrong),
        ),
        tmp.clone(),
        None,
    )
    .await;
    let said = common::stderr(&output);
    assert!(said.contains("basic authentication needs both"), "{said}");
    assert_eq!(
        keys_by_type(&target.address),
        BTreeMap::new(),
        "a refused URL wrote keys"
    );
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "a refused fetch left a file: {left:?}");
    target.stop();
}

/// The names of what `dir` holds.
fn listed(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Waits until `tmp` holds a downloaded copy of `bytes` bytes or more: a download under way.
fn wait_for_copy(tmp: &Path, bytes: u64, child: &mut std::process::Child) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < until {
        let partial = std::fs::read_dir(tmp).unwrap().any(|e| {
            let e = e.unwrap();
            e.file_name().to_string_lossy().starts_with("membench-rdb-")
                && e.metadata().is_ok_and(|m| m.len() >= bytes)
        });
        if partial {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("membench ended ({status}) before its download was under way");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!(
        "no copy of {bytes} bytes in {} within 60 s: {:?}",
        tmp.display(),
        listed(tmp)
    );
}

/// `membench ARGS` started with TMPDIR at `tmp`, its output piped.
fn spawn_in(args: &[String], tmp: &Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(args)
        .env("TMPDIR", tmp)
        .env_remove("SSL_CERT_FILE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Sends `signal` to `child` and waits for it to end, at most `within` seconds (then kills it
/// and fails, naming `what` it was doing).
fn signalled(
    mut child: std::process::Child,
    signal: i32,
    within: u64,
    what: &str,
) -> std::process::Output {
    // SAFETY: a plain kill(2) of a child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(within);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > until {
            let _ = child.kill();
            panic!("still running {within} s after signal {signal}: {what}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_signal_during_a_download_ends_the_command_and_removes_the_partial_copy() {
    let (dump, _) = saved_dump();
    let half = (dump.len() / 2) as u64;
    let server = serve(dump).await;
    let target = common::start(EngineKind::Valkey, &[]);
    let address = target.address.socket_addr();
    let trusted = credentials("held", &[("ca.crt", &server.ca_pem)]);
    let url = format!("https://127.0.0.1:{}/held.rdb", server.address.port());
    let profile = ["profile", "--rdb", &url, "--rdb-credentials"]
        .map(String::from)
        .into_iter()
        .chain([trusted.display().to_string()])
        .collect();
    let cases: [(&str, Vec<String>, i32, &str, i32); 2] = [
        (
            "load",
            load_args(&url, &address, Some(&trusted)),
            libc::SIGINT,
            "SIGINT",
            130,
        ),
        ("profile", profile, libc::SIGTERM, "SIGTERM", 143),
    ];
    for (command, args, signal, signal_name, code) in cases {
        let tmp = fresh_dir(&format!("held-{command}"));
        let mut child = spawn_in(&args, &tmp);
        wait_for_copy(&tmp, half, &mut child);
        let output = signalled(child, signal, 10, command);
        let stderr = common::stderr(&output);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{command}: {signal_name} ends it with {code}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("{signal_name}: stopped while"))
                && stderr.contains("removed the downloaded copy"),
            "{command}: {stderr}"
        );
        assert!(
            listed(&tmp).is_empty(),
            "{command} left {:?} in TMPDIR after {signal_name}",
            listed(&tmp)
        );
    }
    assert!(
        keys_by_type(&target.address).is_empty(),
        "nothing is written when the download is stopped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_load_that_cannot_return_exits_at_its_deadline_and_removes_its_copy() {
    let (dump, _) = saved_dump();
    let server = serve(dump).await;
    let target = common::start(EngineKind::Valkey, &[]);
    let address = target.address.socket_addr();
    let trusted = credentials("paused", &[("ca.crt", &server.ca_pem)]);
    let url = format!("https://127.0.0.1:{}/public.rdb", server.address.port());
    let tmp = fresh_dir("paused-tmp");
    // The engine holds every write for a minute: the load's first batch waits on it.
    let mut control = common::connect(&target.address);
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(60_000)
        .arg("WRITE")
        .query(&mut control)
        .unwrap();
    let mut child = spawn_in(&load_args(&url, &address, Some(&trusted)), &tmp);
    // Waits until one of the engine's clients is held (flag `b`) on a command other than the
    // test's own: the load, blocked on its write.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let held = loop {
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut control)
            .unwrap();
        let held = clients.lines().find(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap_or_default()
            };
            field("flags=").contains('b') && !field("cmd=").starts_with("client")
        });
        if let Some(line) = held {
            break line.to_string();
        }
        if child.try_wait().unwrap().is_some() {
            let output = child.wait_with_output().unwrap();
            panic!(
                "membench ended ({}) before its write was held: {}",
                output.status,
                common::stderr(&output)
            );
        }
        assert!(
            std::time::Instant::now() < until,
            "no client of the engine held on a write within 60 s: {clients}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        !listed(&tmp).is_empty(),
        "the load's copy is in TMPDIR while it runs"
    );
    let output = signalled(child, libc::SIGINT, 15, &format!("held on {held}"));
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut control)
        .unwrap();
    let stderr = common::stderr(&output);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("the measurement did not stop within")
            && stderr.contains("removed the downloaded copy"),
        "the deadline's exit, not a return: {stderr}"
    );
    assert!(
        listed(&tmp).is_empty(),
        "the stopped load left {:?} in TMPDIR",
        listed(&tmp)
    );
}
