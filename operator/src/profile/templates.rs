//! Key names as templates: `flight:1545` becomes `flight:{n}`, `route:JFK:LAX` becomes
//! `route:{s}:{s}`. A name is cut at delimiters (`:` `/` `|` `#` `.` `,` `;` `=` space and
//! braces); a part of digits is `{n}`, a hex or long mixed id is `{id}`, and text stays literal
//! only where it cannot name one key: the first part when at least [`MIN_KEYS_FOR_LITERAL`]
//! sampled keys share it, or a part every key of its template has the same. Everything else is
//! `{s}`. Digit runs inside text (`user123`) are `{n}` too. The other half is the rebuild:
//! a template and a length give a key name, unique by its index.

use std::collections::{BTreeMap, HashMap};

/// A literal part is kept only when at least this many sampled keys share it, so that no
/// part of one key's name reaches the profile.
pub const MIN_KEYS_FOR_LITERAL: u64 = 5;

fn is_delimiter(b: u8) -> bool {
    matches!(
        b,
        b':' | b'/' | b'|' | b'#' | b'.' | b',' | b';' | b'=' | b' ' | b'{' | b'}'
    )
}

/// One token of a key name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Token {
    Delimiter(u8),
    Number,
    Id,
    /// Text, with its bytes while it may still stay literal.
    Text(Vec<u8>),
}

/// An id: a part of at least 8 hex characters and dashes with a digit and a letter (hashes,
/// UUIDs), or of at least 16 letters and digits with both.
fn is_id(part: &[u8]) -> bool {
    let has_digit = part.iter().any(u8::is_ascii_digit);
    let has_letter = part.iter().any(u8::is_ascii_alphabetic);
    let hex = part.len() >= 8
        && part.iter().all(|b| b.is_ascii_hexdigit() || *b == b'-')
        && has_digit
        && has_letter;
    let mixed =
        part.len() >= 16 && part.iter().all(u8::is_ascii_alphanumeric) && has_digit && has_letter;
    hex || mixed
}

fn tokens_of(key: &[u8]) -> Vec<Token> {
    let mut tokens = Vec::new();
    for part in key.split_inclusive(|b| is_delimiter(*b)) {
        let (body, delimiter) = match part.last() {
            Some(&last) if is_delimiter(last) => (&part[..part.len() - 1], Some(last)),
            _ => (part, None),
        };
        if !body.is_empty() {
            if is_id(body) {
                tokens.push(Token::Id);
            } else {
                // Runs of digits and of anything else.
                let mut start = 0;
                while start < body.len() {
                    let digits = body[start].is_ascii_digit();
                    let end = body[start..]
                        .iter()
                        .position(|b| b.is_ascii_digit() != digits)
                        .map_or(body.len(), |n| start + n);
                    tokens.push(if digits {
                        Token::Number
                    } else {
                        Token::Text(body[start..end].to_vec())
                    });
                    start = end;
                }
            }
        }
        if let Some(d) = delimiter {
            tokens.push(Token::Delimiter(d));
        }
    }
    tokens
}

/// The shape of a name: its tokens with every text as `{s}`.
fn shape_of(tokens: &[Token]) -> Vec<Token> {
    tokens
        .iter()
        .map(|t| match t {
            Token::Text(_) => Token::Text(Vec::new()),
            other => other.clone(),
        })
        .collect()
}

/// At most this many distinct first parts of names are counted (a few MB): a keyspace whose
/// names start with a different word each would otherwise make the builder hold a part of every
/// name. A first part first seen after the cap was reached is never literal (`{s}`), and the
/// keys so templated are counted ([`TemplateBuilder::uncounted_first_parts`]).
pub const MOST_FIRST_PARTS_COUNTED: usize = 100_000;

/// What the names of one shape have in common: how many there are, and per text position the
/// text every one of them has there (None once two differ).
struct ShapeTexts {
    keys: u64,
    shared: Vec<Option<Vec<u8>>>,
}

