//! Stored-record decoding (PROTOCOL.md §9): pull bodies, CONSUME_MESSAGE_DIRECTLY bodies.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;

use super::sys_flag::{
    BORNHOST_V6_FLAG, COMPRESSED_FLAG, CompressionType, INNER_BATCH_FLAG, NEED_UNWRAP_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
};
use super::{MessageExt, Properties, decompress};

/// Magic of a V1 record (1-byte topic length).
pub(crate) const MAGIC_V1: i32 = 0xDAA320A7_u32 as i32;
/// Magic of a V2 record (2-byte topic length), written from 5.1 for topics over 127 chars.
pub(crate) const MAGIC_V2: i32 = 0xDAA320AB_u32 as i32;
/// Fixed bytes before the body length with IPv4 hosts.
pub(crate) const FIXED_V4: usize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8;

/// Default cap on one decompressed body: 32 MiB (the broker stores at most 4 MiB compressed).
pub const DEFAULT_MAX_BODY_SIZE: usize = 32 << 20;

/// Options for [`decode_messages`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Decompress compressed bodies (Java `decodeDecompressBody`, default true).
    pub decompress: bool,
    /// Largest decompressed body. A body that would exceed it, or does not decompress, is kept
    /// as stored with COMPRESSED still set in `sys_flag`: delivered, never dropped.
    pub max_body_size: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Self { decompress: true, max_body_size: DEFAULT_MAX_BODY_SIZE }
    }
}

/// A stored record that could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("message record #{index} at byte {offset}: {what}")]
pub struct MessageDecodeError {
    /// Which record (0-based) in the body.
    pub index: usize,
    /// Byte offset in the body where the problem is.
    pub offset: usize,
    /// What was wrong.
    pub what: &'static str,
}

/// Most messages one inner-batch record may unwrap into. A record beyond it is reported as
/// corrupt rather than held: tiny entries cost far more decoded than stored (a 32 MiB body of
/// them would be millions of messages).
pub const MAX_INNER_BATCH: usize = 65_536;

/// How much one decode may produce: a pull answer against its queue's free cache
/// (`pullThresholdForQueue`, `pullThresholdSizeForQueue`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeBudget {
    /// Messages (each inner-batch entry counts).
    pub messages: usize,
    /// Body bytes, after decompression.
    pub bytes: usize,
}

impl DecodeBudget {
    /// No limit but the per-record ones.
    pub const UNLIMITED: Self = Self { messages: usize::MAX, bytes: usize::MAX };
}

/// What [`decode_messages_within`] produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The messages of the records decoded, in order.
    pub messages: Vec<MessageExt>,
    /// The budget ran out before the last record: the rest was not decoded (a later pull brings
    /// it again).
    pub truncated: bool,
    /// When truncated: the queue offset the first record left undecoded claims (read from its
    /// fixed header, unchecked), where the next pull should start if it is plausible.
    pub resume_at: Option<i64>,
}

/// Decode every record of a pull body. Inner batches are unwrapped; bodies decompressed.
///
/// All-or-nothing: a malformed record fails the whole body, because the records after it cannot
/// be located reliably and silently skipping them would lose messages.
pub fn decode_messages(body: &Bytes, opts: &DecodeOptions) -> Result<Vec<MessageExt>, MessageDecodeError> {
    decode_messages_within(body, opts, DecodeBudget::UNLIMITED).map(|d| d.messages)
}

/// Decode records of a pull body while `budget` lasts: the first record always, each next one
/// only while the messages and bytes decoded so far are under the budget. So what a decode holds
/// is bounded by the budget plus one record (itself bounded by
/// [`max_body_size`](DecodeOptions::max_body_size) and [`MAX_INNER_BATCH`]).
pub fn decode_messages_within(
    body: &Bytes,
    opts: &DecodeOptions,
    budget: DecodeBudget,
) -> Result<Decoded, MessageDecodeError> {
    // A pull brings at most 32 messages by default; sizing for that avoids regrowing (and
    // moving every message) while never reserving more than the body could hold.
    let mut out = Vec::with_capacity((body.len() / (FIXED_V4 + 7)).min(32));
    let mut pos = 0;
    let mut index = 0;
    let mut bytes = 0usize;
    let mut last_topic: Option<Arc<str>> = None;
    while pos < body.len() {
        if index > 0 && (out.len() >= budget.messages || bytes >= budget.bytes) {
            // The queue offset field sits at bytes 20..28 of every record.
            let resume_at = body.get(pos + 20..pos + 28).map(|b| be_i64(b, 0));
            return Ok(Decoded { messages: out, truncated: true, resume_at });
        }
        let (msg, size) = decode_record(body, pos, index, opts, &mut last_topic)?;
        pos += size;
        index += 1;
        bytes = bytes.saturating_add(msg.body.len());
        if msg.sys_flag & (INNER_BATCH_FLAG | NEED_UNWRAP_FLAG) == INNER_BATCH_FLAG | NEED_UNWRAP_FLAG {
            unwrap_inner_batch(msg, index - 1, pos - size, &mut out)?;
        } else {
            out.push(msg);
        }
    }
    Ok(Decoded { messages: out, truncated: false, resume_at: None })
}

