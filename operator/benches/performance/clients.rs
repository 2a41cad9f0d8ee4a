//! The clients compared, each run as its own process against the same server: membench's
//! release `membench load`, `redis-benchmark` and `redis-cli --pipe` (Debian `redis-tools`).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use membench::client::connection::resp::CommandBuffer;
use membench::client::workloads::workload::Workload;

use crate::process::{self, Finished};

/// The sorted set every ZADD goes to, for every client.
pub const ZSET_KEY: &str = "membench:zset";

/// One client run as the operating system and the client itself saw it.
#[derive(Clone, Debug)]
pub struct ClientRun {
    /// Commands per second over the client's own timed span (redis-benchmark's and
    /// membench's own figure; for `redis-cli --pipe`, commands over its wall time).
    pub rate: f64,
    pub commands: u64,
    pub cpu_seconds: f64,
    pub peak_rss_kib: u64,
}

impl ClientRun {
    pub fn cpu_seconds_per_million(&self) -> f64 {
        self.cpu_seconds / self.commands as f64 * 1e6
    }
}

fn expect_success(what: &str, finished: &Finished) {
    assert!(
        finished.success,
        "{what} failed:\n{}\n{}",
        finished.stdout, finished.stderr
    );
}

/// What each client sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadCommand {
    /// `SET key:<12 digits> <16 x>` over a 1,000,000-key space.
    Set,
    /// `ZADD membench:zset NX <score> <member>`: membench adds `m:{i}` in order,
    /// redis-benchmark draws random members.
    Zadd,
}

impl LoadCommand {
    /// How a table row names it: ZADD is flagged, since the two clients add members in
    /// different orders.
    pub fn label(self) -> &'static str {
        match self {
            LoadCommand::Set => "SET",
            LoadCommand::Zadd => "ZADD (different member order)",
        }
    }
}

/// `redis-benchmark -p PORT -c 1 -P PIPELINE -n REQUESTS --csv ...`, one connection.
pub fn redis_benchmark(port: u16, command: LoadCommand, pipeline: u32, requests: u64) -> ClientRun {
    let mut args: Vec<String> = [
        "-p",
        &port.to_string(),
        "-c",
        "1",
        "-P",
        &pipeline.to_string(),
        "-n",
        &requests.to_string(),
        "--csv",
    ]
    .map(String::from)
    .to_vec();
    let tail: &[&str] = match command {
        LoadCommand::Set => &["-t", "set", "-r", "1000000", "-d", "16"],
        // __rand_int__ becomes a 12-digit number from the -r range; nearly every member is new.
        LoadCommand::Zadd => &[
            "-r",
            "1000000000",
            "ZADD",
            ZSET_KEY,
            "NX",
            "__rand_int__",
            "m:__rand_int__",
        ],
    };
    args.extend(tail.iter().map(|s| s.to_string()));
    let finished = process::run(Command::new("redis-benchmark").args(&args), None);
    expect_success("redis-benchmark", &finished);
    // `"SET","812345.67",...` on the last line.
    let rate = finished
        .stdout
        .lines()
        .last()
        .and_then(|line| line.split("\",\"").nth(1))
        .and_then(|field| field.trim_matches('"').parse().ok())
        .unwrap_or_else(|| panic!("no rate in redis-benchmark's output: {}", finished.stdout));
    ClientRun {
        rate,
        commands: requests,
        cpu_seconds: finished.cpu_seconds,
        peak_rss_kib: finished.peak_rss_kib,
    }
}

/// The release `membench load` against `port`, one repetition; its own commands/s.
pub fn membench_load(membench: &Path, port: u16, workload_args: &[String]) -> ClientRun {
    let mut args: Vec<String> = [
        "load",
        "--addr",
        &format!("127.0.0.1:{port}"),
        "--repetitions",
        "1",
        "--output",
        "json",
    ]
    .map(String::from)
    .to_vec();
    args.extend(workload_args.iter().cloned());
    let finished = process::run(Command::new(membench).args(&args), None);
    expect_success("membench load", &finished);
    let report: serde_json::Value =
        serde_json::from_str(&finished.stdout).expect("membench load --output json prints JSON");
    let repetition = &report["repetitions"][0];
    ClientRun {
        rate: repetition["commands_per_sec"]
            .as_f64()
            .expect("commands_per_sec in the report"),
        commands: repetition["commands"].as_u64().expect("commands"),
        cpu_seconds: finished.cpu_seconds,
        peak_rss_kib: finished.peak_rss_kib,
    }
}

/// membench's arguments for the same commands redis-benchmark sends, with as many commands
/// unanswered at most as `redis-benchmark -P` (one batch in flight).
pub fn membench_args(command: LoadCommand, pipeline: u32, requests: u64) -> Vec<String> {
    let args = match command {
        LoadCommand::Set => format!(
            "--workload random-strings --requests {requests} --keyspace 1000000 --value-size 16"
        ),
        LoadCommand::Zadd => {
            format!("--workload sorted-set --members {requests} --key {ZSET_KEY} --sample-every 0")
        }
    };
    let mut args: Vec<String> = args.split(' ').map(String::from).collect();
    args.extend(["--pipeline".to_string(), pipeline.to_string()]);
    args.extend(["--batches-in-flight".to_string(), "1".to_string()]);
    args
}

/// A file of `members` `ZADD membench:zset NX i m:i` commands in RESP, byte for byte what
/// membench sends for the sorted set, for `redis-cli --pipe`.
pub fn write_zadd_file(members: u64) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "membench-bench-{}-zadd-{members}.resp",
        std::process::id()
    ));
    let workload = Workload::SortedSet {
        members,
        key: ZSET_KEY.into(),
        sample_every: 0,
    };
    let mut encoder = workload.encoder();
    let mut buffer = CommandBuffer::with_capacity(1 << 20);
    let mut file = BufWriter::new(std::fs::File::create(&path).expect("a temporary file"));
    for i in 0..members {
        encoder.encode(i, &mut buffer);
        if buffer.as_bytes().len() >= 1 << 20 {
            file.write_all(buffer.as_bytes()).expect("write");
            buffer.clear();
        }
    }
    file.write_all(buffer.as_bytes()).expect("write");
    file.flush().expect("write");
    path
}

/// `redis-cli -p PORT --pipe < file`: streams every command without waiting for replies,
/// as fast as the server takes them. The rate is commands over the process's wall time.
pub fn redis_cli_pipe(port: u16, file: &Path, commands: u64) -> ClientRun {
    let input = std::fs::File::open(file).expect("the command file");
    let finished = process::run(
        Command::new("redis-cli").args(["-p", &port.to_string(), "--pipe"]),
        Some(input),
    );
    expect_success("redis-cli --pipe", &finished);
    let expected = format!("errors: 0, replies: {commands}");
    assert!(
        finished.stdout.contains(&expected),
        "redis-cli --pipe did not get {commands} replies without errors: {}",
        finished.stdout
    );
    ClientRun {
        rate: commands as f64 / finished.wall.as_secs_f64(),
        commands,
        cpu_seconds: finished.cpu_seconds,
        peak_rss_kib: finished.peak_rss_kib,
    }
}
