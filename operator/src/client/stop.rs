//! How `membench load` leaves when it is asked to (its pod deleted: the benchmark's timeout,
//! an eviction, the loss of its engine): SIGTERM requests a stop, the measurement ends between
//! two batches with what it measured, and the result is written for the operator to read. Should
//! the measurement not return in time (blocked on an engine that stopped answering), the
//! journal of what was measured so far is written instead, before the grace period ends and
//! the kubelet's SIGKILL would lose it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::client::measure::{BenchmarkReport, StopRequest};
use crate::client::result::ClientResult;
use crate::error::BenchError;

/// How long the measurement may take to return after SIGTERM before the journal is written.
/// Client pods get 5 s of grace; this leaves time to write and exit.
pub const STOP_DEADLINE: Duration = Duration::from_secs(3);

/// The exit code when the journal had to be written (128 + SIGTERM, as a shell reports it).
pub const STOPPED_EXIT_CODE: i32 = 143;

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

    /// The report as it stood, stopped by SIGTERM.
    fn stopped(&self) -> BenchmarkReport {
        let mut report = self
            .report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let error = BenchError::Stopped {
            items_sent: self.commands_sent.load(Ordering::SeqCst),
        };
        report.error = Some((&error).into());
        report
    }
}

/// Turns SIGTERM into `stop`, and writes `journal` to `file` and exits if the measurement has
/// not returned `deadline` after the signal. The handler is in place when this returns.
pub fn stop_on_sigterm(
    stop: StopRequest,
    journal: Journal,
    file: Arc<ResultFile>,
    deadline: Duration,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    // Registered here, not in the thread: a SIGTERM right after this returns is not missed.
    let mut terminate = {
        let _entered = runtime.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?
    };
    std::thread::Builder::new()
        .name("sigterm".into())
        .spawn(move || {
            runtime.block_on(terminate.recv());
            eprintln!("membench: SIGTERM: stopping after the current batch and writing what was measured");
            stop.request();
            std::thread::sleep(deadline);
            let report = journal.stopped();
            if let Err(e) = file.write(&report) {
                eprintln!("error: cannot write the result: {e}");
            }
            eprintln!(
                "membench: the measurement did not stop within {} s; wrote the {} finished repetitions",
                deadline.as_secs(),
                report.repetitions.len()
            );
            std::process::exit(STOPPED_EXIT_CODE);
        })?;
    Ok(())
}
