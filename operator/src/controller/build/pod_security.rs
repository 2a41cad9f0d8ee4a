//! What the Pod Security Standard `restricted` asks of the benchmark's pods, so that they are
//! admitted in a namespace that enforces it (as the chart's own namespace does, and as a
//! platform team's clusters often do): non-root users, no privilege escalation, no
//! capabilities, seccomp `RuntimeDefault`, and a read-only root filesystem.
//!
//! The engines run as the official images' own user, `redis`/`valkey`/`dfly`, uid 999 (the
//! redis and valkey images create it with `useradd -r -u 999` on Debian, gid 999, and with
//! `adduser -u 999` into a group 1000 on Alpine; Dragonfly's image runs `USER dfly`, 999:999).
//! Their data directory, the images' `WORKDIR /data`, is an emptyDir, the only place an engine
//! may write with its root filesystem read-only. The client runs as the membench image's
//! distroless `nonroot` user, 65532.

use k8s_openapi::api::core::v1::{
    Capabilities, EmptyDirVolumeSource, PodSecurityContext, SeccompProfile, SecurityContext,
    Volume, VolumeMount,
};

use crate::crd::{EngineKind, EngineSpec};

/// The engine images' user.
pub const ENGINE_UID: i64 = 999;
/// The membench image's user (distroless `nonroot`).
pub const CLIENT_UID: i64 = 65532;
/// The engine images' data directory (their `WORKDIR`).
pub const ENGINE_DATA_DIR: &str = "/data";
/// The name of the engine pod's emptyDir volume mounted there.
pub const ENGINE_DATA_VOLUME: &str = "data";

/// The group of the engine image's user: 999, or 1000 in the Alpine variants of the redis and
/// valkey images.
pub fn engine_gid(engine: &EngineSpec) -> i64 {
    let image = engine.image();
    let tag = image.rsplit_once(':').map(|(_, tag)| tag).unwrap_or("");
    let alpine = tag.contains("alpine") && !tag.contains('/');
    match engine.engine {
        EngineKind::Redis | EngineKind::Valkey if alpine => 1000,
        _ => ENGINE_UID,
    }
}

fn restricted_pod(uid: i64, gid: i64) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(uid),
        run_as_group: Some(gid),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The container context both pods share: nothing to escalate to, no capabilities, nothing
/// written outside a volume.
pub fn restricted_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The engine pod's context: the image's own non-root user.
pub fn engine_pod_security_context(engine: &EngineSpec) -> PodSecurityContext {
    restricted_pod(ENGINE_UID, engine_gid(engine))
}

/// The client pod's context: the membench image's non-root user.
pub fn client_pod_security_context() -> PodSecurityContext {
    restricted_pod(CLIENT_UID, CLIENT_UID)
}

