//! An RDB file at an https URL: fetched into a file of the temporary directory (`TMPDIR`; in a
//! client pod, an emptyDir the operator mounts there) once per client pod, or once per
//! `membench run`, read from that file as any other, and removed when the run ends.
//!
//! The server is trusted by the Mozilla roots compiled in (`webpki-roots`: the image has no
//! certificate store), by the certificates of the file `SSL_CERT_FILE` names, and by a
//! credentials directory's `ca.crt`. The credentials directory holds what a Kubernetes Secret
//! mounted as a volume holds, one file a key: `username` and `password` (HTTP basic
//! authentication), or `token` (a bearer token), and `ca.crt`, each optional. A presigned URL
//! carries its credentials in its query: messages and results name the URL without it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::prelude::BASE64_STANDARD;
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Where a client pod finds `workload.rdb.credentialsSecret`, mounted read-only.
pub const CREDENTIALS_MOUNT_PATH: &str = "/etc/membench/rdb-credentials";

/// Where a client pod downloads a URL's file: an emptyDir, the pod's `TMPDIR`.
pub const DOWNLOAD_MOUNT_PATH: &str = "/var/lib/membench/download";

/// Redirects followed (each to https) before the download is refused.
const MAX_REDIRECTS: usize = 5;

/// How long the server may stay silent (connecting, answering, between parts of the body).
const SILENCE: Duration = Duration::from_secs(60);

/// The URL as messages and results show it: without its query and fragment (a presigned URL's
/// signature) and without user information.
pub fn redacted(url: &str) -> String {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    let shown = &url[..end];
    let without_user = match (shown.find("://"), shown.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}{}", &shown[..scheme + 3], &shown[at + 1..])
        }
        _ => shown.to_string(),
    };
    match end < url.len() {
        true => format!("{without_user}?…"),
        false => without_user,
    }
}

/// Whether `--rdb`'s value names a URL (to fetch) rather than a file on this machine.
pub fn is_url(source: &std::path::Path) -> Option<&str> {
    source.to_str().filter(|s| s.contains("://"))
}

/// Refuses a URL membench will not fetch, saying why and what to write instead: only https
/// (an RDB file holds the data, and credentials travel with the request), with a host, and
/// without user information (credentials go in the Secret or the credentials directory).
pub fn check_url(url: &str) -> Result<http::Uri, String> {
    let shown = redacted(url);
    if !url.starts_with("https://") {
        return Err(format!(
            "is {shown}: membench fetches a backup over https only (the file holds your data, and credentials travel with the request); serve it over https, or copy the file and name its path"
        ));
    }
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("is {shown}, not a URL membench can read ({e})"))?;
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(format!(
            "is {shown} with a user name in it: put the credentials in the Secret (credentialsSecret: username and password, or token), never in the URL"
        ));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("is {shown}, with no host"));
    }
    Ok(uri)
}

/// What a credentials directory holds.
#[derive(Default)]
struct Credentials {
    authorization: Option<String>,
    ca: Vec<rustls::pki_types::CertificateDer<'static>>,
}

/// Reads `dir`: `username` and `password`, or `token`, and `ca.crt`; each file's trailing
/// newline is not part of its value.
fn read_credentials(dir: &Path) -> Result<Credentials, String> {
    let read = |name: &str| -> Result<Option<String>, String> {
        let path = dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text.trim_end_matches(['\n', '\r']).to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    };
    if !dir.is_dir() {
        return Err(format!(
            "the credentials directory {} is not a directory: it holds one file a key (username and password, or token, and ca.crt), as a mounted Secret does",
            dir.display()
        ));
    }
    let basic = match (read("username")?, read("password")?) {
        (Some(user), Some(password)) => Some(format!(
            "Basic {}",
            BASE64_STANDARD.encode(format!("{user}:{password}"))
        )),
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => {
            return Err(format!(
                "the credentials in {} hold one of username and password: basic authentication needs both",
                named(dir)
            ));
        }
    };
    let bearer = read("token")?.map(|token| format!("Bearer {token}"));
    if basic.is_some() && bearer.is_some() {
        return Err(format!(
            "the credentials in {} hold both username and password and a token: keep one way to authenticate",
            named(dir)
        ));
    }
    let ca = match read("ca.crt")? {
        Some(pem) => certificates(pem.as_bytes(), &dir.join("ca.crt"))?,
        None => Vec::new(),
    };
    Ok(Credentials {
        authorization: basic.or(bearer),
        ca,
    })
}

