//! Frames: bytes ↔ [`RemotingCommand`] (PROTOCOL.md §1–§4).
//!
//! ```text
//! | frame_len: i32 | type << 24 | hdr_len (u24) | header (JSON or binary) | body |
//! ```
//! `frame_len` counts everything after itself. Decoding follows tokio-util's `Decoder` contract
//! without depending on it: `Ok(Some)` consumed one frame, `Ok(None)` wants more bytes (and has
//! reserved room for the rest of the frame), `Err` means the stream is corrupt and the connection
//! should close. The frame size limit is enforced before anything is reserved.

pub mod acl;
mod binary_header;
mod frames;
mod json_header;
mod outbound;

pub use acl::Credentials;
pub use frames::FrameReader;
pub use outbound::Outbound;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::json::JsonError;
use crate::protocol::{RemotingCommand, SerializeType};

/// Netty's default `com.rocketmq.remoting.frameMaxLength`: 16 MiB, length field included.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 16 * 1024 * 1024;

/// Why bytes could not be decoded into a frame. The connection they came from is unusable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The frame (length field included) is larger than the configured maximum.
    #[error("frame of {length} bytes exceeds the maximum of {max}")]
    FrameTooLarge {
        /// Declared size, length field included.
        length: u64,
        /// The limit.
        max: usize,
    },
    /// The length field is too small to hold the header-length word.
    #[error("frame length {length} is too small (at least 4)")]
    FrameTooShort {
        /// Declared `frame_len`.
        length: i32,
    },
    /// The header length is larger than the frame.
    #[error("header length {header} exceeds the {available} bytes left in the frame")]
    HeaderTooLong {
        /// Declared header length.
        header: usize,
        /// Bytes after the header-length word.
        available: usize,
    },
    /// The serialize-type byte is neither 0 (JSON) nor 1 (ROCKETMQ).
    #[error("unknown serialize type {0}")]
    UnknownSerializeType(u8),
    /// The JSON header is not valid JSON.
    #[error("JSON header: {0}")]
    JsonHeader(#[from] JsonError),
    /// The JSON header is JSON but a field has the wrong type.
    #[error("JSON header field `{field}`: {what}")]
    JsonHeaderField {
        /// The field.
        field: &'static str,
        /// What was wrong.
        what: &'static str,
    },
    /// The binary header is malformed.
    #[error("binary header at byte {offset}: {what}")]
    BinaryHeader {
        /// Offset within the header.
        offset: usize,
        /// What was wrong.
        what: &'static str,
    },
}

/// The frame codec. Cheap to copy; holds only the size limit.
#[derive(Clone, Copy, Debug)]
pub struct RemotingCodec {
    max_frame_size: usize,
}

impl Default for RemotingCodec {
    fn default() -> Self {
        Self { max_frame_size: DEFAULT_MAX_FRAME_SIZE }
    }
}

impl RemotingCodec {
    /// A codec with the default 16 MiB limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// A codec that rejects frames (length field included) larger than `max_frame_size`.
    pub fn with_max_frame_size(max_frame_size: usize) -> Self {
        Self { max_frame_size }
    }

    /// The limit.
    pub fn max_frame_size(&self) -> usize {
        self.max_frame_size
    }

    /// The whole length (length field included) of the frame whose length field is `prefix`,
    /// checked against the limit.
    fn frame_len(&self, prefix: [u8; 4]) -> Result<usize, DecodeError> {
        let frame_len = i32::from_be_bytes(prefix);
        if frame_len < 4 {
            return Err(DecodeError::FrameTooShort { length: frame_len });
        }
        let whole = frame_len as u64 + 4;
        if whole > self.max_frame_size as u64 {
            return Err(DecodeError::FrameTooLarge { length: whole, max: self.max_frame_size });
        }
        Ok(whole as usize)
    }

    /// How many bytes the frame begun at the front of `src` still lacks (0: it is complete; up
    /// to the length field while that is incomplete). Fails as [`decode`](Self::decode) would.
    pub fn missing(&self, src: &[u8]) -> Result<usize, DecodeError> {
        match src {
            [a, b, c, d, ..] => Ok(self.frame_len([*a, *b, *c, *d])?.saturating_sub(src.len())),
            _ => Ok(4 - src.len()),
        }
    }

