//! Offset headers: QUERY/UPDATE_CONSUMER_OFFSET (14/15), GET_MAX/MIN_OFFSET (30/31),
//! SEARCH_OFFSET_BY_TIMESTAMP (29).

use crate::protocol::ext::{command_header, name_enum};

command_header! {
    /// QUERY_CONSUMER_OFFSET request.
    pub struct QueryConsumerOffsetRequestHeader {
        /// Group.
        consumer_group: String = "consumerGroup",
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// 5.x: when false the broker answers QUERY_NOT_FOUND rather than guessing 0.
        set_zero_if_not_found: Option<bool> = "setZeroIfNotFound",
        /// 5.x base field.
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// UPDATE_CONSUMER_OFFSET request.
    pub struct UpdateConsumerOffsetRequestHeader {
        /// Group.
        consumer_group: String = "consumerGroup",
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// The offset to store.
        commit_offset: i64 = "commitOffset",
        /// 5.x base field.
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_MAX_OFFSET request.
    pub struct GetMaxOffsetRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// 5.x: count only committed (replicated) messages; Java 5.x always sends true.
        committed: Option<bool> = "committed",
        /// 5.x base field.
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// GET_MIN_OFFSET request.
    pub struct GetMinOffsetRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// 5.x base field.
        bname: Option<String> = "bname",
    }
}

name_enum! {
    /// Which side of a timestamp a search picks (`BoundaryType.java`).
    #[derive(Default)]
    pub enum BoundaryType {
        /// First message stored at or after the timestamp (default).
        #[default]
        Lower = "LOWER",
        /// Last message stored at or before the timestamp.
        Upper = "UPPER",
    }
}

command_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP request.
    pub struct SearchOffsetRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// Milliseconds since the epoch.
        timestamp: i64 = "timestamp",
        /// 5.x.
        boundary_type: Option<BoundaryType> = "boundaryType",
        /// 5.x base field.
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// The answer to QUERY_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP.
    pub struct OffsetResponseHeader {
        /// The offset.
        offset: i64 = "offset",
    }
}
