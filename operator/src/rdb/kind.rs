//! What a key is before its value is read: its data type ([`KeyKind`]) and, for a load, the
//! key its elements belong to ([`KeyHead`]).

/// The data types a key can hold, as `TYPE` answers them, and module values by name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyKind {
    String,
    List,
    Set,
    Zset,
    Hash,
    Stream,
    /// A module's value, by the module type's 9-character name (`ReJSON-RL`), or a type of
    /// Dragonfly's own (`dragonfly-json`).
    Module(String),
}

/// A key as its elements see it, when values were asked for: what a load needs to write them
/// before the key's end is read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyHead {
    pub db: u64,
    pub name: Vec<u8>,
    /// None for a module value (its elements are never given).
    pub kind: Option<KeyKind>,
    /// The absolute expiry in Unix milliseconds.
    pub expire_at_ms: Option<i64>,
}
