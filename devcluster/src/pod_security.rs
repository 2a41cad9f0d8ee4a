//! The Pod Security Standard `restricted`, which every namespace of the tests enforces (as a
//! platform team's cluster would): the label that asks the API server's PodSecurity admission to
//! enforce it, and security contexts that meet it, for tests that build pods of their own.

use k8s_openapi::api::core::v1::{
    Capabilities, Pod, PodSecurityContext, SeccompProfile, SecurityContext,
};

/// The namespace label the PodSecurity admission plugin enforces.
pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
/// The most demanding standard: non-root, no privilege escalation, no capabilities, a seccomp
/// profile, only ephemeral and API-backed volume types.
pub const RESTRICTED: &str = "restricted";

/// A pod-level context meeting `restricted`: non-root as `uid` (its group too), seccomp
/// `RuntimeDefault`.
pub fn restricted_pod_security_context(uid: i64) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(uid),
        run_as_group: Some(uid),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

/// A container-level context meeting `restricted`: no privilege escalation, every capability
/// dropped.
pub fn restricted_container_security_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    }
}

/// Gives `pod` and each of its containers the restricted contexts above (running as `uid`),
/// except where it already has one of its own.
pub fn make_restricted(pod: &mut Pod, uid: i64) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    spec.security_context
        .get_or_insert_with(|| restricted_pod_security_context(uid));
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for container in containers {
        container
            .security_context
            .get_or_insert_with(restricted_container_security_context);
    }
}
