//! The operator's side of a peak phase's marks ([`crate::client::measurement::container_memory`]): a client
//! that cannot see its engine's processes waits at each edge of the phase for the engine
//! container's memory cgroup as the kubelet keeps it. The operator reads the kubelet of the
//! engine's node through the API server's node proxy (`/api/v1/nodes/NODE/proxy/metrics/cadvisor`,
//! which needs `get` on `nodes/proxy`), takes the engine container's
//! `container_memory_usage_bytes` and `container_memory_max_usage_bytes` once the kubelet's
//! reading is timestamped after the mark (it refreshes them every 10 s or so), and posts them to
//! the client. What cannot be read is answered too, with the reason, so the client does not
//! wait for nothing.

use std::time::Duration;

use kube::Client;

use crate::client::measurement::container_memory::{CgroupFigures, ContainerReading, PendingMark};
use crate::client::pod_io::progress_endpoint::answer_mark;

use crate::controller::decide::observation::{EngineContainer, ProbeTarget};

/// How long posting an answer to the client may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a read of the kubelet's metrics may take.
const KUBELET_TIMEOUT: Duration = Duration::from_secs(10);

/// What became of a mark: answered (the client goes on), or not yet (the kubelet's reading is
/// older than the mark: look again in a second).
#[derive(Debug, PartialEq)]
pub enum MarkAnswer {
    Answered,
    NotYet,
}

/// Answers the mark the client at `target` waits on: its engine's container, and its
/// replica's (on another node) when the run has one.
pub async fn answer(client: &Client, target: &ProbeTarget, mark: PendingMark) -> MarkAnswer {
    let answer = match &target.engine {
        None => Err("the operator does not know the engine pod's node".to_string()),
        Some(engine) => match read(client, engine).await {
            Err(reason) => Err(reason),
            Ok((figures, at)) => match &target.replica {
                None => Ok(reading(figures, at, None)),
                Some(replica) => read(client, replica).await.map(|(replica, replica_at)| {
                    reading(figures, at.min(replica_at), Some(replica))
                }),
            },
        },
    };
    if answer
        .as_ref()
        .is_ok_and(|reading| reading.read_at_ms < mark.since_ms)
    {
        return MarkAnswer::NotYet;
    }
    if let Err(reason) = &answer {
        tracing::warn!(%reason, "cannot read the engine container's memory for a peak phase");
    }
    match answer_mark(target.address, mark.seq, &answer, ANSWER_TIMEOUT).await {
        Some(_) => MarkAnswer::Answered,
        // The client did not answer: its next reading shows whether it still waits.
        None => MarkAnswer::NotYet,
    }
}

fn reading(figures: CgroupFigures, at: u64, replica: Option<CgroupFigures>) -> ContainerReading {
    ContainerReading {
        usage_bytes: figures.usage_bytes,
        max_usage_bytes: figures.max_usage_bytes,
        read_at_ms: at,
        replica,
    }
}

/// A container's figures from its node's kubelet, with the time the kubelet took them.
async fn read(
    client: &Client,
    container: &EngineContainer,
) -> Result<(CgroupFigures, u64), String> {
    let text = read_kubelet(client, container).await?;
    container_figures(&text, container)
}

async fn read_kubelet(client: &Client, engine: &EngineContainer) -> Result<String, String> {
    let path = format!("/api/v1/nodes/{}/proxy/metrics/cadvisor", engine.node);
    let request = http::Request::get(&path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    match tokio::time::timeout(KUBELET_TIMEOUT, client.request_text(request)).await {
        Err(_) => Err(format!(
            "the kubelet of node {} did not answer {path} within {} s",
            engine.node,
            KUBELET_TIMEOUT.as_secs()
        )),
        Ok(Err(kube::Error::Api(status))) if status.code == 403 => Err(format!(
            "the operator may not read {path} ({}): grant its ServiceAccount get on nodes/proxy (the chart does with rbac.scope=cluster)",
            status.message
        )),
        Ok(Err(e)) => Err(format!("cannot read {path}: {e}")),
        Ok(Ok(text)) => Ok(text),
    }
}

/// A container's figures in the kubelet's cAdvisor metrics (Prometheus text): its usage and
/// high-water mark, with the time the kubelet took them (the newer line when a container
/// appears twice).
pub fn container_figures(
    text: &str,
    engine: &EngineContainer,
) -> Result<(CgroupFigures, u64), String> {
    let find = |metric: &str| -> Option<(u64, u64)> {
        text.lines()
            .filter_map(|line| sample(line, metric))
            .filter(|(labels, _, _)| {
                label(labels, "namespace") == Some(engine.namespace.as_str())
                    && label(labels, "pod") == Some(engine.pod.as_str())
                    && label(labels, "container") == Some(engine.container.as_str())
            })
            .map(|(_, value, at)| (value, at))
            .max_by_key(|(_, at)| *at)
    };
    let missing = || {
        format!(
            "the kubelet of node {} serves no figures for container {} of pod {}/{} on /metrics/cadvisor (its cAdvisor finds containers through the runtime's socket, /run/containerd/containerd.sock for containerd)",
            engine.node, engine.container, engine.namespace, engine.pod
        )
    };
    let (usage, usage_at) = find("container_memory_usage_bytes").ok_or_else(missing)?;
    let (max, max_at) = find("container_memory_max_usage_bytes").ok_or_else(missing)?;
    Ok((
        CgroupFigures {
            usage_bytes: usage,
            max_usage_bytes: max,
        },
        usage_at.min(max_at),
    ))
}

/// A sample line of `metric`: its labels, value and timestamp (a line without a timestamp is
/// no use: its age is unknown).
fn sample<'a>(line: &'a str, metric: &str) -> Option<(&'a str, u64, u64)> {
    let rest = line.strip_prefix(metric)?.strip_prefix('{')?;
    let end = labels_end(rest)?;
    let labels = &rest[..end];
    let mut fields = rest[end + 1..].split_whitespace();
    let value: f64 = fields.next()?.parse().ok()?;
    let at: u64 = fields.next()?.parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some((labels, value as u64, at))
}

