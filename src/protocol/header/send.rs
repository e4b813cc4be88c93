//! SEND_MESSAGE_V2 (310) and CONSUMER_SEND_MSG_BACK (36) headers (PROTOCOL.md §10, §11).

use crate::protocol::ext::command_header;

command_header! {
    /// SEND_MESSAGE_V2 request: Java's V1 fields under one-letter keys.
    pub struct SendMessageRequestHeaderV2 {
        /// `producerGroup`.
        producer_group: String = "a",
        /// `topic`.
        topic: String = "b",
        /// `defaultTopic`, "TBW102".
        default_topic: String = "c",
        /// `defaultTopicQueueNums`, 4 in Java.
        default_topic_queue_nums: i32 = "d",
        /// `queueId`.
        queue_id: i32 = "e",
        /// `sysFlag`: compression and transaction bits.
        sys_flag: i32 = "f",
        /// `bornTimestamp`, ms.
        born_timestamp: i64 = "g",
        /// `flag`: the user flag.
        flag: i32 = "h",
        /// `properties`, in the stored-message encoding.
        properties: Option<String> = "i",
        /// `reconsumeTimes`.
        reconsume_times: Option<i32> = "j",
        /// `unitMode`.
        unit_mode: Option<bool> = "k",
        /// `maxReconsumeTimes`.
        max_reconsume_times: Option<i32> = "l",
        /// `batch`.
        batch: Option<bool> = "m",
        /// `brokerName`.
        broker_name: Option<String> = "n",
    }
}

command_header! {
    /// Send response.
    pub struct SendMessageResponseHeader {
        /// Offset message id(s), comma-separated for batches.
        msg_id: String = "msgId",
        /// Queue the message went to.
        queue_id: i32 = "queueId",
        /// Its queue offset (the first, for batches).
        queue_offset: i64 = "queueOffset",
        /// Transaction id.
        transaction_id: Option<String> = "transactionId",
        /// 5.x.
        batch_uniq_id: Option<String> = "batchUniqId",
    }
}

command_header! {
    /// CONSUMER_SEND_MSG_BACK request.
    pub struct ConsumerSendMsgBackRequestHeader {
        /// The message's commit-log offset.
        offset: i64 = "offset",
        /// Consumer group.
        group: String = "group",
        /// Delay level: -1 = straight to the DLQ, 0 = broker picks 3 + reconsumeTimes.
        delay_level: i32 = "delayLevel",
        /// The message id (UNIQ_KEY if present).
        origin_msg_id: Option<String> = "originMsgId",
        /// The original topic.
        origin_topic: Option<String> = "originTopic",
        /// Unit mode (Java always sends it; optional when reading).
        unit_mode: Option<bool> = "unitMode",
        /// The consumer's max reconsume times.
        max_reconsume_times: Option<i32> = "maxReconsumeTimes",
        /// 5.x base field.
        bname: Option<String> = "bname",
    }
}
