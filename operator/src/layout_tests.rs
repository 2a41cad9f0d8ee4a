//! The layout of `operator/src` as a test: every top-level part has a rank, a file imports only
//! parts of a lower rank than its own (or its own part), and no file imports, through any
//! chain, a file that imports it back. docs/src/contributing/architecture.md draws the same arrows. The check
//! reads the `crate::`, `super::` and `membench::` paths of every file under operator/src
//! (comments left out), so it needs no build of anything but itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use regex::Regex;

/// The parts of operator/src, by rank: a part may import the parts of a lower rank only.
/// Parts of one rank do not import each other (the controller and the local runner, the
/// reports and the metrics, the client and auth, the leaves).
const RANKS: &[(&str, u32)] = &[
    // The command line (the `membench` binary), over the library.
    ("main", 8),
    ("cli", 8),
    // The crate root and the tests that cross every part.
    ("lib", 7),
    ("fuzz_tests", 7),
    ("layout_tests", 7),
    ("plan_agreement_tests", 7),
    // The two runners: the operator and the local runner; and the book's generated reference
    // pages, which read the CRD, the metrics registry, the result types (report, client) and
    // the exit codes (error).
    ("controller", 6),
    ("local", 6),
    ("docs_reference", 6),
    // What results become: reports and metrics.
    ("report", 5),
    ("metrics", 5),
    // A spec read and checked (it uses the workloads' sizes), the capacity arithmetic (what a
    // result needs at N items), and a live server's keyspace read into a profile (over the
    // client's control connection).
    ("validation", 4),
    ("capacity", 4),
    ("profiler", 4),
    // The load path, and how pods get the engines' password.
    ("client", 3),
    ("auth", 3),
    // The MemoryBenchmark resource.
    ("crd", 2),
    // Leaves: they import no other part but the words.
    ("stats", 1),
    ("formats", 1),
    ("error", 1),
    ("text", 1),
    ("table", 1),
    // A profile's data and key-name templates, which the CRD embeds.
    ("profile", 1),
    // The RDB file reader: pure parsing of a dump from any `Read`.
    ("rdb", 1),
    // The words the status and results carry, and their one shape: below the leaves, since
    // the error categories are words too.
    ("words", 0),
];

fn rank(part: &str) -> Option<u32> {
    RANKS.iter().find(|(p, _)| *p == part).map(|(_, r)| *r)
}

/// One source file: its path under operator/src and its text.
struct Source {
    path: String,
    text: String,
}

fn read_tree(dir: &Path, prefix: &str, out: &mut Vec<Source>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for entry in entries {
        let name = entry
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let path = format!("{prefix}{name}");
        if entry.is_dir() {
            read_tree(&entry, &format!("{path}/"), out);
        } else if name.ends_with(".rs") {
            let text = std::fs::read_to_string(&entry)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", entry.display()));
            out.push(Source { path, text });
        }
    }
}

/// The part a file belongs to: its top-level folder, or its own name at the top.
fn part_of(path: &str) -> &str {
    let first = path.split('/').next().unwrap_or(path);
    first.strip_suffix(".rs").unwrap_or(first)
}

/// Files of the `membench` binary, whose `crate::` is the binary and whose library paths start
/// with `membench::`.
fn in_binary(path: &str) -> bool {
    path == "main.rs" || path.starts_with("cli/")
}

/// The code of a file without its comments (doc links are not imports), and without its inline
/// `#[cfg(test)] mod tests { ... }` when `with_tests` is false.
fn code_of(text: &str, with_tests: bool) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if !with_tests
            && line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim() == "mod tests {")
        {
            break;
        }
        let line = line.split("//").next().unwrap_or_default();
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The module path of a file (`controller/pods/mod.rs` is `controller::pods`), with the files
/// that `#[path]` attributes give another module path.
fn module_paths(sources: &[Source]) -> BTreeMap<String, Vec<String>> {
    let mut modules: BTreeMap<String, Vec<String>> = sources
        .iter()
        .filter(|s| !in_binary(&s.path))
        .map(|s| {
            let stem = s.path.strip_suffix(".rs").unwrap_or(&s.path);
            let mut segments: Vec<String> = stem.split('/').map(String::from).collect();
            if segments.last().is_some_and(|l| l == "mod" || l == "lib") {
                segments.pop();
            }
            (s.path.clone(), segments)
        })
        .collect();
    let path_attribute = Regex::new(
        r#"#\[path = "([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))? )?mod (\w+);"#,
    )
    .expect("a valid regex");
    for source in sources.iter().filter(|s| !in_binary(&s.path)) {
        for found in path_attribute.captures_iter(&source.text) {
            let dir = source.path.rsplit_once('/').map_or("", |(d, _)| d);
            let target = if dir.is_empty() {
                found[1].to_string()
            } else {
                format!("{dir}/{}", &found[1])
            };
            let mut segments = modules[&source.path].clone();
            segments.push(found[2].to_string());
            modules.insert(target, segments);
        }
    }
    modules
}

