//! Messages: stored-record decoding for pull bodies, encoding for sends and the simulator.

mod compress;
mod decode;
mod encode;
mod id;
mod properties;
mod queue;
pub mod sys_flag;

use std::borrow::Cow;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

pub use compress::{DecompressError, compress, decompress};
pub use decode::{
    DEFAULT_MAX_BODY_SIZE, DecodeBudget, DecodeOptions, Decoded, MAX_INNER_BATCH, MessageDecodeError,
    decode_message, decode_messages, decode_messages_within,
};
pub use encode::{encode_batch_entry, encode_stored, stored_size};
pub use id::{UniqIdGenerator, offset_msg_id, parse_offset_msg_id};
pub use properties::{NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Properties, is_system_key, keys};
pub use queue::MessageQueue;
pub use sys_flag::CompressionType;

/// A message as stored by the broker and delivered to consumers (`MessageExt.java`).
///
/// `body` and `properties` are slices of the pull response when the body was not compressed;
/// `topic` is shared between the messages of one pull.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageExt {
    /// Topic. For a retry message handed to a listener, the original topic.
    pub topic: Arc<str>,
    /// Queue id.
    pub queue_id: i32,
    /// User flag from the producer.
    pub flag: i32,
    /// Consume-queue index.
    pub queue_offset: i64,
    /// Commit-log byte offset (what send-back names the message by).
    pub commit_log_offset: i64,
    /// Stored sysFlag; COMPRESSED is cleared once the body is decompressed.
    pub sys_flag: i32,
    /// Born time, ms since the epoch.
    pub born_timestamp: i64,
    /// Producer address.
    pub born_host: SocketAddr,
    /// Store time, ms since the epoch.
    pub store_timestamp: i64,
    /// Broker address.
    pub store_host: SocketAddr,
    /// How many times this message was consumed and sent back.
    pub reconsume_times: i32,
    /// Prepared transaction offset.
    pub prepared_transaction_offset: i64,
    /// CRC32 of the stored (possibly compressed) body, as an i32.
    pub body_crc: i32,
    /// Size of the stored record in bytes.
    pub store_size: i32,
    /// Body, decompressed when possible.
    pub body: Bytes,
    /// Properties.
    pub properties: Properties,
}

impl MessageExt {
    /// The tag (`TAGS` property).
    pub fn tags(&self) -> Option<&str> {
        self.properties.get(keys::TAGS)
    }

    /// The business keys (`KEYS`, split on spaces).
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.properties.get(keys::KEYS).unwrap_or("").split(' ').filter(|k| !k.is_empty())
    }

    /// A property.
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties.get(key)
    }

    /// Java `getMsgId()` on a consumer: `UNIQ_KEY` if present, else the offset message id.
    pub fn msg_id(&self) -> Cow<'_, str> {
        match self.properties.get(keys::UNIQ_KEY) {
            Some(id) => Cow::Borrowed(id),
            None => Cow::Owned(self.offset_msg_id()),
        }
    }

    /// Broker-side id: store host and commit-log offset in hex.
    pub fn offset_msg_id(&self) -> String {
        offset_msg_id(self.store_host, self.commit_log_offset)
    }

    /// The body as text, when it is UTF-8 (what a Java `new String(getBody(), UTF_8)` reads
    /// without replacement characters).
    pub fn body_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.body).ok()
    }

    /// [`born_timestamp`](Self::born_timestamp) as a [`SystemTime`]; the epoch when the
    /// broker sent a value no `SystemTime` can hold.
    pub fn born_time(&self) -> SystemTime {
        epoch_ms(self.born_timestamp)
    }

    /// [`store_timestamp`](Self::store_timestamp) as a [`SystemTime`]; the epoch when the
    /// broker sent a value no `SystemTime` can hold.
    pub fn store_time(&self) -> SystemTime {
        epoch_ms(self.store_timestamp)
    }

    /// True if the body is still compressed (decompression was off or failed).
    pub fn is_compressed(&self) -> bool {
        self.sys_flag & sys_flag::COMPRESSED_FLAG != 0
    }

    /// A blank message for `topic`: used to build records in tests and the simulator.
    pub fn new(topic: impl Into<Arc<str>>, body: impl Into<Bytes>) -> Self {
        let unspecified = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        Self {
            topic: topic.into(),
            queue_id: 0,
            flag: 0,
            queue_offset: 0,
            commit_log_offset: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: unspecified,
            store_timestamp: 0,
            store_host: unspecified,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body_crc: 0,
            store_size: 0,
            body: body.into(),
            properties: Properties::new(),
        }
    }
}

