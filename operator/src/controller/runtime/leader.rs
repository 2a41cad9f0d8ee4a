//! Leader election with a `coordination.k8s.io/v1` Lease, so that the operator can run with a
//! standby: only the holder of the lease runs the controller. kube-rs has no elector of its
//! own, so this is a small one in the manner of client-go's:
//!
//! - a candidate takes the lease when nobody holds it, when it was released (holder empty), or
//!   when it has not changed for its `leaseDurationSeconds` as this process measures time: each
//!   candidate notes, by its own monotonic clock, when it last saw the lease change, so the
//!   machines' clocks never have to agree;
//! - every write is an update at the resourceVersion that was read, so of two candidates that
//!   try at once exactly one wins;
//! - the holder renews every retry period and gives up (stops its controller) when no renewal
//!   has succeeded for the renew deadline, which is shorter than the lease duration, so the old
//!   leader has stopped before anyone may take over;
//! - a holder that shuts down releases the lease, and a standby takes over at its next try.
//!
//! A standby sees a renewal at most a retry period late, counts the lease duration from then and
//! tries every retry period: it takes over at most a lease duration and two retry periods after
//! the leader's last renewal. With the defaults (8 s lease, 5 s renew deadline, 2 s retries)
//! that is 12 s, within 15 s of a leader that dies without releasing the lease.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// How long a lease lasts, how long its holder keeps trying to renew it, and how often
/// everyone tries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTiming {
    /// A lease not renewed for this long may be taken over.
    pub lease_duration: Duration,
    /// The holder stops leading when it could not renew for this long (less than
    /// `lease_duration`, so it has stopped before a standby may take over).
    pub renew_deadline: Duration,
    /// How often the holder renews and a standby tries.
    pub retry_period: Duration,
}

impl Default for LeaseTiming {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(8),
            renew_deadline: Duration::from_secs(5),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What a candidate last saw of the lease, and when by its own clock.
#[derive(Clone, Debug)]
struct Observed {
    holder: String,
    resource_version: String,
    since: Instant,
}

/// Whether `identity` may write itself into a lease held by `holder` that has not changed for
/// `unchanged_for`: its own, a released or empty one, or one whose holder stopped renewing.
pub fn may_take(holder: &str, identity: &str, unchanged_for: Duration, lease: Duration) -> bool {
    holder.is_empty() || holder == identity || unchanged_for >= lease
}

/// One candidate for one lease.
pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: LeaseTiming,
    observed: Option<Observed>,
}

impl LeaseLock {
    /// A candidate `identity` (unique among the replicas: the pod's name) for the lease `name`
    /// that `api` reaches (the operator's own namespace).
    pub fn new(api: Api<Lease>, name: &str, identity: &str, timing: LeaseTiming) -> Self {
        Self {
            api,
            name: name.into(),
            identity: identity.into(),
            timing,
            observed: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// One try to take or keep the lease: create it, renew it, or take it over when it is free
    /// or expired. `Ok(true)` when this candidate holds it now.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let lease_seconds = self.timing.lease_duration.as_secs().max(1) as i32;
        let Some(current) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(lease_seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.saw(&created);
                    Ok(true)
                }
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        self.saw(&current);
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let observed = self.observed.as_ref().expect("just observed");
        let their_duration = spec
            .lease_duration_seconds
            .map_or(self.timing.lease_duration, |s| {
                Duration::from_secs(s.max(1) as u64)
            });
        if !may_take(
            &holder,
            &self.identity,
            observed.since.elapsed(),
            their_duration,
        ) {
            return Ok(false);
        }
        let taking_over = holder != self.identity;
        let mut lease = current;
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(lease_seconds),
            acquire_time: if taking_over {
                Some(now.clone())
            } else {
                spec.acquire_time
            },
            renew_time: Some(now),
            lease_transitions: Some(
                spec.lease_transitions.unwrap_or(0) + i32::from(taking_over && !holder.is_empty()),
            ),
            ..spec
        });
        // An update at the version read: of two candidates, the second gets a 409.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.saw(&written);
                if taking_over {
                    info!(lease = %self.name, previous = %holder, "took the lease");
                }
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Notes the lease as read; a change restarts this candidate's count of its age.
    fn saw(&mut self, lease: &Lease) {
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default();
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.resource_version != version || o.holder != holder);
        if changed {
            self.observed = Some(Observed {
                holder,
                resource_version: version,
                since: Instant::now(),
            });
        }
    }

    /// One bounded try: an API server that does not answer counts as a failed try.
    async fn attempt(&mut self, bound: Duration) -> Result<bool, String> {
        match tokio::time::timeout(bound, self.try_acquire_or_renew()).await {
            Ok(Ok(held)) => Ok(held),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {} s", bound.as_secs())),
        }
    }

    /// Waits until this candidate holds the lease, trying every retry period.
    pub async fn acquire(&mut self) {
        loop {
            match self
                .attempt(self.timing.retry_period.max(Duration::from_secs(1)) * 2)
                .await
            {
                Ok(true) => return,
                Ok(false) => debug!(lease = %self.name, "the lease is held by another replica"),
                Err(e) => warn!(lease = %self.name, error = %e, "cannot read or write the lease"),
            }
            tokio::time::sleep(self.timing.retry_period).await;
        }
    }

    /// Keeps the lease, renewing it every retry period; returns once it is lost: another
    /// replica holds it, or no renewal succeeded for the renew deadline.
    pub async fn hold(&mut self) {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.timing.retry_period).await;
            let left = self
                .timing
                .renew_deadline
                .saturating_sub(renewed.elapsed())
                .max(Duration::from_millis(500));
            match self.attempt(left).await {
                Ok(true) => renewed = Instant::now(),
                Ok(false) => {
                    warn!(lease = %self.name, "another replica holds the lease now");
                    return;
                }
                Err(e) => warn!(lease = %self.name, error = %e, "cannot renew the lease"),
            }
            if renewed.elapsed() >= self.timing.renew_deadline {
                warn!(
                    lease = %self.name,
                    "could not renew the lease for {} s", self.timing.renew_deadline.as_secs()
                );
                return;
            }
        }
    }

    /// Gives the lease up, so that a standby takes over at its next try instead of waiting for
    /// it to expire. Only a lease this candidate still holds is touched.
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await?;
        info!(lease = %self.name, "released the lease");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(10);

    #[test]
    fn a_lease_held_by_another_is_taken_only_once_it_stopped_changing_for_its_duration() {
        assert!(!may_take("op-a", "op-b", Duration::from_secs(9), LEASE));
        assert!(may_take("op-a", "op-b", Duration::from_secs(10), LEASE));
    }

    #[test]
    fn a_released_lease_or_ones_own_is_taken_at_once() {
        assert!(may_take("", "op-b", Duration::ZERO, LEASE));
        assert!(may_take("op-b", "op-b", Duration::ZERO, LEASE));
    }

    #[test]
    fn the_default_timing_hands_over_within_15_seconds_and_stops_the_old_leader_first() {
        let timing = LeaseTiming::default();
        assert!(timing.renew_deadline < timing.lease_duration);
        // A standby sees the leader's last renewal up to a retry period late, and tries every
        // retry period once the lease duration has passed since.
        assert!(timing.lease_duration + 2 * timing.retry_period <= Duration::from_secs(12));
    }
}
