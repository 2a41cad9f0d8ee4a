//! The book in docs/ as a reader meets it: `mdbook build` succeeds, every internal link and
//! `#anchor` of every page resolves in the built HTML (or, for a link out of the book, to a file
//! of the repository), and the hand-written pages and the README keep to the limits that keep
//! them readable (no page over 2,500 words, no paragraph over 150, no sentence over 60; a README
//! of at most 10 KiB and 1,300 words, 20 words a sentence on average, opening with the two
//! fresh-machine commands).
//!
//! mdBook comes from hack/install-mdbook.sh (hack/test.sh runs it and exports MEMBENCH_MDBOOK);
//! without it the test fails, naming that script (`common::mdbook`). docs_render.rs opens the
//! built pages in a browser.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use regex::Regex;

mod common;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("operator/ has a parent")
        .to_path_buf()
}

/// `path` with its `.` and `..` components resolved, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The Markdown pages of docs/src, as paths relative to it.
fn source_pages(src: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for entry in entries {
            if entry.is_dir() {
                walk(&entry, base, out);
            } else if entry.extension().is_some_and(|e| e == "md") {
                out.push(entry.strip_prefix(base).unwrap().to_path_buf());
            }
        }
    }
    let mut pages = Vec::new();
    walk(src, src, &mut pages);
    pages
}

/// The line of `source` (1-based) that holds `needle`, for a message; 0 when none does.
fn line_of(source: &str, needle: &str) -> usize {
    source
        .lines()
        .position(|l| l.contains(needle))
        .map_or(0, |i| i + 1)
}

