//! `membench profile`: the shape of a live server's keyspace, printed as a profile (YAML or
//! JSON) that the `profile` workload rebuilds. Read-only; what the profile holds is in the
//! README ("What a profile holds").

use membench::error::ExitStatus;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use membench::client::connection::engine::{ControlConnection, EngineAddress};
use membench::client::connection::stop_request::StopRequest;
use membench::client::pod_io::stop::{STOP_DEADLINE, exit_on_signals, stop_on_signals};
use membench::client::workloads::rdb_load::download;
use membench::profile::Profile;
use membench::profiler::{
    DEFAULT_COMMANDS_PER_SECOND, ProfileError, ProfileOptions, ProfileProgress, RdbProfileOptions,
    profile_cluster, profile_rdb_file, profile_server,
};

/// How long connecting to a server (each primary, with --cluster) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

use super::usage_error;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProfileOutput {
    Yaml,
    Json,
}

#[derive(Args)]
pub struct ProfileArgs {
    /// The server's address, HOST:PORT.
    #[arg(long, required_unless_present = "rdb")]
    addr: Option<String>,
    /// Profile an RDB file instead of a server (a dump Redis, Valkey or Dragonfly saved):
    /// every key of --db is read from the file, no server is needed. A path, or an https URL
    /// (fetched into TMPDIR first, then removed).
    #[arg(long, value_name = "FILE|URL", conflicts_with_all = ["addr", "cluster", "password"])]
    rdb: Option<std::path::PathBuf>,
    /// --rdb with an https URL: a directory of credentials, one file a key as a mounted Secret
    /// holds them: username and password, or token, and ca.crt (a PEM CA for the server).
    #[arg(long, value_name = "DIR", requires = "rdb")]
    rdb_credentials: Option<std::path::PathBuf>,
    /// The server's password, if it requires one.
    #[arg(long, env = "MEMBENCH_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// The database to profile.
    #[arg(long, default_value_t = 0)]
    db: u32,
    /// Read at most this many keys in full (TYPE, PTTL, OBJECT ENCODING, a bounded read of
    /// their elements), drawn within each group after the walk counted every key: at least
    /// 400 of every group (all of a smaller one), the rest by the groups' sizes.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    sample_keys: u64,
    /// How to print the profile.
    #[arg(long, value_enum, default_value_t = ProfileOutput::Yaml)]
    output: ProfileOutput,
    /// The most commands the profiler sends per second (every command counts: SCAN, TYPE,
    /// PTTL, the size and element reads).
    #[arg(long, default_value_t = DEFAULT_COMMANDS_PER_SECOND, value_parser = clap::value_parser!(u32).range(1..))]
    max_commands_per_sec: u32,
    /// End sampling after this many seconds and print the profile of what was sampled, marked
    /// incomplete (source.complete false, source.stoppedBy says why).
    #[arg(long, default_value_t = 600.0)]
    max_seconds: f64,
    /// The server is a node of a cluster: profile every primary that owns slots (found with
    /// CLUSTER NODES), one after the other, into one profile. --sample-keys is split over
    /// them by DBSIZE, each is read under the full --max-commands-per-sec, and --max-seconds
    /// bounds the whole run.
    #[arg(long)]
    cluster: bool,
}

fn print_profile(profile: &Profile, output: ProfileOutput) {
    match output {
        ProfileOutput::Json => println!(
            "{}",
            serde_json::to_string_pretty(profile).expect("a profile always serializes")
        ),
        ProfileOutput::Yaml => print!(
            "{}",
            serde_saphyr::to_string(profile).expect("a profile always serializes")
        ),
    }
}

