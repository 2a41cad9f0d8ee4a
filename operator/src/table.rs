//! Rows and columns rendered as plain text, Markdown or CSV (`Table`, in an `OutputFormat`),
//! and bytes as a report writes them (`format_bytes`). A leaf: the reports render their tables
//! with it, and a phase's folder builds its own table with it (`client::phases`), below both.

use std::fmt::Write as _;

/// Output formats of the commands that print results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// An aligned table for a terminal.
    Table,
    Json,
    Markdown,
    Csv,
}

/// Rows and columns, rendered in any of the text formats.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Columns padded to their widest cell; numbers (cells starting with a digit, `~`, `+` or
    /// `-`) aligned right.
    pub fn to_text(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|c| {
                std::iter::once(&self.headers[c])
                    .chain(self.rows.iter().map(|r| &r[c]))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let line = |cells: &[String], out: &mut String| {
            let mut text = String::new();
            for (c, cell) in cells.iter().enumerate() {
                let numeric =
                    cell.starts_with(|ch: char| ch.is_ascii_digit() || "~+-".contains(ch));
                let pad = widths[c] - cell.chars().count();
                if c > 0 {
                    text.push_str("  ");
                }
                if numeric {
                    text.push_str(&" ".repeat(pad));
                    text.push_str(cell);
                } else {
                    text.push_str(cell);
                    text.push_str(&" ".repeat(pad));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&self.headers, &mut out);
        let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
        out.push_str(&rule.join("  "));
        out.push('\n');
        for row in &self.rows {
            line(row, &mut out);
        }
        out
    }

    pub fn to_markdown(&self) -> String {
        let escape = |s: &String| s.replace('|', "\\|");
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| {} |",
            self.headers
                .iter()
                .map(escape)
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let _ = writeln!(out, "|{}", "---|".repeat(self.headers.len()));
        for row in &self.rows {
            let _ = writeln!(
                out,
                "| {} |",
                row.iter().map(escape).collect::<Vec<_>>().join(" | ")
            );
        }
        out
    }

    pub fn to_csv(&self) -> String {
        let field = |s: &String| {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.clone()
            }
        };
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(self.rows.iter()) {
            let _ = writeln!(
                out,
                "{}",
                row.iter().map(field).collect::<Vec<_>>().join(",")
            );
        }
        out
    }

    pub fn render(&self, format: OutputFormat) -> String {
        match format {
            OutputFormat::Markdown => self.to_markdown(),
            OutputFormat::Csv => self.to_csv(),
            OutputFormat::Table | OutputFormat::Json => self.to_text(),
        }
    }
}

/// Bytes in decimal units, as the published tables give used_memory ("4.83 GB").
pub fn format_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = bytes;
    let mut unit = 0;
    while value.abs() >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}
