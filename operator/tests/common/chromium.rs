//! Headless Chromium for the tests of `--output html` (hack/install-chromium.sh installs
//! Debian's `chromium`; hack/test.sh runs it). A test fails when Chromium is missing: a page
//! nobody rendered proves nothing.
//!
//! The page under test has no scripts. To read the layout the browser gave it, a test copy of
//! the page gets one script appended that measures the charts' elements and writes what it
//! found into an attribute of `<body>`, which `--dump-dom` then prints.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The most a page may take to render before the test fails.
const RENDER_TIMEOUT: Duration = Duration::from_secs(90);

/// Measures every chart element of the page into `body[data-layout]`: each element's box as
/// laid out (the capacity chart's instance-size lines with their size's name), the colour it
/// is drawn in, the text of every chart label with the box of the chart
/// it belongs to, each table's scrolling box, and how wide the page is against the window.
const LAYOUT_PROBE: &str = r#"<script>
(function () {
  function box(el) {
    var r = el.getBoundingClientRect();
    return { engine: el.getAttribute('data-engine'), value: el.getAttribute('data-value'),
             colour: el.getAttribute('fill') || el.getAttribute('stroke'),
             width: r.width, height: r.height, left: r.left, top: r.top,
             right: r.right, bottom: r.bottom };
  }
  function all(selector) { return Array.prototype.map.call(document.querySelectorAll(selector), box); }
  function label(el) {
    var b = box(el), chart = box(el.ownerSVGElement);
    b.text = el.textContent; b.chartLeft = chart.left; b.chartRight = chart.right;
    b.chartTop = chart.top; b.chartBottom = chart.bottom;
    return b;
  }
  function scroller(el) {
    var b = box(el);
    b.scrollWidth = el.scrollWidth; b.clientWidth = el.clientWidth;
    b.overflowX = getComputedStyle(el).overflowX;
    b.tableWidth = el.querySelector('table').getBoundingClientRect().width;
    return b;
  }
  var root = document.documentElement;
  // In a phone-sized frame (see `render_at`), the layout goes to the page around it.
  var out = window.frameElement ? window.parent.document.body : document.body;
  out.setAttribute('data-layout', JSON.stringify({
    sections: document.querySelectorAll('section.benchmark').length,
    bars: all('svg.bar-chart rect.bar'),
    marks: all('svg.bar-chart line.published-mark'),
    curves: all('svg.growth-chart polyline.growth-line'),
    capacityBars: all('svg.capacity-chart rect.capacity-bar'),
    instanceSizes: Array.prototype.map.call(
      document.querySelectorAll('svg.capacity-chart line.instance-size'),
      function (el) { var b = box(el); b.size = el.getAttribute('data-instance-size'); return b; }),
    charts: all('svg'),
    labels: Array.prototype.map.call(document.querySelectorAll('svg text'), label),
    tables: Array.prototype.map.call(document.querySelectorAll('.table-scroll'), scroller),
    tableRows: document.querySelectorAll('table.comparison tbody tr').length,
    windowWidth: window.innerWidth,
    pageScrollWidth: Math.max(root.scrollWidth, document.body.scrollWidth),
    pageClientWidth: root.clientWidth
  }));
})();
</script>"#;

/// What the browser made of a page.
pub struct Rendered {
    /// The DOM after loading, as `--dump-dom` prints it (for a framed page, the frame's
    /// document as the page around it holds it, unescaped).
    pub dom: String,
    /// The layout the probe measured: `sections`, `bars`, `marks`, `curves`, `capacityBars`,
    /// `instanceSizes` (with each line's `size`), `charts` (each element's `engine`, `value`, `colour`, `width`, `height`, `left`, `top`, `right`,
    /// `bottom`), `labels` (each chart text's box, `text` and its chart's `chartLeft`,
    /// `chartRight`, `chartTop`, `chartBottom`), `tables` (each `.table-scroll` box with its
    /// `scrollWidth`, `clientWidth`, `overflowX` and `tableWidth`), `tableRows`, and the page's
    /// `windowWidth`, `pageScrollWidth` and `pageClientWidth`.
    pub layout: Value,
    /// A screenshot of the page, kept under target/ as the test's artefact.
    pub screenshot: PathBuf,
}

