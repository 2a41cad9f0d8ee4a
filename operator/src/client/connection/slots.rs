//! Which shard of a cluster holds a key: the key's hash slot (CRC16 of the key, or of its hash
//! tag, modulo 16,384, as the Redis cluster specification defines it), the even split of the
//! slots over N shards that membench joins them with, and the routing of a batch of encoded
//! commands to the shards that own their keys.

use crate::client::connection::resp::CommandBuffer;

/// The slots of a Redis or Valkey cluster.
pub const SLOTS: u16 = 16384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no reflection), the checksum the
/// cluster specification hashes keys with.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: between the first `{` and the first `}` after it, when
/// that is not empty; otherwise the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(length) = key[open + 1..].iter().position(|&b| b == b'}')
        && length > 0
    {
        return &key[open + 1..open + 1 + length];
    }
    key
}

/// The hash slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// The slots shard `index` of `shards` owns in the even split: `index * 16384 / shards` up to
/// `(index + 1) * 16384 / shards - 1`.
pub fn even_range(index: usize, shards: usize) -> (u16, u16) {
    let slots = usize::from(SLOTS);
    let first = index * slots / shards;
    let last = (index + 1) * slots / shards - 1;
    (first as u16, last as u16)
}

/// Which shard owns each slot.
#[derive(Clone, Debug, PartialEq)]
pub struct SlotTable {
    owner: Vec<u16>,
    shards: usize,
}

impl SlotTable {
    /// The even split over `shards` shards.
    pub fn even(shards: usize) -> Self {
        let mut owner = vec![0u16; usize::from(SLOTS)];
        for index in 0..shards {
            let (first, last) = even_range(index, shards);
            for slot in first..=last {
                owner[usize::from(slot)] = index as u16;
            }
        }
        Self { owner, shards }
    }

    /// A table from each slot's owner (`None`: a slot nobody owns, which is an error naming it).
    pub fn from_owners(owners: &[Option<usize>], shards: usize) -> Result<Self, u16> {
        let mut owner = Vec::with_capacity(usize::from(SLOTS));
        for (slot, o) in owners.iter().enumerate().take(usize::from(SLOTS)) {
            owner.push(o.ok_or(slot as u16)? as u16);
        }
        if owner.len() < usize::from(SLOTS) {
            return Err(owner.len() as u16);
        }
        Ok(Self { owner, shards })
    }

    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The shard that owns `slot`.
    pub fn owner(&self, slot: u16) -> usize {
        usize::from(self.owner[usize::from(slot % SLOTS)])
    }

    /// The shard that holds `key`.
    pub fn shard_of(&self, key: &[u8]) -> usize {
        self.owner(key_slot(key))
    }

    /// Moves each command of `batch` (RESP arrays, as the encoders write them) to the buffer of
    /// the shard that owns its key (its first argument), keeping their order within a shard,
    /// and writes how many commands each shard got into `counts`. `parts` holds one buffer per
    /// shard; both are cleared first, so the caller reuses them from batch to batch.
    pub fn split(
        &self,
        batch: &CommandBuffer,
        parts: &mut [CommandBuffer],
        counts: &mut Vec<usize>,
    ) {
        for part in parts.iter_mut() {
            part.clear();
        }
        counts.clear();
        counts.resize(self.shards, 0);
        let mut rest = batch.as_bytes();
        while !rest.is_empty() {
            let (length, key) = command_and_key(rest)
                .expect("the encoders write whole RESP arrays of bulk strings");
            let shard = self.shard_of(key);
            parts[shard].raw(&rest[..length]);
            counts[shard] += 1;
            rest = &rest[length..];
        }
    }
}

/// The length of the RESP command at the start of `bytes` (`*N\r\n` then N bulk strings) and
/// its first argument (the key); `None` when it is not whole or has no key.
pub fn command_and_key(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let (args, mut at) = length_line(bytes, b'*')?;
    let mut key: Option<&[u8]> = None;
    for arg in 0..args {
        let (length, header) = length_line(&bytes[at..], b'$')?;
        let start = at + header;
        let end = start.checked_add(length)?;
        if bytes.get(end..end + 2)? != b"\r\n" {
            return None;
        }
        if arg == 1 {
            key = Some(&bytes[start..end]);
        }
        at = end + 2;
    }
    Some((at, key?))
}

