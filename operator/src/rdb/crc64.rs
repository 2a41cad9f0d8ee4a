//! Redis's CRC-64 (Jones polynomial, reflected, initial value 0, no final xor): the checksum
//! an RDB file carries in its last 8 bytes. A plain 256-entry table, built at compile time.

const POLY: u64 = 0x95ac_9329_ac4b_c9b5; // 0xad93d23594c935a9, bit-reversed

const TABLE: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// Continues `crc` over `bytes`.
pub fn update(mut crc: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        crc = TABLE[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_value_of_123456789_is_redis_s() {
        // The value Redis's own crc64 test asserts (src/crc64.c).
        assert_eq!(update(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn updating_in_pieces_equals_updating_at_once() {
        let text = b"This is a test of the emergency broadcast system.";
        let whole = update(0, text);
        let split = update(update(0, &text[..7]), &text[7..]);
        assert_eq!(whole, split);
        assert_ne!(whole, update(0, &text[1..]));
    }
}
