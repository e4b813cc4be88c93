//! POP receipts: the `extraInfo` string that names one popped message to the broker
//! (`ExtraInfoUtil.java`), and the offset lists of a POP_MESSAGE answer from which the client
//! builds it (`docs/pop.md` §2, §3).
//!
//! A receipt is eight space-separated fields:
//! `{ckQueueOffset} {popTime} {invisibleTime} {reviveQid} {retry} {brokerName} {queueId} {offset}`.
//! The broker sets it itself (property `POP_CK`) on messages it revived from the pop retry topic;
//! for the others the client builds it from the answer's `startOffsetInfo` and `msgOffsetInfo`.

use std::fmt;

use crate::message::{MessageExt, keys};
use crate::producer::RETRY_TOPIC_PREFIX;
use crate::protocol::header::PopMessageResponseHeader;

/// Revive queue id the broker gives checkpoints of an orderly pop (`KeyBuilder.POP_ORDER_REVIVE_QUEUE`).
pub const POP_ORDER_REVIVE_QUEUE: i32 = 999;

/// Which topic a popped message was read from (`ExtraInfoUtil` retry flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RetryFlag {
    /// The subscribed topic (`0`).
    Normal,
    /// The pop retry topic `%RETRY%{group}_{topic}` (`1`).
    RetryV1,
    /// The pop retry topic `%RETRY%{group}+{topic}` (`2`, brokers with `enableRetryTopicV2`).
    RetryV2,
}

impl RetryFlag {
    /// The flag of a message read from `topic`.
    pub fn of_topic(topic: &str) -> Self {
        match topic.strip_prefix(RETRY_TOPIC_PREFIX) {
            None => Self::Normal,
            Some(rest) if rest.contains('+') => Self::RetryV2,
            Some(_) => Self::RetryV1,
        }
    }

    /// Read the flag's digit (`"0"`, `"1"` or `"2"`).
    pub fn from_digit(s: &str) -> Option<Self> {
        match s {
            "0" => Some(Self::Normal),
            "1" => Some(Self::RetryV1),
            "2" => Some(Self::RetryV2),
            _ => None,
        }
    }

    /// The flag's digit, as receipts and batch acks write it.
    pub fn digit(self) -> char {
        match self {
            Self::Normal => '0',
            Self::RetryV1 => '1',
            Self::RetryV2 => '2',
        }
    }

    /// The topic the message really sits in, from the subscribed `topic` (`getRealTopic`):
    /// what an ack must name.
    pub fn real_topic(self, topic: &str, group: &str) -> String {
        match self {
            Self::Normal => topic.to_owned(),
            Self::RetryV1 => format!("{RETRY_TOPIC_PREFIX}{group}_{topic}"),
            Self::RetryV2 => format!("{RETRY_TOPIC_PREFIX}{group}+{topic}"),
        }
    }
}

/// Why a receipt or an offset list could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiptError {
    /// A receipt without its eight fields.
    #[error("pop receipt {0:?}: expected 8 space-separated fields")]
    Fields(String),
    /// A field that should be a number or a retry flag is not.
    #[error("pop receipt {text:?}: field {field} is not valid")]
    Field {
        /// The receipt (truncated to 128 characters).
        text: String,
        /// Which field, by Java's getter name.
        field: &'static str,
    },
    /// An offset list entry that is not `"{retry} {queueId} {value}"`.
    #[error("{list}: entry {entry:?} is not \"{{retry}} {{queueId}} {{value}}\"")]
    Entry {
        /// `startOffsetInfo` or `msgOffsetInfo`.
        list: &'static str,
        /// The entry (truncated to 128 characters).
        entry: String,
    },
    /// A popped message the answer's offset lists do not cover.
    #[error("popped message {queue_id}@{offset}: not in the answer's {list}")]
    Unlisted {
        /// `startOffsetInfo` or `msgOffsetInfo`.
        list: &'static str,
        /// Its queue.
        queue_id: i32,
        /// Its offset.
        offset: i64,
    },
}

fn clip(s: &str) -> String {
    s.chars().take(128).collect()
}

/// One popped message's receipt (`extraInfo`, property `POP_CK`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PopReceipt {
    /// Start offset of the checkpoint the message belongs to.
    pub ck_queue_offset: i64,
    /// Broker clock when it was popped, ms.
    pub pop_time: i64,
    /// Invisible time of the pop, ms.
    pub invisible_time: i64,
    /// Revive queue of the checkpoint; [`POP_ORDER_REVIVE_QUEUE`] for an orderly pop.
    pub revive_qid: i32,
    /// Which topic the message was read from.
    pub retry: RetryFlag,
    /// Broker that popped it.
    pub broker_name: String,
    /// Queue it was read from (in the retry topic for a revived message).
    pub queue_id: i32,
    /// Its offset in that queue.
    pub queue_offset: i64,
}

