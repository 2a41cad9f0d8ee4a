//! A pod's volumes, as the kubelet sets them up: each volume a container mounts gets a directory
//! in the pod's directory (`volumes/<name>/`), bind-mounted at the `mountPath` in the
//! container's private mount namespace (see [`super::process`]).
//!
//! - `emptyDir`: an empty directory (mode 0777, as the kubelet makes it) that lives as long as
//!   the pod, shared by every container that mounts it. `medium: Memory` and `sizeLimit` are
//!   not applied: it is a directory on disk.
//! - `secret`, `configMap`, `downwardAPI`, `projected`: files written from the API objects (and
//!   for the service-account token, the TokenRequest API) when the container starts, with
//!   `items`, `defaultMode`/`mode` and `optional` honoured, and mounted read-only whatever the
//!   mount says, as the kubelet mounts them. The ServiceAccount admission plugin adds a
//!   `projected` volume `kube-api-access-*` at [`SERVICE_ACCOUNT_DIR`] to every pod whose
//!   `automountServiceAccountToken` is not false: a token bound to the pod, `ca.crt` from the
//!   `kube-root-ca.crt` ConfigMap and `namespace` from the downward API.
//! - `readOnly: true` mounts read-only; `subPath` mounts a directory or file inside the volume.
//! - `fsGroup`: the files' group becomes it, with group read access (setgid directories), as
//!   the kubelet's ownership management does.
//!
//! Other volume types (persistentVolumeClaim, hostPath, csi, ephemeral, ...) are not mounted;
//! the agent logs that it ignores them.

use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, DownwardAPIVolumeFile, KeyToPath, Pod, Secret, ServiceAccount, Volume,
    VolumeProjection,
};
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::PostParams;
use kube::{Api, Client, Resource, ResourceExt};

use super::podspec::{field_ref_value, resource_field_value};

/// Where Kubernetes mounts a pod's service-account credentials.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The kubelet's default file mode of secret, configMap, downwardAPI and projected volumes.
const DEFAULT_FILE_MODE: u32 = 0o644;

/// A directory (or file) to bind-mount into a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeMount {
    /// The volume's directory in the pod's directory (or a file or directory in it, for a
    /// `subPath`).
    pub source: PathBuf,
    /// The container's `mountPath`.
    pub target: String,
    /// Mounted read-only (`readOnly: true`, or a secret/configMap/downwardAPI/projected volume).
    pub read_only: bool,
}

/// Whether the container mounts the service-account credentials (so it also gets
/// `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`).
pub fn mounts_service_account(container: &Container) -> bool {
    container
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path.trim_end_matches('/') == SERVICE_ACCOUNT_DIR)
}

/// Why a volume could not be set up; the kubelet leaves the container `ContainerCreating`,
/// records a `FailedMount` event and retries.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("secret {0:?} not found")]
    SecretNotFound(String),
    #[error("configmap {0:?} not found")]
    ConfigMapNotFound(String),
    #[error("couldn't find key {key} in {kind} {name}")]
    KeyNotFound {
        kind: &'static str,
        name: String,
        key: String,
    },
    #[error("requesting a token for service account {0:?}: {1}")]
    Token(String, kube::Error),
    #[error("reading {0}: {1}")]
    Api(String, kube::Error),
    #[error("the pod has no volume {0:?}")]
    NoSuchVolume(String),
    #[error("subPath {0:?} must be a relative path that stays inside the volume")]
    SubPath(String),
    #[error("writing {0}: {1}")]
    Write(PathBuf, std::io::Error),
}

/// A volume's failure, worded as the kubelet's `FailedMount` event.
#[derive(Debug, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume {volume:?} : {error}")]
pub struct MountError {
    pub volume: String,
    pub error: VolumeError,
}

/// One file of a secret, configMap, downwardAPI or projected volume.
struct VolumeFile {
    path: String,
    content: Vec<u8>,
    mode: u32,
}

/// What a pod's volumes need from outside: the API server (objects, tokens) and the pod's
/// addresses (downward API).
pub struct VolumeSources<'a> {
    pub client: &'a Client,
    pub pod: &'a Pod,
    pub pod_ip: &'a str,
    pub host_ip: &'a str,
}

