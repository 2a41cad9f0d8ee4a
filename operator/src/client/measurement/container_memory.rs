//! The engine container's memory as the kernel keeps it, for a peak phase run by a client pod
//! that cannot see the engine's processes (a real node: the engine is in a pod of its own). The
//! container's memory cgroup holds its usage and its high-water mark (v1
//! `memory.max_usage_in_bytes`, v2 `memory.peak`); the kubelet serves both on
//! `/metrics/cadvisor` (`container_memory_usage_bytes`, `container_memory_max_usage_bytes`),
//! which the operator reads through the API server's node proxy. A pod can neither read the
//! engine container's cgroup nor reset its mark, so the client marks the phase's edges and the
//! operator answers each mark with a reading the kubelet took after it:
//!
//! 1. the client posts a mark on its progress endpoint (`mark` in the reading: a sequence
//!    number and the time it was posted) and waits, at most [`MARK_TIMEOUT`];
//! 2. the operator, reading the progress, sees the mark, reads the kubelet until its figures
//!    are timestamped after the mark (the kubelet refreshes them every 10 s or so), and posts
//!    them back (`POST /mark?seq=..&usage=..&max=..&at=..`), or why it cannot
//!    (`POST /mark?seq=..&unavailable=..`);
//! 3. the client goes on.
//!
//! A mark before the phase and one after it give the container's memory just before, and its
//! high-water mark after: when that rose during the phase, the phase's peak is the mark (the
//! kernel's own maximum, every page the container was charged for, nothing sampled). When it
//! did not rise, something earlier in the container's life (an earlier repetition's save) went
//! higher, and the phase's own peak is known only to be at most that: reported so, never
//! guessed.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The longest a client waits for the operator's answer to a mark: the kubelet's figures are
/// refreshed every 10 to 15 s, and the operator looks every second while a mark waits.
pub const MARK_TIMEOUT: Duration = Duration::from_secs(60);

/// A mark the client waits on, as its progress reading carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingMark {
    pub seq: u32,
    /// When the client posted it, in milliseconds since the Unix epoch: the answer must be a
    /// reading the kubelet took at or after it.
    pub since_ms: u64,
}

/// The engine container's memory cgroup as the kubelet read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContainerReading {
    /// Its usage (`container_memory_usage_bytes`).
    pub usage_bytes: u64,
    /// Its high-water mark since it started (`container_memory_max_usage_bytes`).
    pub max_usage_bytes: u64,
    /// When the kubelet took the reading, in milliseconds since the Unix epoch (the older of
    /// the two when a replica's container was read too).
    pub read_at_ms: u64,
    /// The same two figures of the replica's container (`spec.peak.replica`, on its own node),
    /// when the run has one.
    pub replica: Option<CgroupFigures>,
}

/// A container's memory cgroup: its usage and its high-water mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CgroupFigures {
    pub usage_bytes: u64,
    pub max_usage_bytes: u64,
}

/// Whoever answers the client's marks.
pub trait ContainerMarks: Send + Sync + std::fmt::Debug {
    /// Posts a mark and waits, at most `timeout`, for a reading of the engine container taken
    /// after it; the reason when there is none.
    fn mark(&self, timeout: Duration) -> Result<ContainerReading, String>;
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The marks of one client: the one it waits on, and the answer to it.
#[derive(Debug, Default)]
pub struct MarkBoard {
    state: Mutex<BoardState>,
    answered: Condvar,
}

#[derive(Debug, Default)]
struct BoardState {
    last_seq: u32,
    /// A mark went unanswered: nobody answers this client's marks (an operator that is gone,
    /// or one from before marks), and later ones are not waited for.
    unanswered: bool,
    pending: Option<PendingMark>,
    answer: Option<(u32, Result<ContainerReading, String>)>,
}

impl MarkBoard {
    fn state(&self) -> std::sync::MutexGuard<'_, BoardState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The mark the client waits on, if any.
    pub fn pending(&self) -> Option<PendingMark> {
        self.state().pending
    }

