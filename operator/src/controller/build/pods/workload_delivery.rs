//! What a workload's data needs in the client pod beyond its plan.
//!
//! A profile workload's profile from a ConfigMap (`configMapRef`) is mounted from it as a file
//! (a ConfigMap holds up to 1 MiB) and named with `--profile`, beside the digest of the
//! profile the operator checked, which the client compares with what it reads; an inline one
//! travels whole in the environment (`MEMBENCH_PROFILE`), which the operator checked it fits in
//! before anything started.
//!
//! An RDB file's PersistentVolumeClaim is mounted read-only where the plan's path points
//! (`CLAIM_MOUNT_PATH`); the client reads the file there.

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, EnvVar, KeyToPath, PersistentVolumeClaimVolumeSource, Volume,
    VolumeMount,
};

use crate::client::profile_workload::{PROFILE_DIGEST_ENV, PROFILE_ENV, profile_digest};
use crate::client::rdb_load::CLAIM_MOUNT_PATH;
use crate::crd::MemoryBenchmark;

/// The volume that holds an RDB file's claim.
const RDB_VOLUME: &str = "rdb";

/// What the client pod gets to read its workload's data: arguments, environment, a volume.
#[derive(Default)]
pub struct WorkloadDelivery {
    pub args: Vec<String>,
    pub env: Vec<EnvVar>,
    pub volume: Option<Volume>,
    pub mount: Option<VolumeMount>,
}

/// The workload's data's way into the client pod (nothing for a workload without data).
pub fn workload_delivery(benchmark: &MemoryBenchmark) -> WorkloadDelivery {
    let Some(claim) = benchmark.spec.workload.rdb_claim() else {
        return profile_delivery(benchmark);
    };
    WorkloadDelivery {
        volume: Some(Volume {
            name: RDB_VOLUME.into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.claim_name.clone(),
                read_only: Some(true),
            }),
            ..Default::default()
        }),
        mount: Some(VolumeMount {
            name: RDB_VOLUME.into(),
            mount_path: CLAIM_MOUNT_PATH.into(),
            read_only: Some(true),
            ..Default::default()
        }),
        ..WorkloadDelivery::default()
    }
}

/// The volume that holds a ConfigMap's profile.
const PROFILE_VOLUME: &str = "profile";
/// Where the client container finds it.
const PROFILE_MOUNT_PATH: &str = "/etc/membench/profile";
/// The file the profile's key becomes.
const PROFILE_FILE: &str = "profile";

/// The profile's way into the client pod (nothing for another workload).
fn profile_delivery(benchmark: &MemoryBenchmark) -> WorkloadDelivery {
    let Some(spec) = benchmark.spec.workload.profile.as_ref() else {
        return WorkloadDelivery::default();
    };
    let Ok(profile) = spec.profile() else {
        return WorkloadDelivery::default();
    };
    let Some(reference) = &spec.config_map_ref else {
        return WorkloadDelivery {
            env: vec![EnvVar {
                name: PROFILE_ENV.into(),
                value: Some(serde_json::to_string(&profile).expect("a profile always serializes")),
                ..Default::default()
            }],
            ..WorkloadDelivery::default()
        };
    };
    WorkloadDelivery {
        args: vec![
            "--profile".into(),
            format!("{PROFILE_MOUNT_PATH}/{PROFILE_FILE}"),
        ],
        env: vec![EnvVar {
            name: PROFILE_DIGEST_ENV.into(),
            value: Some(profile_digest(&profile)),
            ..Default::default()
        }],
        volume: Some(Volume {
            name: PROFILE_VOLUME.into(),
            config_map: Some(ConfigMapVolumeSource {
                name: reference.name.clone(),
                items: Some(vec![KeyToPath {
                    key: reference.key.clone(),
                    path: PROFILE_FILE.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        mount: Some(VolumeMount {
            name: PROFILE_VOLUME.into(),
            mount_path: PROFILE_MOUNT_PATH.into(),
            read_only: Some(true),
            ..Default::default()
        }),
    }
}
