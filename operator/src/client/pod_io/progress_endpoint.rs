//! Progress of a load, served by the client pod itself and read by the operator. The operator
//! used to read progress from the engine (`INFO commandstats`, `ZCARD`), which needs the
//! engine's password and a network path from the operator to every engine. The client already
//! knows where it stands, so it answers one tiny HTTP request on its pod address instead: the
//! engine is reached by its client alone, and the operator needs no Secret.
//!
//! The client side is a thread with a listener ([`ProgressEndpoint::serve`]); the operator side
//! is [`fetch`], which reads at most [`MAX_RESPONSE`] bytes within a deadline, so a client that
//! answers garbage or nothing costs the operator a few milliseconds and no memory.
//!
//! Beside its progress the client serves its whole result (`GET /result`, read with
//! [`fetch_result`], at most [`MAX_RESULT_RESPONSE`] bytes): the repetitions it has finished
//! so far, every column and the whole growth curve, which the 4096 bytes of a termination
//! message cannot always hold. The reading says `done` once every repetition is finished;
//! the operator then takes the result from here, and the termination message stays the
//! fallback. A client whose progress was read waits for that (up to `--serve-result-seconds`,
//! until its pod is deleted); one that nobody read leaves at once ([`ProgressEndpoint::linger`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::client::connection::stop_request::StopRequest;
use crate::client::measurement::container_memory::{
    ContainerMarks, ContainerReading, MarkBoard, PendingMark, answer_path, parse_answer,
};
use crate::client::measurement::measure::{BenchmarkReport, LoadProgress};
use crate::client::pod_io::result::{ClientResult, WHOLE_RESULT_LIMIT};

/// The port the client serves its progress on, in its own pod.
pub const PROGRESS_PORT: u16 = 9121;

/// The most bytes of a progress response the operator reads.
pub const MAX_RESPONSE: usize = 2048;

/// The most bytes of a result response the operator reads: the headers and a result of at
/// most [`WHOLE_RESULT_LIMIT`] bytes.
pub const MAX_RESULT_RESPONSE: usize = WHOLE_RESULT_LIMIT + 512;

/// The most bytes of a request the client reads before it answers.
const MAX_REQUEST: usize = 1024;

/// Where a load stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressReading {
    /// The repetition under way, from 1 (0 before the first begins).
    pub repetition: u32,
    pub repetitions: u32,
    /// Commands sent in this repetition, and how many it sends in all.
    pub commands_done: u64,
    pub commands_total: u64,
    /// Every repetition is finished and the whole result is served (`GET /result`). Absent
    /// (false) from clients before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub done: bool,
    /// A mark the client waits on for a reading of its engine's container
    /// ([`crate::client::measurement::container_memory`]); absent when it waits on none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<PendingMark>,
}

impl ProgressReading {
    /// How much of this repetition is loaded, in percent; `None` before it knows its size.
    pub fn loaded_percent(&self) -> Option<u32> {
        if self.commands_total == 0 {
            return None;
        }
        let done = self.commands_done.min(self.commands_total);
        // u128: a product of two u64 cannot overflow it.
        Some((u128::from(done) * 100 / u128::from(self.commands_total)) as u32)
    }

    /// The last repetition has sent all its commands (what is left: its readings and settle
    /// wait), or the run is done: the operator looks again soon, to take the result.
    pub fn finishing(&self) -> bool {
        self.done
            || (self.repetitions > 0
                && self.repetition >= self.repetitions
                && self.loaded_percent() == Some(100))
    }
}

/// The progress the load updates and the endpoint serves.
#[derive(Debug, Default)]
pub struct ProgressEndpoint {
    repetition: AtomicU32,
    repetitions: AtomicU32,
    commands_done: AtomicU64,
    commands_total: AtomicU64,
    done: AtomicBool,
    /// The whole result of what is finished so far, as served (JSON).
    result: Mutex<Option<String>>,
    /// Whether anyone has read the progress (the operator): only then is the result waited for.
    read: AtomicBool,
    /// The marks a peak phase posts, answered with `POST /mark?...`.
    marks: MarkBoard,
}

impl ContainerMarks for ProgressEndpoint {
    fn mark(&self, timeout: Duration) -> Result<ContainerReading, String> {
        self.marks.mark(timeout)
    }
}

impl ProgressEndpoint {
    /// Records where the load stands (called from the load's progress callback).
    pub fn update(&self, p: &LoadProgress) {
        self.repetition.store(p.repetition, Ordering::Relaxed);
        self.repetitions.store(p.repetitions, Ordering::Relaxed);
        self.commands_done.store(p.commands_done, Ordering::Relaxed);
        self.commands_total
            .store(p.commands_total, Ordering::Relaxed);
    }

