//! The status page: what a MemoryBenchmark's status holds and how it is written, and every
//! condition reason with what it means and what to do, from [`ConditionReason::meaning`] (the
//! doc comments the reasons are declared with in crd/condition_reason.rs).

use crate::crd::ConditionReason;

use super::{header, paragraphs};

/// What the status holds and how the operator writes it. The reasons it names are the
/// variants' own words, so a renamed reason changes the page.
fn overview() -> String {
    use ConditionReason as R;
    let progressing: Vec<String> = [
        R::WaitingForNode,
        R::WaitingForFreeNode,
        R::ParallelismAboveNodes,
        R::ShardsAboveNodes,
        R::WaitingForImage,
        R::WaitingForConfig,
        R::EngineStarting,
        R::ClientStarting,
        R::Measuring,
    ]
    .iter()
    .map(link)
    .collect();
    format!(
        "- `phase`: `Pending` (the first engine has not started), `Running`, `Succeeded` (every \
engine measured), `Failed` (at least one engine failed; the others' results are still there). \
`observedGeneration`, `startedAt`, `finishedAt`, and `workload` (the workload, in words).
- `conditions` (metav1.Condition, a list map keyed by `type`):

  | type | while running | succeeded | failed |
  |---|---|---|---|
  | `Ready` | False / {in_progress} | True / {completed} | False / first failure's reason |
  | `Progressing` | True / {progressing} | False / {completed} | False / reason |
  | `Failed` | False / {no_failure} | False / {no_failure} | True / reason, message lists each failed engine |

  `lastTransitionTime` changes only when a condition's status flips. Reason and message may \
change in between.
- `engines[]`, in spec order: `state` (`Pending`, `Running`, `Succeeded`, `Failed`), `reason` \
(one of the [condition reasons](#condition-reasons)) and `message`. Then, as the engine \
reported them: the version, allocator, arch, `multiplexingApi`, `threads` and `modules`. Then \
the node, instance type, image and image ID, `startedAt`/`finishedAt`, `clientAttempts`, every \
repetition's figures, the summary, `changeVsFirstPercent`, and for the sorted set the `growth` \
curve. The [MemoryBenchmark API](api.md#status) page describes each field.
- `instanceTypes`, `bestBytesPerItem`, `bestEngine`, `progress` and \
`capacity.smallestInstanceType`: the printer columns of `kubectl get mb`.

The status is written by server-side apply (field manager `membench-operator`) on the status \
subresource, and only when it changed. Nothing in it depends on the clock except timestamps, \
which are set once, so a reconciliation that learns nothing new writes nothing. Each \
reconciliation reads the benchmark from the API server, not from the watch's cache, and its \
status write names the `resourceVersion` it read. If anything wrote the benchmark in between, \
the API server answers 409 Conflict, nothing is written, and the operator reads and decides \
again. A decision made from an older view never replaces a newer result.

Events (`kubectl describe mb`, events.k8s.io) are emitted on transitions: `EngineCreated`, \
{waiting_for_node}, {waiting_for_free_node}, {waiting_for_image}, `EngineReady`, {client_retry}, \
`EngineSucceeded`, a Warning with the failure's reason when an engine fails, and \
`BenchmarkSucceeded` / `BenchmarkFailed`. kube-rs groups repeats of the same reason into one \
event series.

",
        in_progress = link(&R::InProgress),
        completed = link(&R::Completed),
        no_failure = link(&R::NoFailure),
        progressing = progressing.join(", "),
        waiting_for_node = link(&R::WaitingForNode),
        waiting_for_free_node = link(&R::WaitingForFreeNode),
        waiting_for_image = link(&R::WaitingForImage),
        client_retry = link(&R::ClientRetry),
    )
}

/// A reason as a link to its entry on this page.
fn link(reason: &ConditionReason) -> String {
    format!("[`{0}`](#{1})", reason.as_str(), anchor(reason))
}

/// The anchor mdBook gives the reason's heading (`### `Name``): the word in lower case.
pub fn anchor(reason: &ConditionReason) -> String {
    reason.as_str().to_lowercase()
}

/// The status reference page.
pub fn status_page() -> String {
    let mut page = header(
        "status",
        "Status",
        "crd/condition_reason.rs (each reason's doc comment) and docs_reference/status.rs",
    );
    page.push_str(&overview());
    page.push_str(
        "## Condition reasons\n\nAn engine's `reason`, and the `reason` of the benchmark's \
         conditions, is one of these words; the engine's `message` says more. \
         `kubectl get mb NAME -o jsonpath='{.status.engines[*].reason}'` lists them. The \
         [troubleshooting guide](../how-to/troubleshooting.md) says what the operator does \
         on each failure.\n\n",
    );
    for reason in ConditionReason::KNOWN {
        page.push_str(&format!(
            "### `{}`\n\n{}\n\n",
            reason.as_str(),
            paragraphs(reason.meaning())
        ));
    }
    // A newer operator's reason is shown as the word it wrote, so it has no heading of its
    // own: the page says what any other word means.
    page.push_str(&format!(
        "### Another word\n\n{}\n\n",
        paragraphs(ConditionReason::Unknown(String::new()).meaning())
    ));
    page
}