/// Sets up every volume `container` mounts under `pod_dir/volumes/` and returns where each is
/// to be mounted, in mount order (a mount inside another comes after it).
pub async fn prepare_volumes(
    sources: &VolumeSources<'_>,
    container: &Container,
    pod_dir: &Path,
) -> Result<Vec<VolumeMount>, MountError> {
    let spec = sources.pod.spec.as_ref();
    let volumes: &[Volume] = spec.and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    let fs_group = spec
        .and_then(|s| s.security_context.as_ref())
        .and_then(|c| c.fs_group)
        .and_then(|g| u32::try_from(g).ok());
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let failed = |error| MountError {
            volume: mount.name.clone(),
            error,
        };
        let volume = volumes
            .iter()
            .find(|v| v.name == mount.name)
            .ok_or_else(|| failed(VolumeError::NoSuchVolume(mount.name.clone())))?;
        let dir = pod_dir.join("volumes").join(&volume.name);
        let read_only = if volume.empty_dir.is_some() {
            prepare_empty_dir(&dir, fs_group).map_err(failed)?;
            mount.read_only == Some(true)
        } else if let Some(files) = volume_files(sources, volume, container)
            .await
            .map_err(failed)?
        {
            write_files(&dir, &files, fs_group).map_err(failed)?;
            true
        } else {
            tracing::warn!(
                pod = %sources.pod.name_any(),
                volume = %volume.name,
                "volume type not supported by the node agent; not mounted"
            );
            continue;
        };
        let source = match mount.sub_path.as_deref().filter(|p| !p.is_empty()) {
            Some(sub_path) => {
                let source = dir.join(checked_sub_path(sub_path).map_err(failed)?);
                if volume.empty_dir.is_some() && !source.exists() {
                    // The kubelet creates a missing subPath of a writable volume.
                    std::fs::create_dir_all(&source)
                        .and_then(|()| set_mode(&source, 0o777))
                        .map_err(|e| failed(VolumeError::Write(source.clone(), e)))?;
                }
                source
            }
            None => dir,
        };
        mounts.push(VolumeMount {
            source,
            target: mount.mount_path.clone(),
            read_only,
        });
    }
    // Parents first, so that a mount inside another volume lands in it.
    mounts.sort_by_key(|m| Path::new(&m.target).components().count());
    Ok(mounts)
}

/// A `subPath` as a path inside the volume: relative, without `..`.
fn checked_sub_path(sub_path: &str) -> Result<PathBuf, VolumeError> {
    let path = Path::new(sub_path);
    let inside = path
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if inside {
        Ok(path.to_path_buf())
    } else {
        Err(VolumeError::SubPath(sub_path.to_string()))
    }
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// An emptyDir: created once and kept (its content outlives container restarts). World
/// writable as the kubelet makes it; with an fsGroup, owned by it and setgid.
fn prepare_empty_dir(dir: &Path, fs_group: Option<u32>) -> Result<(), VolumeError> {
    let write = |e| VolumeError::Write(dir.to_path_buf(), e);
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(write)?;
    }
    let mode = if fs_group.is_some() { 0o2777 } else { 0o777 };
    set_mode(dir, mode).map_err(write)?;
    if let Some(group) = fs_group {
        std::os::unix::fs::chown(dir, None, Some(group)).map_err(write)?;
    }
    Ok(())
}

/// The files of a secret, configMap, downwardAPI or projected volume; None for a type that is
/// not one of them.
async fn volume_files(
    sources: &VolumeSources<'_>,
    volume: &Volume,
    container: &Container,
) -> Result<Option<Vec<VolumeFile>>, VolumeError> {
    if let Some(secret) = &volume.secret {
        let name = secret.secret_name.clone().unwrap_or_default();
        let mode = default_mode(secret.default_mode);
        let files = secret_files(
            sources,
            &name,
            secret.items.as_deref(),
            secret.optional,
            mode,
        );
        return files.await.map(Some);
    }
    if let Some(config_map) = &volume.config_map {
        let mode = default_mode(config_map.default_mode);
        let items = config_map.items.as_deref();
        let files =
            config_map_files(sources, &config_map.name, items, config_map.optional, mode).await;
        return files.map(Some);
    }
    if let Some(downward) = &volume.downward_api {
        let mode = default_mode(downward.default_mode);
        let items = downward.items.as_deref().unwrap_or_default();
        return Ok(Some(downward_files(sources, items, mode, container)));
    }
    if let Some(projected) = &volume.projected {
        let mode = default_mode(projected.default_mode);
        let mut files = Vec::new();
        for source in projected.sources.iter().flatten() {
            files.extend(projection_files(sources, source, mode, container).await?);
        }
        return Ok(Some(files));
    }
    Ok(None)
}

/// A volume's `defaultMode`, else 0644.
fn default_mode(mode: Option<i32>) -> u32 {
    item_mode(mode, DEFAULT_FILE_MODE)
}

/// An item's own `mode`, else the volume's.
fn item_mode(mode: Option<i32>, default_mode: u32) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok())
        .map(|m| m & 0o7777)
        .unwrap_or(default_mode)
}