/// Decode exactly one record (a CONSUME_MESSAGE_DIRECTLY body).
pub fn decode_message(body: &Bytes, opts: &DecodeOptions) -> Result<MessageExt, MessageDecodeError> {
    let (msg, size) = decode_record(body, 0, 0, opts, &mut None)?;
    if size != body.len() {
        return Err(MessageDecodeError { index: 0, offset: size, what: "trailing bytes after the record" });
    }
    Ok(msg)
}

struct Cursor<'a> {
    buf: &'a Bytes,
    pos: usize,
    end: usize,
    index: usize,
}

impl Cursor<'_> {
    fn err(&self, what: &'static str) -> MessageDecodeError {
        MessageDecodeError { index: self.index, offset: self.pos, what }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&[u8], MessageDecodeError> {
        if self.end - self.pos < n {
            return Err(self.err(what));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn slice(&mut self, n: usize, what: &'static str) -> Result<Bytes, MessageDecodeError> {
        if self.end - self.pos < n {
            return Err(self.err(what));
        }
        let s = self.buf.slice(self.pos..self.pos + n);
        self.pos += n;
        Ok(s)
    }

    fn i16(&mut self, what: &'static str) -> Result<i16, MessageDecodeError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, MessageDecodeError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn len(&mut self, raw: i64, what: &'static str) -> Result<usize, MessageDecodeError> {
        usize::try_from(raw).ok().filter(|n| *n <= self.end - self.pos).ok_or_else(|| self.err(what))
    }
}

#[inline(always)]
fn decode_record(
    buf: &Bytes,
    start: usize,
    index: usize,
    opts: &DecodeOptions,
    last_topic: &mut Option<Arc<str>>,
) -> Result<(MessageExt, usize), MessageDecodeError> {
    let mut c = Cursor { buf, pos: start, end: buf.len(), index };
    let total = c.i32("truncated total size")?;
    let size = usize::try_from(total)
        .ok()
        .filter(|n| *n >= FIXED_V4 + 4 + 1 + 2 && *n <= buf.len() - start)
        .ok_or(MessageDecodeError { index, offset: start, what: "total size out of range" })?;
    c.end = start + size;
    // The fixed part (hosts included) is read after one length check: `size` was checked
    // against the IPv4 minimum, and the IPv6 extra is checked once the flags are known.
    let r = &buf[start..start + size];
    let magic = be_i32(r, 4);
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return Err(MessageDecodeError { index, offset: start + 4, what: "unknown magic code" });
    }
    let mut sys_flag = be_i32(r, 36);
    let (born_v6, store_v6) = (sys_flag & BORNHOST_V6_FLAG != 0, sys_flag & STOREHOSTADDRESS_V6_FLAG != 0);
    let fixed = FIXED_V4 + if born_v6 { 12 } else { 0 } + if store_v6 { 12 } else { 0 };
    if size < fixed + 4 + 1 + 2 {
        return Err(MessageDecodeError { index, offset: start, what: "total size too small for IPv6 hosts" });
    }
    let body_crc = be_i32(r, 8);
    let queue_id = be_i32(r, 12);
    let flag = be_i32(r, 16);
    let queue_offset = be_i64(r, 20);
    let commit_log_offset = be_i64(r, 28);
    let born_timestamp = be_i64(r, 40);
    let (born_host, at) = host(r, 48, born_v6);
    let store_timestamp = be_i64(r, at);
    let (store_host, at) = host(r, at + 8, store_v6);
    let reconsume_times = be_i32(r, at);
    let prepared_transaction_offset = be_i64(r, at + 4);
    c.pos = start + at + 12;
    let body_len = c.i32("truncated body length")?;
    let body_len = c.len(body_len.into(), "body length exceeds the record")?;
    let mut body = c.slice(body_len, "truncated body")?;
    let topic_len = if magic == MAGIC_V1 {
        // Java reads the V1 length byte signed: >127 is negative and fails there too.
        i64::from(c.take(1, "truncated topic length")?[0] as i8)
    } else {
        i64::from(c.i16("truncated topic length")?)
    };
    let topic_len = c.len(topic_len, "topic length out of range")?;
    let topic_bytes = c.take(topic_len, "truncated topic")?;
    let topic = intern_topic(topic_bytes, last_topic);
    let props_len = c.i16("truncated properties length")?;
    let props_len = c.len(props_len.into(), "properties length out of range")?;
    let properties = Properties::from_wire(c.slice(props_len, "truncated properties")?);
    if c.pos != c.end {
        return Err(c.err("total size disagrees with the field lengths"));
    }

    if opts.decompress && sys_flag & COMPRESSED_FLAG != 0 {
        // A body that will not decompress is delivered as stored, flag kept: never dropped.
        if let Some(kind) = CompressionType::from_sys_flag(sys_flag) {
            if let Ok(plain) = decompress(kind, &body, opts.max_body_size) {
                body = Bytes::from(plain);
                sys_flag &= !COMPRESSED_FLAG;
            }
        }
    }

    let msg = MessageExt {
        topic,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body_crc,
        store_size: total,
        body,
        properties,
    };
    Ok((msg, size))
}

fn be_i32(r: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]])
}

