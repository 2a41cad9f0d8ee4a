//! The book as a reader sees it: built with mdBook, every page opened in headless Chromium at
//! a phone's width (420 px) and a desktop's (1400 px), nothing sticking out of the text column
//! (tables and code blocks scroll in their own box, as mdBook draws them), and the search box
//! finding a page by a word on it. One Chromium opens every page in turn from a page of the
//! test's own (docs_render/harness.js), so the whole book takes seconds.
//!
//! Needs mdBook (hack/install-mdbook.sh) and Chromium (hack/install-chromium.sh); without
//! either it fails naming the script, never skips.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

/// The widths the book is read at: a phone's, and a desktop window with the sidebar open.
const WIDTHS: [u32; 2] = [420, 1400];

/// A word that appears on one page of the book only, and that page: the search must find it.
const SEARCH_WORD: &str = "hypervisor";
const SEARCH_PAGE: &str = "explanation/round-trip.md";

/// The page the search is typed into (at the book's root, so result links are relative to it).
const SEARCH_FROM: &str = "introduction.html";

/// The built pages a reader opens: every page but mdBook's print-all page, its sidebar frame
/// and its 404 page.
fn built_pages(book: &Path) -> Vec<String> {
    fn walk(dir: &Path, book: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, book, out);
            } else if path.extension().is_some_and(|e| e == "html") {
                let relative = path
                    .strip_prefix(book)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if !["print.html", "toc.html", "404.html"].contains(&relative.as_str()) {
                    out.push(relative);
                }
            }
        }
    }
    let mut pages = Vec::new();
    walk(book, book, &mut pages);
    pages.sort();
    pages
}

/// The test's page beside the book's: the list of pages, the widths and the search, then the
/// harness that opens them.
fn harness_page(book: &Path, pages: &[String]) -> PathBuf {
    let settings = format!(
        "window.BOOK_PAGES = {}; window.BOOK_WIDTHS = {}; window.SEARCH_WORD = {}; window.SEARCH_FROM = {};",
        serde_json::to_string(pages).unwrap(),
        serde_json::to_string(&WIDTHS).unwrap(),
        serde_json::to_string(SEARCH_WORD).unwrap(),
        serde_json::to_string(SEARCH_FROM).unwrap(),
    );
    let html = format!(
        "<!DOCTYPE html>\n<html><body style=\"margin:0\"><iframe id=\"page\" style=\"border:0;display:block;height:1200px;width:1400px\"></iframe>\n<script>{settings}</script>\n<script>{}</script>\n</body></html>\n",
        include_str!("docs_render/harness.js")
    );
    let path = book.join("membench-render-harness.html");
    std::fs::write(&path, html).unwrap();
    path
}

/// Every book page at every width, and the search, as the browser measured them.
fn rendered_book() -> (Vec<String>, Value) {
    let book = common::mdbook::build_book("render");
    let pages = built_pages(&book);
    assert!(
        pages.len() >= 40,
        "only {} pages built: {pages:?}",
        pages.len()
    );
    let harness = harness_page(&book, &pages);
    // File pages may read the frames they open (the same book, on disk); virtual time lets
    // every page load and the harness finish before the DOM is printed.
    let dom = common::chromium::dump_dom(
        &harness,
        1440,
        &[
            "--allow-file-access-from-files".to_string(),
            "--virtual-time-budget=600000".to_string(),
        ],
    );
    let attribute = dom
        .split("data-results=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("the harness wrote no results; DOM:\n{dom}"));
    let results: Value = serde_json::from_str(
        &attribute
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
    .expect("the harness writes JSON");
    let _ = std::fs::remove_dir_all(&book);
    (pages, results)
}

#[test]
fn every_page_fits_a_phone_and_a_desktop_window_and_the_search_finds_a_page_by_its_word() {
    let (pages, results) = rendered_book();

    // Every page at every width was measured: a page that failed to load would be missing.
    let measured = results["pages"].as_array().expect("pages measured");
    assert_eq!(
        measured.len(),
        pages.len() * WIDTHS.len(),
        "not every page was measured at every width"
    );
    let mut problems = Vec::new();
    for page in measured {
        let overflowing = page["overflowing"].as_array().unwrap();
        if !overflowing.is_empty() {
            let source = page["page"].as_str().unwrap().replace(".html", ".md");
            problems.push(format!(
                "docs/src/{source} at {} px overflows its text column: {}",
                page["width"],
                overflowing
                    .iter()
                    .map(|o| o.as_str().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // The word is on one page of the book's source, so the search has one right answer.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src");
    let holding: Vec<&String> = pages
        .iter()
        .filter(|p| {
            std::fs::read_to_string(src.join(p.replace(".html", ".md")))
                .is_ok_and(|text| text.to_lowercase().contains(SEARCH_WORD))
        })
        .collect();
    assert_eq!(
        holding,
        [&SEARCH_PAGE.replace(".md", ".html")],
        "choose another SEARCH_WORD: it must be on {SEARCH_PAGE} only"
    );
    let search = &results["search"];
    let links: Vec<&str> = search["links"]
        .as_array()
        .unwrap_or_else(|| panic!("the search box did not work: {search}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let expected = SEARCH_PAGE.replace(".md", ".html");
    assert!(
        links
            .iter()
            .any(|l| l.split(['?', '#']).next() == Some(expected.as_str())),
        "searching {SEARCH_WORD:?} from {SEARCH_FROM} links no {expected}: {search}"
    );
}
