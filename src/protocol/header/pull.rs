//! PULL_MESSAGE (11) headers and sys flags (PROTOCOL.md §8).

use crate::protocol::ext::{command_header, name_enum};

name_enum! {
    /// Subscription expression language (`ExpressionType.java`).
    #[derive(Default)]
    pub enum ExpressionType {
        /// Tags joined by `||`, or `*`.
        #[default]
        Tag = "TAG",
        /// An SQL92 predicate over properties; needs `enablePropertyFilter=true` on the broker.
        Sql92 = "SQL92",
    }
}

/// Bits of the pull request `sysFlag` (`PullSysFlag.java`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PullSysFlag(pub i32);

impl PullSysFlag {
    /// 0x1: the broker should store `commitOffset` for the group.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// 0x2: the broker may hold the request (long polling) when nothing is there.
    pub const SUSPEND: i32 = 0x2;
    /// 0x4: `subscription` and `expressionType` in this request define the filter.
    pub const SUBSCRIPTION: i32 = 0x4;
    /// 0x8: obsolete class filter.
    pub const CLASS_FILTER: i32 = 0x8;
    /// 0x10: lite pull (code 361).
    pub const LITE_PULL: i32 = 0x10;

    /// Build from the three flags a push consumer uses.
    pub fn build(commit_offset: bool, suspend: bool, subscription: bool) -> Self {
        let mut f = 0;
        if commit_offset {
            f |= Self::COMMIT_OFFSET;
        }
        if suspend {
            f |= Self::SUSPEND;
        }
        if subscription {
            f |= Self::SUBSCRIPTION;
        }
        Self(f)
    }

    /// True if every bit of `mask` is set.
    pub fn has(self, mask: i32) -> bool {
        self.0 & mask == mask
    }
}

command_header! {
    /// PULL_MESSAGE request header (`PullMessageRequestHeader`).
    pub struct PullMessageRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Topic, including `%RETRY%group`.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// Next consume-queue index to fetch.
        queue_offset: i64 = "queueOffset",
        /// Most messages to return (`pullBatchSize`).
        max_msg_nums: i32 = "maxMsgNums",
        /// [`PullSysFlag`] bits.
        sys_flag: i32 = "sysFlag",
        /// Offset to commit when `COMMIT_OFFSET` is set.
        commit_offset: i64 = "commitOffset",
        /// How long the broker may hold the request (15 000 ms in Java).
        suspend_timeout_millis: i64 = "suspendTimeoutMillis",
        /// Expression, sent only with the `SUBSCRIPTION` flag.
        subscription: Option<String> = "subscription",
        /// Subscription version, as sent in the heartbeat.
        sub_version: i64 = "subVersion",
        /// TAG or SQL92.
        expression_type: Option<ExpressionType> = "expressionType",
        /// 5.x: byte cap of the pull (`pullBatchSizeInBytes`).
        max_msg_bytes: Option<i32> = "maxMsgBytes",
        /// 5.x base field: broker name.
        bname: Option<String> = "bname",
    }
}

command_header! {
    /// PULL_MESSAGE response header (`PullMessageResponseHeader`).
    pub struct PullMessageResponseHeader {
        /// Broker id to pull from next (0 = master).
        suggest_which_broker_id: i64 = "suggestWhichBrokerId",
        /// Next `queueOffset` to request.
        next_begin_offset: i64 = "nextBeginOffset",
        /// The queue's min offset.
        min_offset: i64 = "minOffset",
        /// The queue's max offset (one past the last message).
        max_offset: i64 = "maxOffset",
        /// 5.x static topics: add to each message's queue offset.
        offset_delta: Option<i64> = "offsetDelta",
        /// 5.x.
        topic_sys_flag: Option<i32> = "topicSysFlag",
        /// 5.x.
        group_sys_flag: Option<i32> = "groupSysFlag",
        /// 5.x, with NO_PERMISSION.
        forbidden_type: Option<i32> = "forbiddenType",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ext::{CommandHeader, ExtFields};

    #[test]
    fn pull_header_keys_are_java_names() {
        let h = PullMessageRequestHeader {
            consumer_group: "g".into(),
            topic: "T".into(),
            queue_id: 3,
            queue_offset: 100,
            max_msg_nums: 32,
            sys_flag: PullSysFlag::build(true, true, false).0,
            commit_offset: 90,
            suspend_timeout_millis: 15_000,
            subscription: None,
            sub_version: 1_700_000_000_000,
            expression_type: Some(ExpressionType::Tag),
            max_msg_bytes: None,
            bname: Some("broker-a".into()),
        };
        let mut ext = ExtFields::new();
        h.write_to(&mut ext);
        assert_eq!(ext.get("sysFlag"), Some("3"));
        assert_eq!(ext.get("expressionType"), Some("TAG"));
        assert_eq!(ext.get("subscription"), None);
        assert_eq!(ext.get("suspendTimeoutMillis"), Some("15000"));
        assert_eq!(PullMessageRequestHeader::read_from(&ext).unwrap(), h);
        assert_eq!(ExpressionType::from_java_name("sql92"), Some(ExpressionType::Sql92));
    }
}
