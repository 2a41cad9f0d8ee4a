//! What a workload's data needs in the client pod beyond its plan.
//!
//! A profile workload's profile from a ConfigMap (`configMapRef`) is mounted from it as a file
//! (a ConfigMap holds up to 1 MiB) and named with `--profile`, beside the digest of the
//! profile the operator checked, which the client compares with what it reads; an inline one
//! travels whole in the environment (`MEMBENCH_PROFILE`), which the operator checked it fits in
//! before anything started.
//!
//! An RDB file's PersistentVolumeClaim is mounted read-only where the plan's path points
//! (`CLAIM_MOUNT_PATH`); the client reads the file there. An RDB file at a URL is fetched by
//! the client into an emptyDir that is its `TMPDIR` (`DOWNLOAD_MOUNT_PATH`: the image's root is
//! read-only), with the credentials of `credentialsSecret` mounted read-only where the plan
//! says (`CREDENTIALS_MOUNT_PATH`).

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, EmptyDirVolumeSource, EnvVar, KeyToPath,
    PersistentVolumeClaimVolumeSource, SecretVolumeSource, Volume, VolumeMount,
};

use crate::client::workloads::profile_workload::{PROFILE_DIGEST_ENV, PROFILE_ENV, profile_digest};
use crate::client::workloads::rdb_load::CLAIM_MOUNT_PATH;
use crate::client::workloads::rdb_load::download::{CREDENTIALS_MOUNT_PATH, DOWNLOAD_MOUNT_PATH};
use crate::crd::MemoryBenchmark;

/// The volume that holds an RDB file's claim.
const RDB_VOLUME: &str = "rdb";

/// The volume a URL's file is fetched into, and the one of its credentials.
const DOWNLOAD_VOLUME: &str = "rdb-download";
const CREDENTIALS_VOLUME: &str = "rdb-credentials";

/// What the client pod gets to read its workload's data: arguments, environment, volumes.
#[derive(Default)]
pub struct WorkloadDelivery {
    pub args: Vec<String>,
    pub env: Vec<EnvVar>,
    pub volumes: Vec<Volume>,
    pub mounts: Vec<VolumeMount>,
}

impl WorkloadDelivery {
    /// Adds `volume`, mounted at `path` (read-only unless `writable`).
    fn mount(&mut self, volume: Volume, path: &str, writable: bool) {
        self.mounts.push(VolumeMount {
            name: volume.name.clone(),
            mount_path: path.into(),
            read_only: Some(!writable),
            ..Default::default()
        });
        self.volumes.push(volume);
    }
}

/// The workload's data's way into the client pod (nothing for a workload without data).
pub fn workload_delivery(benchmark: &MemoryBenchmark) -> WorkloadDelivery {
    let Some(rdb) = &benchmark.spec.workload.rdb else {
        return profile_delivery(benchmark);
    };
    let mut delivery = WorkloadDelivery::default();
    if let Some(claim) = &rdb.persistent_volume_claim {
        let volume = Volume {
            name: RDB_VOLUME.into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.claim_name.clone(),
                read_only: Some(true),
            }),
            ..Default::default()
        };
        delivery.mount(volume, CLAIM_MOUNT_PATH, false);
    }
    if rdb.url.is_some() {
        let volume = Volume {
            name: DOWNLOAD_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        };
        delivery.mount(volume, DOWNLOAD_MOUNT_PATH, true);
        delivery.env.push(EnvVar {
            name: "TMPDIR".into(),
            value: Some(DOWNLOAD_MOUNT_PATH.into()),
            ..Default::default()
        });
    }
    if let Some(secret) = &rdb.credentials_secret {
        let volume = Volume {
            name: CREDENTIALS_VOLUME.into(),
            // Optional: a missing Secret mounts as an empty directory, and the client then
            // says the server wants credentials the Secret does not give, instead of the pod
            // waiting in ContainerCreating.
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.name.clone()),
                optional: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        delivery.mount(volume, CREDENTIALS_MOUNT_PATH, false);
    }
    delivery
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
        volumes: vec![Volume {
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
        }],
        mounts: vec![VolumeMount {
            name: PROFILE_VOLUME.into(),
            mount_path: PROFILE_MOUNT_PATH.into(),
            read_only: Some(true),
            ..Default::default()
        }],
    }
}
