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

/// Serves `/metrics`, `/healthz` and `/readyz` on `addr` until the task is dropped or accepting
/// a connection fails.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    ready: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    serve_on(listener, metrics, ready).await
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
}
