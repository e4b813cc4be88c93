//! # rocketmq-push-core
//!
//! The sans-IO core of an Apache RocketMQ push consumer.
//!
//! This crate does no I/O. It never opens a socket, reads a clock, sleeps or spawns a thread; the
//! caller (an adapter for tokio, async-std or plain threads) moves bytes and time in and carries
//! actions out. Everything here is deterministic: the same inputs give the same outputs.
#![cfg_attr(not(fuzzing), warn(missing_docs))]

pub mod client_id;
pub mod codec;
pub mod config;
mod consumer;
mod error;
pub mod event;
#[doc(hidden)]
pub mod fuzzing;
pub mod json;
pub mod message;
mod namespace;
mod offset_store;
#[doc(hidden)]
pub mod process_queue;
pub mod producer;
pub mod protocol;
pub mod rebalance;
#[cfg(feature = "sim")]
pub mod sim;
mod stats;
mod timer;

pub use client_id::ClientId;
pub use codec::{DecodeError, RemotingCodec};
pub use config::{ConfigError, ConsumeMode, ConsumerConfig, ConsumerConfigBuilder, Subscription};
pub use consumer::{Consumer, QueueSnapshot};
pub use error::UsageError;
pub use event::{
    Action, Batch, BatchId, BatchKind, Command, ConsumeResult, ConsumeStatus, DisconnectReason, Event, Input,
    Messages, PeerAddr, Request, Transmit,
};
pub use message::{Message, MessageExt, MessageQueue};
pub use protocol::body::{ConsumeFromWhere, MessageModel};
pub use protocol::{RemotingCommand, RequestCode, ResponseCode};
pub use rebalance::AllocateStrategy;
pub use stats::Stats;