/// The paths a file names, each as module segments from the library's root: `crate::a::b`
/// (or `membench::a::b` in the binary) and `super::b` resolved against the file's module.
fn named_paths(path: &str, code: &str, module: &[String]) -> Vec<Vec<String>> {
    let named = Regex::new(r"\b(crate|super|membench)((?:::\w+)+)").expect("a valid regex");
    let mut found = Vec::new();
    for capture in named.captures_iter(code) {
        let mut segments: Vec<String> = capture[2].split("::").skip(1).map(String::from).collect();
        let mut base: Vec<String> = match (&capture[1], in_binary(path)) {
            ("membench", true) => Vec::new(),
            ("crate" | "super", true) | ("membench", false) => continue,
            ("crate", false) => Vec::new(),
            _ => {
                // `super` of a file's module, then any further `super`s.
                let mut base = module.to_vec();
                base.pop();
                while segments.first().is_some_and(|s| s == "super") {
                    base.pop();
                    segments.remove(0);
                }
                base
            }
        };
        base.extend(segments);
        found.push(base);
    }
    found
}

/// What is wrong with the layout of these files; empty when nothing is.
fn layout_problems(sources: &[Source]) -> Vec<String> {
    let mut problems = Vec::new();
    let modules = module_paths(sources);
    let file_of: BTreeMap<&[String], &str> = modules
        .iter()
        .map(|(file, segments)| (segments.as_slice(), file.as_str()))
        .collect();
    let mut imports: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let child_use = Regex::new(r"\buse\s+(?:self::)?(\w+)::").expect("a valid regex");
    for source in sources {
        let part = part_of(&source.path);
        let Some(own) = rank(part) else {
            problems.push(format!(
                "operator/src/{} is in no part of the layout: give `{part}` a rank in RANKS (layout_tests.rs) and a place in docs/src/contributing/architecture.md",
                source.path
            ));
            continue;
        };
        let module = modules.get(&source.path).cloned().unwrap_or_default();
        for named in named_paths(&source.path, &code_of(&source.text, true), &module) {
            let Some(target) = named.first() else {
                continue;
            };
            if target == part {
                continue;
            }
            match rank(target) {
                Some(theirs) if theirs < own => {}
                Some(theirs) => problems.push(format!(
                    "operator/src/{} imports {}::{} (part `{target}`, rank {theirs}), but `{part}` has rank {own}: a part imports only parts of a lower rank (see docs/src/contributing/architecture.md)",
                    source.path,
                    if in_binary(&source.path) { "membench" } else { "crate" },
                    named.join("::")
                )),
                // A crate-root item (`crate::crd_yaml`) or a name of another crate.
                None => {}
            }
        }
        if in_binary(&source.path) {
            continue;
        }
        // The files it imports outside its own inline tests, for the circles: by `crate::` or
        // `super::` paths, and its own submodules by `use child::...` (a re-export of them).
        let code = code_of(&source.text, false);
        let children = child_use
            .captures_iter(&code)
            .map(|c| [module.clone(), vec![c[1].to_string()]].concat());
        let targets = imports.entry(source.path.as_str()).or_default();
        for named in named_paths(&source.path, &code, &module)
            .into_iter()
            .chain(children)
        {
            let target = (1..=named.len())
                .rev()
                .find_map(|n| file_of.get(&named[..n]).copied());
            if let Some(target) = target.filter(|t| *t != source.path) {
                targets.insert(target);
            }
        }
    }
    problems.extend(circles(&imports));
    problems
}

