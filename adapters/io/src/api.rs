//! The types a user of any adapter names: what its builder, listener and events take and give.
//! Each adapter re-exports this module whole (`pub use rocketmq_push_io::api::*`), so the list
//! exists once and no adapter can forget a type its own builder accepts.

pub use rocketmq_push_core::{
    AllocateStrategy, ClientId, Command, ConfigError, ConsumeContext, ConsumeFromWhere, ConsumeMode,
    ConsumeResult, ConsumeStatus, ConsumerConfigBuilder, DisconnectReason, Event, Message, MessageExt,
    MessageModel, MessageQueue, Messages, QueueSelector, QueueSnapshot, SeekTo, Stats, TopicStats,
    UsageError,
};

pub use crate::run::Snapshot;
pub use crate::{ConsumeHook, HookContext, HookOutcome};
pub use crate::{ListenerOutput, StartError};
#[cfg(feature = "tls")]
pub use crate::{Tls, TlsError};
