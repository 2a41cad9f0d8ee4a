//! Engine versions: read from a server's `--version` line, matched against what a spec or an
//! image tag asks for, and ordered.

use std::cmp::Ordering;

/// The version a server program prints with `--version`: `Redis server v=7.0.15 …`,
/// `Valkey server v=9.1.2 …`, or Dragonfly's `dragonfly v1.40.0-87-g…` (which it colours with
/// terminal escapes, and some builds print as `df-v1.40.0`). Only the release (`1.40.0`) is
/// returned.
pub fn parse_version_output(output: &str) -> Option<String> {
    strip_terminal_escapes(output)
        .split_whitespace()
        .find_map(|word| {
            let word = word
                .strip_prefix("v=")
                .or_else(|| word.strip_prefix("df-v"))
                .or_else(|| word.strip_prefix('v'))
                .unwrap_or(word);
            let version: String = word
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let version = version.trim_end_matches('.');
            let valid = version.contains('.')
                && version
                    .split('.')
                    .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
            valid.then(|| version.to_string())
        })
}

/// Removes ANSI escape sequences (`ESC [ … m`) so coloured output reads as plain words.
fn strip_terminal_escapes(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Skip to the end of the sequence: its final byte is a letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// Whether a build of version `actual` satisfies `requested`: the same version, or `requested`
/// names fewer components and they are equal (`8.1` accepts any 8.1.x, as the floating image
/// tag `valkey/valkey:8.1` would pull the newest 8.1.x; `9.1.2` does not accept 9.1.20).
pub fn version_matches(requested: &str, actual: &str) -> bool {
    let requested: Vec<&str> = requested.split('.').collect();
    let actual: Vec<&str> = actual.split('.').collect();
    requested.len() <= actual.len() && requested.iter().zip(&actual).all(|(r, a)| r == a)
}

/// Orders versions by their numeric components (`7.2.13` after `7.2.7`).
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let numbers = |v: &str| -> Vec<u64> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    numbers(a).cmp(&numbers(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_versions_from_each_servers_version_line() {
        assert_eq!(
            parse_version_output(
                "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=1"
            )
            .as_deref(),
            Some("7.0.15")
        );
        assert_eq!(
            parse_version_output("Valkey server v=9.1.2 sha=0 malloc=libc bits=64").as_deref(),
            Some("9.1.2")
        );
        assert_eq!(
            parse_version_output("dragonfly v1.34.1-abcdef\nbuild time: x").as_deref(),
            Some("1.34.1")
        );
        assert_eq!(parse_version_output("nothing here"), None);
    }

    #[test]
    fn dragonflys_coloured_version_line_is_read_as_its_release() {
        let line = "dragonfly \u{1b}[0;32mv1.40.0-87-gf8eca6d0b-f8eca6d0b05c915cee9439036b5b04aebbb973bb\u{1b}[m\nbuild time: \u{1b}[0;33m2026-11-30 13:31:48\u{1b}[m\n";
        assert_eq!(parse_version_output(line).as_deref(), Some("1.40.0"));
        assert_eq!(
            parse_version_output("dragonfly df-v1.40.0-87-gf8eca6d0b").as_deref(),
            Some("1.40.0")
        );
    }

    #[test]
    fn a_short_version_accepts_any_patch_release() {
        assert!(version_matches("9.1", "9.1.2"));
        assert!(version_matches("9", "9.1.2"));
        assert!(version_matches("9.1.2", "9.1.2"));
        assert!(!version_matches("9.1.2", "9.1.20"));
        assert!(!version_matches("7.0.1", "7.0.15"));
        assert!(!version_matches("8.6.7", "7.0.15"));
        assert!(!version_matches("9.1.2.1", "9.1.2"));
    }

    #[test]
    fn versions_order_by_their_numbers_not_their_text() {
        assert_eq!(compare_versions("7.2.13", "7.2.7"), Ordering::Greater);
        assert_eq!(compare_versions("8.1.7", "8.1.8"), Ordering::Less);
        assert_eq!(compare_versions("9.1.2", "9.1.2"), Ordering::Equal);
    }
}
