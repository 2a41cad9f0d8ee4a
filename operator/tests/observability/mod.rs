//! Shared by the metrics, dashboard and chart tests: finding real tools, a minimal HTTP GET,
//! and MemoryBenchmarks whose statuses have the shape the operator writes.
#![allow(dead_code)]

pub mod prometheus;

use std::path::{Path, PathBuf};

use membench::crd::MemoryBenchmark;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Fails a test whose tool is missing, naming it and how to get it: on every machine, not only
/// under CI, since a test that checks nothing must never pass (`hack/test.sh` installs every
/// tool these tests need).
pub fn missing(why: &str) -> ! {
    panic!("this test needs what is missing: {why}");
}

/// Creates the MemoryBenchmark `yaml` describes and waits until it has finished (Succeeded or
/// Failed), returning it; an error with its status when `timeout` passes first.
pub async fn run_until_finished(
    benchmarks: &kube::Api<MemoryBenchmark>,
    yaml: &str,
    timeout: std::time::Duration,
) -> anyhow::Result<MemoryBenchmark> {
    use membench::crd::Phase;
    let benchmark: MemoryBenchmark = serde_saphyr::from_str(yaml)?;
    let name = benchmark.metadata.name.clone().unwrap_or_default();
    benchmarks
        .create(&kube::api::PostParams::default(), &benchmark)
        .await?;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let benchmark = benchmarks.get(&name).await?;
        let phase = benchmark.status.as_ref().and_then(|s| s.phase.clone());
        if matches!(phase, Some(Phase::Succeeded | Phase::Failed)) {
            return Ok(benchmark);
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "{name} did not finish in {timeout:?}: {:#?}",
            benchmark.status
        );
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// The workload label of the finished fixture: records stored as four string keys each, so
/// that its items/s (records) are a quarter of its commands/s (SETs) and a panel that shows
/// one for the other reads wrong.
pub const FINISHED_WORKLOAD: &str = "records 1000 x 4 fields as strings";

/// Commands sent per item in the fixtures: four SETs per record, and for the running strings
/// benchmark (random keys, some repeated) a little over one.
pub const FINISHED_COMMANDS_PER_ITEM: f64 = 4.0;
const RUNNING_COMMANDS_PER_ITEM: f64 = 1.25;

/// A tool from `$env_var`, else from PATH, else from one of `fallbacks`.
pub fn find_binary(env_var: &str, name: &str, fallbacks: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env_var) {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "{env_var}={} is not a file", path.display());
        return Some(path);
    }
    let on_path = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(fallbacks.iter().map(PathBuf::from))
        .find(|path| path.is_file())
}

/// The helm that `hack/build-tools.sh helm` builds (`MEMBENCH_HELM` overrides it), else one on
/// PATH.
pub fn helm() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MEMBENCH_HELM") {
        return Some(PathBuf::from(path));
    }
    let root = repo_root();
    let versions = std::fs::read_to_string(root.join("hack/tool-versions.env")).unwrap();
    let version = versions
        .lines()
        .find_map(|line| line.strip_prefix("HELM_VERSION="))
        .expect("HELM_VERSION in hack/tool-versions.env");
    let bin_dir = std::process::Command::new(root.join("hack/build-tools.sh"))
        .arg("--print-bin-dir")
        .output()
        .expect("hack/build-tools.sh runs");
    let bin_dir = String::from_utf8(bin_dir.stdout).unwrap();
    let built = PathBuf::from(bin_dir.trim()).join(format!("helm-{version}/helm"));
    if built.is_file() {
        return Some(built);
    }
    find_binary("MEMBENCH_HELM", "helm", &[])
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `GET path` over HTTP/1.0 (so the body is neither chunked nor kept alive): status and body.
/// Bounded by [`HTTP_TIMEOUT`]: a server that accepts and never answers is an error, not a hang.
pub async fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    tokio::time::timeout(HTTP_TIMEOUT, http_get_unbounded(addr, path))
        .await
        .unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("GET http://{addr}{path}: no complete answer in {HTTP_TIMEOUT:?}"),
            ))
        })
}

/// How long one HTTP request of the tests may take.
pub const HTTP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

async fn http_get_unbounded(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("not HTTP: {response}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {head}")))?;
    Ok((status, body.to_string()))
}

/// A repetition that stored `items` at `per_sec` items a second with `commands_per_item`
/// commands each.
fn repetition(
    bytes_per_item: f64,
    items: u64,
    per_sec: f64,
    commands_per_item: f64,
) -> serde_json::Value {
    let baseline = 900_000u64;
    let used = baseline + (bytes_per_item * items as f64) as u64;
    json!({
        "baselineUsedMemory": baseline,
        "usedMemory": used,
        "usedMemoryRss": used * 13 / 10,
        "usedMemoryDataset": used - baseline / 2,
        "memFragmentationRatio": 1.3,
        "items": items,
        "bytesPerItem": bytes_per_item,
        "commandsPerSec": per_sec * commands_per_item,
        "itemsPerSec": per_sec,
        "seconds": items as f64 / per_sec,
    })
}

