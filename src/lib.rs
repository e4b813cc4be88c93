//! # rocketmq-push-core
//!
//! The sans-IO core of an Apache RocketMQ push consumer: the remoting codec, the typed protocol,
//! and a state machine that does everything Java's `DefaultMQPushConsumer` does — routes,
//! heartbeats, rebalance, long-polling pulls, flow control, concurrent and orderly consumption,
//! send-back and retry, offsets, broker requests, graceful shutdown — and, where an operator
//! switched a group to POP on 5.x brokers, popping with per-message acks instead of pulling.
//!
//! ## What sans-IO means here
//!
//! This crate does no I/O. It never opens a socket, reads a clock, sleeps, spawns a thread or runs
//! user code. The caller — an adapter for tokio, async-std, smol or plain threads, or the
//! simulator — moves bytes, time and consume results in, and carries outputs out. Everything is
//! deterministic: the same inputs at the same instants give the same outputs in the same order.
//! That is what lets the simulator (module `sim`, feature `sim`) run thousands of fault schedules on
//! virtual time, through exactly the code adapters run.
//!
//! Two layers. [`Consumer`] decides: typed frames, results and commands in; typed requests,
//! batches and events out. [`Driver`] wraps it with what every socket-based caller needs —
//! connections opened lazily per peer, frames queued while connecting, back-off after a failed
//! connect, framing of received bytes, every outgoing frame finished in one place
//! ([`codec::Outbound`]). Adapters and the simulator drive the `Driver`.
//!
//! ```text
//!                   ┌─────────────────────────── Driver ─────────────────────────────┐
//! bytes read ──────▶│framing ──── Frame ───────▶┌──────────┐── Transmit ─▶ Outbound  │─▶ Connect / Write / Close
//! link up / down ──▶│link table ─ Disconnected ▶│ Consumer │── Consume ───────────── │─▶ Consume(batch) → user code
//! consumed(batch) ─▶│──────────── Consumed ────▶│ (decides)│── Event, Persist ────── │─▶ Event / PersistLocalOffsets
//! command ─────────▶│──────────── Command ─────▶│          │── poll_timeout ──────── │─▶ the next deadline
//! time ────────────▶│──────────── handle_timeout▶└──────────┘                        │─▶ Terminated
//!                   └────────────────────────────────────────────────────────────────┘
//! ```
//!
//! ## The run loop
//!
//! 1. Build a [`ConsumerConfig`] (validated once; errors name the Java knob), then
//!    `Driver::new(Consumer::new(config, now))`. It cannot fail.
//! 2. Drain [`Driver::poll_output`] until `None` and carry out each [`DriverOutput`]: connect
//!    (report with [`Driver::connected`] or [`Driver::connect_failed`]), write bytes, close a
//!    link, run a [`Batch`] through user code, store local offsets (broadcasting), log an
//!    [`Event`]. The enum is exhaustive: a new output does not compile until it is handled.
//! 3. Wait for the next input or [`Driver::poll_timeout`] (`None`: no deadline), whichever is
//!    first.
//! 4. Feed the input — [`Driver::received`] bytes (in any pieces), [`Driver::closed`],
//!    [`Driver::consumed`] with a [`ConsumeResult`], [`Driver::command`] — or call
//!    [`Driver::handle_timeout`] when the deadline passed. Always pass the current instant; the
//!    core never reads the clock.
//! 5. Back to 2. Several inputs may come before a drain; outputs queue in order. Feeding all
//!    the results ready before draining lets their POP acks share one request per broker
//!    (the acks go when outputs are next polled).
//! 6. After [`Command::Shutdown`], keep looping until [`DriverOutput::Terminated`].
//!
//! ```no_run
//! use std::time::Instant;
//! use rocketmq_push_core::{ConsumeResult, Consumer, ConsumerConfig, Driver, DriverOutput};
//!
//! let config = ConsumerConfig::builder("my_group").name_server("127.0.0.1:9876").subscribe("T", "*").build()?;
//! let mut driver = Driver::new(Consumer::new(config, Instant::now()));
//! loop {
//!     while let Some(out) = driver.poll_output(Instant::now()) {
//!         match out {
//!             DriverOutput::Connect { link, peer } => { /* connect to peer; then driver.connected(link, now) */ }
//!             DriverOutput::Write { link, bytes } => { /* write bytes to the link's socket */ }
//!             DriverOutput::Close { link } => { /* close the socket */ }
//!             DriverOutput::Consume(batch) => {
//!                 // run user code on &batch.messages, then:
//!                 driver.consumed(batch.id, ConsumeResult::SUCCESS, Instant::now())?;
//!             }
//!             DriverOutput::ConsumeRun(_) => { /* only after driver.report_starts(): its batches, as above */ }
//!             DriverOutput::Withdraw(_) => { /* only after driver.report_starts() */ }
//!             DriverOutput::PersistLocalOffsets(offsets) => { /* broadcasting: store them */ }
//!             DriverOutput::Event(e) => eprintln!("{e:?}"),
//!             DriverOutput::Terminated => return Ok(()),
//!         }
//!     }
//!     // wait for bytes (driver.received(link, &bytes, now)), a closed link, a result, a
//!     // command, or until driver.poll_timeout() …
//!     driver.handle_timeout(Instant::now());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `rocketmq-push-io`'s run loop is this, written once for every runtime.
//!
//! ## Invariants
//!
//! - **Nothing is committed past unfinished work.** A queue's committable offset is its
//!   [watermark](process_queue::ProcessQueue::watermark): the lowest offset pulled and not finished,
//!   or the next offset to pull when nothing is held. A message is finished when user code
//!   succeeded on it, or the broker accepted it back for retry. The one exception is asked for:
//!   a [`Command::Seek`] forward skips what lies before its target.
//! - **A consumer's commits for a queue never go down** while it holds the queue (out-of-order
//!   completions cannot pull them back), except when the broker moves the queue (OFFSET_MOVED,
//!   an admin reset), reported as [`Event::OffsetMoved`], or the application does
//!   ([`Command::Seek`], reported as [`Event::Seeked`]).
//! - **Caches are bounded**: a queue is not pulled while it holds more than
//!   `pullThresholdForQueue` messages or `pullThresholdSizeForQueue` MiB, or while its span —
//!   highest offset pulled minus the watermark — exceeds `consumeConcurrentlyMaxSpan`; and a pull
//!   answer is decoded only into the queue's free cache, plus one record (itself capped: 32 MiB
//!   decompressed, 65,536 inner-batch messages). What did not fit comes with a later pull.
//! - **Every dispatched batch gets exactly one result** from the caller; a result for an unknown
//!   batch is an error and changes nothing; results for released queues are discarded. At most
//!   `consumeThreadMin` concurrent batches are with user code at once; the rest wait in the core,
//!   so a batch's consume timeout runs from the listener's start. An adapter that queues batches
//!   itself ([`Consumer::report_starts`]; ours all do) gets them all at once instead — a pull's
//!   ready messages as one [`Run`] of batches, one hand-off for all — reports each start
//!   ([`Driver::started`]), and is told to drop those not started when their queue
//!   goes away or the shutdown deadline passes ([`DriverOutput::Withdraw`]): the timeout still
//!   runs from the start, and a withdrawn batch never reaches user code. A call that answered
//!   before its start was reported needs no report (it can no longer time out). A shutdown lets
//!   queued batches run until that deadline, as it lets running ones finish.
//! - **Dead links do not hold the consumer**: a request that times out with nothing heard from
//!   its peer since it was sent closes the link; a link stuck inside a frame for 30 s is closed;
//!   both are reopened with back-off and named in [`Event::ConnectionLost`].
//! - **A broker's kill -9 does not replay what was committed**: queues dropped because their
//!   broker left the route remember their commit, and start no lower when they come back.
//! - **A topic's first commit on a broker goes alone.** The broker creates a group's offset map
//!   with its first commit, and two first commits processed together keep only one queue's;
//!   until an update of that (broker, topic) has been answered, the others wait for it and pulls
//!   carry no commit. A dropped link makes the broker's maps unknown and its queues' offsets
//!   unconfirmed again (sent at the next persist), since a crash may have lost them.
//! - **A paused queue is not pulled** after [`Event::QueuesPaused`], and the answer to a pull that
//!   was out is set aside without moving the queue's next offset (resuming pulls those messages
//!   again): only what was pulled before the pause still reaches user code; locks are kept.
//! - **Shutdown ends** within `awaitTerminationMillisWhenShutdown` + `offsetRpcTimeout` +
//!   `mqClientApiTimeout` ([`Consumer::shutdown_limit`]), whatever peers send meanwhile.
//! - **"No offset" is not "lookup failed"**: only the first consults `consumeFromWhere`; the second
//!   retries and never guesses (the Java 4.x replay-from-minimum bug).
//! - **Orderly: one batch per queue, in offset order, under a lock.** A queue is consumed only
//!   while its broker lock (LOCK_BATCH_MQ, renewed every `lockInterval`) is younger than
//!   `lockMaxLiveTime`; its offset is read only after the lock is granted; the next batch waits
//!   for the previous result; a released queue is unlocked only after its running batch answered
//!   and its offset landed. Across the group no queue has two batches with user code, except for
//!   a batch running longer than the broker's lock lifetime minus ours (30 s by default) or across
//!   a broker restart — a bound no client can close.
//! - **POP follows the broker** (unless `clientRebalance`): each rebalance of a topic asks a
//!   broker for its mode first (QUERY_ASSIGNMENT); queues it assigns in POP mode are popped,
//!   every other answer (PULL, none, an error, a 4.x broker) allocates here as before. A popped
//!   message is acked only after its listener succeeded, made invisible again after Java's
//!   back-off when it failed, and otherwise comes back after its invisible time: nothing popped
//!   is lost, and nothing is committed by offset. An orderly consumer with `orderly_pop` pops
//!   with `order=true`: the broker locks each queue per pop; each queue's popped messages go to
//!   the listener one batch at a time, held messages have their invisible time renewed, and a
//!   failed batch goes back to the broker with what waits behind it, to come back in place.
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
//! - Bytes that do not form a frame are a [`DecodeError`] from the [codec]; the driver closes
//!   that connection and reports [`DisconnectReason::Decode`]. A frame whose header or body does
//!   not read is an [`Event::Malformed`]; error answers are [`Event::BrokerError`] with typed
//!   codes.
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
//! `rocketmq-push-tokio`, `rocketmq-push-async-std`, `rocketmq-push-smol` and
//! `rocketmq-push-blocking` (in `adapters/`) run this core on a runtime through one shared run
//! loop (`rocketmq-push-io`), with listeners and connections; `rmqcat` is a command-line tool on
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
pub mod namespace;
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
pub use codec::{Credentials, DecodeError, RemotingCodec};
pub use config::{ConfigError, ConsumeMode, ConsumerConfig, ConsumerConfigBuilder, Subscription};
pub use consumer::{Consumer, QueueSnapshot};
pub use driver::{Driver, DriverOutput, FRAME_STALL_TIMEOUT, LinkId};
pub use error::UsageError;
pub use event::{
    Batch, BatchId, BatchKind, Command, ConsumeContext, ConsumeResult, ConsumeStatus, DisconnectReason,
    Event, Input, IoFailure, MalformedFrame, Messages, Output, PeerAddr, QueueSelector, Request, Run, SeekTo,
    Transmit,
};
pub use message::{Message, MessageExt, MessageQueue};
pub use protocol::body::{ConsumeFromWhere, MessageModel};
pub use protocol::{Code, RemotingCommand, RequestCode, ResponseCode};
pub use rebalance::AllocateStrategy;
pub use stats::{Stats, TopicStats};
