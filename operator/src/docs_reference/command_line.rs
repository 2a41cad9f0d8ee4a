//! The command-line page: every visible command of `membench` and every flag, with its help,
//! default, accepted values and environment variable, by walking clap's command tree.

use clap::{Arg, ArgAction, Command};

use super::{code, header, paragraphs, table_cell};

/// The command-line reference page for `command` (the `membench` binary's clap command).
pub fn command_line_page(command: &Command) -> String {
    let mut page = header(
        "command-line",
        "Command line",
        "clap's command tree of `membench`",
    );
    page.push_str(
        "Every command and flag of `membench`. `membench COMMAND --help` prints the same help, \
         and [Exit codes](exit-codes.md) lists what every command exits with.\n\n",
    );
    describe(command, &[], &mut page);
    page
}

/// Appends `command`'s section (under `parents`' names) and those of its visible subcommands.
fn describe(command: &Command, parents: &[&str], page: &mut String) {
    let mut names: Vec<&str> = parents.to_vec();
    names.push(command.get_name());
    let full_name = names.join(" ");
    page.push_str(&format!("## `{full_name}`\n\n"));
    if let Some(about) = command.get_long_about().or(command.get_about()) {
        page.push_str(&format!("{}\n\n", paragraphs(&about.to_string())));
    }
    let subcommands: Vec<&Command> = command
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .collect();
    if !subcommands.is_empty() {
        page.push_str("| command | what it does |\n|---|---|\n");
        for sub in &subcommands {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            page.push_str(&format!(
                "| [`{full_name} {}`](#{}) | {} |\n",
                sub.get_name(),
                anchor(&format!("{full_name} {}", sub.get_name())),
                table_cell(&about)
            ));
        }
        page.push('\n');
    }
    let arguments: Vec<&Arg> = command
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !is_builtin(a))
        .collect();
    if !arguments.is_empty() {
        page.push_str("| flag | default | values | environment | help |\n|---|---|---|---|---|\n");
        for arg in arguments {
            page.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                code(&flag_form(arg)),
                default_of(arg),
                values_of(arg),
                arg.get_env()
                    .map(|e| code(&e.to_string_lossy()))
                    .unwrap_or_else(|| "-".into()),
                table_cell(
                    &arg.get_long_help()
                        .or(arg.get_help())
                        .map(|h| h.to_string())
                        .unwrap_or_default()
                )
            ));
        }
        page.push('\n');
    }
    for sub in subcommands {
        describe(sub, &names, page);
    }
}

/// clap's own `--help` and `--version`, which every command has.
fn is_builtin(arg: &Arg) -> bool {
    matches!(
        arg.get_action(),
        ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
    )
}

/// How the flag is written: `-n, --namespace <NAMESPACE>`, or `<NAME>...` for a positional.
fn flag_form(arg: &Arg) -> String {
    let value_names = arg
        .get_value_names()
        .map(|names| {
            names
                .iter()
                .map(|n| format!("<{n}>"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| format!("<{}>", arg.get_id().as_str().to_uppercase()));
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values())
        || matches!(arg.get_action(), ArgAction::Set | ArgAction::Append);
    let repeats = matches!(arg.get_action(), ArgAction::Append)
        || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
    if arg.is_positional() {
        return format!("{value_names}{}", if repeats { "..." } else { "" });
    }
    let mut form = Vec::new();
    if let Some(short) = arg.get_short() {
        form.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        form.push(format!("--{long}"));
    }
    let mut text = form.join(", ");
    if takes_value {
        text.push(' ');
        text.push_str(&value_names);
        if repeats {
            text.push_str("...");
        }
    }
    text
}

fn default_of(arg: &Arg) -> String {
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if defaults.is_empty() || matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) {
        "-".into()
    } else {
        code(&defaults.join(","))
    }
}

fn values_of(arg: &Arg) -> String {
    // A switch takes no value: its parser's `true`/`false` are not values a user writes.
    if matches!(
        arg.get_action(),
        ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count
    ) {
        return "-".into();
    }
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| code(v.get_name()))
        .collect();
    if values.is_empty() {
        "-".into()
    } else {
        values.join(", ")
    }
}

/// The anchor mdBook gives a heading `` `text` ``: lower case, spaces as dashes, and only
/// letters, digits, `-` and `_` kept.
pub(super) fn anchor(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}
