//! Who a container's process runs as, from the pod's and the container's `securityContext` the
//! way the kubelet and a container runtime decide it: the user and group (the container's
//! setting over the pod's, else the image's own `USER`), the supplementary groups (`fsGroup`,
//! `supplementalGroups`), `runAsNonRoot` checked before the start, `allowPrivilegeEscalation:
//! false` as the no-new-privileges flag, and dropped capabilities. Pure, so the rules are unit
//! tested without a cluster; [`super::process`] applies the result with `setpriv`.
//!
//! The images' users are those of the official images: `redis` and `valkey` start as root (their
//! entrypoint steps down to uid 999 itself, which is not reproduced here), Dragonfly's image
//! runs as its user `dfly` (999:999), the membench image as 65532:65532. An image run from its
//! unpacked archive (the membench image from `hack/build-image.sh`) runs as its config's `User`,
//! resolved in its own /etc/passwd.
//!
//! Seccomp is not applied, but a `Localhost` profile is looked for where a kubelet keeps them
//! ([`seccomp_profiles_dir`]), and a missing one stops the container before it is created, as a
//! runtime refuses it ([`localhost_seccomp_profile`]).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, SecurityContext};

use super::images::{ImageKind, PulledImage};

/// The user and groups a process runs as, and the privileges it gives up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub uid: u32,
    pub gid: u32,
    /// `fsGroup` then `supplementalGroups`, without duplicates.
    pub supplementary_groups: Vec<u32>,
    /// `allowPrivilegeEscalation: false`: the kernel's no_new_privs flag, so no setuid binary
    /// or file capability can raise the process's privileges.
    pub no_new_privileges: bool,
    /// Capabilities removed from the bounding set (lower case without `CAP_`, as `setpriv`
    /// names them); `all` for `drop: [ALL]`.
    pub dropped_capabilities: Vec<String>,
}

impl ProcessIdentity {
    /// The identity of a process started by root with nothing changed.
    pub fn root() -> ProcessIdentity {
        ProcessIdentity {
            uid: 0,
            gid: 0,
            supplementary_groups: Vec::new(),
            no_new_privileges: false,
            dropped_capabilities: Vec::new(),
        }
    }

    /// Whether starting the process needs more than running it as root as it is.
    pub fn changes_anything(&self) -> bool {
        *self != ProcessIdentity::root()
    }

    /// `setpriv` options that make the process this identity (empty when nothing changes).
    pub fn setpriv_args(&self) -> Vec<String> {
        if !self.changes_anything() {
            return Vec::new();
        }
        let mut args = vec![
            format!("--reuid={}", self.uid),
            format!("--regid={}", self.gid),
        ];
        if self.supplementary_groups.is_empty() {
            args.push("--clear-groups".into());
        } else {
            let groups: Vec<String> = self
                .supplementary_groups
                .iter()
                .map(u32::to_string)
                .collect();
            args.push(format!("--groups={}", groups.join(",")));
        }
        if self.no_new_privileges {
            args.push("--no-new-privs".into());
        }
        if !self.dropped_capabilities.is_empty() {
            let dropped: Vec<String> = self
                .dropped_capabilities
                .iter()
                .map(|c| format!("-{c}"))
                .collect();
            // Out of the bounding set, no exec can give it back; out of the inheritable set,
            // no exec of a root process keeps it.
            args.push(format!("--bounding-set={}", dropped.join(",")));
            args.push(format!("--inh-caps={}", dropped.join(",")));
        }
        args
    }
}

/// The user an image's configuration names (`USER` in its Dockerfile).
#[derive(Debug, Clone, PartialEq, Eq)]
enum ImageUser {
    Numeric(u32),
    /// A user name: the runtime resolves it in the image's /etc/passwd, but the kubelet cannot
    /// check it against `runAsNonRoot`.
    Named(String),
}

/// Who an image runs as by default, and the image's /etc/passwd entries (uid, primary gid)
/// that a runtime consults for a user without a group.
struct ImageIdentity {
    user: ImageUser,
    uid: u32,
    /// A group the image's `USER uid:gid` names.
    gid: Option<u32>,
    passwd: Vec<(u32, u32)>,
}