/// Every import circle among files, each named once by the files along it.
fn circles(imports: &BTreeMap<&str, BTreeSet<&str>>) -> Vec<String> {
    let mut found = Vec::new();
    let mut reported: BTreeSet<BTreeSet<&str>> = BTreeSet::new();
    for start in imports.keys() {
        // The shortest way back to `start`, breadth first.
        let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut frontier = vec![*start];
        let mut back = None;
        'search: while !frontier.is_empty() {
            let mut next = Vec::new();
            for file in frontier {
                for target in imports.get(file).into_iter().flatten() {
                    if target == start {
                        back = Some(file);
                        break 'search;
                    }
                    if !came_from.contains_key(target) {
                        came_from.insert(target, file);
                        next.push(*target);
                    }
                }
            }
            frontier = next;
        }
        let Some(mut file) = back else {
            continue;
        };
        let mut circle = vec![*start];
        let mut along = vec![file];
        while file != *start {
            file = came_from[file];
            along.push(file);
        }
        along.pop();
        circle.extend(along.into_iter().rev());
        if reported.insert(circle.iter().copied().collect()) {
            let names: Vec<String> = circle
                .iter()
                .chain(std::iter::once(start))
                .map(|f| format!("operator/src/{f}"))
                .collect();
            found.push(format!(
                "import circle: {} (imports run one way: move what both need into a module below them)",
                names.join(" -> ")
            ));
        }
    }
    found
}

fn source(path: &str, text: &str) -> Source {
    Source {
        path: path.into(),
        text: text.into(),
    }
}