    /// Take one frame off the front of `src`, if it is complete, without copying: the command's
    /// body is a slice of `src`. What remains of `src` is left for the next call.
    pub fn decode_bytes(&self, src: &mut Bytes) -> Result<Option<RemotingCommand>, DecodeError> {
        let [a, b, c, d, ..] = src[..] else { return Ok(None) };
        let whole = self.frame_len([a, b, c, d])?;
        if src.len() < whole {
            return Ok(None);
        }
        let mut frame = src.split_to(whole);
        frame.advance(4);
        decode_frame_body(frame).map(Some)
    }

    /// Take one frame off the front of `src`, if it is complete.
    pub fn decode(&self, src: &mut BytesMut) -> Result<Option<RemotingCommand>, DecodeError> {
        let [a, b, c, d, ..] = src[..] else { return Ok(None) };
        let whole = self.frame_len([a, b, c, d])?;
        if src.len() < whole {
            // Bounded by the check above.
            src.reserve(whole - src.len());
            return Ok(None);
        }
        let mut frame = src.split_to(whole).freeze();
        frame.advance(4);
        decode_frame_body(frame).map(Some)
    }

    /// Append `cmd` as one frame, in its own `serialize_type`.
    pub fn encode(&self, cmd: &RemotingCommand, dst: &mut BytesMut) {
        encode_frame(cmd, dst);
    }
}

/// Decode a frame without its leading length field (`frame` = type word, header, body).
/// The body is a zero-copy slice of `frame`.
pub fn decode_frame_body(mut frame: Bytes) -> Result<RemotingCommand, DecodeError> {
    if frame.len() < 4 {
        return Err(DecodeError::FrameTooShort { length: frame.len() as i32 });
    }
    let word = frame.get_u32();
    let ty = (word >> 24) as u8;
    let header_len = (word & 0x00FF_FFFF) as usize;
    if header_len > frame.len() {
        return Err(DecodeError::HeaderTooLong { header: header_len, available: frame.len() });
    }
    let header = frame.split_to(header_len);
    let body = frame;
    let mut cmd = match SerializeType::from_code(ty) {
        Some(SerializeType::Json) => json_header::decode(&header)?,
        Some(SerializeType::RocketMq) => binary_header::decode(&header)?,
        None => return Err(DecodeError::UnknownSerializeType(ty)),
    };
    cmd.body = body;
    Ok(cmd)
}

