//! The Lease elector against a real API server, with short timings: one candidate holds the
//! lease while it renews it, a standby takes it over only once it stopped changing for its
//! duration, a released lease is taken at the standby's next try, of candidates that try at
//! once exactly one wins, and a leader stops leading when another holds the lease or when it
//! cannot renew for its renew deadline, before the lease can expire.

mod common;

use std::time::{Duration, Instant};

use common::operator::Harness;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use membench::controller::runtime::leader::{LeaseLock, LeaseTiming};

const TIMING: LeaseTiming = LeaseTiming {
    lease_duration: Duration::from_secs(3),
    renew_deadline: Duration::from_secs(2),
    retry_period: Duration::from_millis(500),
};

fn candidate(leases: &Api<Lease>, identity: &str) -> LeaseLock {
    LeaseLock::new(leases.clone(), "elector-test", identity, TIMING)
}

async fn holder(leases: &Api<Lease>) -> anyhow::Result<Option<String>> {
    Ok(leases
        .get("elector-test")
        .await?
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_waits_while_the_leader_renews_and_takes_over_once_it_stops() -> anyhow::Result<()>
{
    let harness = Harness::without_operator("lease-expiry").await?;
    let leases: Api<Lease> = harness.namespace.api();
    let mut leader = candidate(&leases, "a");
    let mut standby = candidate(&leases, "b");
    assert!(leader.try_acquire_or_renew().await?);
    assert!(!standby.try_acquire_or_renew().await?);
    // The leader renews for twice the lease duration; the standby never gets it. Each try is
    // timed: the slowest is this machine's API round trip, the confounder of the bound below.
    let renewing = Instant::now();
    let mut last_renewal = Instant::now();
    let mut slowest_try = Duration::ZERO;
    while renewing.elapsed() < TIMING.lease_duration * 2 {
        let tried = Instant::now();
        assert!(leader.try_acquire_or_renew().await?);
        last_renewal = Instant::now();
        slowest_try = slowest_try.max(tried.elapsed());
        let tried = Instant::now();
        assert!(!standby.try_acquire_or_renew().await?);
        slowest_try = slowest_try.max(tried.elapsed());
        tokio::time::sleep(TIMING.retry_period).await;
    }
    // The leader stops renewing (it died): the standby takes over a lease duration after the
    // last renewal it saw, not before.
    standby.acquire().await;
    let waited = last_renewal.elapsed();
    assert!(
        waited >= TIMING.lease_duration,
        "took over after {waited:?}"
    );
    // At the latest: the standby tried right after each renewal above, so it saw the last one
    // at most one try late; it counts the lease's duration from there and takes the lease at
    // its first try past it (up to one retry period, then the winning try): the lease's
    // duration, one retry period and two of the slowest tries measured above. A standby that
    // waited a retry period longer than the lease passes it unless a try took 1/4 s.
    let latest = TIMING.lease_duration + TIMING.retry_period + slowest_try * 2;
    assert!(
        waited <= latest,
        "took over only after {waited:?}, past {latest:?} (the slowest try took {slowest_try:?})"
    );
    assert_eq!(holder(&leases).await?.as_deref(), Some("b"));
    let lease = leases.get("elector-test").await?.spec.unwrap();
    assert_eq!(lease.lease_transitions, Some(1));
    // The old leader learns it lost the lease at its next renewal.
    assert!(!leader.try_acquire_or_renew().await?);
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_is_taken_at_the_standbys_next_try() -> anyhow::Result<()> {
    let harness = Harness::without_operator("lease-release").await?;
    let leases: Api<Lease> = harness.namespace.api();
    let mut leader = candidate(&leases, "a");
    let mut standby = candidate(&leases, "b");
    assert!(leader.try_acquire_or_renew().await?);
    assert!(!standby.try_acquire_or_renew().await?);
    leader.release().await?;
    assert_eq!(holder(&leases).await?, None);
    let released = Instant::now();
    standby.acquire().await;
    assert!(
        released.elapsed() < TIMING.lease_duration,
        "a released lease waited {:?}",
        released.elapsed()
    );
    assert_eq!(holder(&leases).await?.as_deref(), Some("b"));
    // Releasing is only ever done by the holder.
    leader.release().await?;
    assert_eq!(holder(&leases).await?.as_deref(), Some("b"));
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_candidates_trying_at_once_exactly_one_wins() -> anyhow::Result<()> {
    let harness = Harness::without_operator("lease-race").await?;
    let leases: Api<Lease> = harness.namespace.api();
    for round in 0..5 {
        let name = format!("race-{round}");
        let tries = (0..4).map(|i| {
            let mut lock = LeaseLock::new(leases.clone(), &name, &format!("c{i}"), TIMING);
            tokio::spawn(async move { lock.try_acquire_or_renew().await })
        });
        let mut winners = 0;
        for outcome in futures::future::join_all(tries).await {
            if outcome?? {
                winners += 1;
            }
        }
        assert_eq!(winners, 1, "round {round}");
    }
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_lease_another_replica_took_stops_leading_at_its_next_renewal()
-> anyhow::Result<()> {
    let harness = Harness::without_operator("lease-hold").await?;
    let leases: Api<Lease> = harness.namespace.api();
    let mut leader = candidate(&leases, "a");
    assert!(leader.try_acquire_or_renew().await?);
    // Another replica takes the lease over behind the leader's back (as one would once the
    // leader's renewals stopped reaching the API server): `hold` returns at the next renewal.
    // The take-over's read and write are timed: one API round trip, the confounder of the
    // bound below.
    let round_trip = Instant::now();
    let mut lease = leases.get("elector-test").await?;
    lease.spec.as_mut().unwrap().holder_identity = Some("z".into());
    leases
        .replace("elector-test", &Default::default(), &lease)
        .await?;
    let round_trip = round_trip.elapsed();
    let held = Instant::now();
    tokio::time::timeout(TIMING.renew_deadline * 2, leader.hold()).await?;
    // `hold` renews every retry period, a read each: it learns at its first renewal one
    // period and one read after it started, at its second two periods and a read. So the
    // bound is two periods, the earliest a stop at the second renewal could come: a stop at
    // the first passes whatever its read took up to a period (a bound of one period and four
    // of the take-over's round trip failed 3 times in 20 beside another test binary, with
    // reads of up to 420 ms against a 7 ms round trip measured a moment before).
    let latest = TIMING.retry_period * 2;
    assert!(
        held.elapsed() < latest,
        "stopped leading after {:?}, not before its second renewal at {latest:?} (a round trip took {round_trip:?})",
        held.elapsed()
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_reach_the_api_server_stops_leading_before_its_lease_expires()
-> anyhow::Result<()> {
    // Nothing listens there: every renewal fails at once.
    let config = kube::Config::new("http://127.0.0.1:1".parse()?);
    let unreachable: Api<Lease> = Api::namespaced(kube::Client::try_from(config)?, "membench");
    let mut leader = candidate(&unreachable, "a");
    let held = Instant::now();
    tokio::time::timeout(TIMING.lease_duration * 2, leader.hold()).await?;
    let stopped = held.elapsed();
    assert!(
        stopped >= TIMING.renew_deadline,
        "gave up after {stopped:?}"
    );
    assert!(
        stopped < TIMING.lease_duration,
        "still leading {stopped:?} after its last renewal, when a standby may take over"
    );
    Ok(())
}
