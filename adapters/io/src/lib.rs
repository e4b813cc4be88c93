//! # rocketmq-push-io
//!
//! What every rocketmq-push adapter needs and the sans-IO core may not do, written once:
//!
//! - [`client_id`]: this process's client id, as Java builds it (`ip@pid#nanos`);
//! - [`OffsetFile`]: broadcasting's local offsets, in Java's `offsets.json` format, replaced
//!   atomically (a crash mid-write leaves the previous file);
//! - [`guarded`]: run a listener, turning a panic into RECONSUME_LATER;
//! - [`log_event`]: what each core [`Event`](rocketmq_push_core::Event) means for a log;
//! - [`run`]: the one run loop, generic over a small [`Runtime`](run::Runtime) trait that each
//!   adapter implements (spawn, timer, TCP), and the public surface the async adapters share;
//! - [`ConsumerOptions`]: the builder part all adapters share (config, offset file, event hook);
//! - [`Client`]: a small blocking remoting client for tools and tests (produce, routes, offsets);
//! - `sim_server` (feature `sim-server`): the simulator's fake name server and brokers served on
//!   loopback TCP in real time.

mod client;
mod client_id;
mod listener;
mod log;
mod offset_file;
mod options;
pub mod run;
#[cfg(feature = "sim-server")]
pub mod sim_server;

pub use client::{Client, ClientError, Producer};
pub use client_id::{client_id, stable_client_id};
pub(crate) use listener::panic_message;
pub use listener::{AsyncListener, BoxFuture, SyncListener, async_listener, guarded};
pub use log::{Repeats, cause, log_event};
pub use offset_file::OffsetFile;
pub use options::{__core, ConsumerOptions, EventHook, LOG_WINDOW, Prepared, StartError};
