//! The opcodes and value type bytes of the RDB format, as Redis's rdb.h, Valkey's rdb.h and
//! Dragonfly's rdb_extensions.h number them.

pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_MODULE_PRE_GA: u8 = 6;
pub const TYPE_MODULE_2: u8 = 7;
pub const TYPE_HASH_ZIPMAP: u8 = 9;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;
pub const TYPE_SET_LISTPACK: u8 = 20;
pub const TYPE_STREAM_LISTPACKS_3: u8 = 21;
/// Redis 7.4 release candidates (REDIS files); in VALKEY files the same byte is
/// [`VALKEY_TYPE_HASH_2`].
pub const TYPE_HASH_METADATA_PRE_GA: u8 = 22;
pub const TYPE_HASH_LISTPACK_EX_PRE_GA: u8 = 23;
pub const TYPE_HASH_METADATA: u8 = 24;
pub const TYPE_HASH_LISTPACK_EX: u8 = 25;
/// Redis 8.6: streams with idempotent-producer (IDMP) state.
pub const TYPE_STREAM_LISTPACKS_4: u8 = 26;
/// Redis after 8.6: streams with NACKed entries.
pub const TYPE_STREAM_LISTPACKS_5: u8 = 27;
/// Valkey 9: a hash whose fields have expiries.
pub const VALKEY_TYPE_HASH_2: u8 = 22;

pub const QUICKLIST_PLAIN: u64 = 1;
pub const QUICKLIST_PACKED: u64 = 2;

/// Redis 8.6 (RDB 13): module metadata of the next key. Valkey 9 uses 243 for SLOT_IMPORT.
pub const OPCODE_KEY_META: u8 = 243;
pub const OPCODE_SLOT_INFO: u8 = 244;
pub const OPCODE_FUNCTION2: u8 = 245;
pub const OPCODE_FUNCTION_PRE_GA: u8 = 246;
pub const OPCODE_MODULE_AUX: u8 = 247;
pub const OPCODE_IDLE: u8 = 248;
pub const OPCODE_FREQ: u8 = 249;
pub const OPCODE_AUX: u8 = 250;
pub const OPCODE_RESIZEDB: u8 = 251;
pub const OPCODE_EXPIRETIME_MS: u8 = 252;
pub const OPCODE_EXPIRETIME: u8 = 253;
pub const OPCODE_SELECTDB: u8 = 254;
pub const OPCODE_EOF: u8 = 255;

// Dragonfly's own (rdb_extensions.h), in its REDIS0009 files.
pub const DF_TYPE_JSON: u8 = 30;
pub const DF_TYPE_HASH_WITH_EXPIRY: u8 = 31;
pub const DF_TYPE_SET_WITH_EXPIRY: u8 = 32;
pub const DF_OPCODE_FULLSYNC_END: u8 = 200;
pub const DF_OPCODE_COMPRESSED_ZSTD: u8 = 201;
pub const DF_OPCODE_COMPRESSED_LZ4: u8 = 202;
pub const DF_OPCODE_JOURNAL_OFFSET: u8 = 211;
pub const DF_OPCODE_MASK: u8 = 220;
pub const DF_MASK_MC_FLAGS: u32 = 1 << 1;
