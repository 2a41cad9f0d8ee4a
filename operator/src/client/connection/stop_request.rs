//! What asks a running measurement to stop early (the command line's SIGINT and SIGTERM
//! handler), what asked, and how a repetition that a signal interrupted is told from one whose
//! engine went away. A leaf: the measurement and the signal handling both take it from here.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::error::{BenchError, StopCause};

/// How often a wait looks for a stop.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Asks a running measurement to stop early, keeping what it measured: set from the command
/// line's signal handler (SIGINT, SIGTERM), read between batches and while waiting. It holds
/// what asked, which says how the stop is reported.
#[derive(Clone, Debug, Default)]
pub struct StopRequest(Arc<AtomicU8>);

impl StopRequest {
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks for the stop; the first cause asked for is the one reported.
    pub fn request(&self, cause: StopCause) {
        let code = match cause {
            StopCause::Interrupt => 1,
            StopCause::Terminate => 2,
            StopCause::PodDeleted => 3,
        };
        let _ = self
            .0
            .compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// What asked for the stop, once one was asked for.
    pub fn cause(&self) -> Option<StopCause> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            1 => Some(StopCause::Interrupt),
            2 => Some(StopCause::Terminate),
            _ => Some(StopCause::PodDeleted),
        }
    }

    pub fn requested(&self) -> bool {
        self.cause().is_some()
    }

    /// `Stopped` with the items sent of the running repetition, once a stop was asked for.
    pub fn check(&self, items_sent: u64) -> Result<(), BenchError> {
        match self.cause() {
            Some(cause) => Err(BenchError::Stopped { items_sent, cause }),
            None => Ok(()),
        }
    }

    /// Sleeps for `duration`, waking early when a stop is requested.
    pub(crate) fn sleep(&self, duration: Duration) -> Result<(), BenchError> {
        let until = Instant::now() + duration;
        while Instant::now() < until {
            self.check(0)?;
            std::thread::sleep(POLL_INTERVAL.min(until - Instant::now()));
        }
        self.check(0)
    }

    /// What stopped a repetition that failed with `error`, if a stop was asked for. A signal
    /// interrupts a socket call with a timeout (EINTR, which is not restarted) a moment before the
    /// signal thread asks for the stop: an interrupted call waits for that request briefly, so
    /// that it is reported as the stop it is rather than as a lost engine.
    pub(crate) fn behind(&self, error: &BenchError) -> Option<StopCause> {
        self.behind_error_text(&error.to_string())
    }

    /// [`Self::behind`] for an error known by its text (the profiler's lost server).
    pub(crate) fn behind_error_text(&self, error: &str) -> Option<StopCause> {
        let interrupted = error.contains("(os error 4)");
        let until = Instant::now() + Duration::from_millis(if interrupted { 500 } else { 0 });
        loop {
            if let Some(cause) = self.cause() {
                return Some(cause);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The race a signal runs: the socket call fails with EINTR first, the signal thread asks
    /// for the stop a moment later. The failure is the stop, found by waiting for it.
    #[test]
    fn a_call_interrupted_before_the_stop_is_asked_for_is_the_stop() {
        let stop = StopRequest::new();
        let signal_thread = stop.clone();
        let asked = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            signal_thread.request(StopCause::Interrupt);
        });
        let text = "the server at 127.0.0.1:6379 went away after 4 key(s) were sampled: \
                    Interrupted system call (os error 4)";
        assert_eq!(stop.behind_error_text(text), Some(StopCause::Interrupt));
        asked.join().unwrap();
    }

    /// Any other failure with no stop asked for is the failure, at once.
    #[test]
    fn a_failure_that_is_no_interruption_waits_for_nothing() {
        let stop = StopRequest::new();
        let started = Instant::now();
        assert_eq!(
            stop.behind_error_text("Connection reset by peer (os error 104)"),
            None
        );
        assert!(started.elapsed() < Duration::from_millis(100));
        assert_eq!(
            stop.behind_error_text("Interrupted system call (os error 4)"),
            None
        );
        stop.request(StopCause::Terminate);
        assert_eq!(
            stop.behind_error_text("anything"),
            Some(StopCause::Terminate)
        );
    }
}
