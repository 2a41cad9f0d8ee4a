//! Every `membench ...` command line in a code block of the book (docs/src) and the README
//! parses with the current command line: a renamed or removed flag or command fails here,
//! naming the page and line. The lines are parsed by clap (`try_get_matches_from`, through the
//! hidden `membench reference-docs check-command-lines`), never run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use std::io::Write as _;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("operator/ has a parent")
        .to_path_buf()
}

/// A shell word or an operator (`&&`, `|`, `>`, ...), as far as docs' command lines need.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Operator(String),
}

/// Splits a command line as a shell would, for the forms docs use: quotes, backslashes,
/// comments, pipes, lists and redirections. `$(...)` and globs stay inside their word.
fn shell_tokens(line: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let flush = |word: &mut String, in_word: &mut bool, tokens: &mut Vec<Token>| {
        if *in_word {
            tokens.push(Token::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => flush(&mut word, &mut in_word, &mut tokens),
            '|' | '&' | ';' | '>' | '<' => {
                // `2>` and `2>&1`: a redirection, not a word `2`.
                if in_word && word == "2" && c == '>' {
                    word.clear();
                    in_word = false;
                }
                flush(&mut word, &mut in_word, &mut tokens);
                let mut op = c.to_string();
                while let Some(&next) = chars.peek() {
                    if "|&>".contains(next) {
                        op.push(next);
                        chars.next();
                    } else {
                        break;
                    }
                }
                // `>&1`, `>&-`: the descriptor belongs to the redirection.
                if op.starts_with('>') && op.ends_with('&') {
                    while let Some(&next) = chars.peek() {
                        if next.is_ascii_digit() || next == '-' {
                            op.push(next);
                            chars.next();
                        } else {
                            break;
                        }
                    }
                }
                tokens.push(Token::Operator(op));
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    flush(&mut word, &mut in_word, &mut tokens);
    tokens
}

/// The membench invocations of one shell line, as argument lists starting with `membench`.
fn membench_invocations(line: &str) -> Vec<Vec<String>> {
    let mut invocations = Vec::new();
    let mut command: Vec<String> = Vec::new();
    let mut skip_next_word = false;
    let finish = |command: &mut Vec<String>, invocations: &mut Vec<Vec<String>>| {
        let words: Vec<String> = command
            .drain(..)
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .collect();
        let rest = match words.first().map(String::as_str) {
            Some(
                "membench" | "target/release/membench" | "./membench" | "./target/release/membench",
            ) => &words[1..],
            Some("kubectl") if words.get(1).map(String::as_str) == Some("membench") => &words[2..],
            _ => return,
        };
        let mut args = vec!["membench".to_string()];
        args.extend(rest.iter().cloned());
        invocations.push(args);
    };
    for token in shell_tokens(line) {
        match token {
            Token::Word(word) if skip_next_word => {
                skip_next_word = false;
                let _ = word;
            }
            Token::Word(word) => command.push(word),
            Token::Operator(op) if op.starts_with('>') || op.starts_with('<') => {
                // `> file`, `>> file`, `< file`: the next word is the file; `>&1` names none.
                skip_next_word = !op.contains('&');
            }
            Token::Operator(_) => finish(&mut command, &mut invocations),
        }
    }
    finish(&mut command, &mut invocations);
    invocations
}

/// The shell lines of each fenced code block, as `(line, text)` with continuations joined.
fn code_blocks(markdown: &str) -> Vec<Vec<(usize, String)>> {
    let mut blocks = Vec::new();
    let mut current: Vec<(usize, String)> = Vec::new();
    let mut fenced = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            if fenced {
                blocks.push(std::mem::take(&mut current));
            }
            fenced = !fenced;
            pending = None;
            continue;
        }
        if !fenced {
            continue;
        }
        let text = line.trim().strip_prefix("$ ").unwrap_or(line.trim());
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        joined.push_str(text);
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((start, format!("{head} ")));
        } else {
            current.push((start, joined));
        }
    }
    blocks
}

/// `(page, line, text)` of every shell line in a fenced code block, continuations joined.
fn code_lines(name: &str, markdown: &str) -> Vec<(String, usize, String)> {
    code_blocks(markdown)
        .into_iter()
        .flatten()
        .map(|(line, text)| (name.to_string(), line, text))
        .collect()
}

fn docs() -> Vec<(String, String)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for entry in entries {
            if entry.is_dir() {
                walk(&entry, root, out);
            } else if entry.extension().is_some_and(|e| e == "md") {
                let name = entry.strip_prefix(root).unwrap().display().to_string();
                out.push((name, std::fs::read_to_string(&entry).unwrap()));
            }
        }
    }
    let root = repo_root();
    let mut out = vec![(
        "README.md".to_string(),
        std::fs::read_to_string(root.join("README.md")).unwrap(),
    )];
    walk(&root.join("docs/src"), &root, &mut out);
    out
}