/// The files of the keys of a Secret's or ConfigMap's `data`: every key, or the `items`
/// (a missing key is an error unless the source is optional).
fn keyed_files(
    kind: &'static str,
    name: &str,
    data: Vec<(String, Vec<u8>)>,
    items: Option<&[KeyToPath]>,
    optional: bool,
    default_mode: u32,
) -> Result<Vec<VolumeFile>, VolumeError> {
    let Some(items) = items else {
        return Ok(data
            .into_iter()
            .map(|(key, content)| VolumeFile {
                path: key,
                content,
                mode: default_mode,
            })
            .collect());
    };
    let mut files = Vec::new();
    for item in items {
        match data.iter().find(|(key, _)| *key == item.key) {
            Some((_, content)) => files.push(VolumeFile {
                path: item.path.clone(),
                content: content.clone(),
                mode: item_mode(item.mode, default_mode),
            }),
            None if optional => {}
            None => {
                return Err(VolumeError::KeyNotFound {
                    kind,
                    name: name.to_string(),
                    key: item.key.clone(),
                });
            }
        }
    }
    Ok(files)
}

/// The named object (a Secret or ConfigMap) of the pod's namespace, if it exists; `what` names
/// its kind in a read error.
async fn source_object<K>(
    sources: &VolumeSources<'_>,
    name: &str,
    what: &str,
) -> Result<Option<K>, VolumeError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let namespace = sources.pod.namespace().unwrap_or_else(|| "default".into());
    let api: Api<K> = Api::namespaced(sources.client.clone(), &namespace);
    api.get_opt(name)
        .await
        .map_err(|e| VolumeError::Api(format!("{what} {name:?}"), e))
}

/// A missing source: no files when the volume says it is optional, else `missing`.
fn not_found(optional: bool, missing: VolumeError) -> Result<Vec<VolumeFile>, VolumeError> {
    if optional {
        Ok(Vec::new())
    } else {
        Err(missing)
    }
}

async fn secret_files(
    sources: &VolumeSources<'_>,
    name: &str,
    items: Option<&[KeyToPath]>,
    optional: Option<bool>,
    default_mode: u32,
) -> Result<Vec<VolumeFile>, VolumeError> {
    let optional = optional == Some(true);
    let found = source_object::<Secret>(sources, name, "secret").await?;
    let Some(secret) = found else {
        return not_found(optional, VolumeError::SecretNotFound(name.to_string()));
    };
    let data = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    keyed_files("Secret", name, data, items, optional, default_mode)
}

async fn config_map_files(
    sources: &VolumeSources<'_>,
    name: &str,
    items: Option<&[KeyToPath]>,
    optional: Option<bool>,
    default_mode: u32,
) -> Result<Vec<VolumeFile>, VolumeError> {
    let optional = optional == Some(true);
    let found = source_object::<ConfigMap>(sources, name, "configmap").await?;
    let Some(config_map) = found else {
        return not_found(optional, VolumeError::ConfigMapNotFound(name.to_string()));
    };
    let data: Vec<(String, Vec<u8>)> = config_map
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.into_bytes()))
        .chain(
            config_map
                .binary_data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0)),
        )
        .collect();
    keyed_files("ConfigMap", name, data, items, optional, default_mode)
}

/// Downward API files: pod fields, and container resources (`resourceFieldRef`, of the named
/// container or this one).
fn downward_files(
    sources: &VolumeSources<'_>,
    items: &[DownwardAPIVolumeFile],
    default_mode: u32,
    container: &Container,
) -> Vec<VolumeFile> {
    items
        .iter()
        .map(|item| {
            let value = if let Some(field) = &item.field_ref {
                field_ref_value(
                    sources.pod,
                    &field.field_path,
                    sources.pod_ip,
                    sources.host_ip,
                )
            } else if let Some(resource) = &item.resource_field_ref {
                let named = resource.container_name.as_deref().and_then(|name| {
                    let spec = sources.pod.spec.as_ref()?;
                    spec.containers.iter().find(|c| c.name == name)
                });
                resource_field_value(
                    named.unwrap_or(container),
                    &resource.resource,
                    resource.divisor.as_ref(),
                )
            } else {
                None
            };
            VolumeFile {
                path: item.path.clone(),
                content: value.unwrap_or_default().into_bytes(),
                mode: item_mode(item.mode, default_mode),
            }
        })
        .collect()
}