/// Append `cmd` as one frame, in its own `serialize_type`.
///
/// A header over 16 MiB cannot be framed; it cannot arise from this crate's requests. A binary
/// header carries the code as an i16, so codes beyond ±32767 must use JSON (Java has the same limit).
pub fn encode_frame(cmd: &RemotingCommand, dst: &mut BytesMut) {
    let start = dst.len();
    dst.put_u32(0); // frame_len, patched below
    dst.put_u32(0); // type and header length, patched below
    let header_start = dst.len();
    match cmd.serialize_type {
        SerializeType::Json => json_header::encode(cmd, dst),
        SerializeType::RocketMq => binary_header::encode(cmd, dst),
    }
    let header_len = dst.len() - header_start;
    dst.extend_from_slice(&cmd.body);
    let frame_len = (dst.len() - start - 4) as u32;
    let word = (u32::from(cmd.serialize_type.code()) << 24) | (header_len as u32 & 0x00FF_FFFF);
    dst[start..start + 4].copy_from_slice(&frame_len.to_be_bytes());
    dst[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
}

/// Encode `cmd` into a new buffer.
pub fn encode_to_bytes(cmd: &RemotingCommand) -> Bytes {
    let mut b = BytesMut::with_capacity(128 + cmd.body.len());
    encode_frame(cmd, &mut b);
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{FLAG_RESPONSE, LanguageCode, RequestCode};

    fn sample(ty: SerializeType) -> RemotingCommand {
        let mut c = RemotingCommand::request(RequestCode::GetConsumerListByGroup).with_opaque(1);
        c.version = 401;
        c.ext_fields.insert("consumerGroup", "g1");
        c.serialize_type = ty;
        c
    }

    #[test]
    fn binary_matches_protocol_worked_example() {
        let bytes = encode_to_bytes(&sample(SerializeType::RocketMq));
        let want: &[u8] = &[
            0, 0, 0, 0x2e, 1, 0, 0, 0x2a, 0, 0x26, 0x0c, 0x01, 0x91, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0x15, 0, 0x0d, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', b'G', b'r', b'o', b'u',
            b'p', 0, 0, 0, 2, b'g', b'1',
        ];
        assert_eq!(&bytes[..], want);
    }

    #[test]
    fn json_matches_protocol_worked_example() {
        let bytes = encode_to_bytes(&sample(SerializeType::Json));
        let text = r#"{"code":38,"extFields":{"consumerGroup":"g1"},"flag":0,"language":"RUST","opaque":1,"serializeTypeCurrentRPC":"JSON","version":401}"#;
        assert_eq!(&bytes[8..], text.as_bytes());
        assert_eq!(&bytes[..8], &[0, 0, 0, 0x87, 0, 0, 0, 0x83]);
    }

    #[test]
    fn round_trip_both_types_with_body_and_partial_input() {
        for ty in [SerializeType::Json, SerializeType::RocketMq] {
            let mut c = sample(ty).with_body(&b"payload"[..]).with_remark("r\u{e9}mark");
            c.flag = FLAG_RESPONSE;
            c.language = LanguageCode::JAVA;
            let bytes = encode_to_bytes(&c);
            let codec = RemotingCodec::new();
            let mut buf = BytesMut::new();
            for (i, b) in bytes.iter().enumerate() {
                buf.put_u8(*b);
                let got = codec.decode(&mut buf).unwrap();
                if i + 1 < bytes.len() {
                    assert!(got.is_none());
                } else {
                    assert_eq!(got.as_ref(), Some(&c));
                }
            }
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn limits_and_corruption() {
        let codec = RemotingCodec::with_max_frame_size(64);
        let mut buf = BytesMut::from(&[0x7f, 0xff, 0xff, 0xff][..]);
        assert_eq!(codec.decode(&mut buf), Err(DecodeError::FrameTooLarge { length: 0x8000_0003, max: 64 }));
        assert!(buf.capacity() < 1024, "nothing reserved for a rejected frame");
        let mut buf = BytesMut::from(&[0, 0, 0, 2, 0, 0][..]);
        assert_eq!(codec.decode(&mut buf), Err(DecodeError::FrameTooShort { length: 2 }));
        let mut buf = BytesMut::from(&[0, 0, 0, 8, 0, 0, 0, 9, 0, 0, 0, 0][..]);
        assert_eq!(codec.decode(&mut buf), Err(DecodeError::HeaderTooLong { header: 9, available: 4 }));
        let mut buf = BytesMut::from(&[0, 0, 0, 4, 7, 0, 0, 0][..]);
        assert_eq!(codec.decode(&mut buf), Err(DecodeError::UnknownSerializeType(7)));
        // Exactly at the limit is fine: 60 bytes of frame + 4 of length.
        let mut buf = BytesMut::new();
        buf.put_u32(60);
        buf.put_u32(0x0100_0000 | 21);
        buf.put_slice(&[0u8; 21]);
        buf.put_slice(&[9u8; 35]);
        let c = codec.decode(&mut buf).unwrap().unwrap();
        assert_eq!(c.body.len(), 35);
    }

    #[test]
    fn two_frames_back_to_back() {
        let a = encode_to_bytes(&sample(SerializeType::Json).with_opaque(1));
        let b = encode_to_bytes(&sample(SerializeType::RocketMq).with_opaque(2));
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&a);
        buf.extend_from_slice(&b);
        let codec = RemotingCodec::new();
        assert_eq!(codec.decode(&mut buf).unwrap().unwrap().opaque, 1);
        assert_eq!(codec.decode(&mut buf).unwrap().unwrap().opaque, 2);
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
    }
}
