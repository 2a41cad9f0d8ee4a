//! The bytes of the element just read, when the reader is asked for values
//! ([`super::RdbReader::with_values`]): one element at a time, whole up to a cap, so that a
//! load can write the file's data while a profile, which never asks, reads no value at all.

use std::cell::RefCell;
use std::rc::Rc;

use super::kind::KeyHead;

/// The longest element the reader holds whole by default: 64 MiB, so that a load's client
/// stays within its memory whatever the file holds (Redis's own limit on one argument,
/// proto-max-bulk-len, is 512 MiB by default).
pub const LARGEST_ELEMENT_HELD: u64 = 64 << 20;

/// The element just read: filled by whichever part of the reader read it, and taken by the
/// caller's callback before the next one is read.
#[derive(Debug)]
pub struct KeptElement {
    /// The longest element held; a longer one is refused at its offset, or passed over with
    /// its bytes left empty when `lenient` (a profile's field names: [`lenient`]).
    pub cap: u64,
    pub lenient: bool,
    pub bytes: Vec<u8>,
    /// The key the element belongs to.
    pub head: KeyHead,
}

/// Shared between the file's cursor (which fills it) and the key's callback (which reads it):
/// both live while a key is read, and the reader is borrowed by the first.
pub type Kept = Rc<RefCell<KeptElement>>;

pub fn new(cap: u64) -> Kept {
    Rc::new(RefCell::new(KeptElement {
        cap,
        lenient: false,
        bytes: Vec::new(),
        head: KeyHead::default(),
    }))
}

/// Holds elements of up to `cap` bytes, and passes longer ones over with no bytes: what a
/// profile needs of a file to read hash field names, whatever the values' lengths.
pub fn lenient(cap: u64) -> Kept {
    let kept = new(cap);
    kept.borrow_mut().lenient = true;
    kept
}

/// Holds `bytes` as the element just read.
pub fn set(kept: &Option<Kept>, bytes: &[u8]) {
    if let Some(kept) = kept {
        let mut kept = kept.borrow_mut();
        kept.bytes.clear();
        kept.bytes.extend_from_slice(bytes);
    }
}

/// Holds an integer's digits, as the server prints it.
pub fn set_integer(kept: &Option<Kept>, value: i64) {
    if let Some(kept) = kept {
        let mut kept = kept.borrow_mut();
        kept.bytes.clear();
        kept.bytes.extend_from_slice(value.to_string().as_bytes());
    }
}

/// A score as the server reads it back exactly: the shortest decimal that parses to the same
/// double (`inf` and `-inf` as the server writes them).
pub fn set_score(kept: &Option<Kept>, score: f64) {
    if kept.is_some() {
        let text = if score.is_infinite() {
            if score > 0.0 {
                "inf".into()
            } else {
                "-inf".into()
            }
        } else {
            format!("{score}")
        };
        set(kept, text.as_bytes());
    }
}