/// The files one source of a projected volume contributes.
async fn projection_files(
    sources: &VolumeSources<'_>,
    source: &VolumeProjection,
    default_mode: u32,
    container: &Container,
) -> Result<Vec<VolumeFile>, VolumeError> {
    let mut files = Vec::new();
    if let Some(token) = &source.service_account_token {
        files.push(VolumeFile {
            path: token.path.clone(),
            content: service_account_token(
                sources,
                token.audience.clone(),
                token.expiration_seconds,
            )
            .await?
            .into_bytes(),
            mode: default_mode,
        });
    }
    if let Some(secret) = &source.secret {
        let items = secret.items.as_deref();
        files.extend(
            secret_files(sources, &secret.name, items, secret.optional, default_mode).await?,
        );
    }
    if let Some(config_map) = &source.config_map {
        let items = config_map.items.as_deref();
        let optional = config_map.optional;
        files.extend(
            config_map_files(sources, &config_map.name, items, optional, default_mode).await?,
        );
    }
    if let Some(downward) = &source.downward_api {
        let items = downward.items.as_deref().unwrap_or_default();
        files.extend(downward_files(sources, items, default_mode, container));
    }
    Ok(files)
}

/// A token for the pod's service account from the TokenRequest API, bound to the pod as the
/// kubelet requests it (`expirationSeconds` 3607 unless the volume says otherwise).
async fn service_account_token(
    sources: &VolumeSources<'_>,
    audience: Option<String>,
    expiration_seconds: Option<i64>,
) -> Result<String, VolumeError> {
    let pod = sources.pod;
    let namespace = pod.namespace().unwrap_or_else(|| "default".into());
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: audience.map(|a| vec![a]),
            expiration_seconds: expiration_seconds.or(Some(3607)),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(pod.name_any()),
                uid: pod.uid(),
            }),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let accounts: Api<ServiceAccount> = Api::namespaced(sources.client.clone(), &namespace);
    let issued = accounts
        .create_token_request(&account, &PostParams::default(), &request)
        .await
        .map_err(|e| VolumeError::Token(account.clone(), e))?;
    Ok(issued.status.and_then(|s| s.token).unwrap_or_default())
}

/// Brings the files of a secret-like volume up to date in place: each file is replaced
/// atomically (written beside it, then renamed over it) and files no longer wanted are removed
/// afterwards, so another container of the pod that has the directory mounted never finds a
/// file it keeps missing or half written.
fn write_files(dir: &Path, files: &[VolumeFile], fs_group: Option<u32>) -> Result<(), VolumeError> {
    let write = |path: &Path| {
        let path = path.to_path_buf();
        move |e| VolumeError::Write(path, e)
    };
    std::fs::create_dir_all(dir).map_err(write(dir))?;
    let mut wanted = Vec::new();
    for file in files {
        let relative = checked_sub_path(&file.path)?;
        let path = dir.join(&relative);
        // A key's path may have been a directory before, or a directory a file.
        if path.is_dir() {
            std::fs::remove_dir_all(&path).map_err(write(&path))?;
        }
        for ancestor in relative.ancestors().skip(1).map(|a| dir.join(a)) {
            if ancestor.is_file() {
                std::fs::remove_file(&ancestor).map_err(write(&ancestor))?;
            }
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(write(parent))?;
        }
        let name = relative.file_name().unwrap_or_default().to_string_lossy();
        let staged = path.with_file_name(format!("..{name}.membench-tmp"));
        std::fs::write(&staged, &file.content).map_err(write(&staged))?;
        // Group read access for the fsGroup, as the kubelet's ownership management gives it.
        let mode = if fs_group.is_some() {
            file.mode | 0o440
        } else {
            file.mode
        };
        set_mode(&staged, mode).map_err(write(&staged))?;
        std::fs::rename(&staged, &path).map_err(write(&path))?;
        wanted.push(relative);
    }
    remove_unwanted(dir, Path::new(""), &wanted).map_err(write(dir))?;
    set_mode(dir, 0o755).map_err(write(dir))?;
    if let Some(group) = fs_group {
        chown_group_recursively(dir, group).map_err(write(dir))?;
    }
    Ok(())
}

/// Removes what lies under `root/relative` that is neither a wanted file nor a directory on the
/// way to one.
fn remove_unwanted(root: &Path, relative: &Path, wanted: &[PathBuf]) -> std::io::Result<()> {
    for entry in std::fs::read_dir(root.join(relative))?.flatten() {
        let inside = relative.join(entry.file_name());
        let is_dir = entry.file_type()?.is_dir();
        if is_dir
            && wanted
                .iter()
                .any(|w| w.starts_with(&inside) && *w != inside)
        {
            remove_unwanted(root, &inside, wanted)?;
        } else if !wanted.contains(&inside) {
            if is_dir {
                std::fs::remove_dir_all(entry.path())?;
            } else {
                std::fs::remove_file(entry.path())?;
            }
        }
    }
    Ok(())
}

