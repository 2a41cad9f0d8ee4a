//! The dev cluster's image registry (`hack/dev-cluster-registry.sh`): CNCF distribution on
//! 127.0.0.1, TLS from the cluster's CA, htpasswd basic auth, holding the membench image and the
//! stand-in engine images under the names a user's mirror would hold. The real nodes pull from
//! it through containerd's registry configuration with the credentials of a pod's
//! imagePullSecret; this module gives tests its address, the image names, pull Secrets and what
//! its log says it served.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::cluster::{DevCluster, EnsureOptions};

/// The registry's user (`REGISTRY_USER` of its `registry.env`).
pub const REGISTRY_USER: &str = "membench";

/// The repository of the membench image in the registry (`<registry>/membench/membench:<version>`).
pub const MEMBENCH_REPOSITORY: &str = "membench/membench";

/// The dev cluster's registry, as `registry/registry.env` in its state directory names it.
#[derive(Clone, Debug)]
pub struct Registry {
    /// `127.0.0.1:<port>`: the host part of its images' names.
    pub host: String,
    pub user: String,
    pub password: String,
    /// The CA its serving certificate is signed by (the cluster's).
    pub ca: PathBuf,
    /// The registry's log (one line per request, access lines among them).
    pub log: PathBuf,
}

impl Registry {
    /// The registry of the dev cluster brought up with `options` (started with it by
    /// `hack/dev-cluster.sh up`). An error when tests run against another cluster
    /// (`MEMBENCH_TEST_KUBECONFIG`): only the dev cluster has this registry.
    pub async fn of_dev_cluster(options: &EnsureOptions) -> anyhow::Result<Registry> {
        anyhow::ensure!(
            DevCluster::is_dev_cluster(),
            "the dev cluster's registry is only there with the dev cluster; tests run against \
             {} ({})",
            crate::TEST_KUBECONFIG_ENV,
            std::env::var(crate::TEST_KUBECONFIG_ENV).unwrap_or_default()
        );
        let kubeconfig = DevCluster::kubeconfig_with(options).await?;
        let state = kubeconfig
            .parent()
            .context("the kubeconfig is in the state directory")?;
        Registry::in_state_dir(state)
    }

    /// The registry recorded in a dev cluster's state directory.
    pub fn in_state_dir(state: &Path) -> anyhow::Result<Registry> {
        let file = state.join("registry/registry.env");
        let text = std::fs::read_to_string(&file).with_context(|| {
            format!(
                "reading {}: the dev cluster runs without its registry (an `up` from before \
                 the registry was added? run hack/dev-cluster.sh up again; its log is \
                 logs/registry.log)",
                file.display()
            )
        })?;
        let vars = parse_env(&text);
        let get = |name: &str| {
            vars.get(name)
                .cloned()
                .with_context(|| format!("{} has no {name}", file.display()))
        };
        Ok(Registry {
            host: get("REGISTRY")?,
            user: get("REGISTRY_USER")?,
            password: get("REGISTRY_PASSWORD")?,
            ca: PathBuf::from(get("REGISTRY_CA")?),
            log: state.join("logs/registry.log"),
        })
    }

    /// The name of `path` (`library/redis:8.2.3`) in this registry.
    pub fn image(&self, path: &str) -> String {
        format!("{}/{path}", self.host)
    }

    /// Where the registry holds the official image `official` (`redis:8.2.3`,
    /// `valkey/valkey:9.1.2`, `docker.dragonflydb.io/dragonflydb/dragonfly:v1.40.0`), as a
    /// mirror holds it: its registry host replaced, Docker Hub's `library/` made explicit.
    pub fn engine_image(&self, official: &str) -> String {
        self.image(&mirror_path(official))
    }

    /// The digest `repository:tag` has in this registry: the sha256 of the manifest (or index)
    /// the registry serves for the tag, read with skopeo over the registry's TLS and
    /// credentials, as a node's imageID names it.
    pub fn manifest_digest(&self, repository: &str, tag: &str) -> anyhow::Result<Option<String>> {
        let Some(manifest) = self.raw_manifest(repository, tag)? else {
            return Ok(None);
        };
        let mut sha = std::process::Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("running sha256sum")?;
        use std::io::Write;
        sha.stdin
            .take()
            .context("sha256sum's stdin")?
            .write_all(&manifest)?;
        let sum = sha.wait_with_output()?;
        let hex = String::from_utf8_lossy(&sum.stdout);
        Ok(hex
            .split_whitespace()
            .next()
            .map(|hex| format!("sha256:{hex}")))
    }