#[test]
fn operator_src_imports_run_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Vec::new();
    read_tree(&root, "", &mut sources);
    assert!(
        sources
            .iter()
            .any(|s| s.path == "controller/decide/plan.rs"),
        "read no operator/src/controller/decide/plan.rs under {}",
        root.display()
    );
    let problems = layout_problems(&sources);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_part_has_its_place_in_the_architecture_guide() {
    let guide =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/contributing/architecture.md");
    let text = std::fs::read_to_string(&guide)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", guide.display()));
    let missing: Vec<&str> = RANKS
        .iter()
        .map(|(part, _)| *part)
        .filter(|part| !text.contains(&format!("`{part}")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/src/contributing/architecture.md does not name these parts of operator/src: {missing:?}"
    );
}

#[test]
fn an_import_of_a_higher_part_is_named_with_its_file() {
    let problems = layout_problems(&[
        source(
            "report/html.rs",
            "use crate::local::runner::LocalComparison;\n",
        ),
        source("local/mod.rs", "pub mod runner;\n"),
        source("local/runner.rs", "use crate::report::html::render_page;\n"),
    ]);
    assert!(
        problems.iter().any(|p| p.starts_with(
            "operator/src/report/html.rs imports crate::local::runner::LocalComparison (part `local`, rank 6), but `report` has rank 5"
        )),
        "{problems:#?}"
    );
    // The import from local into report is downwards, so it is the only rank problem.
    assert_eq!(
        problems.iter().filter(|p| p.contains(" has rank ")).count(),
        1,
        "{problems:#?}"
    );
}

#[test]
fn a_file_outside_every_part_is_named() {
    let problems = layout_problems(&[source("engine.rs", "pub struct EngineAddress;\n")]);
    assert_eq!(
        problems,
        [
            "operator/src/engine.rs is in no part of the layout: give `engine` a rank in RANKS (layout_tests.rs) and a place in docs/src/contributing/architecture.md"
        ]
    );
}

#[test]
fn a_circle_within_a_part_is_named_file_by_file() {
    let problems = layout_problems(&[
        source("controller/mod.rs", "mod plan;\nmod queue;\nmod summary;\n"),
        source(
            "controller/plan.rs",
            "use super::queue::benchmarks_ahead;\n",
        ),
        source("controller/queue.rs", "use super::summary::waiting;\n"),
        source(
            "controller/summary.rs",
            "// crate::controller::plan in a comment is no import\nuse crate::controller::plan::current_engine;\n",
        ),
    ]);
    assert_eq!(
        problems,
        [
            "import circle: operator/src/controller/plan.rs -> operator/src/controller/queue.rs -> operator/src/controller/summary.rs -> operator/src/controller/plan.rs (imports run one way: move what both need into a module below them)"
        ]
    );
}

#[test]
fn inline_tests_and_comments_make_no_circle() {
    let problems = layout_problems(&[
        source("controller/mod.rs", "mod plan;\nmod queue;\n"),
        source(
            "controller/plan.rs",
            "use super::queue::benchmarks_ahead;\n",
        ),
        source(
            "controller/queue.rs",
            "//! Called by [`super::plan`].\npub fn benchmarks_ahead() {}\n#[cfg(test)]\nmod tests {\n    use crate::controller::plan::plan;\n}\n",
        ),
    ]);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_module_that_re_exports_a_child_importing_it_back_is_a_circle() {
    let problems = layout_problems(&[
        source(
            "metrics/mod.rs",
            "mod serve;
pub use serve::serve;
pub struct Metrics;
",
        ),
        source(
            "metrics/serve.rs",
            "use super::Metrics;
pub fn serve() {}
",
        ),
    ]);
    assert_eq!(
        problems,
        [
            "import circle: operator/src/metrics/mod.rs -> operator/src/metrics/serve.rs -> operator/src/metrics/mod.rs (imports run one way: move what both need into a module below them)"
        ]
    );
}

/// The controller's stages, in the order imports run: a stage imports only the stages before
/// it (and the files at the controller's root: its context and error). What is built is
/// decided on, what is decided is read for and written, and the runtime runs it all.
const CONTROLLER_STAGES: &[&str] = &["build", "decide", "read", "write", "runtime"];

/// The stages whose files do no I/O: what they compute is a pure function of their arguments,
/// tested without a cluster.
const PURE_STAGES: &[&str] = &["build", "decide"];

/// What marks a file as doing I/O: awaiting, an async function or block, an API handle or an
/// API client, the file system, the runtime.
const IO_MARKS: &[(&str, &str)] = &[
    (r"\.await\b", "awaits"),
    (r"\basync\b", "is async"),
    (
        r"\bApi\s*(<|::)|kube::api::\{[^}]*\bApi\b|kube::api::Api\b",
        "holds a kube::Api",
    ),
    (
        r"kube::Client\b|use kube::\{[^}]*\bClient\b",
        "holds a kube::Client",
    ),
    (r"std::fs\b", "uses the file system"),
    (r"\btokio::", "uses the tokio runtime"),
];

/// The stage of a controller file (`controller/decide/plan.rs` is `decide`), if it is in one.
fn controller_stage(path: &str) -> Option<&'static str> {
    let rest = path.strip_prefix("controller/")?;
    let (folder, _) = rest.split_once('/')?;
    CONTROLLER_STAGES
        .iter()
        .copied()
        .find(|stage| *stage == folder)
}

/// What is wrong with the controller's stages: a pure stage's file that does I/O, a stage that
/// imports a later one.
fn controller_stage_problems(sources: &[Source]) -> Vec<String> {
    let marks: Vec<(Regex, &str)> = IO_MARKS
        .iter()
        .map(|(pattern, what)| (Regex::new(pattern).expect("a valid regex"), *what))
        .collect();
    let modules = module_paths(sources);
    let order = |stage: &str| CONTROLLER_STAGES.iter().position(|s| *s == stage);
    let mut problems = Vec::new();
    for source in sources {
        let Some(stage) = controller_stage(&source.path) else {
            continue;
        };
        let code = code_of(&source.text, true);
        if PURE_STAGES.contains(&stage) {
            for (line_number, line) in code.lines().enumerate() {
                for (mark, what) in &marks {
                    if mark.is_match(line) {
                        problems.push(format!(
                            "operator/src/{}:{} {what} (`{}`), but controller/{stage}/ is pure: do the I/O in controller/read/ or controller/write/ and pass its result in",
                            source.path,
                            line_number + 1,
                            line.trim()
                        ));
                    }
                }
            }
        }
        let module = modules.get(&source.path).cloned().unwrap_or_default();
        for named in named_paths(&source.path, &code, &module) {
            let [first, second, ..] = named.as_slice() else {
                continue;
            };
            if first != "controller" {
                continue;
            }
            let Some(theirs) = order(second) else {
                continue;
            };
            if theirs > order(stage).expect("a stage") {
                problems.push(format!(
                    "operator/src/{} (stage `{stage}`) imports crate::{}, of the later stage `{second}`: the controller's stages import only earlier ones ({})",
                    source.path,
                    named.join("::"),
                    CONTROLLER_STAGES.join(" < ")
                ));
            }
        }
    }
    problems
}

#[test]
fn the_controllers_decisions_and_builders_do_no_io_and_its_stages_import_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Vec::new();
    read_tree(&root, "", &mut sources);
    for stage in CONTROLLER_STAGES {
        assert!(
            sources
                .iter()
                .any(|s| controller_stage(&s.path) == Some(*stage)),
            "no file under operator/src/controller/{stage}/"
        );
    }
    let problems = controller_stage_problems(&sources);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_decision_that_awaits_or_builds_an_api_and_a_builder_that_reads_a_decision_are_named() {
    let problems = controller_stage_problems(&[
        source(
            "controller/decide/plan.rs",
            "// .await in a comment is fine\npub async fn plan(client: kube::Client) {\n    let pods: Api<Pod> = Api::all(client);\n    pods.list(&lp).await;\n}\n",
        ),
        source(
            "controller/build/pods/mod.rs",
            "use crate::controller::decide::pod_state::PodState;\n",
        ),
        source(
            "controller/write/mod.rs",
            "pub async fn write() { x.await; }\nuse crate::controller::read::Reading;\n",
        ),
    ]);
    assert_eq!(
        problems,
        [
            "operator/src/controller/decide/plan.rs:2 is async (`pub async fn plan(client: kube::Client) {`), but controller/decide/ is pure: do the I/O in controller/read/ or controller/write/ and pass its result in",
            "operator/src/controller/decide/plan.rs:2 holds a kube::Client (`pub async fn plan(client: kube::Client) {`), but controller/decide/ is pure: do the I/O in controller/read/ or controller/write/ and pass its result in",
            "operator/src/controller/decide/plan.rs:3 holds a kube::Api (`let pods: Api<Pod> = Api::all(client);`), but controller/decide/ is pure: do the I/O in controller/read/ or controller/write/ and pass its result in",
            "operator/src/controller/decide/plan.rs:4 awaits (`pods.list(&lp).await;`), but controller/decide/ is pure: do the I/O in controller/read/ or controller/write/ and pass its result in",
            "operator/src/controller/build/pods/mod.rs (stage `build`) imports crate::controller::decide::pod_state::PodState, of the later stage `decide`: the controller's stages import only earlier ones (build < decide < read < write < runtime)",
        ]
    );
}

/// Each measurement phase: its folder under operator/src, the CRD files named for it (the
/// `spec.peak` pair holds the snapshot and the replica side by side), and the most files
/// outside both that may name its module: at most five (the settings in the plan,
/// `membench load`'s flags that build them, the repetition's record, the registration in
/// `client/phases/mod.rs`, and the result's compaction); what a phase adds to the reports
/// it gives through `client::phases::PhaseFigures`, from its own folder. A phase can only come
/// closer from here.
const PHASE_SLICES: &[(&str, &[&str], usize)] = &[
    (
        "snapshot",
        &[
            "crd/snapshot_spec.rs",
            "crd/snapshot_status.rs",
            "crd/peak_spec.rs",
            "crd/peak_status.rs",
        ],
        3,
    ),
    (
        "replica",
        &[
            "crd/replica_spec.rs",
            "crd/replica_status.rs",
            "crd/peak_spec.rs",
            "crd/peak_status.rs",
        ],
        5,
    ),
    ("churn", &["crd/churn_spec.rs", "crd/churn_status.rs"], 5),
    (
        "eviction",
        &["crd/eviction_spec.rs", "crd/eviction_status.rs"],
        5,
    ),
];

/// The files outside `phase`'s folder (`client/phases/<phase>/`) and its CRD files whose code
/// names its module (`phases::<phase>` or `<phase>::`); comments are left out, as they are for
/// the imports: a doc link says where to read, not what a new phase must edit. This file is
/// left out too: its own tests name a phase in the sources they make up.
fn files_naming_phase<'a>(sources: &'a [Source], phase: &str, crd_files: &[&str]) -> Vec<&'a str> {
    let names = Regex::new(&format!(r"\bphases::{phase}\b|\b{phase}::")).expect("a valid regex");
    let folder = format!("client/phases/{phase}/");
    sources
        .iter()
        .filter(|s| s.path != "layout_tests.rs")
        .filter(|s| !s.path.starts_with(&folder) && !crd_files.contains(&s.path.as_str()))
        .filter(|s| names.is_match(&code_of(&s.text, true)))
        .map(|s| s.path.as_str())
        .collect()
}

