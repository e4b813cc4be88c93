//! Stored-message `sysFlag` bits (`MessageSysFlag.java`) and compression types.

/// 0x1: the stored body is compressed.
pub const COMPRESSED_FLAG: i32 = 0x1;
/// 0x2: the topic filter type is MULTI_TAG.
pub const MULTI_TAGS_FLAG: i32 = 0x2;
/// Mask of the 2-bit transaction field.
pub const TRANSACTION_MASK: i32 = 0xC;
/// 0x4: transaction prepared (half message).
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
/// 0x10: the born host is IPv6.
pub const BORNHOST_V6_FLAG: i32 = 0x10;
/// 0x20: the store host is IPv6.
pub const STOREHOSTADDRESS_V6_FLAG: i32 = 0x20;
/// 0x40: the body is a batch to unwrap.
pub const NEED_UNWRAP_FLAG: i32 = 0x40;
/// 0x80: an inner batch (5.x auto-batching).
pub const INNER_BATCH_FLAG: i32 = 0x80;
/// Bits 8–10: compression type.
pub const COMPRESSION_TYPE_MASK: i32 = 0x700;

/// Body compression (`CompressionType.java`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum CompressionType {
    /// A zlib stream (RFC 1950), as `java.util.zip.Deflater` writes. Type value 3 (and 0 from
    /// producers older than 4.9.4).
    Zlib,
    /// An LZ4 frame, as lz4-java's `LZ4FrameOutputStream` writes. Type value 1.
    Lz4,
    /// A zstd frame. Type value 2.
    Zstd,
}

impl CompressionType {
    /// The type from the sysFlag bits 8–10; values 4–7 are invalid (Java throws).
    pub fn from_sys_flag(sys_flag: i32) -> Option<Self> {
        match (sys_flag & COMPRESSION_TYPE_MASK) >> 8 {
            0 | 3 => Some(Self::Zlib),
            1 => Some(Self::Lz4),
            2 => Some(Self::Zstd),
            _ => None,
        }
    }

    /// The sysFlag bits for this type, COMPRESSED_FLAG included (zlib gives 0x301, as Java).
    pub fn sys_flag_bits(self) -> i32 {
        let v = match self {
            Self::Lz4 => 1,
            Self::Zstd => 2,
            Self::Zlib => 3,
        };
        (v << 8) | COMPRESSED_FLAG
    }

    /// Parse `ZLIB` / `LZ4` / `ZSTD`, case-insensitively.
    pub fn from_name(s: &str) -> Option<Self> {
        match s.to_ascii_uppercase().as_str() {
            "ZLIB" => Some(Self::Zlib),
            "LZ4" => Some(Self::Lz4),
            "ZSTD" => Some(Self::Zstd),
            _ => None,
        }
    }
}