fn engine(
    name: &str,
    engine: &str,
    version: &str,
    (instance_type, arch): (&str, &str),
    bytes_per_item: [f64; 3],
    per_sec: [f64; 3],
    (items, commands_per_item): (u64, f64),
) -> serde_json::Value {
    let commands = |i: usize| per_sec[i] * commands_per_item;
    json!({
        "name": name,
        "engine": engine,
        "requestedVersion": version,
        "state": "Succeeded",
        "version": version,
        "allocator": if engine == "dragonfly" { "mimalloc" } else { "jemalloc-5.3.0" },
        "arch": arch,
        "nodeName": format!("{instance_type}-a"),
        "instanceType": instance_type,
        "image": format!("{engine}:{version}"),
        "imageId": format!("docker.io/library/{engine}@sha256:0123"),
        "repetitions": (0..3).map(|i| repetition(bytes_per_item[i], items, per_sec[i], commands_per_item)).collect::<Vec<_>>(),
        "summary": {
            "items": items,
            "usedMemory": 900_000 + (bytes_per_item[0] * items as f64) as u64,
            "bytesPerItem": {"median": bytes_per_item[0], "min": bytes_per_item[1], "max": bytes_per_item[2], "cv": 0.004},
            "commandsPerSec": {"median": commands(0), "min": commands(1), "max": commands(2), "cv": 0.05},
            "itemsPerSec": {"median": per_sec[0], "min": per_sec[1], "max": per_sec[2], "cv": 0.05},
            "unstable": false,
        },
    })
}

