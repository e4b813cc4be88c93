//! Stored-record encoding: what a broker writes into a pull body. Used by the simulator, tests and
//! benches; the inverse of [`decode_messages`](super::decode_messages).

use std::net::SocketAddr;

use bytes::{BufMut, BytesMut};

use super::MessageExt;
use super::decode::{FIXED_V4, MAGIC_V1, MAGIC_V2};
use super::sys_flag::{BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG};

fn host_extra(h: &SocketAddr) -> usize {
    if h.is_ipv6() { 12 } else { 0 }
}

/// Bytes the record for `m` takes.
pub fn stored_size(m: &MessageExt) -> usize {
    let topic_len_field = if m.topic.len() > 127 { 2 } else { 1 };
    FIXED_V4
        + host_extra(&m.born_host)
        + host_extra(&m.store_host)
        + 4
        + m.body.len()
        + topic_len_field
        + m.topic.len()
        + 2
        + m.properties.as_bytes().len()
}

fn put_host(out: &mut BytesMut, h: &SocketAddr) {
    match h {
        SocketAddr::V4(a) => out.put_slice(&a.ip().octets()),
        SocketAddr::V6(a) => out.put_slice(&a.ip().octets()),
    }
    out.put_i32(i32::from(h.port()));
}

/// Append `m` as a stored record. V2 magic is used when the topic is longer than 127 bytes (a V1
/// length byte cannot hold it); the IPv6 host bits of `sys_flag` follow the addresses. The body is
/// written as it is (compress it first and set the flag to store a compressed message).
///
/// Bodies, topics and properties beyond the format's limits are the caller's bug: the lengths are
/// written truncated to their field widths.
pub fn encode_stored(m: &MessageExt, out: &mut BytesMut) {
    let size = stored_size(m);
    out.reserve(size);
    let v2 = m.topic.len() > 127;
    let mut sys_flag = m.sys_flag & !(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG);
    if m.born_host.is_ipv6() {
        sys_flag |= BORNHOST_V6_FLAG;
    }
    if m.store_host.is_ipv6() {
        sys_flag |= STOREHOSTADDRESS_V6_FLAG;
    }
    out.put_i32(size as i32);
    out.put_i32(if v2 { MAGIC_V2 } else { MAGIC_V1 });
    out.put_i32(m.body_crc);
    out.put_i32(m.queue_id);
    out.put_i32(m.flag);
    out.put_i64(m.queue_offset);
    out.put_i64(m.commit_log_offset);
    out.put_i32(sys_flag);
    out.put_i64(m.born_timestamp);
    put_host(out, &m.born_host);
    out.put_i64(m.store_timestamp);
    put_host(out, &m.store_host);
    out.put_i32(m.reconsume_times);
    out.put_i64(m.prepared_transaction_offset);
    out.put_i32(m.body.len() as i32);
    out.put_slice(&m.body);
    if v2 {
        out.put_i16(m.topic.len() as i16);
    } else {
        out.put_u8(m.topic.len() as u8);
    }
    out.put_slice(m.topic.as_bytes());
    out.put_i16(m.properties.as_bytes().len() as i16);
    out.put_slice(m.properties.as_bytes());
}