/// Debian's Chromium, or a failure saying how to install it.
pub fn chromium() -> PathBuf {
    super::find_on_path("chromium")
        .or_else(|| super::find_on_path("chromium-headless-shell"))
        .unwrap_or_else(|| {
            panic!("no chromium on PATH: run hack/install-chromium.sh (Debian package `chromium`)")
        })
}

/// Where the tests keep their screenshots and pages: target/tmp/html-report/.
pub fn artefact_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-report");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The DOM of `page` after it loaded, as `--dump-dom` prints it, in a window `width` px wide
/// with `extra` arguments (docs_render.rs: a page of its own that opens the book's pages).
pub fn dump_dom(page: &Path, width: u32, extra: &[String]) -> String {
    let mut arguments = vec!["--dump-dom".to_string()];
    arguments.extend_from_slice(extra);
    run(page, width, &arguments)
}

/// Runs headless Chromium on a file in a window `width` px wide with `extra` arguments and
/// returns its stdout.
fn run(page: &Path, width: u32, extra: &[String]) -> String {
    let profile = tempfile_dir("chromium-profile");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size={width},1600"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    // Read stdout on a thread so a large DOM cannot fill the pipe while we wait.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
        text
    });
    let deadline = Instant::now() + RENDER_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium did not finish rendering {} within {RENDER_TIMEOUT:?}",
                page.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    assert!(status.success(), "chromium failed ({status}): {stderr}");
    let _ = std::fs::remove_dir_all(&profile);
    reader.join().unwrap()
}

/// A fresh directory under the system's temporary directory (a fresh Chromium profile each
/// run, so nothing from an earlier run changes what it shows).
fn tempfile_dir(prefix: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir =
        std::env::temp_dir().join(format!("membench-{prefix}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn unescape_attribute(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Renders `html` in headless Chromium in a window 1100 px wide; see [`render_at`].
pub fn render(html: &str, name: &str) -> Rendered {
    render_at(html, name, 1100)
}

/// Chromium's narrowest window: a narrower viewport is a frame of that width in a page.
const NARROWEST_WINDOW: u32 = 500;

/// `html` in a frame `width` px wide (and tall enough for any page here), as a phone's
/// viewport: its own `window.innerWidth`, media queries and layout are the frame's.
fn in_frame(html: &str, width: u32) -> String {
    let source = html.replace('&', "&amp;").replace('"', "&quot;");
    format!(
        "<!DOCTYPE html>\n<html><body style=\"margin:0\"><iframe style=\"border:0;display:block;width:{width}px;height:8000px\" srcdoc=\"{source}\"></iframe></body></html>\n"
    )
}

/// Renders `html` in headless Chromium in a viewport `width` px wide (420 for a phone, which
/// is narrower than Chromium's narrowest window, so the page is then framed at that width):
/// the DOM and layout of a probed copy, and a screenshot of the page itself kept as
/// `<name>.png` (and the page as `<name>.html`) under target/.
pub fn render_at(html: &str, name: &str, width: u32) -> Rendered {
    let dir = artefact_dir();
    let page = dir.join(format!("{name}.html"));
    let probed = dir.join(format!("{name}.probed.html"));
    let with_probe = match html.rfind("</body>") {
        Some(at) => format!("{}{LAYOUT_PROBE}{}", &html[..at], &html[at..]),
        None => panic!("the page has no </body>"),
    };
    if width < NARROWEST_WINDOW {
        std::fs::write(&page, in_frame(html, width)).unwrap();
        std::fs::write(&probed, in_frame(&with_probe, width)).unwrap();
    } else {
        std::fs::write(&page, html).unwrap();
        std::fs::write(&probed, with_probe).unwrap();
    }
    let window = width.max(NARROWEST_WINDOW);

    let dom = run(&probed, window, &["--dump-dom".to_string()]);
    let attribute = dom
        .split("data-layout=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("the browser ran no layout probe; DOM:\n{dom}"));
    let layout: Value = serde_json::from_str(&unescape_attribute(attribute)).unwrap();

    let screenshot = dir.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&screenshot);
    run(
        &page,
        window,
        &[format!("--screenshot={}", screenshot.display())],
    );
    let png = std::fs::read(&screenshot)
        .unwrap_or_else(|e| panic!("no screenshot at {}: {e}", screenshot.display()));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        screenshot.display()
    );
    let dom = if width < NARROWEST_WINDOW {
        unescape_attribute(&dom)
    } else {
        dom
    };
    Rendered {
        dom,
        layout,
        screenshot,
    }
}