/// clap's verdict on each argument list: None when it parses.
fn verdicts(lines: &[Vec<String>]) -> Vec<Option<String>> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(["reference-docs", "check-command-lines"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("membench runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(lines).unwrap().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "membench reference-docs check-command-lines failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("a JSON list of verdicts")
}

#[test]
fn every_membench_line_of_the_docs_parses_with_the_current_command_line() {
    let mut found: Vec<(String, usize, String, Vec<String>)> = Vec::new();
    for (name, text) in docs() {
        for (page, line, shell) in code_lines(&name, &text) {
            for args in membench_invocations(&shell) {
                found.push((page.clone(), line, shell.clone(), args));
            }
        }
    }
    // The README's quickstarts and the pages held 30 such invocations when this test was
    // written: finding few means the reader of code blocks broke, not that the docs are right.
    assert!(
        found.len() >= 25,
        "only {} membench lines found in the docs",
        found.len()
    );
    let args: Vec<Vec<String>> = found.iter().map(|f| f.3.clone()).collect();
    let problems: Vec<String> = found
        .iter()
        .zip(verdicts(&args))
        .filter_map(|((page, line, shell, _), verdict)| {
            verdict.map(|error| {
                let error = error.lines().next().unwrap_or_default().to_string();
                format!("{page}:{line}: `{shell}`: {error}")
            })
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_line_with_a_removed_flag_is_refused_and_a_good_one_taken() {
    let lines = vec![
        membench_invocations(
            "membench load --addr 127.0.0.1:6379 --workload strings --keys 10 > out.json",
        )
        .remove(0),
        membench_invocations("membench load --no-such-flag 1").remove(0),
    ];
    let verdicts = verdicts(&lines);
    assert_eq!(verdicts[0], None);
    assert!(
        verdicts[1]
            .as_deref()
            .is_some_and(|e| e.contains("--no-such-flag")),
        "{verdicts:?}"
    );
}

#[test]
fn shell_lines_are_split_into_their_membench_invocations() {
    assert_eq!(
        membench_invocations(
            "hack/install-engines.sh && cargo build --release && target/release/membench run manifests/examples/quick.yaml"
        ),
        vec![vec!["membench", "run", "manifests/examples/quick.yaml"]]
    );
    assert_eq!(
        membench_invocations(
            "MEMBENCH_PASSWORD=x kubectl membench report -n 'a b' --output html > r.html 2>&1 # note"
        ),
        vec![vec!["membench", "report", "-n", "a b", "--output", "html"]]
    );
    assert!(membench_invocations("kubectl get mb -w").is_empty());
}

/// The metric names the operator's registry has now, from its generated reference page.
fn metric_names() -> Vec<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(["reference-docs", "metrics"])
        .output()
        .expect("membench runs");
    assert!(output.status.success());
    let page = String::from_utf8(output.stdout).unwrap();
    page.lines()
        .filter_map(|l| l.strip_prefix("| `membench_"))
        .map(|rest| format!("membench_{}", rest.split('`').next().unwrap()))
        .collect()
}

/// `(page, line, name)` of every `membench_...` word a page names, prose or code, but not a
/// Rust path (`membench_devcluster::...`, `agent::membench_image`) or function
/// (`membench_image(...)`).
fn named_metrics(name: &str, text: &str) -> Vec<(String, usize, String)> {
    let word = regex::Regex::new(r"\bmembench_[a-z_]+").unwrap();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for found in word.find_iter(line) {
            let after = &line[found.end()..];
            let before = &line[..found.start()];
            if after.starts_with("::") || after.starts_with('(') || before.ends_with("::") {
                continue;
            }
            out.push((name.to_string(), i + 1, found.as_str().to_string()));
        }
    }
    out
}

/// Whether `named` is a metric (or one of a histogram's series, or a prefix the text completes,
/// as in `membench_capacity_*`).
fn is_metric(named: &str, metrics: &[String]) -> bool {
    metrics.iter().any(|m| {
        m == named
            || ["_bucket", "_sum", "_count"]
                .iter()
                .any(|suffix| format!("{m}{suffix}") == named)
            || (named.ends_with('_') && m.starts_with(named))
    })
}

#[test]
fn every_metric_the_docs_name_is_one_the_operator_exposes() {
    let metrics = metric_names();
    assert!(
        metrics.len() >= 30,
        "only {} metrics in the registry's page",
        metrics.len()
    );
    let mut named = Vec::new();
    for (name, text) in docs() {
        if name.ends_with("reference/metrics.md") {
            continue;
        }
        named.extend(named_metrics(&name, &text));
    }
    assert!(
        named.len() >= 20,
        "only {} metric names found in the docs",
        named.len()
    );
    let problems: Vec<String> = named
        .iter()
        .filter(|(_, _, metric)| !is_metric(metric, &metrics))
        .map(|(page, line, metric)| {
            format!("{page}:{line}: `{metric}` is no metric of the operator (docs/src/reference/metrics.md lists them)")
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_metric_name_that_does_not_exist_is_named_with_its_line() {
    let metrics = vec!["membench_used_memory_bytes".to_string()];
    let named = named_metrics(
        "p.md",
        "See `membench_used_memory_bytes`.\nAnd membench_used_memory_rss_bytes, not membench_devcluster::tools.",
    );
    let unknown: Vec<_> = named
        .iter()
        .filter(|(_, _, m)| !is_metric(m, &metrics))
        .collect();
    assert_eq!(
        unknown,
        [&(
            "p.md".to_string(),
            2,
            "membench_used_memory_rss_bytes".to_string()
        )]
    );
}

/// The field paths of the MemoryBenchmark API (without `[]`), and those that are maps (whose
/// keys are the user's), from `membench reference-docs api` (the CRD schema the code generates).
fn api_paths() -> (Vec<String>, Vec<String>) {
    let output = Command::new(env!("CARGO_BIN_EXE_membench"))
        .args(["reference-docs", "api"])
        .output()
        .expect("membench runs");
    assert!(output.status.success());
    let page = String::from_utf8(output.stdout).unwrap();
    let mut paths = Vec::new();
    let mut maps = Vec::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        let Some(path) = line
            .strip_prefix("### `")
            .and_then(|rest| rest.strip_suffix('`'))
        else {
            continue;
        };
        let path = path.replace("[]", "");
        let facts = lines.by_ref().find(|l| !l.is_empty()).unwrap_or_default();
        if facts.starts_with("**map of") {
            maps.push(path.clone());
        }
        paths.push(path);
    }
    (paths, maps)
}

/// Status fields of Kubernetes' own objects (a Node's, a Pod's) that pages name beside the
/// MemoryBenchmark's.
const KUBERNETES_STATUS_FIELDS: [&str; 4] = [
    "status.allocatable",
    "status.containerStatuses",
    "status.hostIP",
    "status.podIP",
];

/// `(page, line, path)` of every `spec.x.y` or `status.x[].y` a page names, but not a file name
/// (`spec.rs`, `spec.yaml`) or a status field of Kubernetes' own objects.
fn named_fields(name: &str, text: &str) -> Vec<(String, usize, String)> {
    let path =
        regex::Regex::new(r"(?:^|[^\w./-])((?:spec|status)(?:\.[a-zA-Z]+(?:\[\])?)+)").unwrap();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for capture in path.captures_iter(line) {
            let found = capture[1].replace("[]", "");
            if [".rs", ".yaml", ".json", ".md"]
                .iter()
                .any(|e| found.ends_with(e))
                || KUBERNETES_STATUS_FIELDS
                    .iter()
                    .any(|k| found == *k || found.starts_with(&format!("{k}.")))
            {
                continue;
            }
            out.push((name.to_string(), i + 1, found));
        }
    }
    out
}

/// Whether `named` is a field of the API, or a key inside one of its maps.
fn is_field(named: &str, paths: &[String], maps: &[String]) -> bool {
    paths.iter().any(|p| p == named) || maps.iter().any(|m| named.starts_with(&format!("{m}.")))
}

#[test]
fn every_spec_and_status_field_the_docs_name_is_in_the_crd() {
    let (paths, maps) = api_paths();
    assert!(
        paths.len() >= 200,
        "only {} field paths in the API page",
        paths.len()
    );
    let mut named = Vec::new();
    for (name, text) in docs() {
        if name.ends_with("reference/api.md") {
            continue;
        }
        named.extend(named_fields(&name, &text));
    }
    assert!(
        named.len() >= 100,
        "only {} field paths found in the docs",
        named.len()
    );
    let problems: Vec<String> = named
        .iter()
        .filter(|(_, _, field)| !is_field(field, &paths, &maps))
        .map(|(page, line, field)| {
            format!("{page}:{line}: `{field}` is no field of MemoryBenchmark (docs/src/reference/api.md lists them)")
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_field_path_that_does_not_exist_is_named_with_its_line() {
    let paths = vec![
        "spec.peak".to_string(),
        "spec.peak.replica".to_string(),
        "spec.engines.config".to_string(),
    ];
    let maps = vec!["spec.engines.config".to_string()];
    let named = named_fields(
        "p.md",
        "`spec.peak.replica` runs in a cluster; spec.rs holds it.\nSet spec.engines[].config.maxmemory, not spec.peak.replicas.\n",
    );
    let unknown: Vec<_> = named
        .iter()
        .filter(|(_, _, f)| !is_field(f, &paths, &maps))
        .collect();
    assert_eq!(
        unknown,
        [&("p.md".to_string(), 2, "spec.peak.replicas".to_string())]
    );
}

/// `(page, line, text)` of every ```yaml block.
fn yaml_blocks(name: &str, markdown: &str) -> Vec<(String, usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut fenced = false;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            if let Some((start, text)) = current.take() {
                out.push((name.to_string(), start, text));
            } else if !fenced && (trimmed == "```yaml" || trimmed == "```yml") {
                current = Some((i + 2, String::new()));
            }
            fenced = !fenced;
            continue;
        }
        if let Some((_, text)) = &mut current {
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

/// The key paths of a MemoryBenchmark YAML document below `prefix`, lists looked through.
fn key_paths(value: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map {
                let path = format!("{prefix}.{key}");
                out.push(path.clone());
                key_paths(child, &path, out);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                key_paths(item, prefix, out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_field_of_the_docs_memorybenchmark_yaml_is_in_the_crd() {
    let (paths, maps) = api_paths();
    let spec_fields: Vec<&str> = paths
        .iter()
        .filter_map(|p| p.strip_prefix("spec."))
        .filter(|p| !p.contains('.'))
        .collect();
    let mut checked = 0;
    let mut problems = Vec::new();
    for (name, text) in docs() {
        for (page, line, block) in yaml_blocks(&name, &text) {
            for document in block.split("\n---\n") {
                let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(document) else {
                    continue;
                };
                let Some(top) = value.as_object() else {
                    continue;
                };
                let kind = top.get("kind").and_then(|k| k.as_str());
                // A whole MemoryBenchmark, or a part of one: `spec:` or the spec's own fields.
                let mut found = Vec::new();
                if kind == Some("MemoryBenchmark") || (kind.is_none() && top.contains_key("spec")) {
                    for part in ["spec", "status"] {
                        if let Some(child) = top.get(part) {
                            key_paths(child, part, &mut found);
                        }
                    }
                } else if kind.is_none()
                    && top
                        .keys()
                        .next()
                        .is_some_and(|k| spec_fields.contains(&k.as_str()))
                {
                    key_paths(&value, "spec", &mut found);
                } else {
                    continue;
                }
                checked += 1;
                for path in found {
                    if !is_field(&path, &paths, &maps) {
                        problems.push(format!(
                            "{page}:{line}: the YAML example sets `{path}`, which is no field of MemoryBenchmark (docs/src/reference/api.md lists them)"
                        ));
                    }
                }
            }
        }
    }
    assert!(
        checked >= 6,
        "only {checked} MemoryBenchmark YAML examples found in the docs"
    );
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The names of the MemoryBenchmarks a manifest of the repository creates.
fn benchmark_names(manifest: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join(manifest))
        .unwrap_or_else(|e| panic!("cannot read {manifest}: {e}"));
    text.split("\n---\n")
        .filter_map(|document| serde_saphyr::from_str::<serde_json::Value>(document).ok())
        .filter(|value| value["kind"] == "MemoryBenchmark")
        .filter_map(|value| value["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The words of `args` that are not flags nor the values of `value_flags`.
fn positionals<'a>(args: &'a [String], value_flags: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut skip = false;
    for arg in args {
        if skip {
            skip = false;
        } else if value_flags.contains(&arg.as_str()) {
            skip = true;
        } else if !arg.starts_with('-') {
            out.push(arg.as_str());
        }
    }
    out
}

/// The MemoryBenchmarks a shell line names: `kubectl get|describe|delete|edit mb NAME...` and
/// `membench report NAME...`.
fn benchmarks_named(line: &str) -> Vec<String> {
    let words: Vec<String> = shell_tokens(line)
        .into_iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w),
            Token::Operator(_) => None,
        })
        .collect();
    let kubectl_flags = ["-n", "--namespace", "-o", "--output", "--context", "-l"];
    let kinds = ["mb", "memorybenchmark", "memorybenchmarks"];
    let mut names: Vec<String> = Vec::new();
    if words.first().map(String::as_str) == Some("kubectl")
        && words.len() > 2
        && ["get", "describe", "delete", "edit", "wait"].contains(&words[1].as_str())
    {
        if kinds.contains(&words[2].as_str()) {
            names.extend(
                positionals(&words[3..], &kubectl_flags)
                    .into_iter()
                    .map(str::to_string),
            );
        } else {
            // `kubectl wait mb/NAME`: a kind and a name in one word.
            names.extend(
                positionals(&words[2..], &kubectl_flags)
                    .into_iter()
                    .filter_map(|word| word.split_once('/'))
                    .filter(|(kind, _)| kinds.contains(kind))
                    .map(|(_, name)| name.to_string()),
            );
        }
    }
    for args in membench_invocations(line) {
        if args.get(1).map(String::as_str) == Some("report") {
            names.extend(
                positionals(&args[2..], &["-n", "--namespace", "--context", "--output"])
                    .into_iter()
                    .map(str::to_string),
            );
        }
    }
    names
}

#[test]
fn every_benchmark_a_code_block_names_is_one_the_example_it_applies_creates() {
    let mut checked = 0;
    let mut problems = Vec::new();
    for (name, text) in docs() {
        for block in code_blocks(&text) {
            let created: Vec<(String, Vec<String>)> = block
                .iter()
                .flat_map(|(_, line)| {
                    let words: Vec<String> = shell_tokens(line)
                        .into_iter()
                        .filter_map(|t| match t {
                            Token::Word(w) => Some(w),
                            Token::Operator(_) => None,
                        })
                        .collect();
                    let applies = words.first().map(String::as_str) == Some("kubectl")
                        && words.get(1).map(String::as_str) == Some("apply");
                    // `sed ... manifests/examples/X.yaml | kubectl apply -f -` applies X too.
                    let piped = words.first().map(String::as_str) == Some("sed")
                        && words
                            .windows(3)
                            .any(|w| w[0] == "kubectl" && w[1] == "apply" && w[2] == "-f");
                    words
                        .windows(2)
                        .filter(|w| {
                            (applies && w[0] == "-f" || piped)
                                && w[1].starts_with("manifests/examples/")
                        })
                        .map(|w| (w[1].clone(), benchmark_names(&w[1])))
                        .collect::<Vec<_>>()
                })
                .collect();
            if created.is_empty() {
                continue;
            }
            checked += 1;
            let all: Vec<&String> = created.iter().flat_map(|(_, names)| names).collect();
            for (line, shell) in &block {
                for benchmark in benchmarks_named(shell) {
                    if !all.contains(&&benchmark) {
                        problems.push(format!(
                            "{name}:{line}: `{shell}` names the benchmark `{benchmark}`, which {} does not create (it creates {})",
                            created.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>().join(", "),
                            all.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ")
                        ));
                    }
                }
            }
        }
    }
    assert!(checked >= 2, "only {checked} code blocks apply an example");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_benchmark_name_the_example_does_not_create_is_named_with_its_line() {
    assert_eq!(benchmarks_named("kubectl get mb quick -o yaml"), ["quick"]);
    assert_eq!(
        benchmarks_named("kubectl wait mb/quick --for=jsonpath='{.status.phase}'=Succeeded"),
        ["quick"]
    );
    assert_eq!(
        benchmarks_named("membench report -n default quick-sorted-set --output html > q.html"),
        ["quick-sorted-set"]
    );
    assert!(benchmarks_named("kubectl get mb -w").is_empty());
    let names = benchmark_names("manifests/examples/quick.yaml");
    assert!(names.contains(&"quick-sorted-set".to_string()), "{names:?}");
    assert!(!names.contains(&"quick".to_string()), "{names:?}");
}

/// The first ```sh block after `heading` in `markdown`.
fn block_after(markdown: &str, heading: &str) -> Option<String> {
    let mut lines = markdown.lines();
    lines.by_ref().find(|line| line.trim_end() == heading)?;
    lines.by_ref().find(|line| line.trim_end() == "```sh")?;
    let block: Vec<&str> = lines.take_while(|line| line.trim_end() != "```").collect();
    Some(block.join("\n"))
}

/// quickstart_e2e.rs runs the book's cluster quickstart on the dev cluster; the README's copy
/// must be the same commands, or the README's would go unchecked.
#[test]
fn the_readmes_cluster_quickstart_is_the_books_that_the_suite_runs() {
    let root = repo_root();
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap();
    let book = block_after(
        &read("docs/src/getting-started/cluster.md"),
        "## Quickstart",
    )
    .expect("docs/src/getting-started/cluster.md: a ```sh block under ## Quickstart");
    let readme = block_after(&read("README.md"), "## Cluster quickstart")
        .expect("README.md: a ```sh block under ## Cluster quickstart");
    assert_eq!(
        readme, book,
        "README.md's cluster quickstart differs from the book's (docs/src/getting-started/cluster.md, ## Quickstart), which the suite runs"
    );
}
