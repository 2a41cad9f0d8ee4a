//! Words another release also reads: the enums the status and the results carry as strings
//! (an error category, an engine state, an engine kind in the status, a condition reason, a
//! phase kind). This module owns their one shape: the [`Words`] trait, the [`open_words!`]
//! macro that declares such an enum with its words, and [`words_serde!`], the serialization,
//! display and schema every one of them shares.
//!
//! A word this release does not know (one a newer operator or client wrote) reads as the
//! enum's `Unknown(word)` and is written back unchanged: the controller rewrites a status, and
//! `membench capacity` and `report` re-emit saved results, so a reader that lost the word would
//! erase what a newer writer said. Decisions treat it as unknown all the same (not retryable,
//! not finished). The schema is an open string whose description lists the known words: a
//! closed `enum` in the CRD would make the API server refuse a newer operator's status write.

/// An enum carried as a word: the words this release knows, and any other kept as read.
pub trait Words: Sized + Clone + 'static {
    /// Every value this release knows, in declaration order (never an `Unknown`).
    const KNOWN: &'static [Self];

    /// The word, as serialized: a known value's own, or an unknown one's as it was read.
    fn as_str(&self) -> &str;

    /// The value of a word this release does not know, keeping the word.
    fn unknown(word: &str) -> Self;

    /// The value a word names; a word this release does not know is kept as `Unknown`.
    fn parse(word: &str) -> Self {
        Self::KNOWN
            .iter()
            .find(|known| known.as_str() == word)
            .cloned()
            .unwrap_or_else(|| Self::unknown(word))
    }

    /// Whether this release knows the word (decisions treat an unknown one as unknown).
    fn is_known(&self) -> bool {
        Self::KNOWN
            .iter()
            .any(|known| known.as_str() == self.as_str())
    }

    /// The sentence a schema's description ends with: the known words, and that another is
    /// kept as written.
    fn known_words_sentence() -> String {
        let words: Vec<String> = Self::KNOWN
            .iter()
            .map(|known| format!("`{}`", known.as_str()))
            .collect();
        format!(
            "Known words: {}. A newer release may write another; it is kept as written.",
            words.join(", ")
        )
    }
}

/// A schema transform for a field that holds words and has a doc comment of its own (which
/// replaces the type's description): appends the known words, once.
pub fn name_known_words<W: Words>(schema: &mut schemars::Schema) {
    let sentence = W::known_words_sentence();
    let description = match schema.get("description").and_then(|d| d.as_str()) {
        Some(own) if own.contains(&sentence) => return,
        Some(own) => format!("{own}\n\n{sentence}"),
        None => sentence,
    };
    schema.insert("description".into(), description.into());
}

/// Declares an enum of known words and an `Unknown(String)` that keeps any other: the enum,
/// its [`Words`] impl, inherent `as_str`, `parse`, `is_known` and `meaning` (the variant's doc
/// comment, as written; `unknown_meaning` for an unknown word), and [`words_serde!`]. Each
/// variant is `Name = "word"`.
macro_rules! open_words {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[doc = $doc:literal])* $variant:ident = $word:literal,)*
        }
        unknown_meaning = $unknown_meaning:literal;
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[doc = $doc])* $variant,)*
            /// A word this release does not know (a newer release's), kept as it was read.
            Unknown(String),
        }

        impl $crate::words::Words for $name {
            const KNOWN: &'static [Self] = &[$($name::$variant,)*];

            fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $word,)*
                    $name::Unknown(word) => word,
                }
            }

            fn unknown(word: &str) -> Self {
                $name::Unknown(word.to_string())
            }

            fn is_known(&self) -> bool {
                !matches!(self, $name::Unknown(_))
            }
        }

        impl $name {
            /// Every value this release knows, in declaration order.
            pub const KNOWN: &'static [Self] = <Self as $crate::words::Words>::KNOWN;

            /// The word, as serialized (an unknown one as it was read).
            pub fn as_str(&self) -> &str {
                $crate::words::Words::as_str(self)
            }

            /// The value a word names; a word this release does not know is kept as
            /// `Unknown`.
            pub fn parse(word: &str) -> Self {
                $crate::words::Words::parse(word)
            }

            /// Whether this release knows the word.
            pub fn is_known(&self) -> bool {
                $crate::words::Words::is_known(self)
            }

            /// The word as a bounded label (a metric label): an unknown word is `Unknown`, so
            /// a newer release's words cannot add series.
            pub fn label(&self) -> &'static str {
                match self {
                    $($name::$variant => $word,)*
                    $name::Unknown(_) => "Unknown",
                }
            }

            /// What the value means: the doc comment it is declared with, as written (its
            /// line breaks are the comment's own wrapping).
            pub fn meaning(&self) -> &'static str {
                match self {
                    $($name::$variant => concat!($($doc, "\n",)*),)*
                    $name::Unknown(_) => $unknown_meaning,
                }
            }
        }

        $crate::words::words_serde!($name);
    };
}
pub(crate) use open_words;