    pub fn reading(&self) -> ProgressReading {
        ProgressReading {
            repetition: self.repetition.load(Ordering::Relaxed),
            repetitions: self.repetitions.load(Ordering::Relaxed),
            commands_done: self.commands_done.load(Ordering::Relaxed),
            commands_total: self.commands_total.load(Ordering::Relaxed),
            done: self.done.load(Ordering::SeqCst),
            mark: self.marks.pending(),
        }
    }

    /// Serves the whole result of `report` (what is finished so far); `done` once the run
    /// finished every repetition without an error.
    pub fn set_result(&self, report: &BenchmarkReport, done: bool) {
        let whole = ClientResult::whole(report).to_message();
        *self.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(whole);
        self.done.store(done, Ordering::SeqCst);
    }

    /// Whether the progress has been read since the endpoint began serving.
    pub fn was_read(&self) -> bool {
        self.read.load(Ordering::SeqCst)
    }

    /// After the run: waits for the reader of the progress to take the whole result, until
    /// `stop` is requested (the pod deleted once the operator has it), at most `wait`. A client
    /// whose progress nobody read returns at once: no one would come for the result. Returns
    /// whether it waited.
    pub fn linger(&self, stop: &StopRequest, wait: Duration) -> bool {
        if wait.is_zero() || !self.was_read() || !self.done.load(Ordering::SeqCst) {
            return false;
        }
        let until = Instant::now() + wait;
        while !stop.requested() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    }