fn be_i64(r: &[u8], at: usize) -> i64 {
    let mut a = [0; 8];
    a.copy_from_slice(&r[at..at + 8]);
    i64::from_be_bytes(a)
}

/// A host at `at` (IPv4 or IPv6 address, then an i32 port); returns it and the next offset.
/// Callers checked that the record holds the fixed part.
fn host(r: &[u8], at: usize, v6: bool) -> (SocketAddr, usize) {
    let (ip, port_at): (IpAddr, usize) = if v6 {
        let mut a = [0; 16];
        a.copy_from_slice(&r[at..at + 16]);
        (Ipv6Addr::from(a).into(), at + 16)
    } else {
        (Ipv4Addr::new(r[at], r[at + 1], r[at + 2], r[at + 3]).into(), at + 4)
    };
    // Java stores the port as an int; real ports fit 16 bits.
    (SocketAddr::new(ip, be_i32(r, port_at) as u16), port_at + 4)
}

/// Share one `Arc<str>` between consecutive records of the same topic (one allocation per pull).
fn intern_topic(bytes: &[u8], last: &mut Option<Arc<str>>) -> Arc<str> {
    if let Some(t) = last {
        if t.as_bytes() == bytes {
            return t.clone();
        }
    }
    let t: Arc<str> = String::from_utf8_lossy(bytes).into();
    *last = Some(t.clone());
    t
}

/// Split a 5.x inner-batch record into its messages (`MessageDecoder.decodeMessages`): each entry
/// is i32 total, i32 magic, i32 body CRC, i32 flag, i32 body length + body, i16 properties length
/// + properties. Queue offsets are the outer offset plus the index.
fn unwrap_inner_batch(
    outer: MessageExt,
    index: usize,
    record_start: usize,
    out: &mut Vec<MessageExt>,
) -> Result<(), MessageDecodeError> {
    let body = outer.body.clone();
    let mut c = Cursor { buf: &body, pos: 0, end: body.len(), index };
    let err = |what| MessageDecodeError { index, offset: record_start, what };
    let mut i = 0i64;
    let before = out.len();
    while c.pos < c.end {
        if out.len() - before >= MAX_INNER_BATCH {
            out.truncate(before);
            return Err(err("inner batch of more than MAX_INNER_BATCH (65,536) messages"));
        }
        let entry_start = c.pos;
        let total = c.i32("truncated inner entry size").map_err(|_| err("truncated inner batch entry"))?;
        let _magic = c.i32("").map_err(|_| err("truncated inner batch entry"))?;
        let body_crc = c.i32("").map_err(|_| err("truncated inner batch entry"))?;
        let flag = c.i32("").map_err(|_| err("truncated inner batch entry"))?;
        let body_len = c.i32("").map_err(|_| err("truncated inner batch entry"))?;
        let body_len = c.len(body_len.into(), "").map_err(|_| err("inner body length out of range"))?;
        let entry_body = c.slice(body_len, "").map_err(|_| err("truncated inner batch body"))?;
        let props_len = c.i16("").map_err(|_| err("truncated inner batch entry"))?;
        let props_len =
            c.len(props_len.into(), "").map_err(|_| err("inner properties length out of range"))?;
        let props =
            Properties::from_wire(c.slice(props_len, "").map_err(|_| err("truncated inner properties"))?);
        if i64::from(total) != (c.pos - entry_start) as i64 {
            return Err(err("inner entry size disagrees with its fields"));
        }
        let mut m = outer.clone();
        m.queue_offset = outer.queue_offset.wrapping_add(i);
        m.flag = flag;
        m.body_crc = body_crc;
        m.body = entry_body;
        m.properties = props;
        m.sys_flag &= !(INNER_BATCH_FLAG | NEED_UNWRAP_FLAG);
        out.push(m);
        i += 1;
    }
    Ok(())
}
