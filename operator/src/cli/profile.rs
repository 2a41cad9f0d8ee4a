//! `membench profile`: the shape of a live server's keyspace, printed as a profile (YAML or
//! JSON) that the `profile` workload rebuilds. Read-only; what the profile holds is in the
//! README ("What a profile holds").

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use membench::client::engine::{ControlConnection, EngineAddress};
use membench::profile::Profile;
use membench::profiler::{
    DEFAULT_COMMANDS_PER_SECOND, ProfileError, ProfileOptions, ProfileProgress, profile_cluster,
    profile_server,
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
    #[arg(long)]
    addr: String,
    /// The server's password, if it requires one.
    #[arg(long, env = "MEMBENCH_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// The database to profile.
    #[arg(long, default_value_t = 0)]
    db: u32,
    /// Sample at most this many keys (the first SCAN returns).
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
    let address = match EngineAddress::parse(&args.addr, args.password.clone()) {
        Ok(address) => address,
        Err(e) => return usage_error(&e.to_string()),
    };
    let options = ProfileOptions {
        db: args.db,
        sample_keys: args.sample_keys,
        max_commands_per_second: args.max_commands_per_sec,
        max_duration: Some(Duration::from_secs_f64(args.max_seconds)),
    };
    // Hidden when stderr is not a terminal.
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("profiling {pos}/{len} keys [{bar:30}] eta {eta}")
            .expect("the template is valid")
            .progress_chars("=> "),
    );
    let mut on_progress = |p: ProfileProgress| {
        bar.set_length(p.target);
        bar.set_position(p.sampled);
    };
    let outcome = if args.cluster {
        profile_cluster(&address, &options, CONNECT_TIMEOUT, &mut on_progress)
    } else {
        match ControlConnection::open(&address, CONNECT_TIMEOUT) {
            Ok(mut control) => profile_server(&mut control, &options, &mut on_progress),
            Err(e) => return usage_error(&e.to_string()),
        }
    };
    bar.finish_and_clear();
    match outcome {
        Ok(outcome) => {
            print_profile(&outcome.profile, args.output);
            let source = &outcome.profile.source;
            for note in &outcome.profile.notes {
                eprintln!("note: {note}");
            }
            match (&outcome.error, &source.stopped_by) {
                (Some(e), _) => {
                    eprintln!(
                        "error: {e}; the profile printed holds the {} keys sampled before",
                        source.sampled_keys
                    );
                    ExitCode::from(1)
                }
                (None, Some(why)) => {
                    eprintln!("warning: the profile is incomplete: {why}");
                    ExitCode::SUCCESS
                }
                (None, None) => ExitCode::SUCCESS,
            }
        }
        Err(
            e @ (ProfileError::Empty { .. }
            | ProfileError::Connect(_)
            | ProfileError::NotACluster { .. }),
        ) => usage_error(&e.to_string()),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
