//! How a measuring command leaves when it is asked to: SIGINT (Ctrl-C) or SIGTERM (`kill`,
//! `timeout`, a client pod being deleted: the benchmark's timeout, an eviction, the loss of its
//! engine) requests a stop, the measurement ends between two batches with what it measured,
//! and the command prints and writes it. Should the measurement not return in time (blocked on
//! an engine that stopped answering), the command's own deadline action runs: `membench load`
//! writes the journal of what was measured so far, before a pod's grace period ends and the
//! kubelet's SIGKILL would lose it; `membench run` kills the engines it started, which ends the
//! measurement at once. A second signal runs the deadline action without waiting.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::client::connection::stop_request::StopRequest;
use crate::client::measurement::measure::BenchmarkReport;
use crate::client::pod_io::result::ClientResult;
use crate::error::{BenchError, StopCause};

/// How long the measurement may take to return after a stop signal before the deadline action
/// runs. Client pods get 5 s of grace; this leaves time to write and exit.
pub const STOP_DEADLINE: Duration = Duration::from_secs(3);

/// Writes the result file once, whoever gets there first: the measurement that returned, or
/// the deadline after SIGTERM.
#[derive(Debug)]
pub struct ResultFile {
    path: Option<PathBuf>,
    written: Mutex<bool>,
}

impl ResultFile {
    pub fn new(path: Option<PathBuf>) -> Self {
        Self {
            path,
            written: Mutex::new(false),
        }
    }

    /// Writes the compact result of `report`, unless a result was written already.
    pub fn write(&self, report: &BenchmarkReport) -> std::io::Result<()> {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let Some(path) = &self.path else {
            return Ok(());
        };
        if *written {
            return Ok(());
        }
        std::fs::write(path, ClientResult::from_report(report).to_message())?;
        *written = true;
        Ok(())
    }
}

/// What the measurement has finished so far, and how far the running repetition got.
#[derive(Clone, Debug)]
pub struct Journal {
    report: Arc<Mutex<BenchmarkReport>>,
    commands_sent: Arc<AtomicU64>,
}

impl Journal {
    pub fn new(report: BenchmarkReport) -> Self {
        Self {
            report: Arc::new(Mutex::new(report)),
            commands_sent: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn record(&self, report: &BenchmarkReport) {
        *self.report.lock().unwrap_or_else(|e| e.into_inner()) = report.clone();
        self.commands_sent.store(0, Ordering::SeqCst);
    }

    pub fn progress(&self, commands_sent: u64) {
        self.commands_sent.store(commands_sent, Ordering::SeqCst);
    }

    /// The report as it stood, stopped by `cause`.
    pub fn stopped(&self, cause: StopCause) -> BenchmarkReport {
        let mut report = self
            .report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let error = BenchError::Stopped {
            items_sent: self.commands_sent.load(Ordering::SeqCst),
            cause,
        };
        report.error = Some((&error).into());
        report
    }
}

/// What SIGTERM means here: in a pod (Kubernetes sets `KUBERNETES_SERVICE_HOST` in every
/// container) its deletion, elsewhere whoever sent it.
fn terminate_cause() -> StopCause {
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        StopCause::PodDeleted
    } else {
        StopCause::Terminate
    }
}

/// SIGINT and SIGTERM as a stream of causes, registered on a runtime of their own for the
/// thread that waits on them.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    /// Registers both here, not in the waiting thread: a signal right after the caller returns
    /// is not missed.
    fn register() -> std::io::Result<(tokio::runtime::Runtime, Self)> {
        use tokio::signal::unix::{SignalKind, signal};
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let signals = {
            let _entered = runtime.enter();
            Self {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            }
        };
        Ok((runtime, signals))
    }

    /// The next signal's cause.
    async fn next(&mut self) -> StopCause {
        tokio::select! {
            _ = self.interrupt.recv() => StopCause::Interrupt,
            _ = self.terminate.recv() => terminate_cause(),
        }
    }
}

/// Turns SIGINT and SIGTERM into `stop`, and runs `on_deadline` with the cause if the
/// measurement has not returned `deadline` after the signal (or at a second signal). The
/// handlers are in place when this returns.
pub fn stop_on_signals(
    stop: StopRequest,
    deadline: Duration,
    on_deadline: impl FnOnce(StopCause) + Send + 'static,
) -> std::io::Result<()> {
    let (runtime, mut signals) = Signals::register()?;
    std::thread::Builder::new()
        .name("stop-signals".into())
        .spawn(move || {
            runtime.block_on(async {
                let cause = signals.next().await;
                eprintln!(
                    "membench: {}: stopping after the current batch, then printing and writing what was measured",
                    cause.signal_name()
                );
                stop.request(cause);
                tokio::select! {
                    _ = tokio::time::sleep(deadline) => {}
                    _ = signals.next() => {}
                }
                on_deadline(cause);
            });
        })?;
    Ok(())
}

/// `membench load`'s deadline action: writes `journal` to `file`, hands it to `print`, and
/// exits with the cause's code, since the measurement is blocked on its engine.
pub fn write_journal_and_exit(
    journal: Journal,
    file: Arc<ResultFile>,
    deadline: Duration,
    print: impl FnOnce(&BenchmarkReport) + Send + 'static,
) -> impl FnOnce(StopCause) + Send + 'static {
    move |cause| {
        let report = journal.stopped(cause);
        if let Err(e) = file.write(&report) {
            eprintln!("error: cannot write the result: {e}");
        }
        print(&report);
        eprintln!(
            "membench: the measurement did not stop within {} s; wrote the {} finished repetitions",
            deadline.as_secs(),
            report.repetitions.len()
        );
        exit_removing_copies(cause)
    }
}

/// Exits with `cause`'s code, first removing the RDB files this process downloaded: exiting
/// runs no destructor, and the copy (as large as the user's backup) would stay in `TMPDIR`.
pub fn exit_removing_copies(cause: StopCause) -> ! {
    let removed = crate::client::workloads::rdb_load::download::remove_copies();
    if removed > 0 {
        eprintln!("membench: removed the downloaded copy of the RDB file");
    }
    std::process::exit(i32::from(cause.exit_code()))
}

/// While the returned guard lives, SIGINT and SIGTERM end the command at once with the cause's
/// exit code, after removing what it downloaded: for the part of a command before it measures
/// or while nothing it measures can be lost (fetching an RDB file at a URL, reading it for a
/// profile). Dropped, the guard leaves the signals to the handler installed after it
/// ([`stop_on_signals`]); install that one first, so no signal falls between the two.
pub fn exit_on_signals(doing: &'static str) -> std::io::Result<ExitOnSignals> {
    let (runtime, mut signals) = Signals::register()?;
    let armed = Arc::new(AtomicBool::new(true));
    let armed_here = armed.clone();
    std::thread::Builder::new()
        .name("exit-on-signals".into())
        .spawn(move || {
            runtime.block_on(async {
                loop {
                    let cause = signals.next().await;
                    if armed_here.load(Ordering::SeqCst) {
                        eprintln!("membench: {}: stopped while {doing}", cause.signal_name());
                        exit_removing_copies(cause);
                    }
                }
            });
        })?;
    Ok(ExitOnSignals { armed })
}

/// Ends [`exit_on_signals`] when dropped.
#[derive(Debug)]
pub struct ExitOnSignals {
    armed: Arc<AtomicBool>,
}

impl Drop for ExitOnSignals {
    fn drop(&mut self) {
        self.armed.store(false, Ordering::SeqCst);
    }
}
