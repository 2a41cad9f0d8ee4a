//! The series of a replica's full sync (`spec.peak.replica`) from the status.

use super::Metrics;
use super::tests::{benchmark, engine_status, sample};
use crate::crd::{PeakStatus, Phase, ReplicaStatus, SnapshotStatus};

#[test]
fn a_replicas_sync_in_status_becomes_the_replica_series() {
    let metrics = Metrics::new();
    let synced = |cow: u64, used: u64| PeakStatus {
        snapshot: None,
        replica: Some(ReplicaStatus {
            // A client pod sees the engine's own figures only: no process-tree ratio.
            primary: SnapshotStatus {
                source: "engine-only".into(),
                cow_bytes: Some(cow),
                ..Default::default()
            },
            replica_used_memory: used,
            replica_keys: 20_000,
            ..Default::default()
        }),
    };
    let mut valkey = engine_status("valkey-9.1.2", "valkey", "9.1.2", [90.0, 89.0, 91.0]);
    for (repetition, (cow, used)) in valkey.repetitions.iter_mut().zip([
        (8_000_000, 3_100_000),
        (11_000_000, 3_300_000),
        (9_000_000, 3_200_000),
    ]) {
        repetition.peak = Some(synced(cow, used));
    }
    let plain = engine_status("redis-7.0.15", "redis", "7.0.15", [120.0, 119.0, 121.0]);
    metrics.observe_benchmark(&benchmark(
        "bench",
        "peak",
        Phase::Succeeded,
        vec![valkey, plain],
    ));
    let text = metrics.encode();
    let valkey = [("entry", "valkey-9.1.2")];
    assert_eq!(
        sample(&text, "membench_replica_used_memory_bytes", &valkey),
        Some(3_200_000.0)
    );
    assert_eq!(
        sample(&text, "membench_replica_sync_cow_bytes", &valkey),
        Some(9_000_000.0)
    );
    assert_eq!(
        sample(&text, "membench_replica_sync_peak_ratio", &valkey),
        None,
        "no ratio where the client could not see the engine's processes"
    );
    for metric in [
        "membench_replica_used_memory_bytes",
        "membench_replica_sync_cow_bytes",
        "membench_replica_sync_peak_ratio",
    ] {
        assert_eq!(sample(&text, metric, &[("entry", "redis-7.0.15")]), None);
    }
}