    /// The manifest (or index) the registry serves for `repository:tag`, as it serves it (None
    /// when it has no such image), read with skopeo over the registry's TLS and credentials.
    pub fn raw_manifest(&self, repository: &str, tag: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let cert_dir = tempfile_dir()?;
        std::fs::copy(&self.ca, cert_dir.join("ca.crt"))
            .with_context(|| format!("copying {}", self.ca.display()))?;
        let output = std::process::Command::new("skopeo")
            .args(["inspect", "--raw", "--cert-dir"])
            .arg(&cert_dir)
            .arg("--creds")
            .arg(format!("{}:{}", self.user, self.password))
            .arg(format!("docker://{}/{repository}:{tag}", self.host))
            .output()
            .context("running skopeo (hack/install-node-runtime.sh installs it)")?;
        let _ = std::fs::remove_dir_all(&cert_dir);
        Ok(output.status.success().then_some(output.stdout))
    }

    /// The membench image of `version` (the chart's appVersion) in this registry.
    pub fn membench_image(&self, version: &str) -> String {
        self.image(&format!("{MEMBENCH_REPOSITORY}:{version}"))
    }

    /// A pull Secret (type `kubernetes.io/dockerconfigjson`) with this registry's credentials.
    pub fn pull_secret(&self, name: &str) -> Secret {
        self.pull_secret_with(name, &self.user, &self.password)
    }

    /// A pull Secret for this registry with the given credentials (a wrong password, for
    /// tests of a refused pull).
    pub fn pull_secret_with(&self, name: &str, user: &str, password: &str) -> Secret {
        let config = serde_json::json!({
            "auths": {self.host.as_str(): {"username": user, "password": password}}
        });
        Secret {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/dockerconfigjson".into()),
            data: Some(BTreeMap::from([(
                ".dockerconfigjson".to_string(),
                ByteString(config.to_string().into_bytes()),
            )])),
            ..Secret::default()
        }
    }

    /// Creates [`Registry::pull_secret`] named `name` in `namespace`.
    pub async fn create_pull_secret(
        &self,
        client: &Client,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<Secret> {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        Ok(secrets
            .create(&PostParams::default(), &self.pull_secret(name))
            .await?)
    }

    /// Where the log ends now, for [`Registry::requests_since`].
    pub fn log_offset(&self) -> anyhow::Result<u64> {
        Ok(std::fs::metadata(&self.log)
            .with_context(|| format!("the registry's log {}", self.log.display()))?
            .len())
    }

    /// Every request the registry answered since `offset` of its log (its access lines),
    /// oldest first, refused ones among them.
    pub fn requests_since(&self, offset: u64) -> anyhow::Result<Vec<Request>> {
        Ok(self
            .log_since(offset)?
            .lines()
            .filter_map(Request::parse)
            .collect())
    }

    /// The requests that authenticated, with their user, since `offset` of its log.
    pub fn served_since(&self, offset: u64) -> anyhow::Result<Vec<Served>> {
        Ok(self
            .log_since(offset)?
            .lines()
            .filter_map(Served::parse)
            .collect())
    }

    fn log_since(&self, offset: u64) -> anyhow::Result<String> {
        let text = std::fs::read(&self.log)
            .with_context(|| format!("reading the registry's log {}", self.log.display()))?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(text.len());
        Ok(String::from_utf8_lossy(&text[start..]).into_owned())
    }
}

/// A request the registry answered, from its access line (Apache's combined format:
/// `127.0.0.1 - - [date] "GET /v2/library/redis/manifests/8.2.3 HTTP/1.1" 200 401 "" "containerd/v2.4.2"`),
/// which it writes for every request, refused ones too.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub method: String,
    /// The request's path (`/v2/library/redis/manifests/8.2.3`).
    pub uri: String,
    pub status: u16,
    pub user_agent: String,
}

impl Request {
    pub fn parse(line: &str) -> Option<Request> {
        let (_, rest) = line.split_once("] \"")?;
        let (request, rest) = rest.split_once('"')?;
        let mut words = request.split(' ');
        let (method, uri) = (words.next()?, words.next()?);
        let status = rest.split_whitespace().next()?.parse().ok()?;
        let user_agent = rest.trim_end().strip_suffix('"')?.rsplit('"').next()?;
        Some(Request {
            method: method.to_string(),
            uri: uri.to_string(),
            status,
            user_agent: user_agent.to_string(),
        })
    }
}

/// A request that authenticated, from the registry's `response completed` line (which it
/// writes only for requests past its basic auth): `auth.user.name=membench
/// http.request.method=GET http.request.uri=/v2/... http.response.status=200`.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    pub method: String,
    pub uri: String,
    pub status: u16,
    pub user: String,
    pub user_agent: String,
}

impl Served {
    /// Whether this is containerd fetching `manifest` (`/v2/library/redis/manifests/8.2.3`)
    /// as `user`, served. containerd asks a mirror with the name's registry in the query
    /// (`?ns=docker.io`), which is not part of the manifest's path.
    pub fn is_containerd_fetch_of(&self, manifest: &str, user: &str) -> bool {
        self.uri.split('?').next() == Some(manifest)
            && self.status == 200
            && self.user == user
            && self.user_agent.starts_with("containerd/")
    }

