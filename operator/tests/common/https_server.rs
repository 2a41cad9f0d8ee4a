//! An https server for tests of an RDB file at a URL: a CA and a server certificate for
//! 127.0.0.1 made for each server, served by tokio-rustls. It wants basic authentication as
//! [`USER`]:[`PASSWORD`] at /dump.rdb, none at /public.rdb; /moved redirects to /public.rdb;
//! /busy answers 503 (a server failing for a while); /held.rdb sends the first half of the dump
//! and holds the rest back for ever (a download under way, for a stop signal to land in);
//! anything else is 404. It records each request's path and Authorization header.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::{Either, Full};
use hyper::body::{Body, Bytes, Frame, SizeHint};
use hyper::{Request, Response, StatusCode};
use membench::crd::EngineKind;

pub const USER: &str = "backup-reader";
pub const PASSWORD: &str = "s3cret pass";

/// The requests a server was sent: each one's path and Authorization header.
pub type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// The test's https server: its address, the CA that signed its certificate (PEM), and the
/// Authorization headers it was sent, by path.
pub struct Server {
    pub address: SocketAddr,
    pub ca_pem: String,
    pub seen: Seen,
}

/// Serves `dump` as the module says, on a free port of 127.0.0.1, until the runtime ends.
pub async fn serve(dump: Vec<u8>) -> Server {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "membench rdb_url test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let config = rustls_server_config(cert.der().to_vec(), key.serialize_der());
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let dump = Bytes::from(dump);
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, dump, log) = (acceptor.clone(), dump.clone(), log.clone());
            tokio::spawn(async move {
                // A client that does not trust the certificate ends the handshake.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |request: Request<_>| {
                    let (dump, log) = (dump.clone(), log.clone());
                    async move { Ok::<_, std::convert::Infallible>(answer(&request, dump, &log)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Server {
        address,
        ca_pem: ca.pem(),
        seen,
    }
}

fn rustls_server_config(cert: Vec<u8>, key: Vec<u8>) -> tokio_rustls::rustls::ServerConfig {
    use tokio_rustls::rustls;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(cert)],
            rustls::pki_types::PrivatePkcs8KeyDer::from(key).into(),
        )
        .unwrap()
}

/// A body that sends its first part, then nothing more, never ending: the rest held back.
pub struct Held {
    first: Option<Bytes>,
    whole: u64,
}

impl Body for Held {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.first.take() {
            Some(first) => Poll::Ready(Some(Ok(Frame::data(first)))),
            None => Poll::Pending,
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.whole)
    }
}

type Answer = Response<Either<Full<Bytes>, Held>>;

fn answer<B>(
    request: &Request<B>,
    dump: Bytes,
    log: &Mutex<Vec<(String, Option<String>)>>,
) -> Answer {
    let authorization = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|a| a.to_str().ok())
        .map(str::to_string);
    log.lock()
        .unwrap()
        .push((request.uri().path().to_string(), authorization.clone()));
    let respond = |status: StatusCode, body: Bytes| {
        let mut response = Response::new(Either::Left(Full::new(body)));
        *response.status_mut() = status;
        response
    };
    // "backup-reader:s3cret pass" in base64 (RFC 7617).
    let wanted = "Basic YmFja3VwLXJlYWRlcjpzM2NyZXQgcGFzcw==";
    match request.uri().path() {
        "/dump.rdb" if authorization.as_deref() == Some(wanted) => respond(StatusCode::OK, dump),
        "/dump.rdb" => respond(StatusCode::UNAUTHORIZED, Bytes::new()),
        "/public.rdb" => respond(StatusCode::OK, dump),
        "/busy" => respond(StatusCode::SERVICE_UNAVAILABLE, Bytes::new()),
        "/held.rdb" => Response::new(Either::Right(Held {
            first: Some(dump.slice(..dump.len() / 2)),
            whole: dump.len() as u64,
        })),
        "/moved" => {
            let mut response = respond(StatusCode::FOUND, Bytes::new());
            response
                .headers_mut()
                .insert(hyper::header::LOCATION, "/public.rdb".parse().unwrap());
            response
        }
        _ => respond(StatusCode::NOT_FOUND, Bytes::new()),
    }
}

/// A dump the store's Valkey saved: strings, a hash, a list, a set and a sorted set, some
/// with a TTL, in two databases; and the keys by type of each database.
pub fn saved_dump() -> (Vec<u8>, BTreeMap<u64, BTreeMap<String, u64>>) {
    let source = super::start(EngineKind::Valkey, &[]);
    let mut con = super::connect(&source.address);
    for i in 0..200 {
        let _: () = redis::cmd("SET")
            .arg(format!("s:{i}"))
            .arg("x".repeat(i % 50 + 1))
            .query(&mut con)
            .unwrap();
    }
    let _: () = redis::cmd("EXPIRE")
        .arg("s:7")
        .arg(3600)
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg(&["a", "1", "b", "2"])
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("l")
        .arg(&["x", "y", "z"])
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SELECT").arg(1).query(&mut con).unwrap();
    let _: () = redis::cmd("SADD")
        .arg("set")
        .arg(&["1", "2"])
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg("z")
        .arg(&["1", "a"])
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let mut config = |name: &str| -> String {
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query(&mut con)
            .unwrap();
        pair[1].clone()
    };
    let path = Path::new(&config("dir")).join(config("dbfilename"));
    let dump = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    drop(con);
    source.stop();
    let types = BTreeMap::from([
        (
            0,
            BTreeMap::from([
                ("hash".to_string(), 1),
                ("list".to_string(), 1),
                ("string".to_string(), 200),
            ]),
        ),
        (
            1,
            BTreeMap::from([("set".to_string(), 1), ("zset".to_string(), 1)]),
        ),
    ]);
    (dump, types)
}