/// Groups key names into templates: names are added one by one ([`TemplateBuilder::add`]),
/// then each is templated ([`TemplateBuilder::template_of`]). Holds no name: per shape the
/// texts all its names share, and how many names start with each first text (capped), so
/// that its memory grows with the keyspace's shapes and namespaces, not its keys.
#[derive(Default)]
pub struct TemplateBuilder {
    shapes: BTreeMap<Vec<Token>, ShapeTexts>,
    /// How many keys start with each first text (the namespace).
    first_texts: HashMap<Vec<u8>, u64>,
    /// Keys whose first text was not counted, the cap being reached.
    uncounted_first_parts: u64,
}

fn texts_of(tokens: &[Token]) -> impl Iterator<Item = &Vec<u8>> {
    tokens.iter().filter_map(|t| match t {
        Token::Text(text) => Some(text),
        _ => None,
    })
}

impl TemplateBuilder {
    pub fn add(&mut self, key: &[u8]) {
        let tokens = tokens_of(key);
        if let Some(Token::Text(first)) = tokens.first() {
            if let Some(n) = self.first_texts.get_mut(first) {
                *n += 1;
            } else if self.first_texts.len() < MOST_FIRST_PARTS_COUNTED {
                self.first_texts.insert(first.clone(), 1);
            } else {
                self.uncounted_first_parts += 1;
            }
        }
        match self.shapes.get_mut(&shape_of(&tokens)) {
            Some(shape) => {
                shape.keys += 1;
                for (shared, text) in shape.shared.iter_mut().zip(texts_of(&tokens)) {
                    if shared.as_ref().is_some_and(|s| s != text) {
                        *shared = None;
                    }
                }
            }
            None => {
                let shared = texts_of(&tokens).map(|t| Some(t.clone())).collect();
                self.shapes
                    .insert(shape_of(&tokens), ShapeTexts { keys: 1, shared });
            }
        }
    }

    /// Keys added whose first part was not counted ([`MOST_FIRST_PARTS_COUNTED`]).
    pub fn uncounted_first_parts(&self) -> u64 {
        self.uncounted_first_parts
    }

    /// The template of `key`, one of the names added.
    pub fn template_of(&self, key: &[u8]) -> String {
        let tokens = tokens_of(key);
        let shape = self.shapes.get(&shape_of(&tokens));
        let mut template = String::new();
        let mut text_position = 0;
        for (i, token) in tokens.iter().enumerate() {
            match token {
                Token::Delimiter(b'{') => template.push_str("{{"),
                Token::Delimiter(b'}') => template.push_str("}}"),
                Token::Delimiter(d) => template.push(*d as char),
                Token::Number => template.push_str("{n}"),
                Token::Id => template.push_str("{id}"),
                Token::Text(text) => {
                    let namespace = i == 0
                        && self.first_texts.get(text).copied().unwrap_or(0) >= MIN_KEYS_FOR_LITERAL;
                    let shared = shape.is_some_and(|s| {
                        s.keys >= MIN_KEYS_FOR_LITERAL
                            && s.shared.get(text_position).is_some_and(Option::is_some)
                    });
                    let literal = (namespace || shared)
                        && text
                            .iter()
                            .all(|b| b.is_ascii_graphic() && *b != b'{' && *b != b'}');
                    if literal {
                        template.push_str(&String::from_utf8_lossy(text));
                    } else {
                        template.push_str("{s}");
                    }
                    text_position += 1;
                }
            }
        }
        template
    }
}

/// A part of a template, for a rebuild.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplatePart {
    Literal(Vec<u8>),
    Number,
    Id,
    Text,
}

/// A template read back: literal parts and placeholders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyTemplate {
    pub parts: Vec<TemplatePart>,
}

/// Placeholders are filled from disjoint alphabets, so that two templates that differ only in
/// a placeholder's kind never make the same name: `{n}` digits, `{s}` the letters g to z, and
/// `{id}` hex starting with a letter a to f.
const TEXT_ALPHABET: &[u8] = b"ghijklmnopqrstuvwxyz";
const HEX_ALPHABET: &[u8] = b"0123456789abcdef";

