//! POP headers (5.x): POP_MESSAGE (200050), ACK_MESSAGE (200051) and CHANGE_MESSAGE_INVISIBLETIME
//! (200053). Field names and which are required follow the Java classes of the same names; the
//! fact sheet is `docs/pop.md` §2.

use crate::protocol::ext::command_header;
use crate::protocol::header::ExpressionType;

/// Where a pop starts in a queue the group has no offset for (`ConsumeInitMode.java`). Java
/// derives it from `ConsumeFromWhere`: first offset → MIN, anything else → MAX.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConsumeInitMode {
    /// The queue's min offset (wire value 0).
    Min = 0,
    /// The queue's last message (wire value 1).
    Max = 1,
}

impl ConsumeInitMode {
    /// The wire value of `initMode`.
    pub fn value(self) -> i32 {
        self as i32
    }
}

command_header! {
    /// POP_MESSAGE request (`PopMessageRequestHeader`).
    pub struct PopMessageRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// The subscribed topic (never the retry topic: the broker reads that one itself).
        topic: String = "topic",
        /// Queue id; -1 pops from every read queue of the topic on that broker.
        queue_id: i32 = "queueId",
        /// Most messages to return: 1..=32 (`popBatchNums`, default 32).
        max_msg_nums: i32 = "maxMsgNums",
        /// How long popped messages stay invisible to others, ms (`popInvisibleTime`, 60 000).
        invisible_time: i64 = "invisibleTime",
        /// How long the broker may hold the pop when nothing is there, ms (15 000 in Java).
        poll_time: i64 = "pollTime",
        /// Client clock at sending, ms; the broker uses its own for 0.
        born_time: i64 = "bornTime",
        /// [`ConsumeInitMode::value`].
        init_mode: i32 = "initMode",
        /// TAG or SQL92.
        exp_type: Option<ExpressionType> = "expType",
        /// Subscription expression.
        exp: Option<String> = "exp",
        /// Orderly pop.
        order: Option<bool> = "order",
        /// Orderly pop only: the attempt this pop retries.
        attempt_id: Option<String> = "attemptId",
        /// 5.x base field: broker name.
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// POP_MESSAGE response (`PopMessageResponseHeader`). The broker fills the numbers on every
    /// answer, found or not.
    pub struct PopMessageResponseHeader {
        /// Broker clock when the pop started, ms.
        pop_time: i64 = "popTime",
        /// The invisible time the pop asked for, ms.
        invisible_time: i64 = "invisibleTime",
        /// Revive queue of the checkpoint; 999 for an orderly pop.
        revive_qid: i32 = "reviveQid",
        /// Messages left behind the ones returned, summed over the queues visited.
        rest_num: i64 = "restNum",
        /// Checkpoint start offset per queue: `"{retry} {queueId} {offset};..."`.
        start_offset_info: Option<String> = "startOffsetInfo",
        /// Returned offsets per queue: `"{retry} {queueId} {o1},{o2};..."`.
        msg_offset_info: Option<String> = "msgOffsetInfo",
        /// Orderly pop only: how often each queue's messages were popped.
        order_count_info: Option<String> = "orderCountInfo",
    }
}

command_header! {
    /// ACK_MESSAGE request (`AckMessageRequestHeader`); the answer has no header.
    pub struct AckMessageRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// The topic the message was read from: the pop retry topic for a revived message.
        topic: String = "topic",
        /// Queue the message was read from.
        queue_id: i32 = "queueId",
        /// The message's receipt (`POP_CK`).
        extra_info: String = "extraInfo",
        /// The message's queue offset.
        offset: i64 = "offset",
        /// 5.x base field: broker name.
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME request (`ChangeInvisibleTimeRequestHeader`).
    pub struct ChangeInvisibleTimeRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// The topic the message was read from.
        topic: String = "topic",
        /// Queue the message was read from.
        queue_id: i32 = "queueId",
        /// The message's receipt (`POP_CK`).
        extra_info: String = "extraInfo",
        /// The message's queue offset.
        offset: i64 = "offset",
        /// New invisible time from now, ms.
        invisible_time: i64 = "invisibleTime",
        /// 5.x base field: broker name.
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME response (`ChangeInvisibleTimeResponseHeader`): the new
    /// checkpoint, from which a new receipt is built.
    pub struct ChangeInvisibleTimeResponseHeader {
        /// Broker clock of the new checkpoint, ms.
        pop_time: i64 = "popTime",
        /// Its invisible time, ms.
        invisible_time: i64 = "invisibleTime",
        /// Its revive queue.
        revive_qid: i32 = "reviveQid",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ext::{CommandHeader, ExtFields};

    #[test]
    fn pop_header_keys_are_java_names_and_optional_fields_are_left_out() {
        let h = PopMessageRequestHeader {
            consumer_group: "g".into(),
            topic: "T".into(),
            queue_id: -1,
            max_msg_nums: 32,
            invisible_time: 60_000,
            poll_time: 15_000,
            born_time: 1_700_000_000_000,
            init_mode: 0,
            exp_type: Some(ExpressionType::Tag),
            exp: Some("*".into()),
            order: None,
            attempt_id: None,
            bname: Some("broker-a".into()),
        };
        let mut ext = ExtFields::new();
        h.write_to(&mut ext);
        assert_eq!(ext.get("queueId"), Some("-1"));
        assert_eq!(ext.get("invisibleTime"), Some("60000"));
        assert_eq!(ext.get("expType"), Some("TAG"));
        assert_eq!(ext.get("order"), None);
        assert_eq!(PopMessageRequestHeader::read_from(&ext).unwrap(), h);
        assert_eq!(ConsumeInitMode::Max.value(), 1);
    }

    #[test]
    fn a_pop_answer_without_info_strings_still_reads() {
        // What the broker's early error paths send: the numbers as "0", no info strings.
        let mut ext = ExtFields::new();
        for k in ["popTime", "invisibleTime", "reviveQid", "restNum"] {
            ext.insert(k, "0");
        }
        let h = PopMessageResponseHeader::read_from(&ext).unwrap();
        assert_eq!((h.rest_num, h.start_offset_info), (0, None));
        ext.remove("reviveQid");
        assert!(PopMessageResponseHeader::read_from(&ext).is_err(), "a required number is missing");
    }
}
