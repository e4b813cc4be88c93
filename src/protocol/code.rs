//! Request and response codes (`RequestCode.java`, `ResponseCode.java`, `RemotingSysResponseCode.java`).
//!
//! Only the codes a push consumer, its fallback producer, the tests and `rmqcat` use are named.
//! Any other code still travels as a plain `i32` in [`RemotingCommand::code`](super::RemotingCommand).

use std::fmt;

macro_rules! codes {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $value:expr, $java:literal;)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vmeta])* $variant = $value,)*
        }

        impl $name {
            /// Every named code, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)*];

            /// The code for a wire value, if named here.
            pub fn from_i32(value: i32) -> Option<Self> {
                match value {
                    $($value => Some(Self::$variant),)*
                    _ => None,
                }
            }

            /// The Java constant name, e.g. `PULL_MESSAGE`.
            pub fn java_name(self) -> &'static str {
                match self {
                    $(Self::$variant => $java,)*
                }
            }
        }

        impl NamedCode for $name {
            fn from_i32(value: i32) -> Option<Self> {
                Self::from_i32(value)
            }
            fn value(self) -> i32 {
                self as i32
            }
            fn java_name(self) -> &'static str {
                Self::java_name(self)
            }
        }
    };
}

codes! {
    /// Request codes.
    RequestCode {
        /// 10: send with the V1 header.
        SendMessage = 10, "SEND_MESSAGE";
        /// 11: pull messages from a queue (long polling).
        PullMessage = 11, "PULL_MESSAGE";
        /// 14: read a group's committed offset.
        QueryConsumerOffset = 14, "QUERY_CONSUMER_OFFSET";
        /// 15: commit a group's offset (oneway in Java).
        UpdateConsumerOffset = 15, "UPDATE_CONSUMER_OFFSET";
        /// 17: create or update a topic on a broker.
        UpdateAndCreateTopic = 17, "UPDATE_AND_CREATE_TOPIC";
        /// 29: queue offset of the first message stored at or after a timestamp.
        SearchOffsetByTimestamp = 29, "SEARCH_OFFSET_BY_TIMESTAMP";
        /// 30: a queue's max offset.
        GetMaxOffset = 30, "GET_MAX_OFFSET";
        /// 31: a queue's min offset.
        GetMinOffset = 31, "GET_MIN_OFFSET";
        /// 34: register the client's groups and subscriptions.
        HeartBeat = 34, "HEART_BEAT";
        /// 35: unregister a client's group.
        UnregisterClient = 35, "UNREGISTER_CLIENT";
        /// 36: send a failed message back for a later retry.
        ConsumerSendMsgBack = 36, "CONSUMER_SEND_MSG_BACK";
        /// 38: the ids of a group's live consumers.
        GetConsumerListByGroup = 38, "GET_CONSUMER_LIST_BY_GROUP";
        /// 40: broker → client, oneway: the group's membership changed.
        NotifyConsumerIdsChanged = 40, "NOTIFY_CONSUMER_IDS_CHANGED";
        /// 41: lock queues for orderly consumption.
        LockBatchMq = 41, "LOCK_BATCH_MQ";
        /// 42: unlock queues.
        UnlockBatchMq = 42, "UNLOCK_BATCH_MQ";
        /// 46: can the broker run a subscription's filter (sent for SQL92 at start).
        CheckClientConfig = 46, "CHECK_CLIENT_CONFIG";
        /// 105: name server: a topic's route.
        GetRouteInfoByTopic = 105, "GET_ROUTEINFO_BY_TOPIC";
        /// 106: name server: the cluster's brokers.
        GetBrokerClusterInfo = 106, "GET_BROKER_CLUSTER_INFO";
        /// 200: create or update a subscription group on a broker.
        UpdateAndCreateSubscriptionGroup = 200, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP";
        /// 208: a group's progress per queue on a broker (admin tools' "consumer progress").
        GetConsumeStats = 208, "GET_CONSUME_STATS";
        /// 220: broker → client, oneway: reset the group's offsets.
        ResetConsumerClientOffset = 220, "RESET_CONSUMER_CLIENT_OFFSET";
        /// 222: admin → broker: reset a group's offsets (5.x: on the broker, per queue or by
        /// time; 4.9: by time, through RESET_CONSUMER_CLIENT_OFFSET to the online consumers).
        InvokeBrokerToResetOffset = 222, "INVOKE_BROKER_TO_RESET_OFFSET";
        /// 221: broker → client: report offsets (deprecated path).
        GetConsumerStatusFromClient = 221, "GET_CONSUMER_STATUS_FROM_CLIENT";
        /// 307: broker → client: report running info.
        GetConsumerRunningInfo = 307, "GET_CONSUMER_RUNNING_INFO";
        /// 309: broker → client: consume one message now and report.
        ConsumeMessageDirectly = 309, "CONSUME_MESSAGE_DIRECTLY";
        /// 310: send with the short-named V2 header.
        SendMessageV2 = 310, "SEND_MESSAGE_V2";
        /// 320: send a batch with the V2 header.
        SendBatchMessage = 320, "SEND_BATCH_MESSAGE";
        /// 400 (5.x): the broker's assignment of a topic's queues to this client, with each
        /// queue's mode (PULL or POP).
        QueryAssignment = 400, "QUERY_ASSIGNMENT";
        /// 401 (5.x): admin → broker: switch a group's mode on a topic (`mqadmin setConsumeMode`).
        SetMessageRequestMode = 401, "SET_MESSAGE_REQUEST_MODE";
        /// 200050 (5.x): pop messages, which stay invisible to others until acked or expired.
        PopMessage = 200050, "POP_MESSAGE";
        /// 200051 (5.x): ack one popped message.
        AckMessage = 200051, "ACK_MESSAGE";
        /// 200053 (5.x): make a popped message visible again after a new invisible time.
        ChangeMessageInvisibleTime = 200053, "CHANGE_MESSAGE_INVISIBLETIME";
        /// 200151 (5.x): ack many popped messages, as bit sets per checkpoint.
        BatchAckMessage = 200151, "BATCH_ACK_MESSAGE";
    }
}

