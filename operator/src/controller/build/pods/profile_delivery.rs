//! How a profile workload's profile reaches the client pod. One from a ConfigMap
//! (`configMapRef`) is mounted from it as a file (a ConfigMap holds up to 1 MiB) and named with
//! `--profile`, beside the digest of the profile the operator checked, which the client
//! compares with what it reads; an inline one travels whole in the environment
//! (`MEMBENCH_PROFILE`), which the operator checked it fits in before anything started.

use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, EnvVar, KeyToPath, Volume, VolumeMount};

use crate::client::profile_workload::{PROFILE_DIGEST_ENV, PROFILE_ENV, profile_digest};
use crate::crd::MemoryBenchmark;

/// The volume that holds a ConfigMap's profile.
const VOLUME: &str = "profile";
/// Where the client container finds it.
const MOUNT_PATH: &str = "/etc/membench/profile";
/// The file the profile's key becomes.
const FILE: &str = "profile";

/// What the client pod gets to read its profile: arguments, environment, a volume.
#[derive(Default)]
pub struct ProfileDelivery {
    pub args: Vec<String>,
    pub env: Vec<EnvVar>,
    pub volume: Option<Volume>,
    pub mount: Option<VolumeMount>,
}

/// The profile's way into the client pod (nothing for another workload).
pub fn profile_delivery(benchmark: &MemoryBenchmark) -> ProfileDelivery {
    let Some(spec) = benchmark.spec.workload.profile.as_ref() else {
        return ProfileDelivery::default();
    };
    let Ok(profile) = spec.profile() else {
        return ProfileDelivery::default();
    };
    let Some(reference) = &spec.config_map_ref else {
        return ProfileDelivery {
            env: vec![EnvVar {
                name: PROFILE_ENV.into(),
                value: Some(serde_json::to_string(&profile).expect("a profile always serializes")),
                ..Default::default()
            }],
            ..ProfileDelivery::default()
        };
    };
    ProfileDelivery {
        args: vec!["--profile".into(), format!("{MOUNT_PATH}/{FILE}")],
        env: vec![EnvVar {
            name: PROFILE_DIGEST_ENV.into(),
            value: Some(profile_digest(&profile)),
            ..Default::default()
        }],
        volume: Some(Volume {
            name: VOLUME.into(),
            config_map: Some(ConfigMapVolumeSource {
                name: reference.name.clone(),
                items: Some(vec![KeyToPath {
                    key: reference.key.clone(),
                    path: FILE.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        mount: Some(VolumeMount {
            name: VOLUME.into(),
            mount_path: MOUNT_PATH.into(),
            read_only: Some(true),
            ..Default::default()
        }),
    }
}
