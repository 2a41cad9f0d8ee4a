//! Section "wait-probe", run only when asked for (`-- --only wait-probe`): an experiment for
//! docs/src/explanation/round-trip.md, not a membench setting. A minimal client in this process sends SETs
//! one at a time, as membench does at depth 1, and waits for each reply in one of several ways;
//! redis-benchmark and `membench load --pipeline 1` run in the same rounds. On this machine the
//! way of waiting changed the rate by up to 2x (bench/results/wait-probe.txt).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use membench::report::table::Table;

use crate::Engine;
use crate::clients::{self, ClientRun, LoadCommand};
use crate::figures::{median_min_max, spread};

/// How the probe waits for a reply after sending a command.
#[derive(Clone, Copy)]
pub enum Wait {
    /// A blocking `read`, as membench's load loop does.
    Read,
    /// Removes and re-adds an unrelated eventfd in a private epoll set after each send, then
    /// blocks in `read`: what redis-benchmark's per-request epoll bookkeeping amounts to here.
    RearmUnrelatedEpoll,
    /// Polls the socket without blocking for up to this long, then blocks.
    Spin(Duration),
}

impl Wait {
    fn describe(self) -> String {
        match self {
            Wait::Read => "blocking read (membench's)".into(),
            Wait::RearmUnrelatedEpoll => "epoll DEL+ADD of an unrelated eventfd, then read".into(),
            Wait::Spin(d) => format!(
                "non-blocking recv for up to {} µs, then read",
                d.as_micros()
            ),
        }
    }
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    // SAFETY: rusage is plain data, filled by getrusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD reports on the calling thread only.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// An epoll set holding one eventfd, removed and re-added on demand; closed when dropped.
struct UnrelatedEpoll {
    epoll: libc::c_int,
    event: libc::c_int,
}

impl UnrelatedEpoll {
    fn new() -> Self {
        // SAFETY: plain system calls; the descriptors are checked and owned by this value.
        let (epoll, event) = unsafe { (libc::epoll_create1(0), libc::eventfd(0, 0)) };
        assert!(
            epoll >= 0 && event >= 0,
            "epoll/eventfd: {}",
            std::io::Error::last_os_error()
        );
        let probe = Self { epoll, event };
        probe.control(libc::EPOLL_CTL_ADD);
        probe
    }

    fn control(&self, op: libc::c_int) {
        let mut interest = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 0,
        };
        // SAFETY: both descriptors are open; `interest` lives across the call.
        let rc = unsafe { libc::epoll_ctl(self.epoll, op, self.event, &mut interest) };
        assert_eq!(rc, 0, "epoll_ctl: {}", std::io::Error::last_os_error());
    }

    fn rearm(&self) {
        self.control(libc::EPOLL_CTL_DEL);
        self.control(libc::EPOLL_CTL_ADD);
    }
}

impl Drop for UnrelatedEpoll {
    fn drop(&mut self) {
        // SAFETY: both descriptors are owned here and closed once.
        unsafe {
            libc::close(self.event);
            libc::close(self.epoll);
        }
    }
}

/// One probe run: `requests` SETs at depth 1, with this thread's CPU time (the probe runs in
/// the harness's own process, so it has no peak memory of its own: 0).
fn probe(port: u16, wait: Wait, requests: u64) -> ClientRun {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("the engine accepts");
    stream.set_nodelay(true).expect("TCP_NODELAY");
    let fd = stream.as_raw_fd();
    let rearm = matches!(wait, Wait::RearmUnrelatedEpoll).then(UnrelatedEpoll::new);
    let mut reply = [0u8; 64];
    let mut command = Vec::with_capacity(64);
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let cpu_before = thread_cpu();
    let started = Instant::now();
    for _ in 0..requests {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        command.clear();
        write!(
            command,
            "*3\r\n$3\r\nSET\r\n$16\r\nkey:{:012}\r\n$16\r\nxxxxxxxxxxxxxxxx\r\n",
            state % 1_000_000
        )
        .expect("into a Vec");
        stream.write_all(&command).expect("send");
        if let Some(epoll) = &rearm {
            epoll.rearm();
        }
        let mut got = 0;
        if let Wait::Spin(limit) = wait {
            let until = Instant::now() + limit;
            while got == 0 && Instant::now() < until {
                // SAFETY: `reply` outlives the call and its length is passed with it.
                let n = unsafe {
                    libc::recv(
                        fd,
                        reply.as_mut_ptr().cast(),
                        reply.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if n > 0 {
                    got = n as usize;
                }
            }
        }
        while got < 5 {
            got += stream.read(&mut reply[got..]).expect("a reply");
        }
        assert_eq!(
            &reply[..5],
            b"+OK\r\n",
            "the engine answered SET with something else"
        );
    }
    ClientRun {
        rate: requests as f64 / started.elapsed().as_secs_f64(),
        commands: requests,
        cpu_seconds: (thread_cpu() - cpu_before).as_secs_f64(),
        peak_rss_kib: 0,
    }
}

/// The clients compared: redis-benchmark and `membench load` as their own processes, and the
/// probe with each wait.
#[derive(Clone, Copy)]
enum Contender {
    RedisBenchmark,
    Membench,
    Probe(Wait),
}

impl Contender {
    fn describe(self) -> String {
        match self {
            Contender::RedisBenchmark => "redis-benchmark -P 1 (process, from wait4)".into(),
            Contender::Membench => "membench load --pipeline 1 (process, from wait4)".into(),
            Contender::Probe(wait) => format!("probe: {}", wait.describe()),
        }
    }

    fn run(self, engine: &Engine, membench: &Path, requests: u64) -> ClientRun {
        engine.flush();
        match self {
            Contender::RedisBenchmark => {
                clients::redis_benchmark(engine.port(), LoadCommand::Set, 1, requests)
            }
            Contender::Membench => clients::membench_load(
                membench,
                engine.port(),
                &clients::membench_args(LoadCommand::Set, 1, requests),
            ),
            Contender::Probe(wait) => probe(engine.port(), wait, requests),
        }
    }
}

/// Every contender once as a warm-up, thrown away, then `rounds` rounds (the order reversed
/// every other round), FLUSHALL before each run; medians with min and max, rates against
/// redis-benchmark's median.
pub fn table(engines: &[Engine], membench: &Path, requests: u64, rounds: usize) -> Table {
    let contenders = [
        Contender::RedisBenchmark,
        Contender::Membench,
        Contender::Probe(Wait::Read),
        Contender::Probe(Wait::RearmUnrelatedEpoll),
        Contender::Probe(Wait::Spin(Duration::from_micros(20))),
    ];
    let mut table = Table::new(&[
        "engine",
        "client and wait",
        "k/s",
        "/ redis-benchmark",
        "client CPU µs per command",
    ]);
    for engine in engines {
        for contender in contenders {
            contender.run(engine, membench, requests);
        }
        let mut runs = vec![Vec::new(); contenders.len()];
        for round in 0..rounds {
            let mut order: Vec<usize> = (0..contenders.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                runs[i].push(contenders[i].run(engine, membench, requests));
            }
        }
        let reference = spread(&runs[0], |r| r.rate).median;
        for (contender, runs) in contenders.iter().zip(&runs) {
            let rate = spread(runs, |r| r.rate);
            table.push(vec![
                engine.name().to_string(),
                contender.describe(),
                median_min_max(&rate, 1e3, 1),
                format!("{:.2}", rate.median / reference),
                median_min_max(&spread(runs, |r| r.cpu_seconds_per_million()), 1.0, 1),
            ]);
        }
    }
    table
}