/// The engine's data directory: an emptyDir, since the root filesystem is read-only.
/// With `size_limit` (a spec with `peak.snapshot`: the snapshot lands there), the kubelet
/// evicts the pod once the directory holds more, which ends the engine as its pod lost.
pub fn engine_data_volume(size_limit: Option<u64>) -> Volume {
    Volume {
        name: ENGINE_DATA_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: size_limit.map(|bytes| {
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(bytes.to_string())
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Where the engine container mounts [`engine_data_volume`].
pub fn engine_data_mount() -> VolumeMount {
    VolumeMount {
        name: ENGINE_DATA_VOLUME.into(),
        mount_path: ENGINE_DATA_DIR.into(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::build::pods::{PodSettings, client_pod, engine_pod};
    use crate::crd::MemoryBenchmark;
    use crate::validation::spec_file::parse_specs;
    use k8s_openapi::api::core::v1::Pod;

    fn benchmark(engines: &str) -> MemoryBenchmark {
        let mut b = parse_specs(&format!(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: zset, namespace: bench}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: {engines}\n  workload: {{sortedSet: {{members: 1000}}}}\n"
        ))
        .unwrap()
        .remove(0);
        b.metadata.uid = Some("uid-1".into());
        b
    }

    const THREE_ENGINES: &str = r#"[{engine: redis, version: "7.0.15"}, {engine: valkey, version: "9.1.2"}, {engine: dragonfly, version: "1.34.2"}]"#;

    /// What the PodSecurity admission plugin's `restricted` level refuses in a pod (the
    /// checks of the Pod Security Standards that a pod spec can fail), worded as it words them.
    fn restricted_violations(pod: &Pod) -> Vec<String> {
        let spec = pod.spec.clone().unwrap();
        let pod_context = spec.security_context.clone().unwrap_or_default();
        let mut violations = Vec::new();
        for (name, set) in [
            ("hostNetwork", spec.host_network),
            ("hostPID", spec.host_pid),
            ("hostIPC", spec.host_ipc),
        ] {
            if set == Some(true) {
                violations.push(format!("host namespaces ({name}=true)"));
            }
        }
        let allowed_volumes = |v: &Volume| {
            v.config_map.is_some()
                || v.csi.is_some()
                || v.downward_api.is_some()
                || v.empty_dir.is_some()
                || v.ephemeral.is_some()
                || v.persistent_volume_claim.is_some()
                || v.projected.is_some()
                || v.secret.is_some()
        };
        for volume in spec.volumes.iter().flatten() {
            if !allowed_volumes(volume) {
                violations.push(format!("restricted volume types ({})", volume.name));
            }
        }
        if pod_context.run_as_user == Some(0) {
            violations.push("runAsUser=0".into());
        }
        let containers = spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten());
        for container in containers {
            let context = container.security_context.clone().unwrap_or_default();
            let name = &container.name;
            if context.privileged == Some(true) {
                violations.push(format!("privileged ({name})"));
            }
            if context.allow_privilege_escalation != Some(false) {
                violations.push(format!("allowPrivilegeEscalation != false ({name})"));
            }
            let capabilities = context.capabilities.clone().unwrap_or_default();
            if !capabilities
                .drop
                .unwrap_or_default()
                .iter()
                .any(|c| c == "ALL")
            {
                violations.push(format!("unrestricted capabilities ({name}: drop ALL)"));
            }
            if capabilities
                .add
                .unwrap_or_default()
                .iter()
                .any(|c| c != "NET_BIND_SERVICE")
            {
                violations.push(format!("unrestricted capabilities ({name}: add)"));
            }
            if context.run_as_non_root.or(pod_context.run_as_non_root) != Some(true) {
                violations.push(format!("runAsNonRoot != true ({name})"));
            }
            if context.run_as_user == Some(0) {
                violations.push(format!("runAsUser=0 ({name})"));
            }
            let seccomp = context
                .seccomp_profile
                .clone()
                .or(pod_context.seccomp_profile.clone())
                .map(|p| p.type_);
            if !matches!(seccomp.as_deref(), Some("RuntimeDefault" | "Localhost")) {
                violations.push(format!("seccompProfile ({name})"));
            }
            if container
                .ports
                .iter()
                .flatten()
                .any(|p| p.host_port.is_some_and(|h| h != 0))
            {
                violations.push(format!("hostPort ({name})"));
            }
        }
        violations
    }

    #[test]
    fn every_engine_pod_meets_pod_security_restricted() {
        let b = benchmark(THREE_ENGINES);
        for index in 0..3 {
            let pod = engine_pod(&b, index, 1 << 30, None, &PodSettings::default());
            assert_eq!(restricted_violations(&pod), Vec::<String>::new(), "{index}");
        }
    }

    #[test]
    fn the_client_pod_meets_pod_security_restricted() {
        let b = benchmark(THREE_ENGINES);
        let plans = crate::validation::validate(&b).unwrap().plans;
        let pod = client_pod(&b, 0, 1, &plans, "10.0.0.7", &PodSettings::default());
        assert_eq!(restricted_violations(&pod), Vec::<String>::new());
        let context = pod.spec.unwrap().security_context.unwrap();
        assert_eq!(
            (context.run_as_user, context.run_as_group),
            (Some(65532), Some(65532))
        );
    }

    #[test]
    fn the_restricted_check_refuses_a_pod_without_security_contexts() {
        // The check above is not vacuous: a bare pod fails it on every count.
        let b = benchmark(THREE_ENGINES);
        let mut pod = engine_pod(&b, 0, 1 << 30, None, &PodSettings::default());
        let spec = pod.spec.as_mut().unwrap();
        spec.security_context = None;
        spec.containers[0].security_context = None;
        let violations = restricted_violations(&pod);
        assert_eq!(violations.len(), 4, "{violations:?}");
    }

    #[test]
    fn engines_run_as_their_official_images_user() {
        let b = benchmark(
            r#"[{engine: redis, version: "7.0.15"}, {engine: valkey, version: "9.1.2", image: "valkey/valkey:9.1.2-alpine"}, {engine: dragonfly, version: "1.34.2"}]"#,
        );
        let ids: Vec<(Option<i64>, Option<i64>)> = (0..3)
            .map(|index| {
                let pod = engine_pod(&b, index, 1 << 30, None, &PodSettings::default());
                let context = pod.spec.unwrap().security_context.unwrap();
                (context.run_as_user, context.run_as_group)
            })
            .collect();
        assert_eq!(
            ids,
            [
                (Some(999), Some(999)),
                (Some(999), Some(1000)),
                (Some(999), Some(999))
            ]
        );
    }

    #[test]
    fn the_engine_writes_only_to_an_empty_dir_at_its_data_directory() {
        let b = benchmark(THREE_ENGINES);
        let spec = engine_pod(&b, 0, 1 << 30, None, &PodSettings::default())
            .spec
            .unwrap();
        let container = &spec.containers[0];
        let context = container.security_context.clone().unwrap();
        assert_eq!(context.read_only_root_filesystem, Some(true));
        assert_eq!(container.working_dir.as_deref(), Some("/data"));
        let mounts = container.volume_mounts.clone().unwrap();
        assert_eq!(mounts.len(), 1);
        assert_eq!(mounts[0].mount_path, "/data");
        assert_ne!(mounts[0].read_only, Some(true));
        let volumes = spec.volumes.unwrap();
        let data = volumes.iter().find(|v| v.name == mounts[0].name).unwrap();
        assert!(data.empty_dir.is_some(), "{data:?}");
    }
}