codes! {
    /// Response codes.
    ResponseCode {
        /// 0.
        Success = 0, "SUCCESS";
        /// 1.
        SystemError = 1, "SYSTEM_ERROR";
        /// 2.
        SystemBusy = 2, "SYSTEM_BUSY";
        /// 3.
        RequestCodeNotSupported = 3, "REQUEST_CODE_NOT_SUPPORTED";
        /// 10: a send succeeded but the flush timed out.
        FlushDiskTimeout = 10, "FLUSH_DISK_TIMEOUT";
        /// 11: a send succeeded but no slave is available.
        SlaveNotAvailable = 11, "SLAVE_NOT_AVAILABLE";
        /// 12: a send succeeded but the slave flush timed out.
        FlushSlaveTimeout = 12, "FLUSH_SLAVE_TIMEOUT";
        /// 13.
        MessageIllegal = 13, "MESSAGE_ILLEGAL";
        /// 14.
        ServiceNotAvailable = 14, "SERVICE_NOT_AVAILABLE";
        /// 15.
        VersionNotSupported = 15, "VERSION_NOT_SUPPORTED";
        /// 16.
        NoPermission = 16, "NO_PERMISSION";
        /// 17.
        TopicNotExist = 17, "TOPIC_NOT_EXIST";
        /// 18.
        TopicExistAlready = 18, "TOPIC_EXIST_ALREADY";
        /// 19: pull found nothing new (after the long-poll hold).
        PullNotFound = 19, "PULL_NOT_FOUND";
        /// 20: pull found nothing that matched the filter.
        PullRetryImmediately = 20, "PULL_RETRY_IMMEDIATELY";
        /// 21: the pull offset is out of range.
        PullOffsetMoved = 21, "PULL_OFFSET_MOVED";
        /// 22: no committed offset.
        QueryNotFound = 22, "QUERY_NOT_FOUND";
        /// 23.
        SubscriptionParseFailed = 23, "SUBSCRIPTION_PARSE_FAILED";
        /// 24: the broker has no subscription for the group (no heartbeat yet).
        SubscriptionNotExist = 24, "SUBSCRIPTION_NOT_EXIST";
        /// 25: the pull's subVersion is newer than the broker's.
        SubscriptionNotLatest = 25, "SUBSCRIPTION_NOT_LATEST";
        /// 26.
        SubscriptionGroupNotExist = 26, "SUBSCRIPTION_GROUP_NOT_EXIST";
        /// 27.
        FilterDataNotExist = 27, "FILTER_DATA_NOT_EXIST";
        /// 28.
        FilterDataNotLatest = 28, "FILTER_DATA_NOT_LATEST";
        /// 29.
        InvalidParameter = 29, "INVALID_PARAMETER";
        /// 206.
        ConsumerNotOnline = 206, "CONSUMER_NOT_ONLINE";
        /// 207.
        ConsumeMsgTimeout = 207, "CONSUME_MSG_TIMEOUT";
        /// 208 (5.x): also the answer to an ack whose offset is no longer in the queue.
        NoMessage = 208, "NO_MESSAGE";
        /// 209 (5.x): the broker's table of held pops is full; pop again later.
        PollingFull = 209, "POLLING_FULL";
        /// 210 (5.x): a pop found nothing before its hold ended; pop again at once.
        PollingTimeout = 210, "POLLING_TIMEOUT";
        /// 215 (5.x): retry the pull after 20 ms.
        FlowControl = 215, "FLOW_CONTROL";
        /// 501.
        NotLeaderForQueue = 501, "NOT_LEADER_FOR_QUEUE";
        /// 604.
        IllegalOperation = 604, "ILLEGAL_OPERATION";
        /// 1500 (5.3.1+): the server is shutting down; go elsewhere.
        GoAway = 1500, "GO_AWAY";
    }
}