/// What is wrong with how far each phase reaches outside its folder: one line per phase named
/// by more files than its bound, listing them.
fn phase_slice_problems(sources: &[Source], slices: &[(&str, &[&str], usize)]) -> Vec<String> {
    slices
        .iter()
        .filter_map(|(phase, crd_files, bound)| {
            let files = files_naming_phase(sources, phase, crd_files);
            (files.len() > *bound).then(|| {
                format!(
                    "the {phase} phase is named by {} files outside operator/src/client/phases/{phase}/ and its CRD files, more than its bound of {bound}: {} (keep what the phase owns in its folder; see \"What a new phase adds\" in docs/src/contributing/architecture.md)",
                    files.len(),
                    files.join(", ")
                )
            })
        })
        .collect()
}

#[test]
fn each_phase_is_named_by_few_files_outside_its_folder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Vec::new();
    read_tree(&root, "", &mut sources);
    for (phase, _, _) in PHASE_SLICES {
        assert!(
            sources
                .iter()
                .any(|s| s.path == format!("client/phases/{phase}/phase.rs")),
            "read no operator/src/client/phases/{phase}/phase.rs under {}",
            root.display()
        );
    }
    let problems = phase_slice_problems(&sources, PHASE_SLICES);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_phase_named_past_its_bound_is_reported_with_the_files() {
    let sources = [
        source("client/phases/eviction/mod.rs", "pub fn run() {}\n"),
        source(
            "crd/eviction_spec.rs",
            "// crate::client::phases::eviction\n",
        ),
        source(
            "client/measurement/measured.rs",
            "pub e: Option<crate::client::phases::eviction::EvictionReport>,\n",
        ),
        source(
            "report/table.rs",
            "use crate::client::phases::eviction::PEAK_SAMPLED;\n",
        ),
        // Named in a comment only: not counted.
        source("cli/load.rs", "// see client::phases::eviction::run\n"),
    ];
    let slices: &[(&str, &[&str], usize)] = &[("eviction", &["crd/eviction_spec.rs"], 1)];
    let problems = phase_slice_problems(&sources, slices);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("named by 2 files")
            && problems[0].contains("client/measurement/measured.rs, report/table.rs"),
        "{}",
        problems[0]
    );
    let within: &[(&str, &[&str], usize)] = &[("eviction", &["crd/eviction_spec.rs"], 2)];
    assert!(phase_slice_problems(&sources, within).is_empty());
}

