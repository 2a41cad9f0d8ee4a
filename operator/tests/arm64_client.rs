//! membench built for arm64 (`cargo build --release --target aarch64-unknown-linux-gnu`, which
//! `hack/build-image.sh` runs, so `hack/test.sh` builds it before the tests) and run on this x86
//! machine under qemu-user (`qemu-aarch64-static`, installed with Debian's arm64 libc by
//! `hack/install-cross.sh`).
//!
//! The client's architecture must not change a figure: the engine stores what it is sent, so the
//! arm64 build and the x86 build loading the same workload into the same server must verify the
//! same count and measure the same bytes per item (within the engine's own repetition noise,
//! which is the same for either client). The arm64 build's TLS (ring) is checked against the test
//! cluster's API server (the dev cluster, started through `hack/dev-cluster.sh up`, or
//! `MEMBENCH_TEST_KUBECONFIG`'s).

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use membench::crd::EngineKind;
use membench_devcluster::{DevCluster, EnsureOptions};
use serde_json::Value;

const BUILD_ARM64: &str = "hack/install-cross.sh && cargo build --release --target aarch64-unknown-linux-gnu -p membench --bin membench";

/// `e_machine` of an ELF header for AArch64.
const EM_AARCH64: u16 = 183;

/// The arm64 build in the workspace's target directory (beside the x86 build this test runs).
fn arm64_membench() -> PathBuf {
    let x86 = PathBuf::from(env!("CARGO_BIN_EXE_membench"));
    // target/<profile>/membench -> target/aarch64-unknown-linux-gnu/release/membench
    let target_dir = x86.parent().and_then(|p| p.parent()).unwrap();
    let arm64 = target_dir.join("aarch64-unknown-linux-gnu/release/membench");
    assert!(
        arm64.is_file(),
        "no arm64 build at {}: run `{BUILD_ARM64}`",
        arm64.display()
    );
    arm64
}

fn qemu_aarch64() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("qemu-aarch64-static"))
                .find(|candidate| candidate.is_file())
        })
        .unwrap_or_else(|| {
            panic!("qemu-aarch64-static is not on PATH: run hack/install-cross.sh (Debian's qemu-user-static)")
        })
}

fn elf_machine(path: &PathBuf) -> u16 {
    let header = std::fs::read(path).unwrap();
    assert_eq!(
        &header[..4],
        b"\x7fELF",
        "{} is not an ELF file",
        path.display()
    );
    u16::from_le_bytes([header[18], header[19]])
}

fn x86_membench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(args)
        .output()
        .expect("the x86 membench runs")
}

/// The arm64 build run by qemu-user; its loader and libraries are Debian's arm64 ones at their
/// usual paths (multiarch), so qemu needs no -L.
fn arm64_membench_under_qemu(args: &[&str]) -> Output {
    Command::new(qemu_aarch64())
        .arg(arm64_membench())
        .args(args)
        .output()
        .expect("qemu-aarch64-static runs")
}

