//! The peak phases in a line each, for the tables and the HTML page: a snapshot under writes
//! (`describe_snapshot`) and a replica's full sync under writes (`describe_replica`), each the
//! median over the repetitions that measured it.

use crate::crd::{ReplicaStatus, SnapshotStatus};
use crate::table::format_bytes;

/// Each repetition's snapshot (peak / steady, peak bytes, copy-on-write bytes) as the median
/// peak over the steady memory, the median peak and copy-on-write, in a line; `None` without.
pub fn describe_snapshot(snapshots: &[SnapshotStatus]) -> Option<String> {
    if snapshots.is_empty() {
        return None;
    }
    let median = |values: Vec<f64>| crate::stats::Spread::of(&values).map(|s| s.median);
    let bytes = |f: fn(&SnapshotStatus) -> Option<u64>| {
        median(
            snapshots
                .iter()
                .filter_map(|s| f(s).map(|b| b as f64))
                .collect(),
        )
    };
    let ratio = median(snapshots.iter().filter_map(|s| s.ratio).collect());
    let peak = bytes(|s| s.peak_bytes);
    let cow = bytes(|s| s.cow_bytes);
    let mut parts = Vec::new();
    match (ratio, peak) {
        (Some(ratio), Some(peak)) => parts.push(format!("x{ratio:.2} ({})", format_bytes(peak))),
        _ => parts.push("process tree not seen".to_string()),
    }
    if let Some(cow) = cow {
        parts.push(format!("copy-on-write {}", format_bytes(cow)));
    }
    Some(parts.join(", "))
}

/// Each repetition's replica sync as its primary's peak in [`describe_snapshot`]'s words, and
/// the replica's median used_memory once in sync; `None` without.
pub fn describe_replica(syncs: &[ReplicaStatus]) -> Option<String> {
    let primaries: Vec<SnapshotStatus> = syncs.iter().map(|s| s.primary.clone()).collect();
    let primary = describe_snapshot(&primaries)?;
    let held: Vec<f64> = syncs.iter().map(|s| s.replica_used_memory as f64).collect();
    let held = crate::stats::Spread::of(&held).map_or(0.0, |s| s.median);
    Some(format!("{primary}, replica {}", format_bytes(held)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_sync_reads_as_its_primarys_peak_and_the_replicas_memory() {
        let sync = |ratio: f64, held: u64| ReplicaStatus {
            primary: SnapshotStatus {
                source: "process-tree".into(),
                before_bytes: Some(100_000_000),
                peak_bytes: Some((100_000_000.0 * ratio) as u64),
                ratio: Some(ratio),
                cow_bytes: Some(9_000_000),
                ..Default::default()
            },
            replica_used_memory: held,
            ..Default::default()
        };
        let line = describe_replica(&[
            sync(1.1, 60_000_000),
            sync(1.3, 64_000_000),
            sync(1.2, 62_000_000),
        ]);
        let line = line.unwrap();
        assert!(line.starts_with("x1.20 ("), "{line}");
        assert!(line.contains("copy-on-write"), "{line}");
        assert!(
            line.ends_with(&format!("replica {}", format_bytes(62_000_000.0))),
            "{line}"
        );
        assert_eq!(describe_replica(&[]), None);
    }
}
