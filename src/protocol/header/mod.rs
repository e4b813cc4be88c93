//! Typed request and response headers, one declaration per Java `CommandCustomHeader`.
//!
//! Field names are the Java keys (PROTOCOL.md §6, §8, §10, §11). `bname` is the 5.x base field
//! `RpcRequestHeader.brokerName`, which the Java 5.x client sets and 4.9.x brokers ignore.

mod admin;
mod broker_request;
mod client;
mod offset;
mod pop;
mod pull;
mod send;

pub use admin::{CreateTopicRequestHeader, GetConsumeStatsRequestHeader, GetRouteInfoRequestHeader};
pub use broker_request::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader, NotifyConsumerIdsChangedRequestHeader, ResetOffsetRequestHeader,
};
pub use client::{GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader};
pub use offset::{
    BoundaryType, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
pub use pop::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    ConsumeInitMode, PopMessageRequestHeader, PopMessageResponseHeader,
};
pub use pull::{ExpressionType, PullMessageRequestHeader, PullMessageResponseHeader, PullSysFlag};
pub use send::{ConsumerSendMsgBackRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader};