    pub fn parse(line: &str) -> Option<Served> {
        if !line.contains("msg=\"response completed\"") {
            return None;
        }
        Some(Served {
            method: field(line, "http.request.method")?,
            uri: field(line, "http.request.uri")?,
            status: field(line, "http.response.status")?.parse().ok()?,
            user: field(line, "auth.user.name")?,
            user_agent: field(line, "http.request.useragent").unwrap_or_default(),
        })
    }
}

/// The value of ` key=value` or ` key="value"` in a logrus text line.
fn field(line: &str, key: &str) -> Option<String> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[at..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => &quoted[..quoted.find('"')?],
        None => rest.split(' ').next()?,
    };
    Some(value.to_string())
}

/// `NAME=value` lines.
fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.trim().split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

/// The path a mirror holds `official` under: without its registry host, Docker Hub's official
/// images under `library/`.
fn mirror_path(official: &str) -> String {
    match official.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            rest.to_string()
        }
        Some(_) => official.to_string(),
        None => format!("library/{official}"),
    }
}

/// A fresh directory of this process's own under the system's temporary directory.
fn tempfile_dir() -> anyhow::Result<PathBuf> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("membench-registry-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn official_images_map_to_the_names_a_mirror_holds() {
        assert_eq!(mirror_path("redis:8.2.3"), "library/redis:8.2.3");
        assert_eq!(mirror_path("valkey/valkey:9.1.2"), "valkey/valkey:9.1.2");
        assert_eq!(
            mirror_path("docker.dragonflydb.io/dragonflydb/dragonfly:v1.40.0"),
            "dragonflydb/dragonfly:v1.40.0"
        );
        assert_eq!(
            mirror_path("docker.io/library/redis:8.2.3"),
            "library/redis:8.2.3"
        );
    }

    #[test]
    fn requests_are_read_from_the_access_lines_and_users_from_the_completed_ones() {
        // Lines as distribution v3.1.2 writes them.
        let access = r#"127.0.0.1 - - [01/Dec/2026:22:05:28 +0000] "HEAD /v2/library/redis/manifests/8.2.3 HTTP/1.1" 401 87 "" "containerd/v2.4.2""#;
        assert_eq!(
            Request::parse(access),
            Some(Request {
                method: "HEAD".into(),
                uri: "/v2/library/redis/manifests/8.2.3".into(),
                status: 401,
                user_agent: "containerd/v2.4.2".into(),
            })
        );
        let completed = r#"time="2026-12-01T22:05:28.810531468Z" level=info msg="response completed" auth.user.name=membench go.version=go1.26.8 http.request.host="127.0.0.1:21358" http.request.id=01a2 http.request.method=GET http.request.remoteaddr="127.0.0.1:57148" http.request.uri=/v2/library/redis/manifests/9.9.9 http.request.useragent=curl/7.88.1 http.response.contenttype=application/vnd.oci.image.manifest.v1+json http.response.duration=3.030373ms http.response.status=200 http.response.written=401 vars.name=library/redis"#;
        assert_eq!(
            Served::parse(completed),
            Some(Served {
                method: "GET".into(),
                uri: "/v2/library/redis/manifests/9.9.9".into(),
                status: 200,
                user: "membench".into(),
                user_agent: "curl/7.88.1".into(),
            })
        );
        // Each parser takes only its own kind of line.
        assert_eq!(Served::parse(access), None);
        assert_eq!(Request::parse(completed), None);
    }

    #[test]
    fn a_containerd_fetch_is_known_by_its_manifests_path_user_and_agent_whatever_its_query() {
        let fetch = Served {
            method: "HEAD".into(),
            uri: "/v2/membench/membench/manifests/0.1.0?ns=ghcr.io".into(),
            status: 200,
            user: "membench".into(),
            user_agent: "containerd/v2.4.2".into(),
        };
        let manifest = "/v2/membench/membench/manifests/0.1.0";
        assert!(fetch.is_containerd_fetch_of(manifest, "membench"));
        assert!(!fetch.is_containerd_fetch_of("/v2/membench/membench/manifests/0.1", "membench"));
        assert!(!fetch.is_containerd_fetch_of(manifest, "someone-else"));
        let refused = Served {
            status: 404,
            ..fetch.clone()
        };
        assert!(!refused.is_containerd_fetch_of(manifest, "membench"));
        let by_curl = Served {
            user_agent: "curl/7.88.1".into(),
            ..fetch
        };
        assert!(!by_curl.is_containerd_fetch_of(manifest, "membench"));
    }

    #[test]
    fn the_env_file_is_read_by_name() {
        let vars = parse_env("REGISTRY=127.0.0.1:24000\nREGISTRY_USER=membench\n");
        assert_eq!(vars["REGISTRY"], "127.0.0.1:24000");
        assert_eq!(vars["REGISTRY_USER"], REGISTRY_USER);
    }
}