/// The image's own identity: from its config's `User` and its root's /etc/passwd when it runs
/// from an unpacked image, else the official image's `USER` as it is known here.
fn image_identity(image: &PulledImage) -> Result<ImageIdentity, IdentityError> {
    let Some(configured) = &image.user else {
        let (user, passwd) = official_image_users(image.kind);
        let uid = match &user {
            ImageUser::Numeric(uid) => *uid,
            // The only named user of these images has its entry in the table.
            ImageUser::Named(_) => passwd.last().map(|(uid, _)| *uid).unwrap_or(0),
        };
        return Ok(ImageIdentity {
            user,
            uid,
            gid: None,
            passwd: passwd.to_vec(),
        });
    };
    let entries: Vec<(String, u32, u32)> = image
        .root
        .as_ref()
        .and_then(|root| std::fs::read_to_string(root.join("etc/passwd")).ok())
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            Some((
                fields.first()?.to_string(),
                fields.get(2)?.parse().ok()?,
                fields.get(3)?.parse().ok()?,
            ))
        })
        .collect();
    let (user, group) = match configured.split_once(':') {
        Some((user, group)) => (user, Some(group)),
        None => (configured.as_str(), None),
    };
    let (image_user, uid) = match user.parse::<u32>() {
        Ok(uid) => (ImageUser::Numeric(uid), uid),
        Err(_) => {
            let uid = entries
                .iter()
                .find(|(name, _, _)| name == user)
                .map(|(_, uid, _)| *uid)
                .ok_or_else(|| {
                    IdentityError(format!(
                        "unable to find user {user}: no matching entries in passwd file"
                    ))
                })?;
            (ImageUser::Named(user.to_string()), uid)
        }
    };
    let gid = match group {
        None => None,
        Some(group) => Some(group.parse::<u32>().map_err(|_| {
            IdentityError(format!(
                "the image's user {configured:?} names group {group:?}, which only a number can name here"
            ))
        })?),
    };
    Ok(ImageIdentity {
        user: image_user,
        uid,
        gid,
        passwd: entries.iter().map(|(_, uid, gid)| (*uid, *gid)).collect(),
    })
}

/// The `USER` of the official image, and its /etc/passwd entries (uid, primary gid) that a
/// runtime consults for a `runAsUser` without `runAsGroup`.
fn official_image_users(kind: ImageKind) -> (ImageUser, &'static [(u32, u32)]) {
    match kind {
        // `useradd -r -g redis -u 999 redis` (Debian-based tags; `-alpine` has gid 1000).
        ImageKind::Redis | ImageKind::Valkey => (ImageUser::Numeric(0), &[(0, 0), (999, 999)]),
        // tools/packaging/Dockerfile.ubuntu-prod: `useradd -r -g dfly -u 999 dfly`, `USER dfly`.
        ImageKind::Dragonfly => (ImageUser::Named("dfly".into()), &[(0, 0), (999, 999)]),
        // The membench image (hack/image-rootfs.sh, the Dockerfile): `USER 65532:65532`.
        ImageKind::Membench => (ImageUser::Numeric(65532), &[(0, 0), (65532, 65532)]),
    }
}

/// Why a container may not start as it is configured: the kubelet's
/// `CreateContainerConfigError` messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IdentityError(pub String);