impl KeyTemplate {
    pub fn parse(template: &str) -> Result<Self, String> {
        let bytes = template.as_bytes();
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let rest = &bytes[i..];
            let placeholder = [
                (&b"{n}"[..], TemplatePart::Number),
                (b"{id}", TemplatePart::Id),
                (b"{s}", TemplatePart::Text),
            ]
            .into_iter()
            .find(|(p, _)| rest.starts_with(p));
            if rest.starts_with(b"{{") || rest.starts_with(b"}}") {
                literal.push(rest[0]);
                i += 2;
            } else if let Some((text, part)) = placeholder {
                if !literal.is_empty() {
                    parts.push(TemplatePart::Literal(std::mem::take(&mut literal)));
                }
                parts.push(part);
                i += text.len();
            } else if rest[0] == b'{' || rest[0] == b'}' {
                return Err(format!(
                    "'{template}' has a lone brace at byte {i}: placeholders are {{n}}, {{id}} and {{s}}, literal braces are {{{{ and }}}}"
                ));
            } else {
                literal.push(rest[0]);
                i += 1;
            }
        }
        if !literal.is_empty() {
            parts.push(TemplatePart::Literal(literal));
        }
        if parts.is_empty() {
            return Err("a template is not empty".into());
        }
        Ok(Self { parts })
    }

    fn literal_length(&self) -> usize {
        self.parts
            .iter()
            .map(|p| match p {
                TemplatePart::Literal(l) => l.len(),
                _ => 0,
            })
            .sum()
    }

    /// Appends the name of key `index` to `out`, `length` bytes long where the template
    /// allows (longer when the literal parts, one byte per placeholder and the index need
    /// more). Distinct indexes give distinct names. A template without placeholders gets the
    /// index appended (as `{s}` would write it), since its keys must still be distinct.
    pub fn render(&self, index: u64, length: usize, out: &mut Vec<u8>) {
        let placeholders = self
            .parts
            .iter()
            .filter(|p| !matches!(p, TemplatePart::Literal(_)))
            .count();
        let free = length.saturating_sub(self.literal_length());
        let mut carrier_done = false;
        let others = placeholders.saturating_sub(1);
        for part in &self.parts {
            match part {
                TemplatePart::Literal(l) => out.extend_from_slice(l),
                placeholder => {
                    let alphabet = match placeholder {
                        TemplatePart::Number => &b"0123456789"[..],
                        TemplatePart::Id => HEX_ALPHABET,
                        _ => TEXT_ALPHABET,
                    };
                    if carrier_done {
                        // The other placeholders get one byte each: the carrier takes the rest.
                        out.push(alphabet[1 % alphabet.len()]);
                    } else {
                        carrier_done = true;
                        let width = free.saturating_sub(others).max(1);
                        push_in_alphabet(
                            index,
                            width,
                            alphabet,
                            placeholder == &TemplatePart::Id,
                            out,
                        );
                    }
                }
            }
        }
        if placeholders == 0 {
            let start = out.len();
            let width = length.saturating_sub(self.literal_length()).max(1);
            push_in_alphabet(index, width, TEXT_ALPHABET, false, out);
            debug_assert!(out.len() > start);
        }
    }
}

/// A field name as a template of one literal part (an object hash's field,
/// `profile::model::ObjectField`): printable ASCII, braces doubled; None for a name that is not.
pub fn literal_template(name: &[u8]) -> Option<String> {
    if name.is_empty() || !name.iter().all(u8::is_ascii_graphic) {
        return None;
    }
    let mut template = String::with_capacity(name.len());
    for &b in name {
        match b {
            b'{' => template.push_str("{{"),
            b'}' => template.push_str("}}"),
            other => template.push(other as char),
        }
    }
    Some(template)
}

/// The name a template of one literal part stands for ([`literal_template`]'s inverse).
pub fn literal_of(template: &str) -> Result<Vec<u8>, String> {
    match KeyTemplate::parse(template)?.parts.as_slice() {
        [TemplatePart::Literal(name)] => Ok(name.clone()),
        _ => Err(format!(
            "'{template}' is a field name, written literally: no {{n}}, {{id}} or {{s}}"
        )),
    }
}

