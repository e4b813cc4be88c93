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
#[doc(hidden)]
pub mod fuzzing;
pub mod json;
pub mod message;
pub mod producer;
pub mod protocol;

pub use client_id::ClientId;
pub use codec::{DecodeError, RemotingCodec};
pub use message::{Message, MessageExt, MessageQueue};
pub use protocol::{RemotingCommand, RequestCode, ResponseCode};