impl PopReceipt {
    /// Read `extraInfo`. Java also writes a seven-field form for its own use, but every receipt
    /// on the wire has the offset appended.
    pub fn parse(text: &str) -> Result<Self, ReceiptError> {
        let fields: Vec<&str> = text.split(' ').collect();
        let [ck, pop, invisible, revive, retry, broker, queue, offset] = fields[..] else {
            return Err(ReceiptError::Fields(clip(text)));
        };
        let bad = |field| ReceiptError::Field { text: clip(text), field };
        Ok(Self {
            ck_queue_offset: ck.parse().map_err(|_| bad("ckQueueOffset"))?,
            pop_time: pop.parse().map_err(|_| bad("popTime"))?,
            invisible_time: invisible.parse().map_err(|_| bad("invisibleTime"))?,
            revive_qid: revive.parse().map_err(|_| bad("reviveQid"))?,
            retry: RetryFlag::from_digit(retry).ok_or_else(|| bad("retry"))?,
            broker_name: broker.to_owned(),
            queue_id: queue.parse().map_err(|_| bad("queueId"))?,
            queue_offset: offset.parse().map_err(|_| bad("queueOffset"))?,
        })
    }

    /// Broker time after which the message is visible again unless acked.
    pub fn visible_again_at(&self) -> i64 {
        self.pop_time.saturating_add(self.invisible_time)
    }

    /// Popped by an orderly pop.
    pub fn is_order(&self) -> bool {
        self.revive_qid == POP_ORDER_REVIVE_QUEUE
    }

    /// The receipt after CHANGE_MESSAGE_INVISIBLETIME answered with a new checkpoint: the
    /// message is its own checkpoint from then on (as Java builds it).
    pub fn renewed(&self, pop_time: i64, invisible_time: i64, revive_qid: i32) -> Self {
        Self { ck_queue_offset: self.queue_offset, pop_time, invisible_time, revive_qid, ..self.clone() }
    }
}

impl fmt::Display for PopReceipt {
    /// The wire form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} {} {} {} {}",
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry.digit(),
            self.broker_name,
            self.queue_id,
            self.queue_offset
        )
    }
}

