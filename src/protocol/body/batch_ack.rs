//! BATCH_ACK_MESSAGE (200151) body: many POP acks in one request, one entry per checkpoint with
//! a bitset of the acked messages (`BatchAckMessageRequestBody`, `BatchAck`; `docs/pop.md` §2).
//!
//! Java writes the entries with short keys and reads the long ones too; the bitset is
//! `BitSet.toByteArray()` in Base64: bit *i* (byte `i / 8`, bit `i % 8`) acks the message at
//! `startOffset + i` of the checkpoint's queue.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::{BodyError, JsonBody, Obj};
use crate::json::{JsonWriter, Value};
use crate::protocol::receipt::{PopReceipt, RetryFlag};

/// Highest bit index an entry we build sets: a message further than this from its checkpoint's
/// start (a pop that skipped many filtered messages) is acked on its own instead, so a bitset
/// stays small (at most 1 KiB).
pub const MAX_BATCH_ACK_INDEX: i64 = 8 * 1024 - 1;

/// One checkpoint's acks (`BatchAck`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchAck {
    /// Group (`c`).
    pub consumer_group: String,
    /// The subscribed topic (`t`); the broker adds the retry prefix from `retry`.
    pub topic: String,
    /// Which topic the messages were read from (`r`).
    pub retry: RetryFlag,
    /// Start offset of the checkpoint (`so`).
    pub start_offset: i64,
    /// Queue (`q`).
    pub queue_id: i32,
    /// Revive queue of the checkpoint (`rq`).
    pub revive_queue_id: i32,
    /// Pop time of the checkpoint (`pt`).
    pub pop_time: i64,
    /// Invisible time of the checkpoint (`it`).
    pub invisible_time: i64,
    /// `BitSet.toByteArray()`: little-endian bits, no trailing zero bytes (`b`).
    pub bits: Vec<u8>,
}

impl BatchAck {
    /// An entry for `receipt`'s checkpoint with no bit set yet.
    pub fn for_checkpoint(group: &str, topic: &str, receipt: &PopReceipt) -> Self {
        Self {
            consumer_group: group.to_owned(),
            topic: topic.to_owned(),
            retry: receipt.retry,
            start_offset: receipt.ck_queue_offset,
            queue_id: receipt.queue_id,
            revive_queue_id: receipt.revive_qid,
            pop_time: receipt.pop_time,
            invisible_time: receipt.invisible_time,
            bits: Vec::new(),
        }
    }

    /// True when `receipt` names a message of this entry's checkpoint.
    pub fn same_checkpoint(&self, topic: &str, receipt: &PopReceipt) -> bool {
        self.topic == topic
            && self.retry == receipt.retry
            && self.start_offset == receipt.ck_queue_offset
            && self.queue_id == receipt.queue_id
            && self.revive_queue_id == receipt.revive_qid
            && self.pop_time == receipt.pop_time
            && self.invisible_time == receipt.invisible_time
    }

    /// Mark the message at `offset`; false (nothing marked) when it lies before the checkpoint
    /// start or more than [`MAX_BATCH_ACK_INDEX`] past it.
    pub fn set(&mut self, offset: i64) -> bool {
        let Some(i) = offset.checked_sub(self.start_offset).filter(|i| (0..=MAX_BATCH_ACK_INDEX).contains(i))
        else {
            return false;
        };
        let (byte, bit) = ((i / 8) as usize, i % 8);
        if self.bits.len() <= byte {
            self.bits.resize(byte + 1, 0);
        }
        self.bits[byte] |= 1 << bit;
        true
    }

    /// The acked offsets, lowest first.
    pub fn offsets(&self) -> impl Iterator<Item = i64> + '_ {
        let start = self.start_offset;
        self.bits.iter().enumerate().flat_map(move |(byte, b)| {
            (0..8)
                .filter(move |bit| b & (1 << bit) != 0)
                .map(move |bit| start.saturating_add(byte as i64 * 8 + bit))
        })
    }

    /// The receipt of each acked message, as the pop gave it (`broker_name`: the body's).
    pub fn receipts<'a>(&'a self, broker_name: &'a str) -> impl Iterator<Item = PopReceipt> + 'a {
        self.offsets().map(move |offset| PopReceipt {
            ck_queue_offset: self.start_offset,
            pop_time: self.pop_time,
            invisible_time: self.invisible_time,
            revive_qid: self.revive_queue_id,
            retry: self.retry,
            broker_name: broker_name.to_owned(),
            queue_id: self.queue_id,
            queue_offset: offset,
        })
    }

    /// How many messages it acks.
    pub fn count(&self) -> usize {
        self.bits.iter().map(|b| b.count_ones() as usize).sum()
    }
}

/// Request body of BATCH_ACK_MESSAGE (`BatchAckMessageRequestBody`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchAckMessageRequestBody {
    /// Broker the acks are for.
    pub broker_name: String,
    /// One entry per checkpoint.
    pub acks: Vec<BatchAck>,
}

