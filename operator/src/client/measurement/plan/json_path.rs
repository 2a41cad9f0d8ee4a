//! Which field of a JSON document a parse error is in. `serde_json` says where (a line and a
//! column) and what it expected; a plan's refusal should name the field
//! (`settings.churn.rounds`), so the document is walked up to that place.

/// The field a `serde_json` error of reading `text` is about: where it stopped, or for a
/// missing field, that field in the object that lacks it.
pub fn field_of(text: &str, error: &serde_json::Error) -> String {
    let message = error.to_string();
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    path_at(text, error.line(), error.column(), missing)
}

/// The path (`settings.churn.rounds`, `settings.read_config[2]`) of the value being read at
/// `line` and `column` (1-based, as `serde_json::Error` gives them), or of the field
/// `missing` of the object being read there; `(the plan)` at the top.
fn path_at(text: &str, line: usize, column: usize, missing: Option<&str>) -> String {
    /// Where the walk is inside one object or array.
    enum Frame {
        /// The key being read or last read, and whether a key comes next.
        Object {
            key: Option<String>,
            expects_key: bool,
        },
        Array {
            index: usize,
        },
    }
    let mut stack: Vec<Frame> = Vec::new();
    let (mut at_line, mut at_column) = (1usize, 0usize);
    let mut chars = text.chars();
    let advance = |c: char, line: &mut usize, column: &mut usize| {
        if c == '\n' {
            *line += 1;
            *column = 0;
        } else {
            *column += 1;
        }
    };
    // The walk stops at the error's position: what comes after it was never read.
    let reached = |l: usize, c: usize| (l, c) >= (line, column);
    while let Some(c) = chars.next() {
        advance(c, &mut at_line, &mut at_column);
        if reached(at_line, at_column) {
            break;
        }
        match c {
            '{' => stack.push(Frame::Object {
                key: None,
                expects_key: true,
            }),
            '[' => stack.push(Frame::Array { index: 0 }),
            '}' | ']' => {
                stack.pop();
            }
            ',' => match stack.last_mut() {
                Some(Frame::Object { expects_key, .. }) => *expects_key = true,
                Some(Frame::Array { index }) => *index += 1,
                None => {}
            },
            ':' => {
                if let Some(Frame::Object { expects_key, .. }) = stack.last_mut() {
                    *expects_key = false;
                }
            }
            '"' => {
                let mut read = String::new();
                let mut escaped = false;
                for c in chars.by_ref() {
                    advance(c, &mut at_line, &mut at_column);
                    match (escaped, c) {
                        (false, '\\') => escaped = true,
                        (false, '"') => break,
                        _ => {
                            escaped = false;
                            read.push(c);
                        }
                    }
                }
                if let Some(Frame::Object {
                    key,
                    expects_key: true,
                }) = stack.last_mut()
                {
                    *key = Some(read);
                }
            }
            _ => {}
        }
    }
    if let (Some(missing), Some(Frame::Object { key, .. })) = (missing, stack.last_mut()) {
        *key = Some(missing.to_string());
    }
    let mut path = String::new();
    for frame in &stack {
        match frame {
            Frame::Object { key: Some(key), .. } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Frame::Object { key: None, .. } => {}
            Frame::Array { index } => path.push_str(&format!("[{index}]")),
        }
    }
    if path.is_empty() {
        "(the plan)".into()
    } else {
        path
    }
}

/// A `serde_json` error's message without its ` at line L column C`, which [`field_of`] turned
/// into a field's name.
pub fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}