fn succeeded(output: &Output, which: &str) -> String {
    assert!(
        output.status.success(),
        "{which} membench failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn arm64_build_prints_the_same_version_as_the_x86_build_under_qemu() {
    let arm64 = arm64_membench();
    assert_eq!(
        elf_machine(&arm64),
        EM_AARCH64,
        "{} is not an arm64 program",
        arm64.display()
    );
    let arm64_version = succeeded(&arm64_membench_under_qemu(&["--version"]), "arm64");
    let x86_version = succeeded(&x86_membench(&["--version"]), "x86");
    assert_eq!(
        arm64_version,
        format!("membench {}\n", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(arm64_version, x86_version);
}

/// `membench load ... --output json` by both builds, one after the other, against one server.
fn load_with_both_builds(args: &[&str]) -> (Value, Value) {
    let redis = common::start(EngineKind::Redis, &[]);
    let addr = redis.address.socket_addr();
    let mut full = vec!["load", "--addr", &addr];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--output", "json"]);
    let x86: Value =
        serde_json::from_str(&succeeded(&x86_membench(&full), "x86")).expect("x86 prints JSON");
    let arm64: Value = serde_json::from_str(&succeeded(&arm64_membench_under_qemu(&full), "arm64"))
        .expect("arm64 prints JSON");
    (x86, arm64)
}

/// Items per load: large enough that the engine's own run-to-run noise is a small fraction of
/// a byte per item (below), small enough that the emulated client takes a second or two.
const ITEMS: u64 = 100_000;
const REPETITIONS: &str = "5";

/// How far the two clients' median bytes per item may lie apart. The engine's baseline
/// used_memory moves by up to about 25 KB between repetitions of one client against one server
/// (buffers and table resizes: 1,037,976 to 1,064,640 bytes in one run here), so single
/// repetitions differ by up to 0.8 B/item at 100,000 items even with the same client; medians
/// of five agreed within 0.03 B/item. A client that sent other keys or values would move the
/// figure by at least one allocator size class (8 or 16 bytes) per item.
const MEDIAN_MARGIN_BYTES_PER_ITEM: f64 = 0.5;

/// The same verified count in every repetition of both clients, and the same median bytes per
/// item within the engine's own noise; plus a check that the figures are real rather than two
/// equal absences.
fn assert_same_figures(x86: &Value, arm64: &Value, bytes_per_item_at_least: f64) {
    for report in [x86, arm64] {
        assert!(report["error"].is_null(), "a load failed: {report}");
    }
    assert_eq!(x86["engine"], arm64["engine"], "not the same server");
    let verified = |report: &Value| -> Vec<u64> {
        report["repetitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["items"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(verified(x86), vec![ITEMS; 5], "x86 verified counts");
    assert_eq!(verified(arm64), vec![ITEMS; 5], "arm64 verified counts");
    assert_eq!(x86["summary"]["items"], arm64["summary"]["items"]);

    let median = |report: &Value| {
        report["summary"]["bytes_per_item"]["median"]
            .as_f64()
            .unwrap()
    };
    let (x86_median, arm64_median) = (median(x86), median(arm64));
    assert!(
        x86_median >= bytes_per_item_at_least,
        "{x86_median} B/item is not a real figure"
    );
    assert!(
        (x86_median - arm64_median).abs() <= MEDIAN_MARGIN_BYTES_PER_ITEM,
        "median bytes per item: x86 client {x86_median}, arm64 client {arm64_median}: the client's architecture changed the figure"
    );
}

#[test]
fn arm64_and_x86_clients_measure_the_same_bytes_per_key_for_strings() {
    let keys = ITEMS.to_string();
    let (x86, arm64) = load_with_both_builds(&[
        "--workload",
        "strings",
        "--keys",
        &keys,
        "--value-size",
        "100",
        "--repetitions",
        REPETITIONS,
    ]);
    // A 100-byte value alone takes more than 100 bytes in the engine.
    assert_same_figures(&x86, &arm64, 100.0);
}

#[test]
fn arm64_and_x86_clients_measure_the_same_bytes_per_member_for_a_sorted_set() {
    let members = ITEMS.to_string();
    let (x86, arm64) = load_with_both_builds(&[
        "--workload",
        "sorted-set",
        "--members",
        &members,
        "--pipeline",
        "100",
        "--repetitions",
        REPETITIONS,
    ]);
    // A skiplist node plus a dict entry per member: well above 50 bytes in any encoding.
    assert_same_figures(&x86, &arm64, 50.0);
}

/// The arm64 build's TLS, through the ring crypto provider whose C and armv8 assembly were
/// cross-compiled: `membench report` reaches the test cluster's API server over HTTPS,
/// verifying its certificate, and reads the same (empty) list of benchmarks as the x86 build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arm64_build_reaches_the_api_server_over_tls_under_qemu() {
    let kubeconfig = DevCluster::kubeconfig_with(&EnsureOptions::default())
        .await
        .expect("the test cluster is up");
    // A namespace nobody creates: the list is empty on any cluster, and the same for both.
    let args = [
        "report",
        "--namespace",
        "membench-arm64-tls-check",
        "--output",
        "json",
    ];
    let x86 = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(args)
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    let arm64 = Command::new(qemu_aarch64())
        .arg(arm64_membench())
        .args(args)
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    let x86_list: Value = serde_json::from_str(&succeeded(&x86, "x86")).unwrap();
    let arm64_list: Value = serde_json::from_str(&succeeded(&arm64, "arm64")).unwrap();
    assert_eq!(x86_list, serde_json::json!([]));
    assert_eq!(arm64_list, x86_list);
}
