//! Text cut to a bound on a character boundary, for what a status, an event or a result quotes
//! (an engine's reply, a scheduler's message, a container's last words). A leaf.

/// `text` cut to at most `max` bytes from its start, marked with `…` when cut.
pub fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The last `max` bytes of `text` (trimmed), marked with a leading `…` when cut: where a log
/// says what went wrong last.
pub fn tail(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_a_character_boundary_and_marked() {
        assert_eq!(head("abcdef", 10), "abcdef");
        assert_eq!(head("abcdef", 3), "abc…");
        // "é" is two bytes: a cut inside it moves before it.
        assert_eq!(head("aé", 2), "a…");
        assert_eq!(tail("  abcdef \n", 10), "abcdef");
        assert_eq!(tail("abcdef", 3), "…def");
        assert_eq!(tail("éa", 2), "…a");
    }
}
