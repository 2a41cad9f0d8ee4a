//! The kubelet's HTTPS endpoint, as far as `kubectl logs` needs it: the API server proxies
//! `pods/log` to `https://<node InternalIP>:<kubeletEndpoint port>/containerLogs/...`, and this
//! answers from the container's log file. Client certificates signed by the cluster CA are
//! required (the API server presents one), as a kubelet requires them.
//!
//! `exec`, `attach` and `port-forward` are not supported: there is no container to enter.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Where the endpoint listens and the certificates it uses.
#[derive(Debug, Clone)]
pub struct KubeletTls {
    pub address: SocketAddr,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA whose client certificates are accepted (the cluster CA).
    pub client_ca: PathBuf,
}

fn tls_config(tls: &KubeletTls) -> anyhow::Result<ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&tls.cert)
        .with_context(|| format!("reading {}", tls.cert.display()))?
        .collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&tls.key)
        .with_context(|| format!("reading {}", tls.key.display()))?;
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(&tls.client_ca)? {
        roots.add(ca?)?;
    }
    let verifier = WebPkiClientVerifier::builder(Arc::new(roots)).build()?;
    Ok(ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?)
}

/// Serves container logs from `state_dir/pods` until the process ends.
pub async fn serve(tls: KubeletTls, state_dir: PathBuf) -> anyhow::Result<()> {
    let acceptor = TlsAcceptor::from(Arc::new(tls_config(&tls)?));
    let listener = tokio::net::TcpListener::bind(tls.address)
        .await
        .with_context(|| format!("listening on {}", tls.address))?;
    tracing::info!(address = %tls.address, "kubelet endpoint (container logs) listening");
    let pods_dir = Arc::new(state_dir.join("pods"));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a kubelet endpoint connection failed");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let pods_dir = pods_dir.clone();
        tokio::spawn(async move {
            let stream = match acceptor.accept(tcp).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
            };
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let pods_dir = pods_dir.clone();
                async move { Ok::<_, Infallible>(respond(&request, &pods_dir).await) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "kubelet endpoint connection ended");
            }
        });
    }
}

fn text(status: StatusCode, message: impl Into<String>) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(message.into())).boxed_unsync());
    *response.status_mut() = status;
    response
}

/// The options of a `containerLogs` request that the agent honours.
#[derive(Debug, Default, PartialEq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub tail_lines: Option<usize>,
    pub limit_bytes: Option<usize>,
}

impl LogOptions {
    pub fn parse(query: &str) -> LogOptions {
        let mut options = LogOptions::default();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "follow" => options.follow = value == "true" || value == "1",
                "previous" => options.previous = value == "true" || value == "1",
                "tailLines" => options.tail_lines = value.parse().ok(),
                "limitBytes" => options.limit_bytes = value.parse().ok(),
                _ => {}
            }
        }
        options
    }
}