/// The identity of `container`'s process in `pod`, run from `image`.
pub fn process_identity(
    pod: &Pod,
    container: &Container,
    image: &PulledImage,
) -> Result<ProcessIdentity, IdentityError> {
    let pod_context = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    let context = container.security_context.clone().unwrap_or_default();
    let image = image_identity(image)?;
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let where_ = format!("pod: {pod_name:?}, container: {}", container.name);

    let run_as_user = context.run_as_user.or(pod_context.run_as_user);
    let run_as_non_root = context
        .run_as_non_root
        .or(pod_context.run_as_non_root)
        .unwrap_or(false);
    if run_as_non_root {
        match (run_as_user, &image.user) {
            (Some(0), _) => {
                return Err(IdentityError(format!(
                    "container's runAsUser breaks non-root policy ({where_})"
                )));
            }
            (Some(_), _) => {}
            (None, ImageUser::Numeric(0)) => {
                return Err(IdentityError(format!(
                    "container has runAsNonRoot and image will run as root ({where_})"
                )));
            }
            (None, ImageUser::Named(name)) => {
                return Err(IdentityError(format!(
                    "container has runAsNonRoot and image has non-numeric user ({name}), cannot \
                     verify user is non-root ({where_})"
                )));
            }
            (None, ImageUser::Numeric(_)) => {}
        }
    }

    let uid = match run_as_user {
        Some(uid) => id_value(uid, "runAsUser")?,
        None => image.uid,
    };
    let gid = match context.run_as_group.or(pod_context.run_as_group) {
        Some(gid) => id_value(gid, "runAsGroup")?,
        // The image's `USER uid:gid` for its own user; else a runtime takes the primary group
        // from the image's /etc/passwd, else root's group.
        None => match image.gid.filter(|_| run_as_user.is_none()) {
            Some(gid) => gid,
            None => image
                .passwd
                .iter()
                .find(|(u, _)| *u == uid)
                .map(|(_, g)| *g)
                .unwrap_or(0),
        },
    };
    Ok(ProcessIdentity {
        uid,
        gid,
        supplementary_groups: supplementary_groups(&pod_context)?,
        no_new_privileges: context.allow_privilege_escalation == Some(false),
        dropped_capabilities: dropped_capabilities(&context),
    })
}

fn id_value(id: i64, field: &str) -> Result<u32, IdentityError> {
    u32::try_from(id).map_err(|_| IdentityError(format!("{field} {id} is not a valid id")))
}

fn supplementary_groups(context: &PodSecurityContext) -> Result<Vec<u32>, IdentityError> {
    let mut groups = Vec::new();
    let listed = context.fs_group.iter().map(|g| (*g, "fsGroup")).chain(
        context
            .supplemental_groups
            .iter()
            .flatten()
            .map(|g| (*g, "supplementalGroups")),
    );
    for (group, field) in listed {
        let group = id_value(group, field)?;
        if !groups.contains(&group) {
            groups.push(group);
        }
    }
    Ok(groups)
}

/// Why a container cannot be created: the runtime's `CreateContainerError` messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CreateError(pub String);

/// Where the node keeps `Localhost` seccomp profiles, as a kubelet keeps them in its root
/// directory's `seccomp/`: below the agent's state directory, created when the agent starts.
pub fn seccomp_profiles_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("seccomp")
}

/// The `Localhost` seccomp profile `container` runs under (its own `seccompProfile`, else the
/// pod's), as a file below `profiles_dir` ([`seccomp_profiles_dir`]). `None` for any other
/// profile type or none. A runtime cannot create the container when the file is missing, and
/// the profile's name may not leave the directory.
pub fn localhost_seccomp_profile(
    pod: &Pod,
    container: &Container,
    profiles_dir: &Path,
) -> Result<Option<PathBuf>, CreateError> {
    let profile = container
        .security_context
        .as_ref()
        .and_then(|c| c.seccomp_profile.clone())
        .or_else(|| {
            pod.spec
                .as_ref()?
                .security_context
                .as_ref()?
                .seccomp_profile
                .clone()
        });
    let Some(profile) = profile.filter(|p| p.type_ == "Localhost") else {
        return Ok(None);
    };
    // The runtime's words, as containerd puts them.
    let refused = |why: String| {
        CreateError(format!(
            "failed to generate container {:?} spec: failed to generate seccomp spec opts: {why}",
            container.name
        ))
    };
    let name = profile.localhost_profile.unwrap_or_default();
    let relative = Path::new(&name);
    if name.is_empty()
        || !relative
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
    {
        return Err(refused(format!(
            "localhostProfile {name:?} must be a relative path below the kubelet's seccomp \
             directory"
        )));
    }
    let path = profiles_dir.join(relative);
    let shown = path.display();
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => Ok(Some(path)),
        Ok(_) => Err(refused(format!(
            "cannot load seccomp profile \"{shown}\": not a file"
        ))),
        Err(e) => Err(refused(format!(
            "cannot load seccomp profile \"{shown}\": open {shown}: {e}"
        ))),
    }
}