/// Append one entry of a batch body (SEND_BATCH_MESSAGE, and the inside of a 5.x inner batch).
pub fn encode_batch_entry(flag: i32, body: &[u8], properties: &[u8], out: &mut BytesMut) {
    let total = 4 + 4 + 4 + 4 + 4 + body.len() + 2 + properties.len();
    out.put_i32(total as i32);
    out.put_i32(0); // magic
    out.put_i32(0); // body CRC
    out.put_i32(flag);
    out.put_i32(body.len() as i32);
    out.put_slice(body);
    out.put_i16(properties.len() as i16);
    out.put_slice(properties);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::sys_flag::{COMPRESSED_FLAG, INNER_BATCH_FLAG, NEED_UNWRAP_FLAG};
    use crate::message::{
        CompressionType, DecodeOptions, MessageDecodeError, Properties, compress, decode_message,
        decode_messages,
    };
    use bytes::Bytes;

    fn sample(topic: &str, offset: i64) -> MessageExt {
        let mut m = MessageExt::new(topic, Bytes::from(format!("body-{offset}")));
        m.queue_id = 3;
        m.queue_offset = offset;
        m.commit_log_offset = 1000 + offset;
        m.born_timestamp = 1_700_000_000_000;
        m.store_timestamp = 1_700_000_000_005;
        m.born_host = "10.0.0.1:5555".parse().unwrap();
        m.store_host = "[fe80::1]:10911".parse().unwrap();
        m.reconsume_times = 2;
        m.properties = Properties::from_pairs([("TAGS", "a"), ("UNIQ_KEY", "ABC")]);
        m
    }

    fn encode_all(ms: &[MessageExt]) -> Bytes {
        let mut out = BytesMut::new();
        for m in ms {
            encode_stored(m, &mut out);
        }
        out.freeze()
    }

    fn normalise(mut m: MessageExt) -> MessageExt {
        m.store_size = stored_size(&m) as i32;
        m.sys_flag |= STOREHOSTADDRESS_V6_FLAG;
        m
    }

    #[test]
    fn round_trip_v1_v2_ipv6() {
        let long = "L".repeat(200);
        let ms = vec![sample("T", 1), sample("T", 2), sample(&long, 3)];
        let body = encode_all(&ms);
        let back = decode_messages(&body, &DecodeOptions::default()).unwrap();
        let want: Vec<_> = ms.into_iter().map(normalise).collect();
        assert_eq!(back, want);
        assert!(std::sync::Arc::ptr_eq(&back[0].topic, &back[1].topic), "topic interned");
        assert_eq!(back[2].topic.len(), 200);
    }

    #[test]
    fn compressed_bodies_are_inflated_or_kept() {
        let plain: Vec<u8> = b"0123456789".repeat(600);
        for kind in [CompressionType::Zlib, CompressionType::Lz4, CompressionType::Zstd] {
            let mut m = sample("T", 1);
            m.body = compress(kind, &plain).into();
            m.sys_flag = kind.sys_flag_bits();
            let body = encode_all(&[m]);
            let got = decode_messages(&body, &DecodeOptions::default()).unwrap();
            assert_eq!(got[0].body, plain, "{kind:?}");
            assert_eq!(got[0].sys_flag & COMPRESSED_FLAG, 0);
            // Over the cap: delivered as stored, still marked compressed.
            let capped = DecodeOptions { max_body_size: 100, ..Default::default() };
            let got = decode_messages(&body, &capped).unwrap();
            assert!(got[0].is_compressed());
            assert_ne!(got[0].body, plain);
        }
    }

    #[test]
    fn inner_batch_is_unwrapped() {
        let mut inner = BytesMut::new();
        encode_batch_entry(7, b"one", b"TAGS\x01x\x02", &mut inner);
        encode_batch_entry(8, b"two", b"", &mut inner);
        let mut outer = sample("T", 10);
        outer.body = inner.freeze();
        outer.sys_flag = INNER_BATCH_FLAG | NEED_UNWRAP_FLAG;
        let got = decode_messages(&encode_all(&[outer]), &DecodeOptions::default()).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].queue_offset, got[1].queue_offset), (10, 11));
        assert_eq!((&got[0].body[..], got[0].flag, got[0].tags()), (&b"one"[..], 7, Some("x")));
        assert_eq!(got[1].body, &b"two"[..]);
    }

    #[test]
    fn errors_name_record_and_offset() {
        let body = encode_all(&[sample("T", 1), sample("T", 2)]);
        let first = stored_size(&sample("T", 1));
        // Corrupt the second record's magic.
        let mut bad = BytesMut::from(&body[..]);
        bad[first + 4] ^= 0xff;
        let e = decode_messages(&bad.freeze(), &DecodeOptions::default()).unwrap_err();
        assert_eq!(e, MessageDecodeError { index: 1, offset: first + 4, what: "unknown magic code" });
        // Truncation.
        let e = decode_messages(&body.slice(..body.len() - 1), &DecodeOptions::default()).unwrap_err();
        assert_eq!((e.index, e.what), (1, "total size out of range"));
        // A body length pointing past the record.
        let mut bad = BytesMut::from(&body[..]);
        let body_len_at = FIXED_V4 + 12; // IPv6 store host adds 12
        bad[body_len_at..body_len_at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        let e = decode_messages(&bad.freeze(), &DecodeOptions::default()).unwrap_err();
        assert_eq!(e.what, "body length exceeds the record");
        assert!(decode_message(&body, &DecodeOptions::default()).is_err(), "two records are not one");
        assert!(decode_message(&body.slice(..first), &DecodeOptions::default()).is_ok());
    }
}
