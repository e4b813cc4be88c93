//! # rocketmq-push-core
//!
//! The sans-IO core of an Apache RocketMQ push consumer: the remoting codec, the typed protocol,
//! and a state machine that does everything Java's `DefaultMQPushConsumer` does — routes,
//! heartbeats, rebalance, long-polling pulls, flow control, concurrent and orderly consumption,
//! send-back and retry, offsets, broker requests, graceful shutdown.
//!
//! ## What sans-IO means here
//!
//! This crate does no I/O. It never opens a socket, reads a clock, sleeps, spawns a thread or runs
//! user code. The caller — an adapter for tokio, async-std or plain threads — moves frames, time
//! and consume results in, and carries actions out. Everything is deterministic: the same inputs
//! at the same instants give the same actions in the same order. That is what lets the
//! [simulator](sim) (feature `sim`) run thousands of fault schedules on virtual time.
//!
//! ```text
//!   decoded frames ─┐                                  ┌─▶ Transmit (typed request → a peer)
//!   connected/lost ─┤                                  ├─▶ Dispatch (a batch → user code)
//!   consume results ┼─▶ Consumer::handle(input, now) ──┼─▶ Disconnect / PersistLocalOffsets
//!   commands ───────┤   Consumer::handle_timeout(now)  ├─▶ Event (assigned, revoked, errors, …)
//!   time ───────────┘                                  └─▶ poll_timeout(): the next deadline
//! ```
//!
//! ## The run loop
//!
//! 1. Build a [`ConsumerConfig`] (validated once; errors name the Java knob) and
//!    [`Consumer::new(config, now)`](Consumer::new). It cannot fail.
//! 2. Drain [`Consumer::poll_action`] until `None`: write each [`Transmit`] to its peer
//!    (connecting lazily), run each [`Batch`] through user code, close connections it asks to
//!    close, store local offsets (broadcasting), log [`Event`]s.
//! 3. Wait for the next input or [`Consumer::poll_timeout`], whichever is first.
//! 4. Feed the input with [`Consumer::handle`] (a decoded frame, a connection change, a
//!    [`ConsumeResult`], a [`Command`]) or call [`Consumer::handle_timeout`] when the deadline
//!    passed. Always pass the current instant; the core never reads the clock.
//! 5. Back to 2. Several `handle` calls may come before a drain; actions queue in order.
//! 6. After [`Command::Shutdown`], keep looping until [`Event::Terminated`]; then `poll_timeout`
//!    is `None` and every input is refused.
//!
//! ```no_run
//! use std::time::Instant;
//! use rocketmq_push_core::{Action, ConsumeResult, Consumer, ConsumerConfig, Input};
//!
//! let config = ConsumerConfig::builder("my_group").name_server("127.0.0.1:9876").subscribe("T", "*").build()?;
//! let mut consumer = Consumer::new(config, Instant::now());
//! # let mut net = || -> Option<Input> { None };
//! loop {
//!     while let Some(action) = consumer.poll_action() {
//!         match action {
//!             Action::Transmit(t) => { /* t.encode(&mut buf); write buf to t.peer */ }
//!             Action::Dispatch(batch) => {
//!                 // run user code on &batch.messages, then:
//!                 consumer.handle(Input::ConsumeResult { batch: batch.id, result: ConsumeResult::SUCCESS }, Instant::now())?;
//!             }
//!             Action::Event(e) => eprintln!("{e:?}"),
//!             _ => {}
//!         }
//!     }
//!     if consumer.is_terminated() { break; }
//!     // wait for a frame from the network or until consumer.poll_timeout() …
//!     match net() {
//!         Some(input) => consumer.handle(input, Instant::now())?,
//!         None => consumer.handle_timeout(Instant::now()),
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Invariants
//!
//! - **Nothing is committed past unfinished work.** A queue's committable offset is its
//!   [watermark](process_queue::ProcessQueue::watermark): the lowest offset pulled and not finished,
//!   or the next offset to pull when nothing is held. A message is finished when user code
//!   succeeded on it, or the broker accepted it back for retry.
//! - **A consumer's commits for a queue never go down** while it holds the queue (out-of-order
//!   completions cannot pull them back), except when the broker moves the queue (OFFSET_MOVED,
//!   an admin reset), which is reported as [`Event::OffsetMoved`].
//! - **Caches are bounded**: a queue is not pulled while it holds more than
//!   `pullThresholdForQueue` messages or `pullThresholdSizeForQueue` MiB, or while its span —
//!   highest offset pulled minus the watermark — exceeds `consumeConcurrentlyMaxSpan`.
//! - **Every dispatched batch gets exactly one result** from the caller; a result for an unknown
//!   batch is an error and changes nothing; results for released queues are discarded.
//! - **"No offset" is not "lookup failed"**: only the first consults `consumeFromWhere`; the second
//!   retries and never guesses (the Java 4.x replay-from-minimum bug).
//! - **Orderly: one batch per queue, in offset order, under a lock.** A queue is consumed only
//!   while its broker lock (LOCK_BATCH_MQ, renewed every `lockInterval`) is younger than
//!   `lockMaxLiveTime`; its offset is read only after the lock is granted; the next batch waits
//!   for the previous result; a released queue is unlocked only after its running batch answered
//!   and its offset landed. Across the group no queue has two batches with user code, except for
//!   a batch running longer than the broker's lock lifetime minus ours (30 s by default) or across
//!   a broker restart — a bound no client can close.
//!
//! The simulator checks these after every step of every scenario and of a 10 000-seed randomized
//! run with faults, a third of it orderly (`tests/sim_random.rs`).
//!
//! ## Errors, panics and bugs
//!
//! - Caller mistakes return a [`UsageError`] and change nothing.
//! - Anything a broker or name server sends — unknown codes, missing fields, garbage bodies, late
//!   or duplicated answers — is handled without panicking: reported as an [`Event`], retried or
//!   ignored, never corrupting offsets.
//! - Bytes that do not form a frame are a [`DecodeError`] from the [codec]; the adapter closes
//!   that connection and reports [`DisconnectReason::Decode`].
//! - A panic is a bug. Every decoder is fuzzed (`fuzz/`), and so is a running consumer fed
//!   arbitrary frames.
//!
//! ## Features
//!
//! | feature | what it adds |
//! |---|---|
//! | `sim` | the deterministic simulator: fake name server and brokers, network faults, invariants |
//! | `arbitrary` | `arbitrary::Arbitrary` for a few protocol types |
//!
//! ## Adapters
//!
//! `rocketmq-push-tokio`, `rocketmq-push-async-std` and `rocketmq-push-blocking` (in `adapters/`)
//! run this core on a runtime, with listeners and connections; `rmqcat` is a command-line tool on
//! the tokio adapter.
#![cfg_attr(not(fuzzing), warn(missing_docs))]

pub mod client_id;
pub mod codec;
pub mod config;
mod consumer;
pub mod driver;
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
pub use driver::{Driver, IoCommand, LinkId};
pub use error::UsageError;
pub use event::{
    Action, Batch, BatchId, BatchKind, Command, ConsumeContext, ConsumeResult, ConsumeStatus,
    DisconnectReason, Event, Input, Messages, PeerAddr, Request, Transmit,
};
pub use message::{Message, MessageExt, MessageQueue};
pub use protocol::body::{ConsumeFromWhere, MessageModel};
pub use protocol::{RemotingCommand, RequestCode, ResponseCode};
pub use rebalance::AllocateStrategy;
pub use stats::Stats;