/// `<marker><decimal>\r\n` at the start of `bytes`: the number and the line's length.
fn length_line(bytes: &[u8], marker: u8) -> Option<(usize, usize)> {
    if bytes.first() != Some(&marker) {
        return None;
    }
    let end = bytes.iter().position(|&b| b == b'\r')?;
    if bytes.get(end + 1) != Some(&b'\n') || end < 2 {
        return None;
    }
    let number = std::str::from_utf8(&bytes[1..end]).ok()?.parse().ok()?;
    Some((number, end + 2))
}

/// The slot a `MOVED <slot> <host:port>` or `ASK <slot> <host:port>` error reply names.
pub fn redirected_slot(reply: &str) -> Option<(&'static str, u16, String)> {
    let mut words = reply.split_whitespace();
    let kind = match words.next()? {
        "MOVED" => "MOVED",
        "ASK" => "ASK",
        _ => return None,
    };
    let slot = words.next()?.parse().ok()?;
    Some((kind, slot, words.next().unwrap_or_default().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_the_cluster_specifications_xmodem() {
        // The test vector of the Redis cluster specification's CRC16 reference.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
        // Slots `CLUSTER KEYSLOT` of a Valkey 9.1.2 cluster-mode node gave for these keys
        // (tests/shards.rs asks a live node for more).
        let engine_slots: [(&[u8], u16); 8] = [
            (b"foo", 12182),
            (b"bar", 5061),
            (b"123456789", 12739),
            (b"key:000000000000", 13053),
            (b"key:000000000001", 8924),
            (b"key:000000123456", 11249),
            (b"membench:zset", 8023),
            (b"hello world", 15332),
        ];
        for (key, slot) in engine_slots {
            assert_eq!(key_slot(key), slot, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn a_hash_tag_is_the_first_nonempty_braces() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(
            hash_tag(b"foo{}{bar}"),
            b"foo{}{bar}",
            "empty braces: whole key"
        );
        assert_eq!(
            hash_tag(b"foo{{bar}}zap"),
            b"{bar",
            "first {{ then first }}"
        );
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"no braces"), b"no braces");
        assert_eq!(hash_tag(b"open{only"), b"open{only");
        assert_eq!(hash_tag(b"close}first{x}"), b"x");
    }

    #[test]
    fn the_even_split_covers_every_slot_once() {
        for shards in [2usize, 3, 7, 16] {
            let mut next = 0u32;
            for index in 0..shards {
                let (first, last) = even_range(index, shards);
                assert_eq!(u32::from(first), next, "{shards} shards, shard {index}");
                assert!(last >= first);
                next = u32::from(last) + 1;
            }
            assert_eq!(next, u32::from(SLOTS), "{shards} shards");
        }
        assert_eq!(even_range(0, 3), (0, 5460));
        assert_eq!(even_range(2, 3), (10922, 16383));
        let table = SlotTable::even(3);
        assert_eq!((table.owner(5460), table.owner(5461)), (0, 1));
    }

    #[test]
    fn a_batch_is_split_by_the_owner_of_each_key() {
        let table = SlotTable::even(3);
        let mut batch = CommandBuffer::default();
        let keys: Vec<String> = (0..50).map(|i| format!("key:{i:012}")).collect();
        for key in &keys {
            batch.array(3).bulk(b"SET").bulk(key.as_bytes()).bulk(b"xx");
            batch
                .array(3)
                .bulk(b"EXPIRE")
                .bulk(key.as_bytes())
                .bulk(b"60");
        }
        let mut parts = vec![CommandBuffer::default(); 3];
        let mut counts = Vec::new();
        table.split(&batch, &mut parts, &mut counts);
        assert_eq!(counts.iter().sum::<usize>(), 100);
        for (shard, part) in parts.iter().enumerate() {
            let mut rest = part.as_bytes();
            let mut seen = 0;
            while !rest.is_empty() {
                let (length, key) = command_and_key(rest).unwrap();
                assert_eq!(table.shard_of(key), shard);
                rest = &rest[length..];
                seen += 1;
            }
            assert_eq!(seen, counts[shard]);
            assert!(seen > 0, "50 keys reach every one of 3 shards");
        }
    }

    #[test]
    fn a_redirection_names_its_slot() {
        assert_eq!(
            redirected_slot("MOVED 3999 127.0.0.1:6381"),
            Some(("MOVED", 3999, "127.0.0.1:6381".to_string()))
        );
        assert_eq!(redirected_slot("ASK 1 10.0.0.1:6379").map(|r| r.1), Some(1));
        assert_eq!(redirected_slot("ERR syntax error"), None);
    }
}
