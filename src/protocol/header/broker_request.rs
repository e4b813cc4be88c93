//! Headers of requests a broker sends to its clients (PROTOCOL.md §5.3, §6.11).

use crate::protocol::ext::command_header;

command_header! {
    /// NOTIFY_CONSUMER_IDS_CHANGED (40), oneway.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        /// Group whose membership changed.
        consumer_group: String = "consumerGroup",
    }
}

command_header! {
    /// RESET_CONSUMER_CLIENT_OFFSET (220), oneway; the offsets are in the body.
    pub struct ResetOffsetRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Group.
        group: String = "group",
        /// Timestamp the offsets were searched for.
        timestamp: i64 = "timestamp",
        /// Force (the key is literally `isForce`).
        is_force: bool = "isForce",
        /// 5.x: a single queue, -1 for all.
        queue_id: Option<i32> = "queueId",
        /// 5.x: the offset for `queue_id`.
        offset: Option<i64> = "offset",
    }
}

command_header! {
    /// GET_CONSUMER_STATUS_FROM_CLIENT (221).
    pub struct GetConsumerStatusRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Group.
        group: String = "group",
        /// Client address.
        client_addr: Option<String> = "clientAddr",
    }
}

command_header! {
    /// GET_CONSUMER_RUNNING_INFO (307).
    pub struct GetConsumerRunningInfoRequestHeader {
        /// Group.
        consumer_group: String = "consumerGroup",
        /// Client id.
        client_id: String = "clientId",
        /// Ask for a thread dump (ignored: there is no JVM).
        jstack_enable: Option<bool> = "jstackEnable",
    }
}

command_header! {
    /// CONSUME_MESSAGE_DIRECTLY (309); the body is one stored message.
    pub struct ConsumeMessageDirectlyResultRequestHeader {
        /// Group.
        consumer_group: String = "consumerGroup",
        /// Client id.
        client_id: Option<String> = "clientId",
        /// Message id.
        msg_id: Option<String> = "msgId",
        /// Broker name.
        broker_name: Option<String> = "brokerName",
        /// 5.x.
        topic: Option<String> = "topic",
        /// 5.x.
        topic_sys_flag: Option<i32> = "topicSysFlag",
        /// 5.x.
        group_sys_flag: Option<i32> = "groupSysFlag",
    }
}