/// Entries `"{retry} {queueId} {value}"` joined by `;`, as `startOffsetInfo` and `msgOffsetInfo`
/// carry them. Empty or absent lists have no entries.
fn entries<'a>(
    list: &'static str,
    text: Option<&'a str>,
) -> impl Iterator<Item = Result<(RetryFlag, i32, &'a str), ReceiptError>> + 'a {
    text.unwrap_or("").split(';').filter(|e| !e.is_empty()).map(move |entry| {
        let bad = || ReceiptError::Entry { list, entry: clip(entry) };
        let mut parts = entry.split(' ');
        let (Some(retry), Some(queue), Some(value), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let retry = RetryFlag::from_digit(retry).ok_or_else(bad)?;
        let queue = queue.parse().map_err(|_| bad())?;
        Ok((retry, queue, value))
    })
}

/// Build each popped message's receipt from a POP_MESSAGE answer, the way the Java client does
/// (`MQClientAPIImpl.processPopResponse`): a message the broker already gave a `POP_CK` (a
/// revived one) keeps it; the others get one from the answer's offset lists. Each message also
/// gets `POP_CK` and, if absent, `1ST_POP_TIME` as properties, and its topic becomes the
/// subscribed `topic` (a revived message arrives under it already; the receipt keeps where it
/// really came from).
///
/// Returns the receipts in message order; all or the first error ([`attach_receipts_each`]
/// keeps the messages that do get one).
pub fn attach_receipts(
    messages: &mut [MessageExt],
    header: &PopMessageResponseHeader,
    broker_name: &str,
    topic: &str,
) -> Result<Vec<PopReceipt>, ReceiptError> {
    attach_receipts_each(messages, header, broker_name, topic).into_iter().collect()
}

/// [`attach_receipts`], one result per message: a message whose `POP_CK` does not read (any
/// producer can set that property) gets one from the offset lists instead, and a message the
/// lists do not cover fails alone (it cannot be acked; it comes back after its invisible time).
pub fn attach_receipts_each(
    messages: &mut [MessageExt],
    header: &PopMessageResponseHeader,
    broker_name: &str,
    topic: &str,
) -> Vec<Result<PopReceipt, ReceiptError>> {
    let mut starts: Vec<(RetryFlag, i32, i64)> = Vec::new();
    let mut bad_lists = None;
    for e in entries("startOffsetInfo", header.start_offset_info.as_deref()) {
        let parsed = e.and_then(|(retry, queue, value)| {
            let offset = value
                .parse()
                .map_err(|_| ReceiptError::Entry { list: "startOffsetInfo", entry: clip(value) })?;
            Ok((retry, queue, offset))
        });
        match parsed {
            Ok(entry) => starts.push(entry),
            Err(e) => bad_lists = bad_lists.or(Some(e)),
        }
    }
    let mut listed: Vec<(RetryFlag, i32, &str)> = Vec::new();
    for e in entries("msgOffsetInfo", header.msg_offset_info.as_deref()) {
        match e {
            Ok(entry) => listed.push(entry),
            Err(e) => bad_lists = bad_lists.or(Some(e)),
        }
    }
    let topic: std::sync::Arc<str> = topic.into();
    let mut receipts = Vec::with_capacity(messages.len());
    // Position of each message among the answer's messages of the same queue: the index into
    // that queue's msgOffsetInfo list.
    let mut seen: Vec<(RetryFlag, i32, usize)> = Vec::new();
    for m in messages.iter_mut() {
        let given = m.properties.get(keys::POP_CK).map(PopReceipt::parse);
        let receipt = match given {
            Some(Ok(r)) => Ok(r),
            _ => {
                // Java keys by the retry flag of the receipt the message carries, else by its
                // topic; a receipt that does not read says nothing.
                let retry = RetryFlag::of_topic(&m.topic);
                let key = (retry, m.queue_id);
                let unlisted = |list| {
                    bad_lists.clone().unwrap_or(ReceiptError::Unlisted {
                        list,
                        queue_id: m.queue_id,
                        offset: m.queue_offset,
                    })
                };
                let index = match seen.iter_mut().find(|(r, q, _)| (*r, *q) == key) {
                    Some(slot) => {
                        slot.2 += 1;
                        slot.2
                    }
                    None => {
                        seen.push((retry, m.queue_id, 0));
                        0
                    }
                };
                let ck = starts.iter().find(|(r, q, _)| (*r, *q) == key).map(|e| e.2);
                let offsets = listed.iter().find(|(r, q, _)| (*r, *q) == key).map(|e| e.2);
                match (ck, offsets) {
                    (None, _) => Err(unlisted("startOffsetInfo")),
                    (Some(ck), offsets) => offsets
                        .and_then(|o| o.split(',').nth(index))
                        .and_then(|o| o.parse().ok())
                        .map(|offset| PopReceipt {
                            ck_queue_offset: ck,
                            pop_time: header.pop_time,
                            invisible_time: header.invisible_time,
                            revive_qid: header.revive_qid,
                            retry,
                            broker_name: broker_name.to_owned(),
                            queue_id: m.queue_id,
                            queue_offset: offset,
                        })
                        .ok_or_else(|| unlisted("msgOffsetInfo")),
                }
            }
        };
        if let Ok(r) = &receipt {
            let mut props = m.properties.with(keys::POP_CK, &r.to_string());
            if props.get(keys::FIRST_POP_TIME).is_none() {
                props = props.with(keys::FIRST_POP_TIME, &header.pop_time.to_string());
            }
            m.properties = props;
        }
        m.topic = topic.clone();
        receipts.push(receipt);
    }
    receipts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Properties;

    fn header(start: &str, offsets: &str) -> PopMessageResponseHeader {
        PopMessageResponseHeader {
            pop_time: 1_000,
            invisible_time: 60_000,
            revive_qid: 3,
            rest_num: 0,
            start_offset_info: Some(start.into()),
            msg_offset_info: Some(offsets.into()),
            order_count_info: None,
        }
    }

    fn msg(topic: &str, queue_id: i32, offset: i64) -> MessageExt {
        let mut m = MessageExt::new(topic, b"x".to_vec());
        (m.queue_id, m.queue_offset) = (queue_id, offset);
        m
    }

    #[test]
    fn receipts_round_trip_and_name_the_real_topic() {
        let text = "100 1700000000000 60000 3 1 broker-a 0 7";
        let r = PopReceipt::parse(text).unwrap();
        assert_eq!((r.ck_queue_offset, r.queue_id, r.queue_offset, r.retry), (100, 0, 7, RetryFlag::RetryV1));
        assert_eq!(r.to_string(), text);
        assert_eq!(r.retry.real_topic("T", "g"), "%RETRY%g_T");
        assert_eq!(RetryFlag::of_topic("%RETRY%g+T").real_topic("T", "g"), "%RETRY%g+T");
        assert_eq!(r.visible_again_at(), 1_700_000_060_000);
        let renewed = r.renewed(5, 10_000, 2);
        assert_eq!(renewed.to_string(), "7 5 10000 2 1 broker-a 0 7");
        for bad in ["", "1 2 3", "1 2 3 4 5 b 6 7 8", "x 2 3 4 0 b 6 7", "1 2 3 4 9 b 6 7"] {
            assert!(PopReceipt::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn receipts_follow_each_queues_list_in_answer_order() {
        let mut ms = vec![msg("T", 3, 100), msg("T", 1, 50), msg("T", 3, 101)];
        let h = header("0 3 100;0 1 48", "0 3 100,101;0 1 50");
        let rs = attach_receipts(&mut ms, &h, "broker-a", "T").unwrap();
        let texts: Vec<String> = rs.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "100 1000 60000 3 0 broker-a 3 100",
                "48 1000 60000 3 0 broker-a 1 50",
                "100 1000 60000 3 0 broker-a 3 101"
            ]
        );
        assert_eq!(ms[2].properties.get(keys::POP_CK), Some(texts[2].as_str()));
        assert_eq!(ms[0].properties.get(keys::FIRST_POP_TIME), Some("1000"));
    }

    #[test]
    fn a_revived_message_keeps_the_brokers_receipt_and_gets_the_subscribed_topic() {
        let ck = "7 900 60000 1 1 broker-a 0 7";
        let mut m = msg("T", 0, 7);
        m.properties = Properties::from_pairs([(keys::POP_CK, ck), (keys::FIRST_POP_TIME, "12")]);
        let mut ms = vec![m, msg("%RETRY%g_T", 0, 8)];
        let h = header("1 0 8", "1 0 8");
        let rs = attach_receipts(&mut ms, &h, "broker-a", "T").unwrap();
        assert_eq!(rs[0].to_string(), ck);
        assert_eq!(rs[1].retry, RetryFlag::RetryV1);
        assert_eq!(&*ms[1].topic, "T");
        assert_eq!(ms[0].properties.get(keys::FIRST_POP_TIME), Some("12"), "the first pop time is kept");
    }

    #[test]
    fn an_unreadable_pop_ck_is_rebuilt_from_the_lists_and_an_unlisted_message_fails_alone() {
        let mut bad = msg("T", 3, 100);
        bad.properties = Properties::from_pairs([(keys::POP_CK, "forged by a producer")]);
        let mut ms = vec![bad, msg("T", 3, 101), msg("T", 5, 7)];
        let rs = attach_receipts_each(&mut ms, &header("0 3 100", "0 3 100,101"), "b", "T");
        assert_eq!(rs[0].as_ref().unwrap().queue_offset, 100, "rebuilt from the lists");
        assert_eq!(rs[1].as_ref().unwrap().queue_offset, 101);
        assert_eq!(rs[2], Err(ReceiptError::Unlisted { list: "startOffsetInfo", queue_id: 5, offset: 7 }));
        assert_eq!(ms[0].properties.get(keys::POP_CK), Some("100 1000 60000 3 0 b 3 100"));
        assert_eq!(ms[2].properties.get(keys::POP_CK), None, "no receipt, no property");
    }

    #[test]
    fn answers_that_do_not_cover_their_messages_are_errors() {
        for (start, offsets) in
            [("", ""), ("0 3 100", ""), ("0 3 100", "0 3 "), ("0 3", "0 3 100"), ("0 3 x", "0 3 100")]
        {
            let mut ms = vec![msg("T", 3, 100)];
            assert!(
                attach_receipts(&mut ms, &header(start, offsets), "b", "T").is_err(),
                "{start:?} {offsets:?}"
            );
        }
        let mut two = vec![msg("T", 3, 100), msg("T", 3, 101)];
        let err = attach_receipts(&mut two, &header("0 3 100", "0 3 100"), "b", "T").unwrap_err();
        assert_eq!(err, ReceiptError::Unlisted { list: "msgOffsetInfo", queue_id: 3, offset: 101 });
    }
}
