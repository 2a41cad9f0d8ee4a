//! What a container's spec means for a local process: its environment (values, the downward
//! API, ConfigMap and Secret references, `$(VAR)` expansion) and its memory limit in bytes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVar, Pod, Secret};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{Api, Client};

/// Parses a Kubernetes quantity (`128Mi`, `1Gi`, `500M`, `1e9`, `250m`) into a number of units.
pub fn parse_quantity(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exp if exp.starts_with(['e', 'E']) => 10f64.powi(exp[1..].parse().ok()?),
        _ => return None,
    };
    Some(number * factor)
}

/// The container's memory limit in bytes, if it has one.
pub fn memory_limit_bytes(container: &Container) -> Option<u64> {
    let limits = container.resources.as_ref()?.limits.as_ref()?;
    let Quantity(q) = limits.get("memory")?;
    parse_quantity(q).map(|b| b.ceil() as u64)
}

/// Expands `$(VAR)` references the way Kubernetes does in `command`, `args` and env values:
/// defined variables are substituted, `$$` escapes a `$`, undefined references stay as written.
pub fn expand(input: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(body) = after.strip_prefix('(')
            && let Some(end) = body.find(')')
        {
            let name = &body[..end];
            match vars.get(name) {
                Some(value) => out.push_str(value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The downward API: the value of a `fieldRef` path for this pod.
pub fn field_ref_value(pod: &Pod, path: &str, pod_ip: &str, host_ip: &str) -> Option<String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let keyed = |prefix: &str, map: Option<&BTreeMap<String, String>>| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(map.and_then(|m| m.get(key)).cloned().unwrap_or_default())
    };
    match path {
        "metadata.name" => meta.name.clone(),
        "metadata.namespace" => meta.namespace.clone(),
        "metadata.uid" => meta.uid.clone(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()),
        "status.podIP" | "status.podIPs" => Some(pod_ip.to_string()),
        "status.hostIP" | "status.hostIPs" => Some(host_ip.to_string()),
        _ => keyed("metadata.labels['", meta.labels.as_ref())
            .or_else(|| keyed("metadata.annotations['", meta.annotations.as_ref())),
    }
}

/// The value of a `resourceFieldRef` (`limits.memory`, `requests.cpu`, ...), in the units the
/// divisor names (default 1; CPU rounds up to whole cores as Kubernetes does).
pub fn resource_field_value(
    container: &Container,
    resource: &str,
    divisor: Option<&Quantity>,
) -> Option<String> {
    let (kind, name) = resource.split_once('.')?;
    let resources = container.resources.as_ref();
    let map = match kind {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => return None,
    };
    let divisor = divisor.and_then(|q| parse_quantity(&q.0)).unwrap_or(1.0);
    // Without a limit Kubernetes reports the node's allocatable; a fake node's is all we know.
    let value = map
        .and_then(|m| m.get(name))
        .and_then(|q| parse_quantity(&q.0))?;
    Some(format!("{}", (value / divisor).ceil() as u64))
}

/// Errors resolving a container's environment; the kubelet reports these as
/// `CreateContainerConfigError`.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("configmap {0:?} not found")]
    ConfigMapNotFound(String),
    #[error("secret {0:?} not found")]
    SecretNotFound(String),
    #[error("couldn't find key {key} in {kind} {namespace}/{name}")]
    KeyNotFound {
        kind: &'static str,
        namespace: String,
        name: String,
        key: String,
    },
    #[error("reading {0}: {1}")]
    Api(String, kube::Error),
}

/// Reads ConfigMaps and Secrets for env references, once per name.
struct RefCache {
    client: Client,
    namespace: String,
    config_maps: BTreeMap<String, Option<BTreeMap<String, String>>>,
    secrets: BTreeMap<String, Option<BTreeMap<String, String>>>,
}

impl RefCache {
    async fn config_map(
        &mut self,
        name: &str,
    ) -> Result<Option<&BTreeMap<String, String>>, EnvError> {
        if !self.config_maps.contains_key(name) {
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
            let cm = api
                .get_opt(name)
                .await
                .map_err(|e| EnvError::Api(format!("configmap {name}"), e))?;
            self.config_maps
                .insert(name.to_string(), cm.map(|cm| cm.data.unwrap_or_default()));
        }
        Ok(self.config_maps[name].as_ref())
    }

    async fn secret(&mut self, name: &str) -> Result<Option<&BTreeMap<String, String>>, EnvError> {
        if !self.secrets.contains_key(name) {
            let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
            let secret = api
                .get_opt(name)
                .await
                .map_err(|e| EnvError::Api(format!("secret {name}"), e))?;
            let data = secret.map(|s| {
                let mut data: BTreeMap<String, String> = s.string_data.unwrap_or_default();
                for (k, v) in s.data.unwrap_or_default() {
                    data.insert(k, String::from_utf8_lossy(&v.0).into_owned());
                }
                data
            });
            self.secrets.insert(name.to_string(), data);
        }
        Ok(self.secrets[name].as_ref())
    }
}

/// The container's environment as Kubernetes builds it: `envFrom` first, then `env` in order,
/// each value expanded against the variables defined before it.
pub async fn container_env(
    client: &Client,
    pod: &Pod,
    container: &Container,
    pod_ip: &str,
    host_ip: &str,
) -> Result<BTreeMap<String, String>, EnvError> {
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let mut refs = RefCache {
        client: client.clone(),
        namespace: namespace.clone(),
        config_maps: BTreeMap::new(),
        secrets: BTreeMap::new(),
    };
    let mut vars = BTreeMap::new();
    for source in container.env_from.iter().flatten() {
        let prefix = source.prefix.clone().unwrap_or_default();
        if let Some(r) = &source.config_map_ref {
            match refs.config_map(&r.name).await? {
                Some(data) => vars.extend(
                    data.iter()
                        .map(|(k, v)| (format!("{prefix}{k}"), v.clone())),
                ),
                None if r.optional == Some(true) => {}
                None => return Err(EnvError::ConfigMapNotFound(r.name.clone())),
            }
        }
        if let Some(r) = &source.secret_ref {
            match refs.secret(&r.name).await? {
                Some(data) => vars.extend(
                    data.iter()
                        .map(|(k, v)| (format!("{prefix}{k}"), v.clone())),
                ),
                None if r.optional == Some(true) => {}
                None => return Err(EnvError::SecretNotFound(r.name.clone())),
            }
        }
    }
    for EnvVar {
        name,
        value,
        value_from,
    } in container.env.iter().flatten()
    {
        let resolved = if let Some(value) = value {
            Some(expand(value, &vars))
        } else if let Some(from) = value_from {
            if let Some(f) = &from.field_ref {
                field_ref_value(pod, &f.field_path, pod_ip, host_ip)
            } else if let Some(r) = &from.resource_field_ref {
                resource_field_value(container, &r.resource, r.divisor.as_ref())
            } else if let Some(k) = &from.config_map_key_ref {
                let optional = k.optional == Some(true);
                match refs.config_map(&k.name).await? {
                    Some(data) => match data.get(&k.key) {
                        Some(v) => Some(v.clone()),
                        None if optional => None,
                        None => {
                            return Err(EnvError::KeyNotFound {
                                kind: "configmap",
                                namespace,
                                name: k.name.clone(),
                                key: k.key.clone(),
                            });
                        }
                    },
                    None if optional => None,
                    None => return Err(EnvError::ConfigMapNotFound(k.name.clone())),
                }
            } else if let Some(k) = &from.secret_key_ref {
                let optional = k.optional == Some(true);
                match refs.secret(&k.name).await? {
                    Some(data) => match data.get(&k.key) {
                        Some(v) => Some(v.clone()),
                        None if optional => None,
                        None => {
                            return Err(EnvError::KeyNotFound {
                                kind: "secret",
                                namespace,
                                name: k.name.clone(),
                                key: k.key.clone(),
                            });
                        }
                    },
                    None if optional => None,
                    None => return Err(EnvError::SecretNotFound(k.name.clone())),
                }
            } else {
                None
            }
        } else {
            Some(String::new())
        };
        if let Some(v) = resolved {
            vars.insert(name.clone(), v);
        }
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_in_binary_and_decimal_units() {
        assert_eq!(parse_quantity("128Mi"), Some(128.0 * 1024.0 * 1024.0));
        assert_eq!(parse_quantity("1Gi"), Some(1024f64.powi(3)));
        assert_eq!(parse_quantity("500M"), Some(5e8));
        assert_eq!(parse_quantity("1e9"), Some(1e9));
        assert_eq!(parse_quantity("250m"), Some(0.25));
        assert_eq!(parse_quantity("16"), Some(16.0));
        assert_eq!(parse_quantity("12Zi"), None);
    }

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let vars: BTreeMap<String, String> =
            [("POD_IP".to_string(), "127.100.0.2".to_string())].into();
        assert_eq!(expand("--bind=$(POD_IP)", &vars), "--bind=127.100.0.2");
        assert_eq!(expand("$(UNDEFINED) stays", &vars), "$(UNDEFINED) stays");
        assert_eq!(
            expand("$$(POD_IP) is escaped", &vars),
            "$(POD_IP) is escaped"
        );
        assert_eq!(expand("cost: $5", &vars), "cost: $5");
    }

    #[test]
    fn downward_api_fields() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "redis"}},
            "spec": {"nodeName": "r8g-4xlarge-0", "containers": []}
        }))
        .unwrap();
        assert_eq!(
            field_ref_value(&pod, "metadata.name", "ip", "h").as_deref(),
            Some("p")
        );
        assert_eq!(
            field_ref_value(&pod, "status.podIP", "127.100.0.2", "h").as_deref(),
            Some("127.100.0.2")
        );
        assert_eq!(
            field_ref_value(&pod, "spec.nodeName", "", "").as_deref(),
            Some("r8g-4xlarge-0")
        );
        assert_eq!(
            field_ref_value(&pod, "metadata.labels['app']", "", "").as_deref(),
            Some("redis")
        );
    }

    #[test]
    fn memory_limit_is_read_in_bytes() {
        let container: Container = serde_json::from_value(serde_json::json!({
            "name": "c", "resources": {"limits": {"memory": "64Mi"}}
        }))
        .unwrap();
        assert_eq!(memory_limit_bytes(&container), Some(64 * 1024 * 1024));
    }
}