    /// Listens on `address` and answers every connection with the current reading, on a
    /// thread of its own, for as long as the process runs. Returns the bound address.
    pub fn serve(self: &Arc<Self>, address: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(address)?;
        let bound = listener.local_addr()?;
        let progress = self.clone();
        std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    // One reader at a time is all the operator ever is; a slow one is cut off.
                    let _ = progress.answer(stream);
                }
            })?;
        Ok(bound)
    }

    fn answer(&self, mut stream: TcpStream) -> std::io::Result<()> {
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        stream.set_write_timeout(Some(Duration::from_secs(1)))?;
        let mut request = [0u8; MAX_REQUEST];
        let mut read = 0;
        while read < request.len() && !request[..read].windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut request[read..])? {
                0 => break,
                n => read += n,
            }
        }
        let wants_result = request[..read].starts_with(b"GET /result ");
        if let Some(path) = request[..read]
            .strip_prefix(b"POST ")
            .and_then(|rest| rest.split(|b| *b == b' ').next())
            .and_then(|path| std::str::from_utf8(path).ok())
        {
            let taken =
                parse_answer(path).is_some_and(|(seq, answer)| self.marks.answer(seq, answer));
            let status = if taken {
                "204 No Content"
            } else {
                "409 Conflict"
            };
            return write!(
                stream,
                "HTTP/1.0 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
        // A mark alone, for a reader that follows only the marks (runs in parallel): it does not
        // count as reading the progress, so the client does not wait for its result to be taken.
        if request[..read].starts_with(b"GET /mark ") {
            let body = serde_json::to_string(&self.marks.pending()).expect("marks serialize");
            return write!(
                stream,
                "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        let body = if wants_result {
            self.result
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        } else {
            self.read.store(true, Ordering::SeqCst);
            Some(serde_json::to_string(&self.reading()).expect("readings serialize"))
        };
        match body {
            Some(body) => write!(
                stream,
                "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
            None => stream.write_all(
                b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            ),
        }
    }
}

/// Reads a client's progress at `address`, bounded in time and bytes; `None` when the client
/// does not answer within `timeout` or answers something else.
pub async fn fetch(address: SocketAddr, timeout: Duration) -> Option<ProgressReading> {
    let response = get(address, "/progress", MAX_RESPONSE, timeout).await?;
    parse_response(&response)
}

/// Reads the whole result a client serves at `address`, bounded in time and bytes: the body
/// of a 200 response, for [`ClientResult::read_whole`] to check. `None` when the client does
/// not answer within `timeout`, answers more than [`MAX_RESULT_RESPONSE`] bytes, or has no
/// result to serve.
pub async fn fetch_result(address: SocketAddr, timeout: Duration) -> Option<String> {
    let response = get(address, "/result", MAX_RESULT_RESPONSE, timeout).await?;
    let body = body_of_200(&response)?;
    String::from_utf8(body.to_vec()).ok()
}

/// The mark the client at `address` waits on, without reading its progress; `None` when it
/// waits on none or does not answer within `timeout`.
pub async fn fetch_mark(address: SocketAddr, timeout: Duration) -> Option<PendingMark> {
    let response = get(address, "/mark", MAX_RESPONSE, timeout).await?;
    serde_json::from_slice::<Option<PendingMark>>(body_of_200(&response)?).ok()?
}

/// Answers the client's mark `seq` at `address` ([`crate::client::measurement::container_memory`]): whether
/// the client took it (false when it no longer waits on that mark); `None` when it did not
/// answer within `timeout`.
pub async fn answer_mark(
    address: SocketAddr,
    seq: u32,
    answer: &Result<ContainerReading, String>,
    timeout: Duration,
) -> Option<bool> {
    let path = answer_path(seq, answer);
    let response = exchange(address, "POST", &path, 512, timeout).await?;
    Some(response.starts_with(b"HTTP/1.0 204"))
}

async fn get(address: SocketAddr, path: &str, max: usize, timeout: Duration) -> Option<Vec<u8>> {
    exchange(address, "GET", path, max, timeout).await
}

/// One HTTP/1.0 request for `path`, its response whole, or `None` when it takes longer than
/// `timeout` or runs past `max` bytes.
async fn exchange(
    address: SocketAddr,
    method: &str,
    path: &str,
    max: usize,
    timeout: Duration,
) -> Option<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        let request = format!("{method} {path} HTTP/1.0\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = Vec::with_capacity(512);
        let mut chunk = [0u8; 4096];
        loop {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            if response.len() + n > max {
                return None;
            }
            response.extend_from_slice(&chunk[..n]);
        }
        Some(response)
    };
    tokio::time::timeout(timeout, exchange).await.ok().flatten()
}

/// The body of an HTTP response with status 200.
fn body_of_200(response: &[u8]) -> Option<&[u8]> {
    if !response.starts_with(b"HTTP/1.0 200 ") && !response.starts_with(b"HTTP/1.1 200 ") {
        return None;
    }
    let body_at = response.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    Some(&response[body_at..])
}

/// The reading in an HTTP response: status 200 and a JSON body.
pub fn parse_response(response: &[u8]) -> Option<ProgressReading> {
    serde_json::from_slice(body_of_200(response)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(repetition: u32, done: u64) -> LoadProgress {
        LoadProgress {
            repetition,
            repetitions: 3,
            commands_done: done,
            commands_total: 20_000,
        }
    }

    #[tokio::test]
    async fn the_operator_reads_what_the_client_serves() {
        let endpoint = Arc::new(ProgressEndpoint::default());
        let address = endpoint.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        endpoint.update(&progress(2, 5_000));
        let reading = fetch(address, Duration::from_secs(2)).await.unwrap();
        assert_eq!(
            reading,
            ProgressReading {
                repetition: 2,
                repetitions: 3,
                commands_done: 5_000,
                commands_total: 20_000,
                done: false,
                mark: None,
            }
        );
        assert_eq!(reading.loaded_percent(), Some(25));
        endpoint.update(&progress(3, 20_000));
        let later = fetch(address, Duration::from_secs(2)).await.unwrap();
        assert_eq!((later.repetition, later.loaded_percent()), (3, Some(100)));
    }

    #[tokio::test]
    async fn a_peer_that_answers_too_much_or_nothing_gives_no_reading_in_bounded_time() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut peers = Vec::new();
            for (i, stream) in listener.incoming().flatten().enumerate() {
                let mut stream = stream;
                if i == 0 {
                    // A megabyte of a response.
                    let _ = stream.write_all(b"HTTP/1.0 200 OK\r\n\r\n");
                    let _ = stream.write_all(&vec![b'9'; 1 << 20]);
                } else {
                    // Silence: hold the connection open.
                    peers.push(stream);
                }
            }
        });
        assert_eq!(fetch(address, Duration::from_secs(2)).await, None);
        let started = std::time::Instant::now();
        assert_eq!(fetch(address, Duration::from_millis(300)).await, None);
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn the_whole_result_is_served_beside_the_progress_and_done_says_it_is_complete() {
        let endpoint = Arc::new(ProgressEndpoint::default());
        let address = endpoint.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        // Nothing finished yet: nothing to serve.
        assert_eq!(fetch_result(address, Duration::from_secs(2)).await, None);
        let report = crate::client::pod_io::result::tests::report(100, true);
        let mut partial = report.clone();
        partial.repetitions.truncate(40);
        endpoint.set_result(&partial, false);
        let body = fetch_result(address, Duration::from_secs(2)).await.unwrap();
        let served = ClientResult::read_whole(&body, 100).unwrap();
        assert_eq!(served.decoded_repetitions().len(), 40);
        assert!(!fetch(address, Duration::from_secs(2)).await.unwrap().done);

        endpoint.set_result(&report, true);
        let body = fetch_result(address, Duration::from_secs(2)).await.unwrap();
        assert!(body.len() > crate::client::pod_io::result::TERMINATION_MESSAGE_LIMIT);
        let served = ClientResult::read_whole(&body, 100).unwrap();
        let decoded = served.decoded_repetitions();
        assert_eq!((decoded.len(), served.omitted), (100, 0));
        for (d, r) in decoded.iter().zip(&report.repetitions) {
            assert_eq!(
                d.settled_used_memory,
                r.settled.as_ref().map(|s| s.used_memory)
            );
            assert_eq!(d.used_memory_dataset, r.used_memory_dataset);
        }
        assert_eq!(
            served.growth.unwrap().points(),
            report.repetitions[0].samples
        );
        let reading = fetch(address, Duration::from_secs(2)).await.unwrap();
        assert!(reading.done && reading.finishing());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_mark_is_served_and_answered_over_http_without_counting_as_a_progress_read() {
        let endpoint = Arc::new(ProgressEndpoint::default());
        let address = endpoint.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        assert_eq!(fetch_mark(address, Duration::from_secs(2)).await, None);
        let waiting = {
            let endpoint = endpoint.clone();
            std::thread::spawn(move || endpoint.mark(Duration::from_secs(10)))
        };
        let mark = loop {
            if let Some(mark) = fetch_mark(address, Duration::from_secs(2)).await {
                break mark;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        // The progress reading carries it too.
        let reading = fetch(address, Duration::from_secs(2)).await.unwrap();
        assert_eq!(reading.mark, Some(mark));
        let answer = Ok(ContainerReading {
            usage_bytes: 72_000_000,
            max_usage_bytes: 149_000_000,
            read_at_ms: mark.since_ms + 1,
            replica: None,
        });
        // A stale sequence number is turned away; the right one is taken once.
        let stale = answer_mark(address, mark.seq + 1, &answer, Duration::from_secs(2)).await;
        assert_eq!(stale, Some(false));
        let taken = answer_mark(address, mark.seq, &answer, Duration::from_secs(2)).await;
        assert_eq!(taken, Some(true));
        assert_eq!(waiting.join().unwrap(), answer);
        assert_eq!(fetch_mark(address, Duration::from_secs(2)).await, None);
        // Reading marks alone does not make the client wait for its result to be taken.
        let marks_only = Arc::new(ProgressEndpoint::default());
        let address = marks_only.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        assert_eq!(fetch_mark(address, Duration::from_secs(2)).await, None);
        assert!(!marks_only.was_read());
    }

    #[tokio::test]
    async fn a_client_waits_for_its_result_to_be_taken_only_when_its_progress_was_read() {
        let report = crate::client::pod_io::result::tests::report(3, false);
        let stop = StopRequest::new();
        let unread = Arc::new(ProgressEndpoint::default());
        unread.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        unread.set_result(&report, true);
        let started = Instant::now();
        assert!(!unread.linger(&stop, Duration::from_secs(30)));
        assert!(started.elapsed() < Duration::from_millis(500));

        let read = Arc::new(ProgressEndpoint::default());
        let address = read.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        fetch(address, Duration::from_secs(2)).await.unwrap();
        read.set_result(&report, true);
        // Until the stop (the operator deleting the pod), well before the 30 s.
        let stopper = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            stopper.request(crate::error::StopCause::PodDeleted);
        });
        let started = Instant::now();
        let waited =
            tokio::task::spawn_blocking(move || read.linger(&stop, Duration::from_secs(30)))
                .await
                .unwrap();
        assert!(waited);
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(5),
            "{took:?}"
        );
        // And at most the wait it is given.
        let bounded = Arc::new(ProgressEndpoint::default());
        let address = bounded.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        fetch(address, Duration::from_secs(2)).await.unwrap();
        bounded.set_result(&report, true);
        let started = Instant::now();
        let waited = tokio::task::spawn_blocking(move || {
            bounded.linger(&StopRequest::new(), Duration::from_millis(300))
        })
        .await
        .unwrap();
        assert!(waited && started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_result_larger_than_the_operator_reads_gives_nothing() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let _ = stream.write_all(b"HTTP/1.0 200 OK\r\n\r\n{");
                let _ = stream.write_all(&vec![b' '; MAX_RESULT_RESPONSE]);
            }
        });
        assert_eq!(fetch_result(address, Duration::from_secs(2)).await, None);
    }

    #[test]
    fn only_a_200_with_a_reading_counts() {
        assert_eq!(parse_response(b"HTTP/1.0 404 Not Found\r\n\r\n{}"), None);
        assert_eq!(parse_response(b"HTTP/1.0 200 OK\r\n\r\nnot json"), None);
        let ok = b"HTTP/1.0 200 OK\r\n\r\n{\"repetition\":1,\"repetitions\":1,\"commands_done\":0,\"commands_total\":0}";
        let reading = parse_response(ok).unwrap();
        assert_eq!(reading.loaded_percent(), None, "no size known yet");
    }
}
