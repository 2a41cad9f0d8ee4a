//! `membench completions SHELL`: the shell completion script of the whole command line.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use clap_complete::Shell;

/// The shells membench prints a completion script for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    /// `membench completions bash > /etc/bash_completion.d/membench`, or `source <(...)`.
    Bash,
    /// `membench completions zsh > "${fpath[1]}/_membench"`.
    Zsh,
    /// `membench completions fish > ~/.config/fish/completions/membench.fish`.
    Fish,
}

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to print the script for.
    #[arg(value_enum)]
    shell: CompletionShell,
}

/// Prints the script for `command`, completing the program by the name it was invoked as
/// (`membench`, or `kubectl-membench` for the kubectl plugin).
pub fn run_completions(args: CompletionsArgs, mut command: clap::Command, name: &str) -> ExitCode {
    let shell = match args.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let bin = name.replace(' ', "-");
    clap_complete::generate(shell, &mut command, bin, &mut std::io::stdout());
    ExitCode::SUCCESS
}
