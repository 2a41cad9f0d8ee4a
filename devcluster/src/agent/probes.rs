//! Container probes (startup, readiness, liveness) run from this machine: `exec` runs the
//! command locally, `tcpSocket` connects and `httpGet` sends a plain HTTP GET, all to the pod's
//! address unless the probe names a host.
//!
//! Inside a real pod, `localhost` is the pod itself; here it is the machine, and engines listen
//! only on the pod's address. So an exec probe running `redis-cli` or `valkey-cli` without
//! `-h`/`-u` gets `-h <podIP>` inserted, as the server got `--bind <podIP>`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A probe's timing and thresholds, with Kubernetes' defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeTiming {
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

impl ProbeTiming {
    pub fn of(probe: &Probe) -> ProbeTiming {
        let secs =
            |v: Option<i32>, default: i32| Duration::from_secs(v.unwrap_or(default).max(0) as u64);
        ProbeTiming {
            initial_delay: secs(probe.initial_delay_seconds, 0),
            period: secs(probe.period_seconds, 10).max(Duration::from_secs(1)),
            timeout: secs(probe.timeout_seconds, 1).max(Duration::from_secs(1)),
            success_threshold: probe.success_threshold.unwrap_or(1).max(1) as u32,
            failure_threshold: probe.failure_threshold.unwrap_or(3).max(1) as u32,
        }
    }
}

/// Where and how to run an exec probe's command.
pub struct ExecContext<'a> {
    pub env: &'a BTreeMap<String, String>,
    pub working_dir: &'a PathBuf,
    /// Resolves a program name the way the container's command was resolved.
    pub find_program: &'a (dyn Fn(&str) -> Option<PathBuf> + Sync),
}

/// The outcome of one probe run; the error says why it failed (for events and logs).
pub type ProbeResult = Result<(), String>;

/// Runs a probe once.
pub async fn run_probe(
    probe: &Probe,
    container: &Container,
    pod_ip: &str,
    exec: &ExecContext<'_>,
) -> ProbeResult {
    let timeout = ProbeTiming::of(probe).timeout;
    let outcome = tokio::time::timeout(timeout, async {
        if let Some(action) = &probe.exec {
            run_exec(action.command.as_deref().unwrap_or_default(), pod_ip, exec).await
        } else if let Some(tcp) = &probe.tcp_socket {
            let port = resolve_port(&tcp.port, container)?;
            let host = tcp.host.as_deref().unwrap_or(pod_ip);
            TcpStream::connect((host, port))
                .await
                .map(|_| ())
                .map_err(|e| format!("dial tcp {host}:{port}: {e}"))
        } else if let Some(http) = &probe.http_get {
            let port = resolve_port(&http.port, container)?;
            let host = http.host.as_deref().unwrap_or(pod_ip);
            if http
                .scheme
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("https"))
            {
                return Err(
                    "httpGet probes with scheme HTTPS are not supported by the node agent".into(),
                );
            }
            http_get(host, port, http.path.as_deref().unwrap_or("/")).await
        } else if probe.grpc.is_some() {
            Err("grpc probes are not supported by the node agent".into())
        } else {
            Err("probe has no handler".into())
        }
    })
    .await;
    outcome.unwrap_or_else(|_| Err(format!("probe timed out after {timeout:?}")))
}

/// A port given by number or by the name of one of the container's ports.
fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n).map_err(|_| format!("invalid port {n}")),
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name))
            .and_then(|p| u16::try_from(p.container_port).ok())
            .ok_or_else(|| format!("container has no port named {name:?}")),
    }
}

/// The exec probe's command with the pod-address shim applied to redis-cli and valkey-cli.
pub fn exec_probe_argv(command: &[String], pod_ip: &str) -> Vec<String> {
    let mut argv = command.to_vec();
    let is_cli = argv
        .first()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .is_some_and(|base| base == "redis-cli" || base == "valkey-cli");
    let names_host = argv
        .iter()
        .skip(1)
        .any(|a| a == "-h" || a == "-u" || a == "-s");
    if is_cli && !names_host {
        argv.splice(1..1, ["-h".to_string(), pod_ip.to_string()]);
    }
    argv
}

async fn run_exec(command: &[String], pod_ip: &str, exec: &ExecContext<'_>) -> ProbeResult {
    let argv = exec_probe_argv(command, pod_ip);
    let Some((program, args)) = argv.split_first() else {
        return Err("exec probe has an empty command".into());
    };
    let Some(path) = (exec.find_program)(program) else {
        return Err(format!("exec: {program:?}: executable file not found"));
    };
    let output = tokio::process::Command::new(path)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(exec.env)
        .current_dir(exec.working_dir)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("exec {program}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "command {argv:?} exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stdout).trim()
        ))
    }
}

/// A minimal HTTP/1.1 GET: success is a status from 200 to 399, as the kubelet counts it.
async fn http_get(host: &str, port: u16, path: &str) -> ProbeResult {
    let mut stream = TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/membench-node-agent\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut head = vec![0u8; 64];
    let n = stream.read(&mut head).await.map_err(|e| e.to_string())?;
    let line = String::from_utf8_lossy(&head[..n]);
    let code: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("malformed HTTP response: {line:?}"))?;
    if (200..400).contains(&code) {
        Ok(())
    } else {
        Err(format!("HTTP probe failed with statuscode: {code}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cli_probes_are_pointed_at_the_pod_address() {
        assert_eq!(
            exec_probe_argv(&strings(&["redis-cli", "ping"]), "127.100.0.2"),
            strings(&["redis-cli", "-h", "127.100.0.2", "ping"])
        );
        assert_eq!(
            exec_probe_argv(
                &strings(&["valkey-cli", "-h", "10.0.0.1", "ping"]),
                "127.100.0.2"
            ),
            strings(&["valkey-cli", "-h", "10.0.0.1", "ping"])
        );
        assert_eq!(
            exec_probe_argv(&strings(&["sh", "-c", "true"]), "127.100.0.2"),
            strings(&["sh", "-c", "true"])
        );
    }

    #[test]
    fn probe_defaults_are_kubernetes_defaults() {
        let timing = ProbeTiming::of(&Probe::default());
        assert_eq!(timing.period, Duration::from_secs(10));
        assert_eq!(timing.timeout, Duration::from_secs(1));
        assert_eq!(timing.failure_threshold, 3);
        assert_eq!(timing.success_threshold, 1);
    }
}
