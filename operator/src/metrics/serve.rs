//! The HTTP server of the metrics: `/metrics`, `/healthz` and `/readyz`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus::{Encoder, TextEncoder};
use tokio::net::TcpListener;

use super::Metrics;

/// `membench operator --metrics-addr`'s default: port 8080 on every IPv6 and IPv4 address.
pub const DEFAULT_ADDR: &str = "[::]:8080";

/// Serves `/metrics`, `/healthz` and `/readyz` on `addr` (see [`bind`]) until the task is
/// dropped or accepting a connection fails.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    ready: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let listener = bind(addr)?;
    serve_on(listener, metrics, ready).await
}

/// The metrics listener on `addr`. The unspecified IPv6 address (`[::]`, the operator's default)
/// listens on IPv6 and IPv4 both: the socket is dual-stack (`IPV6_V6ONLY` off) whatever the
/// node's `net.ipv6.bindv6only` says, so a scraper reaches it on a pod's IPv4 and IPv6 address
/// alike. Where the kernel has no IPv6 at all (`ipv6.disable=1`), `[::]` falls back to `0.0.0.0`
/// on the same port, with a warning. Any other address is bound as given (`0.0.0.0` is IPv4 only,
/// a pod IP only that address). Must be called within a tokio runtime.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    match bind_socket(addr) {
        Err(e) if addr == unspecified_v6(addr.port()) && ipv6_unavailable(&e) => {
            let v4 = SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, addr.port()));
            tracing::warn!(
                "metrics: this kernel has no IPv6 ({e}); listening on {v4} (IPv4 only) instead \
                 of {addr}"
            );
            bind_socket(v4)
        }
        other => other,
    }
    .map_err(|e| std::io::Error::new(e.kind(), format!("metrics address {addr}: {e}")))
}

fn unspecified_v6(port: u16) -> SocketAddr {
    SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port))
}

/// No IPv6 in the kernel: the socket cannot be made (EAFNOSUPPORT) or `::` cannot be bound.
fn ipv6_unavailable(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc_errno::EAFNOSUPPORT | libc_errno::EADDRNOTAVAIL)
    )
}

/// Linux's errno values for [`ipv6_unavailable`] (membench runs on Linux only).
mod libc_errno {
    pub const EAFNOSUPPORT: i32 = 97;
    pub const EADDRNOTAVAIL: i32 = 99;
}

fn bind_socket(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(false)?;
    }
    // As tokio's own bind: a restarted operator may take the port while old connections linger.
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(std::net::TcpListener::from(socket))
}

/// Like [`serve`], on a listener the caller already bound (tests bind port 0 and read it back).
pub async fn serve_on(
    listener: TcpListener,
    metrics: Metrics,
    ready: Arc<AtomicBool>,
) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let metrics = metrics.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let response = respond(&request, &metrics, &ready);
                async move { Ok::<_, Infallible>(response) }
            });
            // A client that hangs up mid-request is not the operator's problem.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn respond(
    request: &Request<Incoming>,
    metrics: &Metrics,
    ready: &AtomicBool,
) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: &'static str| {
        Response::builder()
            .status(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .expect("valid response")
    };
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
    }
    match request.uri().path() {
        "/metrics" => Response::builder()
            .header("content-type", TextEncoder::new().format_type())
            .body(Full::new(Bytes::from(metrics.encode())))
            .expect("valid response"),
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" if ready.load(Ordering::Relaxed) => text(StatusCode::OK, "ready\n"),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /healthz or /readyz\n",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, response)
    }

    #[tokio::test]
    async fn the_server_answers_health_always_readiness_once_ready_and_metrics_as_text() {
        let metrics = Metrics::new();
        drop(metrics.reconcile_started());
        let ready = Arc::new(AtomicBool::new(false));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve_on(listener, metrics, ready.clone()));

        assert_eq!(get(addr, "/healthz").await.0, 200);
        assert_eq!(get(addr, "/readyz").await.0, 503);
        ready.store(true, Ordering::Relaxed);
        assert_eq!(get(addr, "/readyz").await.0, 200);
        let (status, response) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            response.contains("content-type: text/plain; version=0.0.4"),
            "{response}"
        );
        assert!(
            response.contains("membench_reconciliations_total 1"),
            "{response}"
        );
        assert_eq!(get(addr, "/elsewhere").await.0, 404);
        server.abort();
    }

    #[tokio::test]
    async fn the_default_address_serves_metrics_on_ipv6_and_ipv4_loopback() {
        // The operator's default (`--metrics-addr [::]:8080`), on a free port.
        let default: SocketAddr = DEFAULT_ADDR.parse().unwrap();
        assert_eq!(default, unspecified_v6(8080));
        let listener = bind(unspecified_v6(0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(listener.local_addr().unwrap(), unspecified_v6(port));
        let metrics = Metrics::new();
        drop(metrics.reconcile_started());
        let server = tokio::spawn(serve_on(listener, metrics, Arc::new(AtomicBool::new(true))));
        for host in ["[::1]", "127.0.0.1"] {
            let addr: SocketAddr = format!("{host}:{port}").parse().unwrap();
            let (status, response) = get(addr, "/metrics").await;
            assert_eq!(status, 200, "{addr}: {response}");
            assert!(
                response.contains("membench_reconciliations_total 1"),
                "{addr}: {response}"
            );
        }
        server.abort();
    }

    #[tokio::test]
    async fn an_ipv4_address_is_bound_as_given_and_a_taken_port_names_the_address() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        assert!(addr.is_ipv4());
        let error = bind(addr).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::AddrInUse);
        assert!(
            error
                .to_string()
                .starts_with(&format!("metrics address {addr}: ")),
            "{error}"
        );
    }
}
