//! # rocketmq-push-blocking
//!
//! An Apache RocketMQ push consumer for code without an async runtime: the `rocketmq-push-core`
//! state machine and every connection driven by one thread of its own, and up to
//! `consumeThreadMin` threads running the (blocking) listener.
//!
//! ```no_run
//! use rocketmq_push_blocking::{ConsumeStatus, PushConsumer};
//!
//! let consumer = PushConsumer::builder("my_group")
//!     .name_server("127.0.0.1:9876")
//!     .subscribe("TopicA", "*")
//!     .listener(|msgs, _ctx| {
//!         for m in &msgs {
//!             // `?` works: an `Err` (here, a body that is not a number) is RECONSUME_LATER,
//!             // logged with its message.
//!             let amount: u64 = std::str::from_utf8(&m.body)?.trim().parse()?;
//!             println!("{} {amount}", m.msg_id());
//!         }
//!         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(ConsumeStatus::Success)
//!     })
//!     .start()?;
//! // … later: drain in-flight batches, commit offsets, unregister.
//! consumer.shutdown();
//! # Ok::<(), rocketmq_push_blocking::StartError>(())
//! ```

mod runtime;

pub use rocketmq_push_io::api::*;
use rocketmq_push_io::run::{self, Handle};
use rocketmq_push_io::{ConsumerOptions, forward_options};

/// A listener: the messages of one batch and their context, as the async adapters' listeners
/// get them; returns the status, or `ctx.result(status)` after setting `ack_index`, the delay
/// level or the orderly suspend time.
pub type Listener = rocketmq_push_io::SyncListener;

/// Builder for [`PushConsumer`].
pub struct Builder {
    options: ConsumerOptions,
    listener: Option<Listener>,
}

impl Builder {
    forward_options!();

    /// The listener (`MessageListenerConcurrently`), run on `consumeThreadMin` threads. It takes
    /// what an async adapter's listener takes — the batch's [`Messages`] and its
    /// [`ConsumeContext`] — and returns a `ConsumeStatus` (Java's defaults), a full
    /// `ConsumeResult` (`ctx.result(status)` after setting `ack_index` or the delay level), or
    /// either in a `Result`, so `?` works: an `Err`, like a panic, counts as RECONSUME_LATER and
    /// is logged.
    pub fn listener<R: ListenerOutput>(
        mut self,
        f: impl Fn(Messages, ConsumeContext) -> R + Send + Sync + 'static,
    ) -> Self {
        self.listener = Some(rocketmq_push_io::sync_listener(f));
        self
    }

    /// An orderly listener (`MessageListenerOrderly`): one batch per queue at a time, in offset
    /// order, under a broker lock. Return `SuspendCurrentQueueAMoment` to retry the batch later.
    pub fn orderly_listener<R: ListenerOutput>(
        self,
        f: impl Fn(Messages, ConsumeContext) -> R + Send + Sync + 'static,
    ) -> Self {
        self.listener(f).orderly()
    }

    /// Start consuming. Errors name the invalid setting; unreachable servers are reported as
    /// events (and logged) and retried, not returned here.
    pub fn start(self) -> Result<PushConsumer, StartError> {
        let listener = self.listener.ok_or(StartError::NoListener)?;
        let handle = run::start(runtime::new(), self.options, run::Listener::Sync(listener))?;
        Ok(PushConsumer { handle })
    }
}

/// A running push consumer. Call [`PushConsumer::shutdown`] to stop it gracefully and wait for
/// it. Dropping it, as in every adapter, asks for the same shutdown and returns at once: the
/// consumer's own thread completes it (in-flight batches finish, offsets are committed, the client
/// unregisters) while the process lives. A process that exits first leaves the last offsets
/// uncommitted, so their messages come again: call `shutdown` before exiting.
pub struct PushConsumer {
    handle: Handle,
}

impl std::fmt::Debug for PushConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumer").finish_non_exhaustive()
    }
}

impl PushConsumer {
    /// A builder for `group`.
    pub fn builder(group: impl Into<String>) -> Builder {
        Builder { options: ConsumerOptions::new(group), listener: None }
    }

    fn command(&self, c: Command) {
        self.handle.command(c);
    }

    rocketmq_push_io::consumer_commands!();

    /// Counters since start (pulled, consumed OK and failed, sent back, timeouts, pull errors,
    /// flow-control delays); zeros once the consumer terminated.
    pub fn stats(&self) -> Stats {
        runtime::block_on(self.handle.snapshot()).map(|s| s.stats).unwrap_or_default()
    }

    /// Every held queue: next and committed offsets, cached messages and bytes, the broker's max
    /// offset and the lag ([`QueueSnapshot::lag`]) from the pull answers, orderly lock state.
    pub fn queues(&self) -> Vec<QueueSnapshot> {
        runtime::block_on(self.handle.snapshot()).map(|s| s.queues).unwrap_or_default()
    }

    /// Rates per subscribed topic, as Java's ConsumerStatsManager keeps them: pull and consume
    /// TPS and RT over the last minute (sampled every 10 s), failures over the last hour; see
    /// [`TopicStats`]. Empty once the consumer terminated.
    pub fn topics(&self) -> Vec<TopicStats> {
        runtime::block_on(self.handle.snapshot()).map(|s| s.topics).unwrap_or_default()
    }

    /// Move this consumer's queues of a topic (or one queue) to the first, the last, an offset
    /// or a time, as `mqadmin resetOffsetByTime` does a running Java consumer: what is cached is
    /// dropped, the target is committed and pulled from ([`Event::Seeked`] per queue;
    /// [`Event::SeekFailed`] if a broker lookup fails). Refused, moving nothing: a topic not
    /// subscribed, a queue not held, a negative or out-of-range offset, a time in the future
    /// ([`Command::Seek`] has the details).
    pub fn seek(&self, queues: QueueSelector, to: SeekTo) -> Result<(), UsageError> {
        runtime::block_on(self.handle.checked_command(Command::Seek { queues, to }))
    }

    /// Graceful shutdown: stop pulling, let in-flight batches finish (up to
    /// `awaitTerminationMillisWhenShutdown`, 30 s by default), commit offsets, unregister.
    /// Returns when done; bounded by that deadline plus request timeouts.
    pub fn shutdown(self) {
        if !self.handle.is_terminated() {
            runtime::block_on(self.handle.shutdown());
        }
    }
}

impl Drop for PushConsumer {
    fn drop(&mut self) {
        self.handle.shutdown_in_background();
    }
}
