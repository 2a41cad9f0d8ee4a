//! The engine store's arm64 builds, run on this x86_64 machine by qemu-user: Debian's arm64
//! `redis-server` 7.0.15 and the shared arm64 tarballs, which `hack/install-engines.sh` installs
//! with the arm64 root qemu runs them in; and `membench run` with `arch: arm64`.
//!
//! An engine's memory accounting is its own code and allocator, not the CPU's: the arm64 build
//! of a release and its x86 build with the same allocator (Debian's system jemalloc for both
//! Debian builds; the bundled jemalloc for both upstream builds) must measure the same bytes per
//! item. The rates under emulation are the emulator's, and the output says so.

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::membench;
use membench::crd::EngineKind;
use membench_enginestore::EngineStore;
use serde_json::Value;

fn stdout_json(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is JSON")
}

/// Writes MemoryBenchmark documents (`(name, spec lines indented by two)`) to one file.
fn write_specs(file: &str, documents: &[(&str, String)]) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("membench-arm64-{}-{file}.yaml", std::process::id()));
    let yaml: Vec<String> = documents
        .iter()
        .map(|(name, spec)| {
            format!(
                "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: {name}}}\nspec:\n{spec}"
            )
        })
        .collect();
    std::fs::write(&path, yaml.join("---\n")).unwrap();
    path
}

/// Whether the store has a build of this name; fails on an x86_64 machine whose store has no
/// arm64 build at all, since hack/install-engines.sh installs Debian's everywhere.
fn store_has(build: &str) -> bool {
    let store = EngineStore::open_default().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        store.get("redis-7.0.15-debian-arm64").is_some(),
        "the engine store at {} has no arm64 build: run hack/install-engines.sh (it installs qemu-user-static and Debian's arm64 redis-server)",
        store.root().display()
    );
    store.get(build).is_some()
}

fn median_bytes(engine: &Value) -> f64 {
    engine["summary"]["bytes_per_item"]["median"]
        .as_f64()
        .unwrap_or_else(|| panic!("no median bytes per item: {engine}"))
}

/// The same workload for both architectures, one document each, in one `membench run`; returns
/// the x86_64 and the aarch64 engine reports.
fn run_on_both_architectures(file: &str, engine: &str, workload: &str) -> (Value, Value) {
    let spec = |arch: &str| {
        format!(
            "  instanceType: r8g.4xlarge\n  arch: {arch}\n  engines:\n    - {engine}\n  workload: {workload}\n  repetitions: 2\n"
        )
    };
    let path = write_specs(
        file,
        &[("on-amd64", spec("amd64")), ("on-arm64", spec("arm64"))],
    );
    let json = stdout_json(&membench(&[
        "run",
        path.to_str().unwrap(),
        "--output",
        "json",
    ]));
    let _ = std::fs::remove_file(path);
    let [amd64, arm64] = &json.as_array().expect("one comparison per document")[..] else {
        panic!("two comparisons: {json}")
    };
    (amd64["engines"][0].clone(), arm64["engines"][0].clone())
}

#[test]
fn run_with_arch_arm64_runs_the_arm64_build_under_qemu_and_marks_its_rates() {
    store_has("redis-7.0.15-debian-arm64");
    let path = write_specs(
        "marks",
        &[(
            "arm64-redis",
            "  instanceType: r8g.4xlarge\n  arch: arm64\n  engines:\n    - {engine: redis, version: \"7.0\"}\n  workload: {strings: {keys: 20000}}\n  repetitions: 1\n".into(),
        )],
    );
    let json = stdout_json(&membench(&[
        "run",
        path.to_str().unwrap(),
        "--output",
        "json",
    ]));
    assert_eq!(json["arch"], "aarch64", "{json}");
    let engine = &json["engines"][0]["engine"];
    assert_eq!(engine["build"], "redis-7.0.15-debian-arm64", "{engine}");
    // What the server itself reports: it runs arm64 code.
    assert_eq!(engine["arch"], "aarch64", "{engine}");
    assert!(
        engine["os"].as_str().unwrap().ends_with(" aarch64"),
        "{engine}"
    );
    assert_eq!(engine["emulator"], "qemu-aarch64-static", "{engine}");
    assert_eq!(json["engines"][0]["summary"]["items"], 20000);

    let output = membench(&["run", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("aarch64 builds under qemu-user emulation"),
        "{text}"
    );
    let row = text.lines().find(|l| l.starts_with("Redis")).unwrap();
    assert!(
        row.contains("k/s emulated") && row.contains("under qemu-aarch64-static"),
        "{text}"
    );
}

#[test]
fn debian_redis_7_0_for_arm64_stores_a_key_in_the_same_bytes_as_for_x86() {
    store_has("redis-7.0.15-debian-arm64");
    let (amd64, arm64) = run_on_both_architectures(
        "debian-redis",
        "{engine: redis, version: \"7.0.15\"}",
        "{strings: {keys: 100000, valueSize: 100}}",
    );
    assert_eq!(amd64["engine"]["build"], "redis-7.0.15-debian");
    assert_eq!(arm64["engine"]["build"], "redis-7.0.15-debian-arm64");
    assert_eq!(arm64["engine"]["arch"], "aarch64");
    let (x86, arm) = (median_bytes(&amd64), median_bytes(&arm64));
    eprintln!(
        "Debian Redis 7.0.15, 100,000 x 100 B: x86_64 {x86:.2} B/key, aarch64 {arm:.2} B/key"
    );
    // Same release, same Debian jemalloc: the same figure (about 200 B/key; a different size
    // class for either would move it by 8 B or more, 4%).
    assert!(
        (arm / x86 - 1.0).abs() < 0.005,
        "arm64 {arm:.2} and x86 {x86:.2} B/key differ"
    );
}

#[test]
fn valkey_9_1_for_arm64_stores_a_sorted_set_member_in_the_same_bytes_as_for_x86() {
    assert!(
        store_has("valkey-9.1.2-upstream-arm64"),
        "{}",
        common::missing_shared_build(
            "valkey-9.1.2-linux-arm64.tar.xz",
            common::shared_tarball_for(EngineKind::Valkey, "9.1.2", "aarch64"),
            "the engine store has no valkey-9.1.2-upstream-arm64",
        )
    );
    let (amd64, arm64) = run_on_both_architectures(
        "upstream-valkey",
        "{engine: valkey, version: \"9.1.2\"}",
        "{sortedSet: {members: 300000, sampleEvery: 0}}",
    );
    assert_eq!(amd64["engine"]["build"], "valkey-9.1.2-upstream");
    assert_eq!(arm64["engine"]["build"], "valkey-9.1.2-upstream-arm64");
    let (x86, arm) = (median_bytes(&amd64), median_bytes(&arm64));
    eprintln!(
        "Valkey 9.1.2, sorted set of 300,000: x86_64 {x86:.3} B/member, aarch64 {arm:.3} B/member"
    );
    // Both with the bundled jemalloc 5.3.0 (the arm64 one configured for 64 KiB pages, as the
    // official arm64 images): the same figure.
    assert!(
        (arm / x86 - 1.0).abs() < 0.005,
        "arm64 {arm:.3} and x86 {x86:.3} B/member differ"
    );
}