/// The directory of the newest pod called `name` in `namespace` (names are unique at a time,
/// but an earlier pod of the same name may not be cleaned up yet).
fn pod_dir(pods_dir: &Path, namespace: &str, name: &str) -> Option<PathBuf> {
    let prefix = format!("{namespace}_{name}_");
    std::fs::read_dir(pods_dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
}

/// The last `tail_lines` lines of `log`, then at most `limit_bytes` of them.
pub fn select_log(log: &[u8], options: &LogOptions) -> Vec<u8> {
    let mut start = 0;
    if let Some(n) = options.tail_lines {
        // Walk back over n line ends (a final newline ends the last line, not a new one).
        let body = log.strip_suffix(b"\n").unwrap_or(log);
        let mut seen = 0;
        start = 0;
        for (i, b) in body.iter().enumerate().rev() {
            if *b == b'\n' {
                seen += 1;
                if seen == n {
                    start = i + 1;
                    break;
                }
            }
        }
        if n == 0 {
            start = log.len();
        }
    }
    let mut selected = log[start..].to_vec();
    if let Some(limit) = options.limit_bytes {
        selected.truncate(limit);
    }
    selected
}

async fn respond(request: &Request<Incoming>, pods_dir: &Path) -> Response<Body> {
    let path = request.uri().path();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let ["containerLogs", namespace, pod, container] = parts.as_slice() else {
        return text(
            StatusCode::NOT_FOUND,
            format!(
                "{path}: the membench node agent serves only /containerLogs (no exec, attach or port-forward)\n"
            ),
        );
    };
    let options = LogOptions::parse(request.uri().query().unwrap_or(""));
    let Some(dir) = pod_dir(pods_dir, namespace, pod) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("pod {namespace}/{pod} is not running on this node agent\n"),
        );
    };
    let log_path = if options.previous {
        dir.join(format!("{container}.previous.log"))
    } else {
        dir.join(format!("{container}.log"))
    };
    let content = match tokio::fs::read(&log_path).await {
        Ok(content) => content,
        Err(_) if options.previous => {
            return text(
                StatusCode::BAD_REQUEST,
                format!(
                    "previous terminated container \"{container}\" in pod \"{pod}\" not found\n"
                ),
            );
        }
        Err(_) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("container \"{container}\" in pod \"{pod}\" is waiting to start\n"),
            );
        }
    };
    let selected = select_log(&content, &options);
    if !options.follow || options.previous {
        return Response::new(Full::new(Bytes::from(selected)).boxed_unsync());
    }
    follow(
        log_path,
        dir.join(format!("{container}.pid")),
        selected,
        content.len() as u64,
    )
}

/// Streams the log as it grows, until the container's process is gone.
fn follow(log_path: PathBuf, pid_file: PathBuf, first: Vec<u8>, offset: u64) -> Response<Body> {
    struct Tail {
        log_path: PathBuf,
        pid_file: PathBuf,
        offset: u64,
        first: Option<Vec<u8>>,
    }
    let stream = futures::stream::unfold(
        Tail {
            log_path,
            pid_file,
            offset,
            first: Some(first),
        },
        |mut tail| async move {
            if let Some(first) = tail.first.take() {
                return Some((Bytes::from(first), tail));
            }
            loop {
                let running = tail.pid_file.exists();
                let mut chunk = Vec::new();
                if let Ok(mut file) = tokio::fs::File::open(&tail.log_path).await
                    && file
                        .seek(std::io::SeekFrom::Start(tail.offset))
                        .await
                        .is_ok()
                {
                    let _ = file.read_to_end(&mut chunk).await;
                }
                if !chunk.is_empty() {
                    tail.offset += chunk.len() as u64;
                    return Some((Bytes::from(chunk), tail));
                }
                if !running {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        },
    );
    let body = StreamBody::new(stream.map(|chunk| Ok::<_, Infallible>(Frame::data(chunk))));
    Response::new(BodyExt::boxed_unsync(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_options_come_from_the_query() {
        let options = LogOptions::parse("follow=true&tailLines=10&limitBytes=500&timestamps=true");
        assert_eq!(
            options,
            LogOptions {
                follow: true,
                previous: false,
                tail_lines: Some(10),
                limit_bytes: Some(500)
            }
        );
    }

    #[test]
    fn tail_lines_counts_lines_from_the_end() {
        let log = b"one\ntwo\nthree\n";
        let tail = |n| {
            select_log(
                log,
                &LogOptions {
                    tail_lines: Some(n),
                    ..Default::default()
                },
            )
        };
        assert_eq!(tail(1), b"three\n");
        assert_eq!(tail(2), b"two\nthree\n");
        assert_eq!(tail(5), b"one\ntwo\nthree\n");
        assert_eq!(tail(0), b"");
        let limited = select_log(
            log,
            &LogOptions {
                limit_bytes: Some(3),
                ..Default::default()
            },
        );
        assert_eq!(limited, b"one");
    }
}
