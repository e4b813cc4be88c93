//! Name-server and admin headers: GET_ROUTEINFO_BY_TOPIC (105), UPDATE_AND_CREATE_TOPIC (17),
//! GET_CONSUME_STATS (208).

use crate::protocol::ext::command_header;

command_header! {
    /// GET_ROUTEINFO_BY_TOPIC request.
    pub struct GetRouteInfoRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Ask for standard JSON (quoted integer keys) whatever our version.
        accept_standard_json_only: Option<bool> = "acceptStandardJsonOnly",
    }
}

command_header! {
    /// GET_CONSUME_STATS request, sent to a broker.
    pub struct GetConsumeStatsRequestHeader {
        /// Group.
        consumer_group: String = "consumerGroup",
        /// One topic; absent: every topic the broker holds offsets of the group for.
        topic: Option<String> = "topic",
    }
}

command_header! {
    /// UPDATE_AND_CREATE_TOPIC request, sent to a broker.
    pub struct CreateTopicRequestHeader {
        /// Topic name, `^[%|a-zA-Z0-9_-]+$`, at most 127 characters.
        topic: String = "topic",
        /// Unused by the broker but required: "TBW102".
        default_topic: String = "defaultTopic",
        /// Read queues.
        read_queue_nums: i32 = "readQueueNums",
        /// Write queues.
        write_queue_nums: i32 = "writeQueueNums",
        /// Permission bits: 6 = read | write.
        perm: i32 = "perm",
        /// `SINGLE_TAG` or `MULTI_TAG`.
        topic_filter_type: String = "topicFilterType",
        /// Topic sys flag.
        topic_sys_flag: Option<i32> = "topicSysFlag",
        /// Ordered topic.
        order: Option<bool> = "order",
        /// 5.x attributes, e.g. `+message.type=NORMAL`.
        attributes: Option<String> = "attributes",
    }
}

impl CreateTopicRequestHeader {
    /// A read/write topic with `queues` queues.
    pub fn new(topic: impl Into<String>, queues: i32) -> Self {
        Self {
            topic: topic.into(),
            default_topic: "TBW102".into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".into(),
            topic_sys_flag: Some(0),
            order: Some(false),
            attributes: None,
        }
    }
}
