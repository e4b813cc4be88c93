//! Message properties: `name \x01 value \x02` repeated (PROTOCOL.md §9.3), kept in wire form.
//!
//! Decoding keeps the raw bytes (a zero-copy slice of the pull response) and parses on access, so
//! a pull of 32 messages allocates nothing per message for properties.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

/// Separates a name from its value.
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Ends each pair.
pub const PROPERTY_SEPARATOR: char = '\u{2}';

/// Well-known property keys (`MessageConst.java`).
pub mod keys {
    /// Tag.
    pub const TAGS: &str = "TAGS";
    /// Business keys, space separated.
    pub const KEYS: &str = "KEYS";
    /// Wait for store OK.
    pub const WAIT: &str = "WAIT";
    /// Delay level.
    pub const DELAY: &str = "DELAY";
    /// Producer-generated message id.
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    /// Original topic of a retry message.
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    /// First message id of a retried message.
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    /// Reconsume count carried by the send-back fallback.
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    /// Max reconsume times carried by the send-back fallback.
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    /// Real topic of a delayed message.
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    /// Real queue id of a delayed message.
    pub const REAL_QID: &str = "REAL_QID";
    /// Transaction half message.
    pub const TRAN_MSG: &str = "TRAN_MSG";
    /// Producer group.
    pub const PGROUP: &str = "PGROUP";
    /// Cluster, added by the broker.
    pub const CLUSTER: &str = "CLUSTER";
    /// Namespace.
    pub const INSTANCE_ID: &str = "INSTANCE_ID";
    /// Original topic of a dead-lettered message.
    pub const DLQ_ORIGIN_TOPIC: &str = "DLQ_ORIGIN_TOPIC";
    /// Original id of a dead-lettered message.
    pub const DLQ_ORIGIN_MESSAGE_ID: &str = "DLQ_ORIGIN_MESSAGE_ID";
    /// Consume start time, set by the Java client.
    pub const CONSUME_START_TIME: &str = "CONSUME_START_TIME";
    /// Inner-batch count.
    pub const INNER_NUM: &str = "INNER_NUM";
    /// Region, added by 5.x brokers on send.
    pub const MSG_REGION: &str = "MSG_REGION";
    /// Trace switch, added by 5.x brokers on send.
    pub const TRACE_ON: &str = "TRACE_ON";
    /// POP: the message's receipt (`extraInfo`), what an ack or change of invisibility names.
    pub const POP_CK: &str = "POP_CK";
    /// POP: broker time of the message's first pop, ms.
    pub const FIRST_POP_TIME: &str = "1ST_POP_TIME";
}

/// Property keys the system uses; everything else is a user property.
const SYSTEM_KEYS: &[&str] = &[
    "TAGS",
    "KEYS",
    "WAIT",
    "DELAY",
    "UNIQ_KEY",
    "RETRY_TOPIC",
    "ORIGIN_MESSAGE_ID",
    "RECONSUME_TIME",
    "MAX_RECONSUME_TIMES",
    "REAL_TOPIC",
    "REAL_QID",
    "TRAN_MSG",
    "PGROUP",
    "CLUSTER",
    "MSG_REGION",
    "TRACE_ON",
    "INSTANCE_ID",
    "__transactionId__",
    "TRANSACTION_CHECK_TIMES",
    "CHECK_IMMUNITY_TIME_IN_SECONDS",
    "MSG_TYPE",
    "CORRELATION_ID",
    "REPLY_TO_CLIENT",
    "TTL",
    "__SHARDINGKEY",
    "TIMER_DELIVER_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELAY_MS",
    "TIMER_OUT_MS",
    "INNER_NUM",
    "INNER_MULTI_DISPATCH",
    "INNER_MULTI_QUEUE_OFFSET",
    "DLQ_ORIGIN_TOPIC",
    "DLQ_ORIGIN_MESSAGE_ID",
    "__CRC32#",
    "1ST_POP_TIME",
    "POP_CK",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "CONSUME_START_TIME",
    "BUYER_ID",
    "TRACE_CONTEXT",
    "SHARDING_KEY",
    "DELIVER_TIME_MS",
    "RECONSUME_TIMES",
];

/// True for keys RocketMQ itself sets (`MessageConst.STRING_HASH_SET` and friends).
pub fn is_system_key(key: &str) -> bool {
    SYSTEM_KEYS.contains(&key)
}

/// Properties in wire form. Always valid UTF-8.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Properties {
    raw: Bytes,
}

impl Properties {
    /// No properties.
    pub fn new() -> Self {
        Self::default()
    }

