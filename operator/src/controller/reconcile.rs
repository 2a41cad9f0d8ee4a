//! One reconciliation of one benchmark: read, decide (and create), write, record.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::controller::Action;
use tracing::{info, instrument, warn};

use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::read::{self, Found};
use crate::controller::write::{self, Written};
use crate::crd::MemoryBenchmark;

/// One reconciliation of one benchmark.
#[instrument(skip_all, fields(benchmark = %cached.name_any(), namespace = %cached.namespace().unwrap_or_default()))]
pub async fn reconcile(cached: Arc<MemoryBenchmark>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_started();
    let reading = match read::read(&cached, &ctx).await? {
        Found::Gone => return Ok(Action::await_change()),
        Found::Deleting(pods) => {
            write::release_all(&cached, &pods, &ctx.client).await?;
            return Ok(Action::await_change());
        }
        Found::Live(reading) => reading,
    };
    let plan = write::create_as_decided(&reading, &ctx).await?;
    if write::status(&reading.benchmark, &plan.status, &ctx).await? == Written::Conflict {
        info!("the benchmark changed since it was read; reading it again");
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    // The metrics follow the status as soon as it is written, before the pods it lets go.
    let mut observed = reading.benchmark.clone();
    observed.status = Some(plan.status.clone());
    ctx.metrics.observe_benchmark(&observed);
    write::pods_after_status(&reading.benchmark, &plan, &ctx.client).await?;

    let requeue = match plan.requeue {
        Some(after) if reading.mark_waits => Some(after.min(Duration::from_secs(1))),
        other => other,
    };
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

/// After a failed reconciliation: count it and try again shortly (API errors are transient;
/// an invalid spec is not an error but a Failed status that waits for a change).
pub fn error_policy(benchmark: Arc<MemoryBenchmark>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(benchmark = %benchmark.name_any(), category = error.category(), "reconciliation failed: {error}");
    ctx.metrics.reconcile_failed(error.category());
    Action::requeue(Duration::from_secs(5))
}