/// The short key Java writes if present, else the long one it also reads.
fn key(o: &Obj<'_>, short: &'static str, long: &'static str) -> &'static str {
    if o.get(short).is_some() { short } else { long }
}

impl JsonBody for BatchAckMessageRequestBody {
    const NAME: &'static str = "BatchAckMessageRequestBody";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        let items = o.array("acks")?;
        let mut acks = Vec::with_capacity(items.len());
        for item in items {
            let a = Obj::new(item, "BatchAck")?;
            let flag = a.opt_str(key(&a, "r", "retry"))?.unwrap_or_else(|| "0".to_owned());
            let retry = RetryFlag::from_digit(&flag).ok_or(BodyError::Field {
                body: "BatchAck",
                field: "retry",
                what: "is not 0, 1 or 2",
            })?;
            let bits = match a.get(key(&a, "b", "bitSet")) {
                None => Vec::new(),
                Some(Value::String(s)) => STANDARD.decode(s).map_err(|_| BodyError::Field {
                    body: "BatchAck",
                    field: "bitSet",
                    what: "is not Base64",
                })?,
                Some(_) => {
                    return Err(BodyError::Field {
                        body: "BatchAck",
                        field: "bitSet",
                        what: "is not a string",
                    });
                }
            };
            acks.push(BatchAck {
                consumer_group: a.opt_str(key(&a, "c", "consumerGroup"))?.unwrap_or_default(),
                topic: a.opt_str(key(&a, "t", "topic"))?.unwrap_or_default(),
                retry,
                start_offset: a.opt_i64(key(&a, "so", "startOffset"))?.unwrap_or(0),
                queue_id: a.i32_or(key(&a, "q", "queueId"), 0)?,
                revive_queue_id: a.i32_or(key(&a, "rq", "reviveQueueId"), 0)?,
                pop_time: a.opt_i64(key(&a, "pt", "popTime"))?.unwrap_or(0),
                invisible_time: a.opt_i64(key(&a, "it", "invisibleTime"))?.unwrap_or(0),
                bits,
            });
        }
        Ok(Self { broker_name: o.opt_str("brokerName")?.unwrap_or_default(), acks })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object().key("acks").begin_array();
        for a in &self.acks {
            let flag = a.retry.digit().to_string();
            w.begin_object()
                .field_str("b", &STANDARD.encode(&a.bits))
                .field_str("c", &a.consumer_group)
                .field_int("it", a.invisible_time)
                .field_int("pt", a.pop_time)
                .field_int("q", a.queue_id.into())
                .field_str("r", &flag)
                .field_int("rq", a.revive_queue_id.into())
                .field_int("so", a.start_offset)
                .field_str("t", &a.topic)
                .end_object();
        }
        w.end_array().field_str("brokerName", &self.broker_name).end_object();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(ck: i64, offset: i64) -> PopReceipt {
        PopReceipt::parse(&format!("{ck} 1700000000000 60000 3 0 broker-a 1 {offset}")).unwrap()
    }

    #[test]
    fn bits_are_java_bitset_bytes() {
        let mut a = BatchAck::for_checkpoint("G", "T", &receipt(0, 0));
        for off in [0, 2, 4, 6] {
            assert!(a.set(off));
        }
        // The body checked against the 5.3.3 broker in docs/pop.md: "VQ==" acks 0, 2, 4, 6.
        assert_eq!(STANDARD.encode(&a.bits), "VQ==");
        assert!(a.set(9));
        assert_eq!(a.bits, [0x55, 0x02]);
        assert_eq!(a.offsets().collect::<Vec<_>>(), [0, 2, 4, 6, 9]);
        assert_eq!(a.count(), 5);
        assert!(!a.set(-1), "before the checkpoint");
        assert!(!a.set(MAX_BATCH_ACK_INDEX + 1), "too far past it");
        assert!(a.set(MAX_BATCH_ACK_INDEX));
        assert_eq!(a.bits.len(), 1024);
    }

    #[test]
    fn body_round_trips_with_java_keys() {
        let mut a = BatchAck::for_checkpoint("G", "T", &receipt(10, 12));
        assert!(a.same_checkpoint("T", &receipt(10, 11)));
        assert!(!a.same_checkpoint("T", &receipt(11, 12)));
        assert!(!a.same_checkpoint("U", &receipt(10, 12)));
        a.set(12);
        let body = BatchAckMessageRequestBody { broker_name: "broker-a".into(), acks: vec![a] };
        let json = String::from_utf8(body.encode().to_vec()).unwrap();
        assert_eq!(
            json,
            r#"{"acks":[{"b":"BA==","c":"G","it":60000,"pt":1700000000000,"q":1,"r":"0","rq":3,"so":10,"t":"T"}],"brokerName":"broker-a"}"#
        );
        assert_eq!(BatchAckMessageRequestBody::decode(json.as_bytes()).unwrap(), body);
        let long = br#"{"brokerName":"b","acks":[{"consumerGroup":"G","topic":"T","retry":"1","startOffset":5,"queueId":2,"reviveQueueId":7,"popTime":9,"invisibleTime":8,"bitSet":"Aw=="}]}"#;
        let d = BatchAckMessageRequestBody::decode(long).unwrap();
        assert_eq!(d.acks[0].retry, RetryFlag::RetryV1);
        assert_eq!(d.acks[0].offsets().collect::<Vec<_>>(), [5, 6]);
        let r: Vec<String> = d.acks[0].receipts("b").map(|r| r.to_string()).collect();
        assert_eq!(r, ["5 9 8 7 1 b 2 5", "5 9 8 7 1 b 2 6"]);
        assert_eq!((d.acks[0].queue_id, d.acks[0].revive_queue_id, d.acks[0].pop_time), (2, 7, 9));
    }

    #[test]
    fn bad_entries_are_typed_errors() {
        for bad in [
            &br#"{"acks":[{"b":"not base64!"}]}"#[..],
            br#"{"acks":[{"b":5}]}"#,
            br#"{"acks":[{"r":"7"}]}"#,
            br#"{"acks":[3]}"#,
            br#"{"acks":{}}"#,
        ] {
            assert!(BatchAckMessageRequestBody::decode(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(BatchAckMessageRequestBody::decode(b"{}").unwrap().acks, []);
    }
}