    /// From wire bytes. Invalid UTF-8 is replaced (as Java's decoder does), which costs a copy only
    /// in that case.
    pub fn from_wire(raw: Bytes) -> Self {
        // Nearly always ASCII, checked a word at a time, cheaper than UTF-8 validation's state
        // machine on short text.
        if raw.is_ascii() || std::str::from_utf8(&raw).is_ok() {
            Self { raw }
        } else {
            Self { raw: Bytes::from(String::from_utf8_lossy(&raw).into_owned()) }
        }
    }

    /// Build from pairs; pairs with an empty name or value are skipped (Java drops them on decode).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut buf = BytesMut::new();
        for (k, v) in pairs {
            if k.is_empty() || v.is_empty() || k.contains(['\u{1}', '\u{2}']) || v.contains('\u{2}') {
                continue;
            }
            buf.put_slice(k.as_bytes());
            buf.put_u8(1);
            buf.put_slice(v.as_bytes());
            buf.put_u8(2);
        }
        Self { raw: buf.freeze() }
    }

    /// The wire form.
    pub fn as_bytes(&self) -> &Bytes {
        &self.raw
    }

    /// The wire form as text (what SEND_MESSAGE_V2 carries in header field `i`).
    pub fn as_wire_str(&self) -> &str {
        std::str::from_utf8(&self.raw).unwrap_or("")
    }

    /// True if there are no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Pairs as byte slices, in wire order, with Java's filter: a piece counts only if it has a
    /// non-empty name before the first `\x01` and a non-empty value after it.
    fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.raw.split(|b| *b == 2).filter_map(|piece| {
            let at = piece.iter().position(|b| *b == 1)?;
            let (k, v) = (&piece[..at], &piece[at + 1..]);
            (!k.is_empty() && !v.is_empty()).then_some((k, v))
        })
    }

    /// Pairs in wire order, with Java's filter: a piece counts only if it has a non-empty name
    /// before the first `\x01` and a non-empty value after it.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.pairs().map(|(k, v)| (text(k), text(v)))
    }

    /// The value of `key`; the last one wins when repeated (Java fills a HashMap), and a piece
    /// with an empty value does not count (Java's filter). The pieces are walked from the end,
    /// their separators found a word at a time, inline, and a piece is looked at
    /// only where it starts with `key` and `\x01`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let (raw, key) = (&self.raw[..], key.as_bytes());
        // A name never holds the separators (the name ends at the first `\x01`).
        let &first = key.first()?;
        if key.iter().any(|b| *b == 1 || *b == 2) {
            return None;
        }
        let mut end = raw.len();
        loop {
            let start = last_separator(&raw[..end]).map_or(0, |at| at + 1);
            let piece = &raw[start..end];
            // The first byte rules out most pieces before a full comparison.
            if piece.len() > key.len() + 1
                && piece[0] == first
                && piece[key.len()] == 1
                && piece.starts_with(key)
            {
                return Some(text(&piece[key.len() + 1..]));
            }
            if start == 0 {
                return None;
            }
            end = start - 1;
        }
    }

    /// A copy with `key` set to `value` (replacing earlier values).
    pub fn with(&self, key: &str, value: &str) -> Self {
        let kept = self.iter().filter(|(k, _)| *k != key);
        Self::from_pairs(kept.chain(std::iter::once((key, value))))
    }

    /// A copy without `key`.
    pub fn without(&self, key: &str) -> Self {
        Self::from_pairs(self.iter().filter(|(k, _)| *k != key))
    }

    /// The pairs as Java's `getProperties()` map holds them: one per name, the last value
    /// winning (as [`get`](Self::get)), in the order the names first appear.
    pub fn distinct(&self) -> Vec<(&str, &str)> {
        let mut out: Vec<(&str, &str)> = Vec::new();
        let mut at: hashbrown::HashMap<&str, usize> = hashbrown::HashMap::new();
        for (k, v) in self.iter() {
            match at.get(k) {
                Some(&i) => out[i].1 = v,
                None => {
                    at.insert(k, out.len());
                    out.push((k, v));
                }
            }
        }
        out
    }

    /// User properties only (not RocketMQ's own keys), one per name as [`distinct`](Self::distinct).
    pub fn user(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.distinct().into_iter().filter(|(k, _)| !is_system_key(k))
    }
}