#[test]
fn the_book_builds_and_every_internal_link_and_anchor_resolves() {
    let root = repo_root();
    let src = root.join("docs/src");
    let out = common::mdbook::build_book("links");

    let id = Regex::new(r#"\bid="([^"]+)""#).unwrap();
    let href = Regex::new(r#"\bhref="([^"]+)""#).unwrap();
    let scheme = Regex::new(r"^[a-zA-Z][a-zA-Z0-9+.-]*:").unwrap();
    let ids_of = |html: &str| -> BTreeSet<String> {
        id.captures_iter(html).map(|c| c[1].to_string()).collect()
    };
    let mut problems = Vec::new();
    let mut links_checked = 0;
    for page in source_pages(&src) {
        if page == Path::new("SUMMARY.md") {
            continue;
        }
        let page_html = page.with_extension("html");
        let built = out.join(&page_html);
        let html = std::fs::read_to_string(&built).unwrap_or_else(|e| {
            panic!(
                "docs/src/{} is in the book's source but {} was not built ({e}): is it in SUMMARY.md?",
                page.display(),
                page_html.display()
            )
        });
        let source = std::fs::read_to_string(src.join(&page)).unwrap();
        // Only the page's own content: the theme's links (css, fonts, the sidebar) are mdBook's.
        let main = html
            .split("<main>")
            .nth(1)
            .and_then(|rest| rest.split("</main>").next())
            .unwrap_or_else(|| panic!("{} has no <main> element", page_html.display()));
        let own_ids = ids_of(&html);
        let dir = page.parent().unwrap_or(Path::new(""));
        for capture in href.captures_iter(main) {
            let link = capture[1].replace("&amp;", "&");
            if scheme.is_match(&link) {
                continue;
            }
            links_checked += 1;
            let (path, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let shown = link.replace(".html", ".md");
            if path.is_empty() {
                if !own_ids.contains(fragment) {
                    problems.push(format!(
                        "docs/src/{}:{}: anchor #{fragment} is no heading or id of this page",
                        page.display(),
                        line_of(&source, &format!("#{fragment}"))
                    ));
                }
                continue;
            }
            let target = normalize(&dir.join(path));
            let in_book = out.join(&target);
            if in_book.is_file() && target.extension().is_some_and(|e| e == "html") {
                if !fragment.is_empty() {
                    let target_html = std::fs::read_to_string(&in_book).unwrap();
                    if !ids_of(&target_html).contains(fragment) {
                        problems.push(format!(
                            "docs/src/{}:{}: link `{shown}`: {} has no anchor #{fragment}",
                            page.display(),
                            line_of(&source, &shown),
                            target.with_extension("md").display()
                        ));
                    }
                }
                continue;
            }
            if in_book.exists() {
                continue;
            }
            // A link out of the book, to a file of the repository (an example, raw JSON).
            let in_repo = normalize(&Path::new("docs/src").join(dir).join(path));
            if !root.join(&in_repo).exists() {
                problems.push(format!(
                    "docs/src/{}:{}: link `{shown}` names {}, which is neither a page of the book nor a file of the repository",
                    page.display(),
                    line_of(&source, &shown),
                    in_repo.display()
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        links_checked > 100,
        "only {links_checked} links were found in the built pages: the check read no content"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// One block of prose: the line it starts at and its text on one line.
struct Paragraph {
    line: usize,
    text: String,
}

/// The prose of a Markdown page: its paragraphs and list items, without code blocks, headings,
/// tables and HTML.
fn paragraphs(markdown: &str) -> Vec<Paragraph> {
    let item = Regex::new(r"^\s*([-*+]|\d+\.)\s").unwrap();
    let mut out = Vec::new();
    let mut current: Option<Paragraph> = None;
    let mut fenced = false;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim();
        let ends = trimmed.starts_with("```")
            || fenced
            || trimmed.is_empty()
            || trimmed.starts_with('#')
            || trimmed.starts_with('|')
            || trimmed.starts_with('<');
        if trimmed.starts_with("```") {
            fenced = !fenced;
        }
        if ends || item.is_match(line) {
            out.extend(current.take());
        }
        if ends {
            continue;
        }
        match &mut current {
            Some(paragraph) => {
                paragraph.text.push(' ');
                paragraph.text.push_str(trimmed);
            }
            None => {
                current = Some(Paragraph {
                    line: i + 1,
                    text: trimmed.to_string(),
                })
            }
        }
    }
    out.extend(current);
    out
}

/// The sentences of a paragraph: it breaks after `.`, `!` or `?` followed by a space and a
/// capital, a digit or an opening mark, never inside inline code.
fn sentences(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut in_code = false;
    let mut start = 0;
    let mut out = Vec::new();
    for i in 0..chars.len() {
        if chars[i] == '`' {
            in_code = !in_code;
            continue;
        }
        if in_code || !matches!(chars[i], '.' | '!' | '?') {
            continue;
        }
        let Some(space) = chars.get(i + 1) else {
            continue;
        };
        if !space.is_whitespace() {
            continue;
        }
        let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
        if next.is_some_and(|c| c.is_uppercase() || c.is_ascii_digit() || "`([\"*".contains(*c)) {
            out.push(chars[start..=i].iter().collect());
            start = i + 1;
        }
    }
    let rest: String = chars[start..].iter().collect();
    if !rest.trim().is_empty() {
        out.push(rest);
    }
    out
}

fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

/// A sentence's opening words, to find it in the page.
fn opening(text: &str) -> String {
    text.split_whitespace()
        .take(10)
        .collect::<Vec<_>>()
        .join(" ")
}

/// What breaks a hand-written page's limits, each naming the page and line.
fn limit_problems(name: &str, markdown: &str) -> Vec<String> {
    let issue_number = Regex::new(r"(?i)\bissues? \d+").unwrap();
    let here = Regex::new(r"(?i)\bhere\b").unwrap();
    let mut problems = Vec::new();
    let mut page_words = 0;
    for paragraph in paragraphs(markdown) {
        let n = words(&paragraph.text);
        page_words += n;
        if n > 150 {
            problems.push(format!(
                "{name}:{}: a paragraph of {n} words (at most 150): {}...",
                paragraph.line,
                opening(&paragraph.text)
            ));
        }
        for sentence in sentences(&paragraph.text) {
            let n = words(&sentence);
            if n > 60 {
                problems.push(format!(
                    "{name}:{}: a sentence of {n} words (at most 60): {}...",
                    paragraph.line,
                    opening(&sentence)
                ));
            }
        }
        if let Some(found) = issue_number.find(&paragraph.text) {
            problems.push(format!(
                "{name}:{}: \"{}\" cites an internal issue a reader cannot see",
                paragraph.line,
                found.as_str()
            ));
        }
        // Outside inline code: `here` must name the machine it means.
        let prose: String = paragraph
            .text
            .split('`')
            .step_by(2)
            .collect::<Vec<_>>()
            .join(" ");
        if here.is_match(&prose) {
            problems.push(format!(
                "{name}:{}: \"here\" does not say which machine or page it means: {}...",
                paragraph.line,
                opening(&paragraph.text)
            ));
        }
    }
    if page_words > 2500 {
        problems.push(format!(
            "{name}: {page_words} words of prose (at most 2,500 a page): split it along its headings"
        ));
    }
    problems
}

#[test]
fn every_hand_written_page_keeps_to_the_limits_of_length_and_names_what_it_means() {
    let src = repo_root().join("docs/src");
    let mut problems = Vec::new();
    let mut pages = 0;
    for page in source_pages(&src) {
        let text = std::fs::read_to_string(src.join(&page)).unwrap();
        // Generated pages are checked against their code (docs_reference.rs), not for prose.
        if page == Path::new("SUMMARY.md") || text.starts_with("<!-- Generated from") {
            continue;
        }
        pages += 1;
        problems.extend(limit_problems(
            &format!("docs/src/{}", page.display()),
            &text,
        ));
    }
    assert!(pages >= 40, "only {pages} hand-written pages in docs/src");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_is_short_and_opens_with_the_two_fresh_machine_commands() {
    let text = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let mut problems = limit_problems("README.md", &text);
    if text.len() > 10 * 1024 {
        problems.push(format!(
            "README.md is {} bytes (at most 10 KiB)",
            text.len()
        ));
    }
    let all_words = words(&text);
    if all_words > 1300 {
        problems.push(format!("README.md has {all_words} words (at most 1,300)"));
    }
    let sentences: Vec<String> = paragraphs(&text)
        .iter()
        .flat_map(|p| sentences(&p.text))
        .collect();
    let mean = sentences.iter().map(|s| words(s)).sum::<usize>() as f64 / sentences.len() as f64;
    if mean > 20.0 {
        problems.push(format!(
            "README.md's sentences average {mean:.1} words (at most 20)"
        ));
    }
    // Its links point into the book and the repository, which a reader on GitHub follows as
    // files: each must exist.
    let link = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    for (number, line) in text.lines().enumerate() {
        for capture in link.captures_iter(line) {
            let target = capture[1].split('#').next().unwrap_or_default();
            if target.contains("://") || target.is_empty() {
                continue;
            }
            if !repo_root().join(target).exists() {
                problems.push(format!(
                    "README.md:{}: link `{}` names no file of the repository",
                    number + 1,
                    &capture[1]
                ));
            }
        }
    }
    // The first two code blocks are the two commands a fresh machine needs, exactly.
    let blocks: Vec<&str> = text
        .split("```sh\n")
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap())
        .take(2)
        .collect();
    let expected = [
        "hack/install-engines.sh && cargo build --release && target/release/membench run manifests/examples/quick.yaml",
        "hack/test.sh",
    ];
    if blocks != expected {
        problems.push(format!(
            "README.md's first two code blocks are {blocks:?}, not the two fresh-machine commands {expected:?}"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_long_sentence_paragraph_and_issue_number_are_each_named_with_their_line() {
    let long_sentence = format!("{}.", vec!["word"; 61].join(" "));
    let long_paragraph = vec!["Five words in a sentence."; 31].join(" ");
    let page = format!(
        "# Title\n\nShort.\n\n{long_sentence}\n\n```sh\n{}\n```\n\n{long_paragraph}\n\nAs issue 27 says.\n\nMeasured here.\n",
        vec!["code"; 200].join(" ")
    );
    let problems = limit_problems("p.md", &page);
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert!(
        problems[0].starts_with("p.md:5: a sentence of 61 words"),
        "{}",
        problems[0]
    );
    assert!(
        problems[1].starts_with("p.md:11: a paragraph of 155 words"),
        "{}",
        problems[1]
    );
    assert!(
        problems[2].starts_with("p.md:13: \"issue 27\""),
        "{}",
        problems[2]
    );
    assert!(
        problems[3].starts_with("p.md:15: \"here\""),
        "{}",
        problems[3]
    );
}
