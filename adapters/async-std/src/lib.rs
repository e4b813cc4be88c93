//! # rocketmq-push-async-std
//!
//! An Apache RocketMQ push consumer on async-std: the `rocketmq-push-core` state machine owned by
//! one task, a reader and a writer task per connection, and `consumeThreadMin` workers running the
//! listener (async, or blocking on the blocking pool). The run loop is `rocketmq-push-io`'s,
//! shared by every adapter; this crate supplies async-std's calls (`src/runtime.rs`).
//!
//! **async-std is discontinued upstream** (RUSTSEC-2025-0052) and recommends smol:
//! `rocketmq-push-smol` has the same API.
//!
//! ```no_run
//! use rocketmq_push_async_std::{ConsumeStatus, PushConsumer};
//!
//! # async fn run() -> Result<(), rocketmq_push_async_std::StartError> {
//! let consumer = PushConsumer::builder("my_group")
//!     .name_server("127.0.0.1:9876")
//!     .subscribe("TopicA", "*")
//!     .listener(|msgs, _ctx| async move {
//!         for m in msgs.iter() {
//!             // `?` works: an `Err` (here, a body that is not a number) is RECONSUME_LATER,
//!             // logged with its message.
//!             let amount: u64 = std::str::from_utf8(&m.body)?.trim().parse()?;
//!             println!("{} {amount}", m.msg_id());
//!         }
//!         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(ConsumeStatus::Success)
//!     })
//!     .start()?;
//! consumer.shutdown().await;
//! # Ok(()) }
//! ```

mod runtime;

pub use rocketmq_push_io::api::*;
pub use rocketmq_push_io::run::{Deliveries, Delivery};

rocketmq_push_io::async_adapter!(runtime::current);