/// Two benchmarks as the operator leaves them: a finished comparison of Redis 7.0 and Valkey
/// 9.1 on Graviton4 (records as string keys), and a random-strings run across three engines on
/// x86 still running. Neither stores one item per command, so items/s and commands/s differ.
pub fn fixture_benchmarks() -> Vec<MemoryBenchmark> {
    let mut sorted_set = json!({
        "apiVersion": "membench.io/v1alpha1",
        "kind": "MemoryBenchmark",
        "metadata": {"name": "records-r8g", "namespace": "membench"},
        "spec": {
            "instanceType": "r8g.4xlarge",
            "arch": "arm64",
            "engines": [{"engine": "redis", "version": "7.0.15"}, {"engine": "valkey", "version": "9.1.2"}],
            "workload": {"records": {"records": 1000, "layout": "strings"}},
            "repetitions": 3,
        },
        "status": {
            "phase": "Succeeded",
            "workload": FINISHED_WORKLOAD,
            "engines": [
                engine("redis-7.0.15", "redis", "7.0.15", ("r8g.4xlarge", "arm64"),
                       [112.3, 112.1, 112.6], [410_000.0, 395_000.0, 420_000.0], (1000, FINISHED_COMMANDS_PER_ITEM)),
                engine("valkey-9.1.2", "valkey", "9.1.2", ("r8g.4xlarge", "arm64"),
                       [70.1, 70.0, 70.4], [450_000.0, 440_000.0, 462_000.0], (1000, FINISHED_COMMANDS_PER_ITEM)),
            ],
            // What status.capacity holds for spec.capacity (items 50,000,000).
            "capacity": {
                "items": 50_000_000u64,
                "instanceFamilies": ["r8g"],
                "smallestInstanceType": "r8g.large",
                "engines": [
                    {"name": "redis-7.0.15", "projectedUsedMemory": 5_620_000_000u64,
                     "projectedUsedMemoryLow": 5_560_000_000u64, "projectedUsedMemoryHigh": 5_680_000_000u64,
                     "projectedRss": 5_900_000_000u64, "requiredNodeMemory": 8_700_000_000u64,
                     "smallestInstanceType": "r8g.xlarge", "fillPercent": 25.3, "growthRule": "power-of-two-dict",
                     "recommended": {"maxmemoryBytes": 5_620_367_360u64, "memoryLimitBytes": 9_663_676_416u64,
                                     "memoryRequestBytes": 5_905_580_032u64, "reservePercent": 41.84,
                                     "terms": [{"name": "empty_rss", "bytes": 7_500_000u64, "source": "measured"},
                                               {"name": "data_rss", "bytes": 5_898_080_032u64, "source": "measured"},
                                               {"name": "copy_on_write", "bytes": 3_758_096_384u64, "source": "default"}]}},
                    {"name": "valkey-9.1.2", "projectedUsedMemory": 3_510_000_000u64,
                     "projectedUsedMemoryLow": 3_470_000_000u64, "projectedUsedMemoryHigh": 3_550_000_000u64,
                     "projectedRss": 3_690_000_000u64, "requiredNodeMemory": 5_600_000_000u64,
                     "smallestInstanceType": "r8g.large", "fillPercent": 32.6, "growthRule": "bucketed-hashtable",
                     "recommended": {"maxmemoryBytes": 3_510_632_448u64, "memoryLimitBytes": 6_442_450_944u64,
                                     "memoryRequestBytes": 3_697_000_000u64, "reservePercent": 45.51,
                                     "terms": [{"name": "empty_rss", "bytes": 7_000_000u64, "source": "measured"},
                                               {"name": "data_rss", "bytes": 3_690_000_000u64, "source": "measured"},
                                               {"name": "copy_on_write", "bytes": 2_745_450_944u64, "source": "default"}]}},
                ],
            },
        },
    });
    // Valkey's repetitions as a spec.churn with defrag and a spec.eviction leave them.
    for repetition in sorted_set["status"]["engines"][1]["repetitions"]
        .as_array_mut()
        .unwrap()
    {
        repetition["churn"] = json!({
            "rounds": [
                {"round": 1, "deleted": 500, "overwritten": 120, "usedMemory": 600_000u64,
                 "usedMemoryRss": 9_800_000u64, "allocatorFragRatio": 1.8, "items": 500, "seconds": 0.01},
            ],
            "defrag": {"switched": "activedefrag", "rssBefore": 9_800_000u64, "rssAfter": 8_100_000u64,
                       "usedMemoryBefore": 600_000u64, "usedMemoryAfter": 600_000u64,
                       "seconds": 4.5, "windowSeconds": 9.5, "cpuSeconds": 0.4,
                       "writeLatencyMs": {"writes": 190, "p50": 0.3, "p99": 1.1, "max": 2.0}},
        });
        repetition["peak"] = json!({"snapshot": {
            "source": "process-tree", "beforeBytes": 9_000_000u64, "peakBytes": 13_950_000u64,
            "ratio": 1.55, "cowBytes": 4_700_000u64, "usedMemoryBefore": 600_000u64,
            "durationSeconds": 0.4, "writesPerSec": 1000.0, "writesPerSecAsked": 1000,
            "writeLatencyMs": {"p50": 0.2, "p99": 0.9, "max": 3.0},
        }, "replica": {
            "source": "process-tree", "beforeBytes": 9_000_000u64, "peakBytes": 10_170_000u64,
            "ratio": 1.13, "cowBytes": 1_100_000u64, "usedMemoryBefore": 600_000u64,
            "durationSeconds": 5.6, "writesPerSec": 1000.0, "writesPerSecAsked": 1000,
            "writeLatencyMs": {"p50": 0.2, "p99": 0.8, "max": 2.0},
            "backlogBytes": 1_048_576u64, "primaryUsedMemoryAfter": 1_650_000u64,
            "replicaUsedMemory": 620_000u64, "replicaUsedMemoryRss": 8_900_000u64,
            "replicaKeys": 1_000u64,
        }});
        repetition["eviction"] = json!({
            "maxmemory": 16_777_216u64, "policy": "allkeys-lru", "itemsWritten": 300_000u64,
            "peakUsedMemory": 16_777_300u64, "overshootBytes": 84, "usedMemoryRss": 19_000_000u64,
            "evictedKeys": 200_000u64, "keysKept": 100_000u64, "itemsPerSecEvicting": 150_000.0,
        });
    }
    let mut running_dragonfly = engine(
        "dragonfly-1.34.2",
        "dragonfly",
        "1.34.2",
        ("r7i.4xlarge", "amd64"),
        [0.0; 3],
        [0.0; 3],
        (1000, RUNNING_COMMANDS_PER_ITEM),
    );
    running_dragonfly["state"] = json!("Running");
    running_dragonfly["repetitions"] =
        json!([repetition(60.5, 1000, 800_000.0, RUNNING_COMMANDS_PER_ITEM)]);
    running_dragonfly.as_object_mut().unwrap().remove("summary");
    let strings = json!({
        "apiVersion": "membench.io/v1alpha1",
        "kind": "MemoryBenchmark",
        "metadata": {"name": "strings-r7i", "namespace": "team-a"},
        "spec": {
            "instanceType": "r7i.4xlarge",
            "engines": [
                {"engine": "redis", "version": "8.2.1"},
                {"engine": "valkey", "version": "9.1.2"},
                {"engine": "dragonfly", "version": "1.34.2"},
            ],
            "workload": {"randomStrings": {"requests": 1250, "keyspace": 1250, "valueSize": 100}},
            "repetitions": 3,
        },
        "status": {
            "phase": "Running",
            "workload": "random-strings 1250 SETs over 1250 keys, 100-byte values",
            "engines": [
                engine("redis-8.2.1", "redis", "8.2.1", ("r7i.4xlarge", "amd64"),
                       [180.2, 180.0, 181.0], [300_000.0, 290_000.0, 310_000.0], (1000, RUNNING_COMMANDS_PER_ITEM)),
                engine("valkey-9.1.2", "valkey", "9.1.2", ("r7i.4xlarge", "amd64"),
                       [164.0, 163.8, 164.5], [320_000.0, 300_000.0, 330_000.0], (1000, RUNNING_COMMANDS_PER_ITEM)),
                running_dragonfly,
            ],
        },
    });
    [sorted_set, strings]
        .into_iter()
        .map(|value| serde_json::from_value(value).expect("fixtures match the CRD types"))
        .collect()
}