fn dropped_capabilities(context: &SecurityContext) -> Vec<String> {
    let dropped: Vec<String> = context
        .capabilities
        .as_ref()
        .and_then(|c| c.drop.clone())
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let name = c.trim().to_ascii_lowercase();
            name.strip_prefix("cap_").unwrap_or(&name).to_string()
        })
        .collect();
    if dropped.iter().any(|c| c == "all") {
        vec!["all".into()]
    } else {
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec_context: serde_json::Value, container_context: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {
                "securityContext": spec_context,
                "containers": [{"name": "c", "image": "redis:7.0.15", "securityContext": container_context}],
            },
        }))
        .unwrap()
    }

    fn identity(p: &Pod, kind: ImageKind) -> Result<ProcessIdentity, IdentityError> {
        let image = PulledImage {
            kind,
            ..PulledImage::default()
        };
        process_identity(p, &p.spec.as_ref().unwrap().containers[0], &image)
    }

    #[test]
    fn the_containers_user_overrides_the_pods() {
        let p = pod(
            json!({"runAsUser": 1000, "runAsGroup": 2000}),
            json!({"runAsUser": 999}),
        );
        let id = identity(&p, ImageKind::Redis).unwrap();
        assert_eq!((id.uid, id.gid), (999, 2000));
    }

    #[test]
    fn without_a_group_the_images_passwd_entry_gives_it() {
        let p = pod(json!({}), json!({"runAsUser": 999}));
        assert_eq!(identity(&p, ImageKind::Redis).unwrap().gid, 999);
        // A user the image does not know gets root's group, as a runtime gives it.
        let p = pod(json!({}), json!({"runAsUser": 4242}));
        assert_eq!(identity(&p, ImageKind::Redis).unwrap().gid, 0);
    }

    #[test]
    fn without_a_user_the_images_own_user_runs() {
        let p = pod(json!({}), json!({}));
        assert_eq!(
            identity(&p, ImageKind::Redis).unwrap(),
            ProcessIdentity::root()
        );
        let membench = identity(&p, ImageKind::Membench).unwrap();
        assert_eq!((membench.uid, membench.gid), (65532, 65532));
        let dragonfly = identity(&p, ImageKind::Dragonfly).unwrap();
        assert_eq!((dragonfly.uid, dragonfly.gid), (999, 999));
    }

    #[test]
    fn an_image_from_its_archive_runs_as_its_configs_user_resolved_in_its_own_passwd() {
        let root = std::env::temp_dir().join(format!("membench-image-user-{}", std::process::id()));
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(
            root.join("etc/passwd"),
            "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
        )
        .unwrap();
        let image = |user: &str| PulledImage {
            kind: ImageKind::Membench,
            root: Some(root.clone()),
            user: Some(user.into()),
            ..PulledImage::default()
        };
        let p = pod(json!({}), json!({}));
        let container = &p.spec.as_ref().unwrap().containers[0];
        let id = process_identity(&p, container, &image("1234:4321")).unwrap();
        assert_eq!((id.uid, id.gid), (1234, 4321));
        let id = process_identity(&p, container, &image("nonroot")).unwrap();
        assert_eq!((id.uid, id.gid), (65532, 65532));
        let err = process_identity(&p, container, &image("nobody-here")).unwrap_err();
        assert!(err.0.contains("unable to find user nobody-here"), "{err}");
        // A name cannot be checked against runAsNonRoot, as the kubelet says.
        let non_root = pod(json!({"runAsNonRoot": true}), json!({}));
        let container = &non_root.spec.as_ref().unwrap().containers[0];
        let err = process_identity(&non_root, container, &image("nonroot")).unwrap_err();
        assert!(err.0.contains("non-numeric user (nonroot)"), "{err}");
        assert!(process_identity(&non_root, container, &image("65532:65532")).is_ok());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn run_as_non_root_refuses_what_would_run_as_root_or_cannot_be_checked() {
        let root_image = pod(json!({"runAsNonRoot": true}), json!({}));
        let err = identity(&root_image, ImageKind::Redis).unwrap_err();
        assert!(err.0.contains("image will run as root"), "{err}");
        let root_user = pod(json!({"runAsNonRoot": true}), json!({"runAsUser": 0}));
        let err = identity(&root_user, ImageKind::Membench).unwrap_err();
        assert!(err.0.contains("runAsUser breaks non-root policy"), "{err}");
        let named = identity(&root_image, ImageKind::Dragonfly).unwrap_err();
        assert!(named.0.contains("non-numeric user (dfly)"), "{named}");
        // A numeric non-root image user, or an explicit one, passes.
        assert!(identity(&root_image, ImageKind::Membench).is_ok());
        let explicit = pod(json!({"runAsNonRoot": true, "runAsUser": 999}), json!({}));
        assert!(identity(&explicit, ImageKind::Dragonfly).is_ok());
    }

    #[test]
    fn fs_group_and_supplemental_groups_become_supplementary_groups() {
        let p = pod(
            json!({"runAsUser": 999, "fsGroup": 2000, "supplementalGroups": [3000, 2000]}),
            json!({}),
        );
        assert_eq!(
            identity(&p, ImageKind::Redis).unwrap().supplementary_groups,
            [2000, 3000]
        );
    }

    #[test]
    fn the_restricted_settings_become_setpriv_options() {
        let p = pod(
            json!({"runAsNonRoot": true, "runAsUser": 999, "runAsGroup": 999, "seccompProfile": {"type": "RuntimeDefault"}}),
            json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}),
        );
        let id = identity(&p, ImageKind::Valkey).unwrap();
        assert_eq!(
            id.setpriv_args(),
            [
                "--reuid=999",
                "--regid=999",
                "--clear-groups",
                "--no-new-privs",
                "--bounding-set=-all",
                "--inh-caps=-all"
            ]
        );
        let some = pod(
            json!({}),
            json!({"capabilities": {"drop": ["NET_RAW", "CAP_SYS_ADMIN"]}}),
        );
        assert_eq!(
            identity(&some, ImageKind::Redis)
                .unwrap()
                .dropped_capabilities,
            ["net_raw", "sys_admin"]
        );
        assert!(ProcessIdentity::root().setpriv_args().is_empty());
    }

    #[test]
    fn a_localhost_seccomp_profile_must_be_on_the_node_the_containers_choice_first() {
        let dir = std::env::temp_dir().join(format!("membench-seccomp-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("profiles")).unwrap();
        std::fs::write(dir.join("profiles/there.json"), "{}").unwrap();
        let localhost =
            |name: &str| json!({"seccompProfile": {"type": "Localhost", "localhostProfile": name}});
        let runtime_default = json!({"seccompProfile": {"type": "RuntimeDefault"}});
        let check =
            |p: &Pod| localhost_seccomp_profile(p, &p.spec.as_ref().unwrap().containers[0], &dir);

        let there = pod(runtime_default.clone(), localhost("profiles/there.json"));
        assert_eq!(check(&there), Ok(Some(dir.join("profiles/there.json"))));
        // The container's RuntimeDefault wins over the pod's Localhost, which is never read.
        let overridden = pod(localhost("profiles/missing.json"), runtime_default.clone());
        assert_eq!(check(&overridden), Ok(None));
        assert_eq!(check(&pod(json!({}), json!({}))), Ok(None));

        let missing = check(&pod(localhost("profiles/missing.json"), json!({}))).unwrap_err();
        assert!(
            missing.0.contains("cannot load seccomp profile")
                && missing.0.contains("profiles/missing.json")
                && missing.0.contains("container \"c\""),
            "{missing}"
        );
        let a_directory = check(&pod(json!({}), localhost("profiles"))).unwrap_err();
        assert!(a_directory.0.contains("not a file"), "{a_directory}");
        for outside in ["../../etc/passwd", "/etc/passwd", ""] {
            let refused = check(&pod(json!({}), localhost(outside))).unwrap_err();
            assert!(
                refused.0.contains("must be a relative path"),
                "{outside}: {refused}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