pub fn run_profile(args: ProfileArgs) -> ExitCode {
    if !(args.max_seconds.is_finite() && args.max_seconds > 0.0) {
        return usage_error("--max-seconds must be a positive number of seconds");
    }
    if let Some(path) = &args.rdb {
        return run_rdb_profile(path, &args);
    }
    let addr = args.addr.clone().unwrap_or_default();
    let address = match EngineAddress::parse(&addr, args.password.clone()) {
        Ok(address) => address,
        Err(e) => return usage_error(&e.to_string()),
    };
    let stop = StopRequest::new();
    let options = ProfileOptions {
        db: args.db,
        sample_keys: args.sample_keys,
        max_commands_per_second: args.max_commands_per_sec,
        max_duration: Some(Duration::from_secs_f64(args.max_seconds)),
        stop: stop.clone(),
    };
    // SIGINT and SIGTERM end the profile between two commands, and what was read is printed,
    // marked incomplete; a command that does not return in time ends membench with the code.
    if let Err(e) = stop_on_signals(stop.clone(), STOP_DEADLINE, |cause| {
        eprintln!(
            "error: {}: the server did not answer within {} s, so nothing could be printed",
            cause.signal_name(),
            STOP_DEADLINE.as_secs()
        );
        std::process::exit(i32::from(cause.exit_code()));
    }) {
        eprintln!(
            "warning: cannot handle SIGINT and SIGTERM ({e}); a stopped profile would print nothing"
        );
    }
    // Hidden when stderr is not a terminal.
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("profiling ({msg}) {pos}/{len} keys [{bar:30}] eta {eta}")
            .expect("the template is valid")
            .progress_chars("=> "),
    );
    let mut on_progress = |p: ProfileProgress| {
        bar.set_message(p.stage);
        bar.set_length(p.target);
        bar.set_position(p.sampled);
    };
    let outcome = if args.cluster {
        profile_cluster(&address, &options, CONNECT_TIMEOUT, &mut on_progress)
    } else {
        match ControlConnection::open(&address, CONNECT_TIMEOUT) {
            Ok(mut control) => profile_server(&mut control, &options, &mut on_progress),
            Err(e) => Err(ProfileError::Connect(e)),
        }
    };
    bar.finish_and_clear();
    // A stop asked for (SIGINT 130, SIGTERM 143) is the exit code, as in `load` and `run`.
    let stopped = stop.cause().map(|cause| ExitCode::from(cause.exit_code()));
    match outcome {
        Ok(outcome) => {
            print_profile(&outcome.profile, args.output);
            let source = &outcome.profile.source;
            for note in &outcome.profile.notes {
                eprintln!("note: {note}");
            }
            let read = format!(
                "it holds the {} keys read in full of {} ({} groups)",
                source.sampled_keys,
                source.keys,
                outcome.profile.groups.len()
            );
            match (&outcome.error, &source.stopped_by) {
                (Some(e), _) => {
                    eprintln!("error: {e}; the profile printed is marked incomplete: {read}");
                    stopped.unwrap_or(ExitStatus::Failed.into())
                }
                (None, Some(why)) => {
                    eprintln!(
                        "warning: the profile is incomplete (source.complete false): {why}; {read}"
                    );
                    stopped.unwrap_or(ExitCode::SUCCESS)
                }
                (None, None) => stopped.unwrap_or(ExitCode::SUCCESS),
            }
        }
        Err(e @ (ProfileError::Empty { .. } | ProfileError::NotACluster { .. })) => {
            usage_error(&e.to_string())
        }
        // A server that cannot be reached or refuses the password: 1, as `load` exits.
        Err(e) => {
            eprintln!("error: {e}");
            stopped.unwrap_or(ExitStatus::Failed.into())
        }
    }
}

/// `membench profile --rdb FILE|URL`: the file (fetched first, from a URL) read to its end,
/// the profile printed. A URL's copy is named by the URL (without its query) wherever the
/// profile or a message would name the file.
fn run_rdb_profile(path: &std::path::Path, args: &ProfileArgs) -> ExitCode {
    let url = download::is_url(path);
    // SIGINT and SIGTERM end the command at once, removing a URL's copy, partial or whole:
    // a profile is printed only when the file has been read to its end.
    let _exit_on_signals = match url.map(|_| exit_on_signals("profiling the RDB file")) {
        Some(Err(e)) => {
            eprintln!(
                "warning: cannot handle SIGINT and SIGTERM ({e}); a stopped profile would leave the downloaded copy in TMPDIR"
            );
            None
        }
        Some(Ok(guard)) => Some(guard),
        None => None,
    };
    let copy = match (url, &args.rdb_credentials) {
        (None, Some(_)) => {
            return usage_error(
                "--rdb-credentials applies only with --rdb https://...: a file on this machine needs none; remove it, or name the file by its URL",
            );
        }
        (None, None) => None,
        (Some(url), credentials) => {
            match download::download_blocking(url, credentials.as_deref()) {
                Ok(copy) => Some((copy, download::redacted(url))),
                Err(failure) => {
                    eprintln!("error: --rdb {}", failure.message);
                    return match failure.transient {
                        true => ExitStatus::Failed.into(),
                        false => ExitStatus::BadInput.into(),
                    };
                }
            }
        }
    };
    let (path, shown) = match &copy {
        Some((copy, shown)) => (
            copy.path.as_path(),
            Some((copy.path.display().to_string(), shown)),
        ),
        None => (path, None),
    };
    let named = |text: String| match &shown {
        Some((copy, url)) => text.replace(copy.as_str(), url),
        None => text,
    };
    let options = RdbProfileOptions {
        db: args.db,
        sample_keys: args.sample_keys,
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("reading {pos} keys of the file")
            .expect("the template is valid"),
    );
    let outcome = profile_rdb_file(path, &options, &mut |p: ProfileProgress| {
        bar.set_position(p.sampled);
    });
    bar.finish_and_clear();
    match outcome {
        Ok(mut outcome) => {
            let notes = std::mem::take(&mut outcome.profile.notes);
            outcome.profile.notes = notes.into_iter().map(named).collect();
            print_profile(&outcome.profile, args.output);
            for note in &outcome.profile.notes {
                eprintln!("note: {note}");
            }
            ExitCode::SUCCESS
        }
        Err(e @ ProfileError::EmptyFile { .. }) => usage_error(&named(e.to_string())),
        Err(e) => {
            eprintln!("error: {}", named(e.to_string()));
            ExitStatus::Failed.into()
        }
    }
}