fn chown_group_recursively(path: &Path, group: u32) -> std::io::Result<()> {
    std::os::unix::fs::chown(path, None, Some(group))?;
    if path.is_dir() {
        set_mode(path, 0o2755)?;
        for entry in std::fs::read_dir(path)?.flatten() {
            chown_group_recursively(&entry.path(), group)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::VolumeMount as K8sVolumeMount;

    fn container_mounting(path: &str) -> Container {
        Container {
            name: "c".into(),
            volume_mounts: Some(vec![K8sVolumeMount {
                name: "kube-api-access-x".into(),
                mount_path: path.into(),
                ..K8sVolumeMount::default()
            }]),
            ..Container::default()
        }
    }

    #[test]
    fn the_service_account_mount_is_recognised_by_its_path() {
        assert!(mounts_service_account(&container_mounting(
            SERVICE_ACCOUNT_DIR
        )));
        assert!(mounts_service_account(&container_mounting(
            "/var/run/secrets/kubernetes.io/serviceaccount/"
        )));
        assert!(!mounts_service_account(&container_mounting("/data")));
        assert!(!mounts_service_account(&Container::default()));
    }

    #[test]
    fn sub_paths_stay_inside_the_volume() {
        assert_eq!(
            checked_sub_path("conf/redis.conf").unwrap(),
            PathBuf::from("conf/redis.conf")
        );
        assert!(checked_sub_path("../escape").is_err());
        assert!(checked_sub_path("/etc/passwd").is_err());
        assert!(checked_sub_path("a/../../b").is_err());
    }

    #[test]
    fn items_pick_keys_with_their_own_paths_and_modes() {
        let data = vec![
            ("user".to_string(), b"admin".to_vec()),
            ("password".to_string(), b"s3cret".to_vec()),
        ];
        let items = [KeyToPath {
            key: "password".into(),
            path: "db/password".into(),
            mode: Some(0o400),
            ..KeyToPath::default()
        }];
        let files =
            keyed_files("Secret", "creds", data.clone(), Some(&items), false, 0o644).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(
            (
                files[0].path.as_str(),
                files[0].content.as_slice(),
                files[0].mode
            ),
            ("db/password", b"s3cret".as_slice(), 0o400)
        );
        let all = keyed_files("Secret", "creds", data.clone(), None, false, 0o640).unwrap();
        assert_eq!(all.len(), 2);
        assert!(all.iter().all(|f| f.mode == 0o640));
        let missing = [KeyToPath {
            key: "token".into(),
            path: "token".into(),
            ..KeyToPath::default()
        }];
        let err = keyed_files(
            "Secret",
            "creds",
            data.clone(),
            Some(&missing),
            false,
            0o644,
        )
        .err()
        .unwrap();
        assert_eq!(err.to_string(), "couldn't find key token in Secret creds");
        assert!(
            keyed_files("Secret", "creds", data, Some(&missing), true, 0o644)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn modes_default_to_0644_and_items_override_the_volume() {
        assert_eq!(default_mode(None), 0o644);
        assert_eq!(default_mode(Some(0o400)), 0o400);
        assert_eq!(item_mode(Some(0o440), default_mode(Some(0o400))), 0o440);
        assert_eq!(item_mode(None, 0o400), 0o400);
    }

    #[test]
    fn rewriting_a_volume_keeps_its_directory_and_drops_old_files() {
        let dir = std::env::temp_dir().join(format!("membench-volume-{}", std::process::id()));
        let file = |path: &str, content: &str| VolumeFile {
            path: path.into(),
            content: content.as_bytes().to_vec(),
            mode: 0o600,
        };
        write_files(
            &dir,
            &[file("a", "1"), file("sub/b", "2"), file("keep/c", "4")],
            None,
        )
        .unwrap();
        let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&dir).unwrap());
        write_files(&dir, &[file("a", "3"), file("keep/c", "5")], None).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "3");
        assert_eq!(std::fs::read_to_string(dir.join("keep/c")).unwrap(), "5");
        assert!(!dir.join("sub").exists());
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "no staged file is left: {names:?}");
        let meta = std::fs::metadata(&dir).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&meta), inode);
        let mode = std::fs::metadata(dir.join("a"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // A path that was a directory becomes a file, and the other way round.
        write_files(&dir, &[file("keep", "6"), file("a/d", "7")], None).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("keep")).unwrap(), "6");
        assert_eq!(std::fs::read_to_string(dir.join("a/d")).unwrap(), "7");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