/// The position of the last `\x02` in `b`. Pieces are short (tens of bytes): a word at a time,
/// inline, costs no more than a call into a SIMD search that first sets itself up.
fn last_separator(b: &[u8]) -> Option<usize> {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let mut end = b.len();
    while end >= 8 {
        let word = u64::from_le_bytes(b[end - 8..end].try_into().unwrap_or([0; 8])) ^ 0x0202_0202_0202_0202;
        // The high bit set in each byte that is zero, exactly (no borrow between bytes, unlike
        // the shorter has-zero trick, whose false hits above a real one would be found first).
        let zero = !(((word & LOW7) + LOW7) | word | LOW7);
        if zero != 0 {
            return Some(end - 8 + (63 - zero.leading_zeros() as usize) / 8);
        }
        end -= 8;
    }
    b[..end].iter().rposition(|x| *x == 2)
}

/// A piece of properties as text. The whole was valid UTF-8 when built, and pieces are cut at
/// ASCII separators, so every piece is valid too: the check is on the piece alone (short).
fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or("")
}

impl fmt::Debug for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_split_rules() {
        let p = Properties::from_wire(Bytes::from_static(
            b"TAGS\x01a\x02\x01x\x02EMPTY\x01\x02K\x01v\x01w\x02TAGS\x01b\x02junk",
        ));
        let pairs: Vec<_> = p.iter().collect();
        assert_eq!(pairs, [("TAGS", "a"), ("K", "v\u{1}w"), ("TAGS", "b")]);
        assert_eq!(p.get("TAGS"), Some("b"), "last wins");
        assert_eq!(p.get("EMPTY"), None, "empty values are dropped");
        assert_eq!(p.distinct(), [("TAGS", "b"), ("K", "v\u{1}w")], "one per name, as Java's map");
    }

    #[test]
    fn distinct_agrees_with_get_for_every_name() {
        // A batch entry's properties repeat UNIQ_KEY and WAIT (the batch's and the entry's own).
        let p = Properties::from_wire(Bytes::from_static(
            b"WAIT\x01true\x02UNIQ_KEY\x01A\x02c\x01red\x02UNIQ_KEY\x01B\x02WAIT\x01false\x02c\x01blue",
        ));
        let d = p.distinct();
        assert_eq!(d, [("WAIT", "false"), ("UNIQ_KEY", "B"), ("c", "blue")]);
        for (k, v) in &d {
            assert_eq!(p.get(k), Some(*v), "{k}");
        }
        assert_eq!(p.user().collect::<Vec<_>>(), [("c", "blue")]);
    }

    #[test]
    fn build_and_edit() {
        let p = Properties::from_pairs([("TAGS", "t"), ("color", "红"), ("", "x"), ("e", "")]);
        assert_eq!(p.as_wire_str(), "TAGS\u{1}t\u{2}color\u{1}红\u{2}");
        let q = p.with("TAGS", "u").without("color");
        assert_eq!(q.as_wire_str(), "TAGS\u{1}u\u{2}");
        assert_eq!(p.user().collect::<Vec<_>>(), [("color", "红")]);
    }

    #[test]
    fn get_agrees_with_the_pairs_for_every_name() {
        let wires: [&[u8]; 5] = [
            b"TAG\x01x\x02TAGS\x01y\x02TAGSS\x01z\x02",
            b"\x02\x02K\x01\x01\x02K\x01v\x01w\x02",
            b"A\x01\x02A\x01b\x02A\x01\x02",
            b"UNIQ_KEY\x01id",
            b"",
        ];
        for wire in wires {
            let p = Properties::from_wire(Bytes::from_static(wire));
            for name in ["TAG", "TAGS", "TAGSS", "K", "A", "UNIQ_KEY", "", "T", "\u{1}", "K\u{1}v"] {
                let want = p.iter().filter(|(k, _)| *k == name).last().map(|(_, v)| v);
                assert_eq!(p.get(name), want, "{name:?} in {wire:?}");
            }
        }
    }

    proptest::proptest! {
        /// `get` (a word-at-a-time walk from the end) agrees with the pairs in wire order, for any
        /// text around the separators and any placement of them against word boundaries.
        #[test]
        fn get_agrees_with_the_pairs_on_any_wire(
            wire in proptest::collection::vec(proptest::sample::select(&["\u{1}", "\u{2}", "A", "AB", "K", "\u{3}", "\u{0}", "\u{82}", "é", "\u{7f}"][..]), 0..80),
        ) {
            let p = Properties::from_wire(Bytes::from(wire.concat()));
            for name in ["A", "AB", "K", "A\u{82}", "é", "\u{3}"] {
                let want = p.iter().filter(|(k, _)| *k == name).last().map(|(_, v)| v);
                proptest::prop_assert_eq!(p.get(name), want, "{:?}", name);
            }
        }
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let p = Properties::from_wire(Bytes::from_static(b"K\x01\xff\x02"));
        assert_eq!(p.get("K"), Some("\u{FFFD}"));
    }
}