/// The certificates of a PEM file; one that holds none is refused.
fn certificates(
    pem: &[u8],
    path: &Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject as _;
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{} is not a PEM certificate file: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{} holds no certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

/// The roots a server's certificate is checked against.
fn roots(credentials: &Credentials) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(file) = std::env::var_os("SSL_CERT_FILE") {
        let path = PathBuf::from(file);
        let pem = std::fs::read(&path)
            .map_err(|e| format!("cannot read SSL_CERT_FILE {}: {e}", path.display()))?;
        for cert in certificates(&pem, &path)? {
            roots
                .add(cert)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    for cert in &credentials.ca {
        roots
            .add(cert.clone())
            .map_err(|e| format!("ca.crt: {e}"))?;
    }
    Ok(roots)
}

/// Why a download failed, and whether another attempt may do better: the server failed for a
/// while (a 5xx or 429 answer, no answer, a connection or download broken off), not the URL,
/// the credentials or the certificate.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub transient: bool,
}

impl Failure {
    fn lasting(message: String) -> Self {
        Self {
            message,
            transient: false,
        }
    }

    fn transient(message: String) -> Self {
        Self {
            message,
            transient: true,
        }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::lasting(message)
    }
}

/// The downloaded copies of this process that exist now, partial ones included: what
/// [`remove_copies`] removes when the process must exit without running destructors.
static LIVE_COPIES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn live_copies() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE_COPIES.lock().unwrap_or_else(|e| e.into_inner())
}

/// A file that is removed when dropped: the downloaded copy. It is listed as live from the
/// moment it is named, before its first byte, until it is removed.
#[derive(Debug)]
pub struct Downloaded {
    pub path: PathBuf,
}

