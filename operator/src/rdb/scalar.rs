//! One element of a value as a profile sees it: its length as the server prints it, and
//! whether the server holds it as an integer. The bytes themselves go no further than here.

/// One element: a string value, a hash field or value, a list item, a member or a score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scalar {
    /// Bytes as the server returns it (an integer's digits and sign).
    pub length: u64,
    /// Whether the server stores it as a number.
    pub integer: bool,
    pub negative: bool,
    /// The integer itself, when it is one (the stream reader reads its own counts and flags
    /// this way).
    pub value: Option<i64>,
}

/// How many bytes of a string are looked at: an integer is at most 20 characters.
pub const LONGEST_INTEGER: usize = 20;

impl Scalar {
    pub fn of_integer(value: i64) -> Self {
        Self {
            length: value.to_string().len() as u64,
            integer: true,
            negative: value < 0,
            value: Some(value),
        }
    }

    /// A string of `length` bytes whose first bytes are `head` (all of it when it is short
    /// enough to be an integer).
    pub fn of_text(head: &[u8], length: u64) -> Self {
        let integer = length as usize == head.len() && holds_integer(head);
        let value = integer
            .then(|| std::str::from_utf8(head).ok()?.parse().ok())
            .flatten();
        Self {
            length,
            integer,
            negative: integer && head.first() == Some(&b'-'),
            value,
        }
    }

    /// A score as the server prints it (Redis's d2string: integral values as integers).
    pub fn of_score(score: f64) -> Self {
        if score.is_nan() {
            return Self::of_text(b"nan", 3);
        }
        if score.is_infinite() {
            let text: &[u8] = if score > 0.0 { b"inf" } else { b"-inf" };
            return Self::of_text(text, text.len() as u64);
        }
        if score.fract() == 0.0 && score.abs() < 9.007_199_254_740_992e15 {
            return Self::of_integer(score as i64);
        }
        let text = format!("{score}");
        Self::of_text(text.as_bytes(), text.len() as u64)
    }
}

/// Whether the server would store these bytes as a number: at most 20 characters, an optional
/// minus, no leading zero (but `0`), digits, within 64 bits.
pub fn holds_integer(bytes: &[u8]) -> bool {
    if bytes.is_empty() || bytes.len() > LONGEST_INTEGER {
        return false;
    }
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return false;
    }
    if digits[0] == b'0' && (digits.len() > 1 || bytes[0] == b'-') {
        return false;
    }
    std::str::from_utf8(bytes).is_ok_and(|s| s.parse::<i64>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_scores_have_the_length_the_server_prints() {
        assert_eq!(
            Scalar::of_integer(-120),
            Scalar {
                length: 4,
                integer: true,
                negative: true,
                value: Some(-120)
            }
        );
        assert_eq!(Scalar::of_score(3.0), Scalar::of_integer(3));
        assert_eq!(Scalar::of_score(1.5).length, 3);
        assert!(!Scalar::of_score(1.5).integer);
        assert!(!Scalar::of_text(b"007", 3).integer);
        // A long string is never an integer, whatever its first bytes.
        assert!(!Scalar::of_text(b"12345", 40).integer);
    }
}