/// The groups of operator/src/client, by rank: a client file imports only its own group and the
/// groups of a lower rank. `connection` (how the client talks to an engine, with the stop flag
/// every batch loop consults) is lowest; `workloads` (what it writes) uses it; `measurement`
/// and `phases` run the workloads and read memory; `pod_io` (progress, signals, the result)
/// shows it all outside the pod. `measurement` and `phases` share a rank and may import each
/// other, the one known cycle: a repetition's record (`measured.rs`) and the plan's settings
/// hold each phase's report and settings, and each phase runs with the load options and writes
/// into the record. `client/mod.rs` is above them all, and no other file sits directly in
/// client/.
const CLIENT_GROUPS: &[(&str, u32)] = &[
    ("connection", 0),
    ("workloads", 1),
    ("measurement", 2),
    ("phases", 2),
    ("pod_io", 3),
];

fn client_group_rank(group: &str) -> Option<u32> {
    CLIENT_GROUPS
        .iter()
        .find(|(g, _)| *g == group)
        .map(|(_, r)| *r)
}

/// What is wrong with the groups of operator/src/client: a file directly in client/ (other than
/// its mod.rs), a folder that is no group, a file that imports a higher-ranked group.
fn client_group_problems(sources: &[Source]) -> Vec<String> {
    let modules = module_paths(sources);
    let order = CLIENT_GROUPS
        .iter()
        .map(|(g, r)| format!("{g} {r}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut problems = Vec::new();
    for source in sources {
        let Some(rest) = source.path.strip_prefix("client/") else {
            continue;
        };
        if rest == "mod.rs" {
            continue;
        }
        let Some((group, _)) = rest.split_once('/') else {
            problems.push(format!(
                "operator/src/{} sits directly in client/: put it in the group it belongs to ({order}; CLIENT_GROUPS in layout_tests.rs, docs/src/contributing/architecture.md)",
                source.path
            ));
            continue;
        };
        let Some(own) = client_group_rank(group) else {
            problems.push(format!(
                "operator/src/{} is in no group of client/: give `{group}` a rank in CLIENT_GROUPS (layout_tests.rs) and a place in docs/src/contributing/architecture.md",
                source.path
            ));
            continue;
        };
        let module = modules.get(&source.path).cloned().unwrap_or_default();
        for named in named_paths(&source.path, &code_of(&source.text, true), &module) {
            let [first, target, ..] = named.as_slice() else {
                continue;
            };
            if first != "client" {
                continue;
            }
            if let Some(theirs) = client_group_rank(target).filter(|theirs| *theirs > own) {
                problems.push(format!(
                    "operator/src/{} (group `{group}`, rank {own}) imports crate::{}, of the group `{target}` (rank {theirs}): a client file imports only its own group and lower-ranked ones ({order})",
                    source.path,
                    named.join("::")
                ));
            }
        }
    }
    problems
}

#[test]
fn client_groups_import_only_lower_ranked_groups() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Vec::new();
    read_tree(&root, "", &mut sources);
    for (group, _) in CLIENT_GROUPS {
        assert!(
            sources
                .iter()
                .any(|s| s.path == format!("client/{group}/mod.rs")),
            "read no operator/src/client/{group}/mod.rs under {}",
            root.display()
        );
    }
    let problems = client_group_problems(&sources);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_client_file_importing_a_higher_group_or_sitting_flat_is_named() {
    let problems = client_group_problems(&[
        source(
            "client/mod.rs",
            "pub mod connection;\npub mod measurement;\n",
        ),
        source(
            "client/connection/engine.rs",
            "use crate::client::workloads::workload::Workload;\nuse super::resp::CommandBuffer;\n",
        ),
        source(
            "client/workloads/encoder.rs",
            "use super::draws::KeyGenerator;\nuse crate::client::connection::resp::CommandBuffer;\n",
        ),
        source(
            "client/workloads/workload.rs",
            "// crate::client::pod_io::stop in a comment is no import\nuse super::super::pod_io::result::ClientResult;\n",
        ),
        // measurement and phases share a rank: each may import the other.
        source(
            "client/measurement/measured.rs",
            "pub e: Option<crate::client::phases::eviction::EvictionReport>,\n",
        ),
        source(
            "client/phases/eviction/phase.rs",
            "use crate::client::measurement::load_options::LoadOptions;\n",
        ),
        source(
            "client/pod_io/stop.rs",
            "use crate::client::measurement::measure::run;\n",
        ),
        source("client/stray.rs", "pub fn stray() {}\n"),
        source("client/misc/util.rs", "pub fn util() {}\n"),
    ]);
    assert_eq!(
        problems,
        [
            "operator/src/client/connection/engine.rs (group `connection`, rank 0) imports crate::client::workloads::workload::Workload, of the group `workloads` (rank 1): a client file imports only its own group and lower-ranked ones (connection 0, workloads 1, measurement 2, phases 2, pod_io 3)",
            "operator/src/client/workloads/workload.rs (group `workloads`, rank 1) imports crate::client::pod_io::result::ClientResult, of the group `pod_io` (rank 3): a client file imports only its own group and lower-ranked ones (connection 0, workloads 1, measurement 2, phases 2, pod_io 3)",
            "operator/src/client/stray.rs sits directly in client/: put it in the group it belongs to (connection 0, workloads 1, measurement 2, phases 2, pod_io 3; CLIENT_GROUPS in layout_tests.rs, docs/src/contributing/architecture.md)",
            "operator/src/client/misc/util.rs is in no group of client/: give `misc` a rank in CLIENT_GROUPS (layout_tests.rs) and a place in docs/src/contributing/architecture.md",
        ]
    );
}