/// A code type with Java names: [`RequestCode`] or [`ResponseCode`].
pub trait NamedCode: Copy + fmt::Debug + PartialEq + Eq + std::hash::Hash {
    /// The named code for a wire value.
    fn from_i32(value: i32) -> Option<Self>;
    /// The wire value.
    fn value(self) -> i32;
    /// The Java constant name.
    fn java_name(self) -> &'static str;
}

/// A code as it came off the wire: named when this crate knows it, else the raw value. Peers
/// may send any code; events carry this instead of a bare `i32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code<T> {
    /// A code this crate names.
    Known(T),
    /// Any other value.
    Unknown(i32),
}

impl<T: NamedCode> Code<T> {
    /// Classify a wire value.
    pub fn from_i32(value: i32) -> Self {
        T::from_i32(value).map_or(Self::Unknown(value), Self::Known)
    }

    /// The wire value.
    pub fn value(self) -> i32 {
        match self {
            Self::Known(c) => c.value(),
            Self::Unknown(v) => v,
        }
    }

    /// The named code, if any.
    pub fn known(self) -> Option<T> {
        match self {
            Self::Known(c) => Some(c),
            Self::Unknown(_) => None,
        }
    }
}

impl<T: NamedCode> From<T> for Code<T> {
    fn from(c: T) -> Self {
        Self::Known(c)
    }
}

impl<T: NamedCode> PartialEq<T> for Code<T> {
    fn eq(&self, other: &T) -> bool {
        *self == Self::Known(*other)
    }
}

impl<T: NamedCode> fmt::Display for Code<T> {
    /// `PULL_NOT_FOUND (19)`, or the bare value when unnamed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Known(c) => write!(f, "{} ({})", c.java_name(), c.value()),
            Self::Unknown(v) => write!(f, "{v}"),
        }
    }
}

impl ResponseCode {
    /// Codes a send treats as stored (`SendStatus` other than an error).
    pub fn is_send_ok(code: i32) -> bool {
        matches!(
            Self::from_i32(code),
            Some(Self::Success | Self::FlushDiskTimeout | Self::FlushSlaveTimeout | Self::SlaveNotAvailable)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_java() {
        assert_eq!(RequestCode::PullMessage as i32, 11);
        assert_eq!(RequestCode::from_i32(310), Some(RequestCode::SendMessageV2));
        assert_eq!(RequestCode::from_i32(9999), None);
        assert_eq!(ResponseCode::from_i32(21), Some(ResponseCode::PullOffsetMoved));
        assert_eq!(ResponseCode::GoAway.java_name(), "GO_AWAY");
        assert_eq!(RequestCode::from_i32(200_050), Some(RequestCode::PopMessage));
        assert_eq!(RequestCode::BatchAckMessage as i32, 200_151);
        assert_eq!(ResponseCode::from_i32(210), Some(ResponseCode::PollingTimeout));
        assert!(ResponseCode::is_send_ok(11));
        assert!(!ResponseCode::is_send_ok(14));
        for c in RequestCode::ALL {
            assert_eq!(RequestCode::from_i32(*c as i32), Some(*c));
        }
        for c in ResponseCode::ALL {
            assert_eq!(ResponseCode::from_i32(*c as i32), Some(*c));
        }
    }

    #[test]
    fn unnamed_codes_keep_their_value() {
        let c = Code::<ResponseCode>::from_i32(19);
        assert_eq!(c, ResponseCode::PullNotFound);
        assert_eq!(c.to_string(), "PULL_NOT_FOUND (19)");
        let u = Code::<ResponseCode>::from_i32(4242);
        assert_eq!((u.known(), u.value(), u.to_string()), (None, 4242, "4242".to_owned()));
    }
}