/// A message to send (`Message.java`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Topic.
    pub topic: String,
    /// Body (uncompressed).
    pub body: Bytes,
    /// User flag.
    pub flag: i32,
    /// Properties (tags, keys, user properties, …).
    pub properties: Properties,
}

impl Message {
    /// A message with `WAIT=true`, as Java's constructor sets.
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            body: body.into(),
            flag: 0,
            properties: Properties::from_pairs([(keys::WAIT, "true")]),
        }
    }

    /// Set the tag.
    pub fn with_tags(mut self, tags: &str) -> Self {
        self.properties = self.properties.with(keys::TAGS, tags);
        self
    }

    /// Set the keys (joined with a space).
    pub fn with_keys<'a>(mut self, keys: impl IntoIterator<Item = &'a str>) -> Self {
        let joined = keys.into_iter().collect::<Vec<_>>().join(" ");
        self.properties = self.properties.with(keys::KEYS, &joined);
        self
    }

    /// Set a property.
    pub fn with_property(mut self, key: &str, value: &str) -> Self {
        self.properties = self.properties.with(key, value);
        self
    }

    /// Set the delay level (1..=18 with the broker's default levels).
    pub fn with_delay_level(mut self, level: i32) -> Self {
        self.properties = self.properties.with(keys::DELAY, &level.to_string());
        self
    }
}

/// Java's `String.hashCode()`: `h = 31*h + c` over UTF-16 code units, wrapping.
///
/// The broker filters tags by the hash codes the client sends, so this must match Java exactly.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// Milliseconds since the epoch (negative: before it) as a `SystemTime`, saturating to the
/// epoch where the platform's `SystemTime` has no room.
fn epoch_ms(ms: i64) -> SystemTime {
    let d = Duration::from_millis(ms.unsigned_abs());
    let t = if ms >= 0 { UNIX_EPOCH.checked_add(d) } else { UNIX_EPOCH.checked_sub(d) };
    t.unwrap_or(UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_protocol_examples() {
        assert_eq!(java_string_hash("tagA"), 3_552_231);
        assert_eq!(java_string_hash("tagB"), 3_552_232);
        assert_eq!(java_string_hash("中文"), 646_394);
        assert_eq!(java_string_hash("😀"), 1_772_899);
        assert_eq!(java_string_hash(""), 0);
        // wraps like Java's int arithmetic
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    }

    #[test]
    fn message_builders() {
        let m = Message::new("T", "b").with_tags("A").with_keys(["k1", "k2"]).with_property("p", "v");
        assert_eq!(m.properties.get("KEYS"), Some("k1 k2"));
        assert_eq!(m.properties.get("WAIT"), Some("true"));
        let mut e = MessageExt::new("T", "x");
        e.properties = m.properties;
        assert_eq!(e.keys().collect::<Vec<_>>(), ["k1", "k2"]);
        assert_eq!(e.tags(), Some("A"));
        assert_eq!(e.msg_id(), e.offset_msg_id());
    }

    #[test]
    fn body_text_and_times() {
        let mut m = MessageExt::new("T", "héllo");
        assert_eq!(m.body_str(), Some("héllo"));
        m.body = Bytes::from_static(&[0xff, 0xfe]);
        assert_eq!(m.body_str(), None);
        m.born_timestamp = 1_700_000_000_123;
        m.store_timestamp = -1_000;
        assert_eq!(m.born_time(), UNIX_EPOCH + Duration::from_millis(1_700_000_000_123));
        assert_eq!(m.store_time(), UNIX_EPOCH - Duration::from_secs(1));
        for extreme in [i64::MIN, i64::MAX] {
            m.born_timestamp = extreme;
            let _ = m.born_time(); // any broker value: no panic
        }
    }
}