    /// Takes the answer to mark `seq`; false when that mark is not the one waited on (already
    /// answered, timed out, or never posted).
    pub fn answer(&self, seq: u32, answer: Result<ContainerReading, String>) -> bool {
        let mut state = self.state();
        if state.pending.is_none_or(|p| p.seq != seq) {
            return false;
        }
        state.pending = None;
        state.answer = Some((seq, answer));
        self.answered.notify_all();
        true
    }
}

impl ContainerMarks for MarkBoard {
    fn mark(&self, timeout: Duration) -> Result<ContainerReading, String> {
        let mut state = self.state();
        if state.unanswered {
            return Err(
                "an earlier mark of this run went unanswered: later ones are not waited for".into(),
            );
        }
        state.last_seq += 1;
        let seq = state.last_seq;
        state.pending = Some(PendingMark {
            seq,
            since_ms: now_ms(),
        });
        state.answer = None;
        let until = Instant::now() + timeout;
        loop {
            if let Some((answered, _)) = &state.answer
                && *answered == seq
            {
                return state.answer.take().map(|(_, a)| a).expect("an answer");
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                state.pending = None;
                state.unanswered = true;
                return Err(format!(
                    "no reading of the engine container came within {} s of the mark (the operator answers it from the kubelet's /metrics/cadvisor)",
                    timeout.as_secs()
                ));
            }
            state = self
                .answered
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// The request path that answers mark `seq` (the operator's side).
pub fn answer_path(seq: u32, answer: &Result<ContainerReading, String>) -> String {
    match answer {
        Ok(r) => {
            let replica = r.replica.map_or(String::new(), |f| {
                format!("&rusage={}&rmax={}", f.usage_bytes, f.max_usage_bytes)
            });
            format!(
                "/mark?seq={seq}&usage={}&max={}&at={}{replica}",
                r.usage_bytes, r.max_usage_bytes, r.read_at_ms
            )
        }
        Err(reason) => format!("/mark?seq={seq}&unavailable={}", encode(reason)),
    }
}

/// The answer a request path carries (the client's side): `None` when it is no answer.
pub fn parse_answer(path: &str) -> Option<(u32, Result<ContainerReading, String>)> {
    let query = path.strip_prefix("/mark?")?;
    let field = |name: &str| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
    };
    let seq = field("seq")?.parse().ok()?;
    if let Some(reason) = field("unavailable") {
        return Some((seq, Err(decode(reason)?)));
    }
    let number = |name: &str| field(name)?.parse::<u64>().ok();
    let replica = match (field("rusage"), field("rmax")) {
        (None, None) => None,
        _ => Some(CgroupFigures {
            usage_bytes: number("rusage")?,
            max_usage_bytes: number("rmax")?,
        }),
    };
    Some((
        seq,
        Ok(ContainerReading {
            usage_bytes: number("usage")?,
            max_usage_bytes: number("max")?,
            read_at_ms: number("at")?,
            replica,
        }),
    ))
}

fn encode(text: &str) -> String {
    text.bytes()
        .take(400)
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl ContainerReading {
    fn figures(&self) -> CgroupFigures {
        CgroupFigures {
            usage_bytes: self.usage_bytes,
            max_usage_bytes: self.max_usage_bytes,
        }
    }
}

/// What a phase's two marks say.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerPeak {
    /// The container's usage just before the phase.
    pub before_bytes: u64,
    /// The high-water mark, when it rose during the phase (then it is the phase's own peak).
    pub peak_bytes: Option<u64>,
    /// The high-water mark after the phase, whatever reached it.
    pub high_water_bytes: u64,
}

impl ContainerPeak {
    pub fn of(before: ContainerReading, after: ContainerReading) -> Self {
        Self::of_figures(before.figures(), after.figures())
    }

    /// The replica's container between the same two marks, when both read it.
    pub fn of_replica(before: ContainerReading, after: ContainerReading) -> Option<Self> {
        Some(Self::of_figures(before.replica?, after.replica?))
    }

    fn of_figures(before: CgroupFigures, after: CgroupFigures) -> Self {
        Self {
            before_bytes: before.usage_bytes,
            peak_bytes: (after.max_usage_bytes > before.max_usage_bytes)
                .then_some(after.max_usage_bytes.max(before.usage_bytes)),
            high_water_bytes: after.max_usage_bytes,
        }
    }

    /// Why `peak_bytes` is absent, when it is.
    pub fn note(&self) -> Option<String> {
        self.peak_bytes.is_none().then(|| {
            format!(
                "the engine container's high-water mark did not rise during the phase: it stands at {} bytes from earlier in the container's life (an earlier repetition's phase), which a pod cannot reset, so this phase's own peak is at most that",
                self.high_water_bytes
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn reading(usage: u64, max: u64) -> ContainerReading {
        ContainerReading {
            usage_bytes: usage,
            max_usage_bytes: max,
            read_at_ms: 1_796_469_662_509,
            replica: None,
        }
    }

    #[test]
    fn an_answer_goes_through_its_path_unchanged() {
        let ok = Ok(reading(268_000_000, 510_000_000));
        assert_eq!(parse_answer(&answer_path(7, &ok)), Some((7, ok)));
        let with_replica = Ok(ContainerReading {
            replica: Some(CgroupFigures {
                usage_bytes: 3_000_000,
                max_usage_bytes: 290_000_000,
            }),
            ..reading(268_000_000, 510_000_000)
        });
        assert_eq!(
            parse_answer(&answer_path(9, &with_replica)),
            Some((9, with_replica))
        );
        assert_eq!(
            parse_answer("/mark?seq=1&usage=2&max=3&at=4&rusage=5"),
            None
        );
        let refused: Result<ContainerReading, String> =
            Err("nodes \"r7i-xlarge-0\" is forbidden: cannot get nodes/proxy & more".into());
        assert_eq!(parse_answer(&answer_path(8, &refused)), Some((8, refused)));
        assert_eq!(parse_answer("/progress"), None);
        assert_eq!(parse_answer("/mark?seq=1&usage=2&max=x&at=4"), None);
    }

    #[test]
    fn a_mark_waits_for_its_own_answer_and_an_old_one_is_ignored() {
        let board = Arc::new(MarkBoard::default());
        assert_eq!(board.pending(), None);
        let answering = {
            let board = board.clone();
            std::thread::spawn(move || {
                let pending = loop {
                    if let Some(p) = board.pending() {
                        break p;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                };
                assert!(!board.answer(pending.seq + 1, Ok(reading(1, 1))));
                assert!(board.answer(pending.seq, Ok(reading(100, 200))));
                assert!(!board.answer(pending.seq, Ok(reading(1, 1))));
                pending
            })
        };
        assert_eq!(board.mark(Duration::from_secs(10)), Ok(reading(100, 200)));
        let pending = answering.join().unwrap();
        assert!(pending.since_ms <= now_ms());
        assert_eq!(board.pending(), None);
    }

    #[test]
    fn a_mark_nobody_answers_ends_in_its_bound_naming_what_was_waited_for() {
        let board = MarkBoard::default();
        let started = Instant::now();
        let error = board.mark(Duration::from_millis(100)).unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert!(error.contains("/metrics/cadvisor"), "{error}");
        assert_eq!(board.pending(), None);
        // Nobody answers this client: the next mark does not wait again.
        let started = Instant::now();
        let error = board.mark(Duration::from_secs(30)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(1), "{error}");
        assert!(error.contains("went unanswered"), "{error}");
    }

    #[test]
    fn the_peak_is_the_high_water_mark_only_when_it_rose_in_the_phase() {
        let rose = ContainerPeak::of(reading(270, 280), reading(275, 480));
        assert_eq!(rose.before_bytes, 270);
        assert_eq!(rose.peak_bytes, Some(480));
        assert_eq!(rose.note(), None);
        let replica = |usage, max| ContainerReading {
            replica: Some(CgroupFigures {
                usage_bytes: usage,
                max_usage_bytes: max,
            }),
            ..reading(270, 280)
        };
        let synced = ContainerPeak::of_replica(replica(3, 4), replica(250, 300)).unwrap();
        assert_eq!((synced.before_bytes, synced.peak_bytes), (3, Some(300)));
        assert_eq!(
            ContainerPeak::of_replica(reading(1, 1), replica(2, 2)),
            None
        );
        let earlier = ContainerPeak::of(reading(270, 490), reading(272, 490));
        assert_eq!(earlier.peak_bytes, None);
        assert_eq!(earlier.high_water_bytes, 490);
        assert!(earlier.note().unwrap().contains("at most"));
    }
}