impl Downloaded {
    /// A new copy named in the temporary directory, listed as live.
    fn named() -> Self {
        let path = std::env::temp_dir().join(format!(
            "membench-rdb-{}-{}.rdb",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        live_copies().push(path.clone());
        Self { path }
    }
}

impl Drop for Downloaded {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        live_copies().retain(|p| p != &self.path);
    }
}

/// Removes every downloaded copy of this process that is still there, partial or whole, and
/// returns how many: called just before the process exits on a stop signal
/// (`client::pod_io::stop`), where no destructor runs and a copy would be left in `TMPDIR`.
pub fn remove_copies() -> usize {
    let mut live = live_copies();
    let removed = live
        .iter()
        .filter(|path| std::fs::remove_file(path).is_ok())
        .count();
    live.clear();
    removed
}

/// Fetches `url` into a new file of the temporary directory, with the credentials of
/// `credentials_dir` when given. Every failure says what went wrong with the URL (without its
/// query) and what to do; a partial file is removed.
pub async fn download(url: &str, credentials_dir: Option<&Path>) -> Result<Downloaded, Failure> {
    let shown = redacted(url);
    let mut uri = check_url(url)?;
    let credentials = match credentials_dir {
        Some(dir) => read_credentials(dir)?,
        None => Credentials::default(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots(&credentials)?)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let origin = uri.authority().cloned();
    let mut redirects = 0;
    let response = loop {
        let mut request =
            http::Request::get(uri.clone()).header(http::header::USER_AGENT, "membench");
        // Credentials go to the URL's own server only, never to one a redirect names.
        if let Some(authorization) = &credentials.authorization
            && uri.authority() == origin.as_ref()
        {
            request = request.header(http::header::AUTHORIZATION, authorization);
        }
        let request = request
            .body(Empty::new())
            .map_err(|e| format!("{shown}: {e}"))?;
        let response = tokio::time::timeout(SILENCE, client.request(request))
            .await
            .map_err(|_| {
                Failure::transient(format!(
                    "{shown}: no answer in {} s; check that the server is up and reachable from where membench runs",
                    SILENCE.as_secs()
                ))
            })?
            .map_err(|e| connect_failure(&shown, &e, credentials_dir))?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| format!("{shown} answered {status} without a Location"))?;
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(Failure::lasting(format!(
                    "{shown} redirected more than {MAX_REDIRECTS} times: name the file's final URL"
                )));
            }
            // A Location of a path alone is on the same server.
            let location = match (
                location.starts_with('/') && !location.starts_with("//"),
                uri.authority(),
            ) {
                (true, Some(authority)) => format!("https://{authority}{location}"),
                _ => location.to_string(),
            };
            uri =
                check_url(&location).map_err(|e| format!("{shown} redirects to a URL that {e}"))?;
            continue;
        }
        if !status.is_success() {
            let message = refusal(
                &shown,
                status,
                credentials_dir,
                credentials.authorization.is_some(),
            );
            return Err(match status.is_server_error() || status.as_u16() == 429 {
                true => Failure::transient(message),
                false => Failure::lasting(message),
            });
        }
        break response;
    };
    let expected = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|l| l.to_str().ok()?.parse::<u64>().ok());
    let file = Downloaded::named();
    let dir = file
        .path
        .parent()
        .unwrap_or(Path::new("/"))
        .display()
        .to_string();
    let mut out = std::fs::File::create(&file.path).map_err(|e| {
        format!("cannot write the download of {shown} into {dir}: {e}; set TMPDIR to a directory with room for the file")
    })?;
    let mut body = response.into_body();
    let mut written = 0u64;
    loop {
        let frame = tokio::time::timeout(SILENCE, body.frame())
            .await
            .map_err(|_| {
                Failure::transient(format!(
                    "{shown}: the server sent nothing for {} s after {written} bytes",
                    SILENCE.as_secs()
                ))
            })?;
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|e| {
            Failure::transient(format!(
                "{shown}: the download broke off after {written} bytes ({e}); try again"
            ))
        })?;
        if let Some(data) = frame.data_ref() {
            out.write_all(data).map_err(|e| {
                format!(
                    "cannot write the download of {shown} into {dir} after {written} bytes: {e}; free room there or set TMPDIR to a directory with room for the file{}",
                    expected.map(|n| format!(" ({n} bytes)")).unwrap_or_default()
                )
            })?;
            written += data.len() as u64;
        }
    }
    out.flush()
        .map_err(|e| format!("cannot write the download of {shown} into {dir}: {e}"))?;
    if let Some(expected) = expected
        && expected != written
    {
        return Err(Failure::transient(format!(
            "{shown}: the server announced {expected} bytes and sent {written}; try again"
        )));
    }
    Ok(file)
}

/// [`download`] from code that is not async, or runs inside a runtime it must not block on:
/// on a thread of its own, with a runtime of its own.
pub fn download_blocking(url: &str, credentials_dir: Option<&Path>) -> Result<Downloaded, Failure> {
    let url = url.to_string();
    let dir = credentials_dir.map(Path::to_path_buf);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::lasting(format!("cannot start the download: {e}")))?;
        runtime.block_on(download(&url, dir.as_deref()))
    })
    .join()
    .unwrap_or_else(|_| Err(Failure::lasting("the download stopped unexpectedly".into())))
}

static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// What a refusal by the server means, and what to do.
/// `authenticated`: whether the request carried credentials.
fn refusal(
    shown: &str,
    status: http::StatusCode,
    credentials_dir: Option<&Path>,
    authenticated: bool,
) -> String {
    let what = match (status.as_u16(), credentials_dir) {
        (401, Some(dir)) if !authenticated => format!(
            "the server wants credentials, and {} has none: add username and password, or token",
            named(dir)
        ),
        (401, None) => {
            "the server wants credentials: give them in credentialsSecret (username and password, or token)".to_string()
        }
        (401 | 403, Some(dir)) => format!(
            "the server refused the credentials of {}: check them (username and password, or token)",
            named(dir)
        ),
        (403, None) => "the server forbids it: give credentials in credentialsSecret, or check that a presigned URL has not expired".into(),
        (404, _) => "no file there: check the URL".into(),
        _ => "try again later, or check the server".into(),
    };
    format!("{shown} answered {status}: {what}")
}