/// What every [`Words`] type shares, from its `as_str` and `parse`: serialized as the word,
/// read from any word (never an error), displayed as the word, equal to the word, and a schema
/// of an open string whose description lists the known words.
macro_rules! words_serde {
    ($name:ty) => {
        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str($crate::words::Words::as_str(self))
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let word = <String as ::serde::Deserialize<'de>>::deserialize(deserializer)?;
                Ok(<$name as $crate::words::Words>::parse(&word))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($crate::words::Words::as_str(self))
            }
        }

        /// A value equals the word it serializes as (readers compare with the word).
        impl PartialEq<&str> for $name {
            fn eq(&self, word: &&str) -> bool {
                $crate::words::Words::as_str(self) == *word
            }
        }

        /// The value a word names (an unknown word kept).
        impl From<&str> for $name {
            fn from(word: &str) -> Self {
                <$name as $crate::words::Words>::parse(word)
            }
        }

        /// An open string: no `enum`, so a newer release's word is accepted where this
        /// release's schema is enforced (the CRD's status); the known words are in the
        /// description.
        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                ::schemars::json_schema!({
                    "type": "string",
                    "description": <$name as $crate::words::Words>::known_words_sentence(),
                })
            }
        }
    };
}
pub(crate) use words_serde;

#[cfg(test)]
mod tests {
    use super::Words;

    crate::words::open_words! {
        /// A test enum.
        pub enum Season {
            /// When it is warm.
            Summer = "summer",
            Winter = "winter",
        }
        unknown_meaning = "A season this release does not know.\n";
    }

    #[test]
    fn a_known_word_reads_as_its_value_and_writes_back_as_its_word() {
        let read: Season = serde_json::from_str("\"summer\"").unwrap();
        assert_eq!(read, Season::Summer);
        assert_eq!(serde_json::to_string(&read).unwrap(), "\"summer\"");
        assert_eq!(read.meaning(), " When it is warm.\n");
    }

    #[test]
    fn an_unknown_word_is_kept_written_back_and_still_unknown() {
        let read: Season = serde_json::from_str("\"monsoon\"").unwrap();
        assert_eq!(read, Season::Unknown("monsoon".into()));
        assert!(!read.is_known());
        assert_eq!(read.to_string(), "monsoon");
        assert_eq!(serde_json::to_string(&read).unwrap(), "\"monsoon\"");
        assert_eq!(read.meaning(), "A season this release does not know.\n");
        // A metric label stays bounded: every unknown word is one label.
        assert_eq!(read.label(), "Unknown");
        assert_eq!(Season::Winter.label(), "winter");
        assert_eq!(Season::Winter.as_str(), "winter");
        assert_eq!(Season::parse("winter"), Season::Winter);
        assert_eq!(Season::KNOWN, [Season::Summer, Season::Winter]);
    }

    #[test]
    fn the_schema_is_an_open_string_that_lists_the_known_words() {
        let schema = schemars::schema_for!(Season);
        assert_eq!(schema.get("type"), Some(&serde_json::json!("string")));
        assert_eq!(schema.get("enum"), None, "{schema:?}");
        assert_eq!(
            schema.get("description").and_then(|d| d.as_str()),
            Some(Season::known_words_sentence().as_str())
        );
        assert!(Season::known_words_sentence().contains("`summer`, `winter`"));
    }
}