/// `n` written in `alphabet`, left-padded with its zero to `width` (or longer when `n` needs
/// it); with `letter_first`, the first byte is a letter a to f, so that the id differs from
/// any number.
fn push_in_alphabet(
    mut n: u64,
    width: usize,
    alphabet: &[u8],
    letter_first: bool,
    out: &mut Vec<u8>,
) {
    let base = alphabet.len() as u64;
    let mut digits = Vec::with_capacity(24);
    loop {
        digits.push(alphabet[(n % base) as usize]);
        n /= base;
        if n == 0 {
            break;
        }
    }
    let body_width = if letter_first {
        width.saturating_sub(1)
    } else {
        width
    };
    while digits.len() < body_width {
        digits.push(alphabet[0]);
    }
    if letter_first {
        out.push(b'a');
    }
    out.extend(digits.iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn templates(keys: &[&str]) -> Vec<String> {
        let mut builder = TemplateBuilder::default();
        for key in keys {
            builder.add(key.as_bytes());
        }
        keys.iter()
            .map(|k| builder.template_of(k.as_bytes()))
            .collect()
    }

    #[test]
    fn digit_runs_become_n_and_a_shared_namespace_stays() {
        let keys: Vec<String> = (0..10)
            .map(|i| format!("flight:{}", 1000 + i * 37))
            .collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        assert!(templates(&keys).iter().all(|t| t == "flight:{n}"));
    }

    #[test]
    fn words_that_vary_become_s_and_no_key_part_of_one_key_survives() {
        let keys = [
            "route:JFK:LAX",
            "route:EWR:SFO",
            "route:LGA:ORD",
            "route:JFK:SEA",
            "route:EWR:BOS",
            "secret-one-off-name",
        ];
        let t = templates(&keys);
        assert!(t[..5].iter().all(|t| t == "route:{s}:{s}"), "{t:?}");
        assert_eq!(t[5], "{s}");
    }

    #[test]
    fn a_part_every_key_of_a_template_shares_stays_literal() {
        let keys: Vec<String> = (0..6).map(|i| format!("user:{i}:profile")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        assert!(templates(&keys).iter().all(|t| t == "user:{n}:profile"));
    }

    #[test]
    fn ids_and_hash_tags() {
        let keys: Vec<String> = (0..5)
            .map(|i| format!("session:{{9f86d081884c7d65{i}}}"))
            .collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let t = templates(&keys);
        assert_eq!(t[0], "session:{{{id}}}");
        let parsed = KeyTemplate::parse(&t[0]).unwrap();
        assert_eq!(
            parsed.parts,
            vec![
                TemplatePart::Literal(b"session:{".to_vec()),
                TemplatePart::Id,
                TemplatePart::Literal(b"}".to_vec())
            ]
        );
    }

    #[test]
    fn rendered_names_have_the_length_asked_and_are_distinct() {
        let template = KeyTemplate::parse("route:{s}:{s}").unwrap();
        let mut seen = std::collections::HashSet::new();
        for index in 0..5000 {
            let mut name = Vec::new();
            template.render(index, 13, &mut name);
            assert_eq!(name.len(), 13, "{}", String::from_utf8_lossy(&name));
            assert!(seen.insert(name));
        }
        // Too short for the index: longer, still distinct.
        let mut name = Vec::new();
        KeyTemplate::parse("k{n}")
            .unwrap()
            .render(123_456, 3, &mut name);
        assert_eq!(name, b"k123456");
        // No placeholder: the index is appended.
        let mut name = Vec::new();
        KeyTemplate::parse("config")
            .unwrap()
            .render(7, 8, &mut name);
        assert_eq!(name, b"configgn");
    }

    #[test]
    fn first_parts_past_the_cap_are_not_counted_and_say_so() {
        let mut builder = TemplateBuilder::default();
        for i in 0..MOST_FIRST_PARTS_COUNTED {
            // Distinct first parts (letters only: digits would be {n}).
            let word: String = format!("{i:x}")
                .chars()
                .map(|c| (b'g' + c.to_digit(16).unwrap() as u8) as char)
                .collect();
            builder.add(format!("{word}:1").as_bytes());
        }
        for i in 0..5 {
            builder.add(format!("late:{i}").as_bytes());
            builder.add(format!("g:{i}").as_bytes());
        }
        assert_eq!(builder.uncounted_first_parts(), 5);
        // Five keys start with "late", but it came after the cap: {s}. "g" was counted first.
        assert_eq!(builder.template_of(b"late:3"), "{s}:{n}");
        assert_eq!(builder.template_of(b"g:3"), "g:{n}");
    }

    #[test]
    fn a_lone_brace_is_refused() {
        assert!(
            KeyTemplate::parse("a{b")
                .unwrap_err()
                .contains("lone brace")
        );
    }
}
