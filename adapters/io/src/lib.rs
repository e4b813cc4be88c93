//! # rocketmq-push-io
//!
//! What every rocketmq-push adapter needs and the sans-IO core may not do, written once:
//!
//! - [`client_id`]: this process's client id, as Java builds it (`ip@pid#nanos`);
//! - [`OffsetFile`]: broadcasting's local offsets, in Java's `offsets.json` format, replaced
//!   atomically (a crash mid-write leaves the previous file);
//! - [`guarded`]: run a listener, turning a panic or an `Err` into RECONSUME_LATER;
//! - [`log_event`]: what each core [`Event`](rocketmq_push_core::Event) means for a log;
//! - [`run`]: the one run loop, generic over a small [`Runtime`](run::Runtime) trait that each
//!   adapter implements (spawn, timer, TCP), and the public surface the async adapters share;
//! - [`ConsumerOptions`]: the builder part all adapters share (config, offset file, event hook,
//!   [`ConsumeHook`]s around every listener call);
//! - [`Client`]: a small blocking remoting client for tools and tests (produce, routes, offsets);
//! - [`Transport`]: plain TCP, or TLS (feature `tls`: `Tls`, rustls) for the run loop and the
//!   blocking client alike — the handshake is part of the connect;
//! - `sim_server` (feature `sim-server`): the simulator's fake name server and brokers served on
//!   loopback TCP in real time.

pub mod api;
mod client;
mod client_id;
mod hook;
mod listener;
mod log;
mod offset_file;
mod options;
pub mod run;
#[cfg(feature = "sim-server")]
pub mod sim_server;
#[cfg(feature = "tls")]
mod tls;
mod transport;

pub use client::{Client, ClientError, Producer};
pub use client_id::{client_id, stable_client_id};
pub use hook::{ConsumeHook, HookContext, HookOutcome};
pub(crate) use listener::settled;
pub use listener::{
    AsyncListener, BoxFuture, ListenerOutput, SyncListener, async_listener, guarded, sync_listener,
};
pub use log::{Repeats, cause, log_event};
pub use offset_file::OffsetFile;
pub use options::{
    __core, ConsumerOptions, EventHook, LOG_WINDOW, Prepared, StartError, credentials_from_env,
};
#[cfg(feature = "tls")]
pub use tls::{Tls, TlsError};
pub use transport::Transport;
