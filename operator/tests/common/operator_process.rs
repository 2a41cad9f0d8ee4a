//! `membench operator` as its own process (this build's binary), so that its own log, metrics
//! and memory can be read, and a replica killed. Used by tests/security_e2e.rs, by the leader
//! hand-over in tests/fault_e2e.rs and, through a `#[path]` include, by
//! benches/operator_at_scale.rs. Killed when dropped; its log is removed then, unless an
//! assertion is failing (the thread panics), when its path is printed instead. A test that ends
//! with an error through `?` is not panicking yet when this drops, so its log goes.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// What the operator is started with besides the cluster it talks to.
pub struct OperatorArgs<'a> {
    /// The namespaces it watches (`--namespace a,b`).
    pub namespaces: &'a [&'a str],
    pub client_image: &'a str,
    /// `RUST_LOG` for its JSON log.
    pub rust_log: &'a str,
    /// The log file's name, in the temporary directory.
    pub log_name: &'a str,
    /// With leader election, this replica's identity (`POD_NAME`); its Lease is in the first
    /// namespace (`MEMBENCH_NAMESPACE`).
    pub leader_identity: Option<&'a str>,
}

pub struct OperatorProcess {
    child: Child,
    log: PathBuf,
    metrics_port: u16,
}

impl OperatorProcess {
    pub fn start(kubeconfig: &Path, args: &OperatorArgs) -> anyhow::Result<Self> {
        let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = std::env::temp_dir().join(args.log_name);
        let file = std::fs::File::create(&log)?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_membench"));
        command
            .args(["operator", "--namespace", &args.namespaces.join(",")])
            .args(["--client-image", args.client_image, "--log-format", "json"])
            .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", args.rust_log)
            .env_remove("MEMBENCH_WATCH_NAMESPACE")
            .env_remove("MEMBENCH_NAMESPACE")
            .env_remove("POD_NAME");
        if let Some(identity) = args.leader_identity {
            let lease_namespace = args.namespaces.first().ok_or_else(|| {
                anyhow::anyhow!("leader election needs a namespace for its Lease")
            })?;
            command
                .arg("--leader-election")
                .env("MEMBENCH_NAMESPACE", lease_namespace)
                .env("POD_NAME", identity);
        }
        let child = command
            .stdout(file.try_clone()?)
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()?;
        Ok(Self {
            child,
            log,
            metrics_port,
        })
    }

    /// Kills it (SIGKILL, as a node dying would) and waits until it is gone.
    pub fn kill(&mut self) -> std::io::Result<()> {
        self.child.kill()?;
        self.child.wait().map(drop)
    }

    /// Everything it has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its `/metrics` page, as an HTTP/1.0 response.
    pub fn metrics(&self) -> anyhow::Result<String> {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.metrics_port))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
        let mut text = String::new();
        stream.read_to_string(&mut text)?;
        Ok(text)
    }

    /// The value of an unlabelled metric, if it is served.
    pub fn metric(&self, name: &str) -> Option<f64> {
        let text = self.metrics().ok()?;
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))?
            .trim()
            .parse()
            .ok()
    }

    /// VmHWM of the operator process, in MiB.
    pub fn peak_rss_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("the operator's log: {}", self.log.display());
        } else {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}