/// Where the label set ends (its closing brace, outside any quoted value).
fn labels_end(text: &str) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// The value of label `name` (as written: the names compared here have no escapes).
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    let mut rest = labels;
    loop {
        let (key, after) = rest.split_once("=\"")?;
        let key = key.trim_start_matches(',').trim();
        let mut escaped = false;
        let end = after.char_indices().find_map(|(i, c)| match c {
            _ if escaped => {
                escaped = false;
                None
            }
            '\\' => {
                escaped = true;
                None
            }
            '"' => Some(i),
            _ => None,
        })?;
        if key == name {
            return Some(&after[..end]);
        }
        rest = &after[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> EngineContainer {
        EngineContainer {
            namespace: "default".into(),
            pod: "peak-0".into(),
            container: "engine".into(),
            node: "r7i-xlarge-0".into(),
        }
    }

    /// Lines as this machine's kubelet v1.37.2 served them (a pod, its pause container, its
    /// engine container), and another pod's engine whose name has a `}` and a quote.
    const METRICS: &str = r#"# HELP container_memory_max_usage_bytes Maximum memory usage recorded in bytes
# TYPE container_memory_max_usage_bytes gauge
container_memory_max_usage_bytes{container="",id="/membench-0-r7i-xlarge-0/kubepods/pod7d",image="",name="",namespace="default",pod="peak-0"} 4.517888e+06 1796469662509
container_memory_max_usage_bytes{container="POD",id="/kubepods/pod7d/c4b0",image="registry.k8s.io/pause:3.10.1",name="c4b0",namespace="default",pod="peak-0"} 4.079616e+06 1796469666161
container_memory_max_usage_bytes{container="engine",id="/kubepods/pod7d/8f74",image="docker.io/valkey/valkey:9.1.2",name="8f74",namespace="default",pod="peak-0"} 5.1e+08 1796469663043
container_memory_max_usage_bytes{container="engine",id="/kubepods/pod9/1",image="a\"}b",name="1",namespace="default",pod="peak-1"} 9e+09 1796469663043
container_memory_usage_bytes{container="engine",id="/kubepods/pod7d/8f74",image="docker.io/valkey/valkey:9.1.2",name="8f74",namespace="default",pod="peak-0"} 2.8e+08 1796469663043
container_memory_usage_bytes{container="engine",id="/kubepods/pod9/1",image="a\"}b",name="1",namespace="default",pod="peak-1"} 8e+09 1796469663043
"#;

    #[test]
    fn the_engine_containers_own_lines_are_read_with_the_kubelets_time() {
        let reading = container_figures(METRICS, &engine()).unwrap();
        assert_eq!(
            reading,
            (
                CgroupFigures {
                    usage_bytes: 280_000_000,
                    max_usage_bytes: 510_000_000,
                },
                1_796_469_663_043
            )
        );
        let other = EngineContainer {
            pod: "peak-1".into(),
            ..engine()
        };
        assert_eq!(
            container_figures(METRICS, &other).unwrap().0.usage_bytes,
            8_000_000_000
        );
    }

    #[test]
    fn a_kubelet_that_serves_only_the_pods_lines_is_named_with_what_to_check() {
        let pod_only: String = METRICS
            .lines()
            .filter(|l| !l.contains("container=\"engine\""))
            .collect::<Vec<_>>()
            .join("\n");
        let error = container_figures(&pod_only, &engine()).unwrap_err();
        assert!(
            error.contains("container engine of pod default/peak-0"),
            "{error}"
        );
        assert!(error.contains("r7i-xlarge-0"), "{error}");
        assert!(error.contains("containerd.sock"), "{error}");
    }

    #[test]
    fn lines_without_a_timestamp_or_with_a_bad_value_are_not_taken() {
        assert_eq!(
            sample(
                "container_memory_usage_bytes{pod=\"a\"} 12",
                "container_memory_usage_bytes"
            ),
            None
        );
        assert_eq!(
            sample(
                "container_memory_usage_bytes{pod=\"a\"} NaN 5",
                "container_memory_usage_bytes"
            ),
            None
        );
        assert_eq!(
            sample(
                "container_memory_usage_bytes{pod=\"a\"} 12 5",
                "container_memory_usage_bytes"
            ),
            Some(("pod=\"a\"", 12, 5))
        );
    }
}
