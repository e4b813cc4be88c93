//! # rocketmq-push-tokio
//!
//! An Apache RocketMQ push consumer on tokio: the `rocketmq-push-core` state machine owned by one
//! task, a reader and a writer task per connection, and `consumeThreadMin` workers running the
//! listener — async, or blocking code on `spawn_blocking`. Prefer pulling?
//! [`Builder::start_stream`] hands out a [`Stream`](futures_core::Stream) of deliveries to
//! acknowledge explicitly. The run loop is `rocketmq-push-io`'s, shared by every adapter; this
//! crate supplies tokio's calls (`src/runtime.rs`).
//!
//! ```no_run
//! use rocketmq_push_tokio::{ConsumeStatus, PushConsumer};
//!
//! # async fn run() -> Result<(), rocketmq_push_tokio::StartError> {
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
//! // … later: drain in-flight batches, commit offsets, unregister.
//! consumer.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! [`Builder::start`] needs a running tokio runtime (it spawns on the current one).

mod runtime;

pub use rocketmq_push_io::api::*;
pub use rocketmq_push_io::run::{Deliveries, Delivery};

rocketmq_push_io::async_adapter!(runtime::current);