/// The credentials directory as its user knows it: in a client pod, the benchmark's
/// `credentialsSecret`, mounted there.
fn named(dir: &Path) -> String {
    match dir == Path::new(CREDENTIALS_MOUNT_PATH) {
        true => format!(
            "spec.workload.rdb.credentialsSecret (mounted at {CREDENTIALS_MOUNT_PATH}; a Secret the namespace lacks mounts empty)"
        ),
        false => dir.display().to_string(),
    }
}

/// Why the connection or TLS handshake failed, and what to do.
fn connect_failure(
    shown: &str,
    error: &hyper_util::client::legacy::Error,
    credentials_dir: Option<&Path>,
) -> Failure {
    let mut detail = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        detail = format!("{detail}: {cause}");
        source = cause.source();
    }
    let untrusted = detail.contains("certificate") || detail.contains("UnknownIssuer");
    let hint = if untrusted {
        match credentials_dir {
            Some(dir) => format!(
                "the server's certificate is not trusted: put the CA that signed it in ca.crt of {}",
                named(dir)
            ),
            None => "the server's certificate is not trusted: give the CA that signed it as ca.crt in credentialsSecret (locally, SSL_CERT_FILE names a PEM file of trusted CAs)".into(),
        }
    } else {
        "check that the server is up and reachable from where membench runs".into()
    };
    let message = format!("cannot fetch {shown} ({detail}): {hint}");
    match untrusted {
        true => Failure::lasting(message),
        false => Failure::transient(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_live_from_its_name_until_removed_and_remove_copies_removes_what_is_left() {
        let kept = Downloaded::named();
        std::fs::write(&kept.path, b"REDIS0011").unwrap();
        let dropped = Downloaded::named();
        std::fs::write(&dropped.path, b"REDIS0011").unwrap();
        let dropped_path = dropped.path.clone();
        drop(dropped);
        assert!(!dropped_path.exists());
        assert!(
            !live_copies().contains(&dropped_path),
            "a removed copy stays listed"
        );
        assert!(live_copies().contains(&kept.path));
        // As the stop path does before exiting: the copy that destructors would not remove.
        assert!(remove_copies() >= 1);
        assert!(!kept.path.exists(), "{} left behind", kept.path.display());
        assert!(live_copies().is_empty());
    }

    #[test]
    fn a_url_is_shown_without_its_query_and_user() {
        assert_eq!(
            redacted("https://b.s3.amazonaws.com/dump.rdb?X-Amz-Signature=abc"),
            "https://b.s3.amazonaws.com/dump.rdb?…"
        );
        assert_eq!(
            redacted("https://me:secret@host/dump.rdb"),
            "https://host/dump.rdb"
        );
        assert_eq!(redacted("https://host/a.rdb"), "https://host/a.rdb");
    }

    #[test]
    fn only_an_https_url_without_credentials_is_fetched() {
        assert!(check_url("https://host:8443/backups/dump.rdb").is_ok());
        let http = check_url("http://host/dump.rdb").unwrap_err();
        assert!(http.contains("over https only"), "{http}");
        let user = check_url("https://me:pw@host/dump.rdb").unwrap_err();
        assert!(
            user.contains("never in the URL") && !user.contains("pw"),
            "{user}"
        );
        assert!(check_url("https:///dump.rdb").is_err());
    }

    #[test]
    fn a_credentials_directory_gives_one_way_to_authenticate() {
        let dir = std::env::temp_dir().join(format!("membench-creds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("username"), "Aladdin\n").unwrap();
        let half = read_credentials(&dir).err().unwrap();
        assert!(half.contains("needs both"), "{half}");
        std::fs::write(dir.join("password"), "open sesame").unwrap();
        // RFC 7617's example.
        assert_eq!(
            read_credentials(&dir).unwrap().authorization.as_deref(),
            Some("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
        );
        std::fs::write(dir.join("token"), "t").unwrap();
        let both = read_credentials(&dir).err().unwrap();
        assert!(both.contains("keep one way"), "{both}");
        std::fs::write(dir.join("ca.crt"), "not a certificate").unwrap();
        std::fs::remove_file(dir.join("username")).unwrap();
        std::fs::remove_file(dir.join("password")).unwrap();
        let ca = read_credentials(&dir).err().unwrap();
        assert!(
            ca.contains("ca.crt") && ca.contains("no certificate"),
            "{ca}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
