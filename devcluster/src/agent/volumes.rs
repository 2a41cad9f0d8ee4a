//! In-cluster credentials, as the kubelet provides them: the `projected` volumes a pod mounts
//! (the ServiceAccount admission plugin adds one, `kube-api-access-*`, at
//! [`SERVICE_ACCOUNT_DIR`] to every pod whose `automountServiceAccountToken` is not false) are
//! written to a per-pod directory, to be bind-mounted at their `mountPath` in the container's
//! private mount namespace. Their sources: a `serviceAccountToken` from the TokenRequest API,
//! bound to the pod; `configMap` keys (the `kube-root-ca.crt` ConfigMap holds `ca.crt`); and
//! `downwardAPI` fields (`metadata.namespace`). Other volume types stay ignored.

use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, ServiceAccount, VolumeProjection};
use kube::api::PostParams;
use kube::{Api, Client, ResourceExt};

use super::podspec::field_ref_value;

/// Where Kubernetes mounts a pod's service-account credentials.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A directory to bind-mount into a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeMount {
    /// The per-pod directory holding the volume's files.
    pub source: PathBuf,
    /// The container's `mountPath`.
    pub target: String,
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

/// Why a projected volume could not be written; the kubelet reports these as
/// `CreateContainerConfigError` and retries.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("configmap {0:?} not found")]
    ConfigMapNotFound(String),
    #[error("couldn't find key {key} in configmap {name}")]
    KeyNotFound { name: String, key: String },
    #[error("requesting a token for service account {0:?}: {1}")]
    Token(String, kube::Error),
    #[error("reading configmap {0:?}: {1}")]
    Api(String, kube::Error),
    #[error("writing {0}: {1}")]
    Write(PathBuf, std::io::Error),
}

/// Writes the container's projected volumes under `pod_dir/volumes/<name>/` and returns where
/// each is to be mounted.
pub async fn prepare_projected_volumes(
    client: &Client,
    pod: &Pod,
    container: &Container,
    pod_dir: &Path,
    pod_ip: &str,
    host_ip: &str,
) -> Result<Vec<VolumeMount>, VolumeError> {
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let Some(projected) = volumes
            .iter()
            .find(|v| v.name == mount.name)
            .and_then(|v| v.projected.as_ref())
        else {
            continue;
        };
        let dir = pod_dir.join("volumes").join(&mount.name);
        std::fs::create_dir_all(&dir).map_err(|e| VolumeError::Write(dir.clone(), e))?;
        for source in projected.sources.iter().flatten() {
            for (path, content) in source_files(client, pod, source, pod_ip, host_ip).await? {
                let file = dir.join(path);
                if let Some(parent) = file.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| VolumeError::Write(parent.to_path_buf(), e))?;
                }
                std::fs::write(&file, content).map_err(|e| VolumeError::Write(file.clone(), e))?;
            }
        }
        mounts.push(VolumeMount {
            source: dir,
            target: mount.mount_path.clone(),
        });
    }
    Ok(mounts)
}

/// The files (relative path, content) one projected source contributes.
async fn source_files(
    client: &Client,
    pod: &Pod,
    source: &VolumeProjection,
    pod_ip: &str,
    host_ip: &str,
) -> Result<Vec<(String, Vec<u8>)>, VolumeError> {
    let namespace = pod.namespace().unwrap_or_else(|| "default".into());
    let mut files = Vec::new();
    if let Some(token) = &source.service_account_token {
        let account = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into());
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: token.audience.clone().map(|a| vec![a]),
                expiration_seconds: token.expiration_seconds.or(Some(3607)),
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
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
        let issued = accounts
            .create_token_request(&account, &PostParams::default(), &request)
            .await
            .map_err(|e| VolumeError::Token(account.clone(), e))?;
        let token_value = issued.status.and_then(|s| s.token).unwrap_or_default();
        files.push((token.path.clone(), token_value.into_bytes()));
    }
    if let Some(config_map) = &source.config_map {
        let name = config_map.name.clone();
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
        let found = api
            .get_opt(&name)
            .await
            .map_err(|e| VolumeError::Api(name.clone(), e))?;
        let optional = config_map.optional == Some(true);
        match found {
            None if optional => {}
            None => return Err(VolumeError::ConfigMapNotFound(name)),
            Some(cm) => {
                let data = cm.data.unwrap_or_default();
                match &config_map.items {
                    Some(items) => {
                        for item in items {
                            match data.get(&item.key) {
                                Some(value) => {
                                    files.push((item.path.clone(), value.clone().into_bytes()))
                                }
                                None if optional => {}
                                None => {
                                    return Err(VolumeError::KeyNotFound {
                                        name,
                                        key: item.key.clone(),
                                    });
                                }
                            }
                        }
                    }
                    None => {
                        files.extend(data.into_iter().map(|(k, v)| (k, v.into_bytes())));
                    }
                }
            }
        }
    }
    if let Some(downward) = &source.downward_api {
        for item in downward.items.iter().flatten() {
            let value = item
                .field_ref
                .as_ref()
                .and_then(|f| field_ref_value(pod, &f.field_path, pod_ip, host_ip))
                .unwrap_or_default();
            files.push((item.path.clone(), value.into_bytes()));
        }
    }
    Ok(files)
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
}
