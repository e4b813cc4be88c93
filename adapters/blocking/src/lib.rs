//! # rocketmq-push-blocking
//!
//! An Apache RocketMQ push consumer on plain threads: the `rocketmq-push-core` state machine
//! driven by one thread, with one reader and one writer thread per connection and a fixed pool
//! of `consumeThreadMin` threads running the listener.
//!
//! ```no_run
//! use rocketmq_push_blocking::{ConsumeStatus, PushConsumer};
//!
//! let consumer = PushConsumer::builder("my_group")
//!     .name_server("127.0.0.1:9876")
//!     .subscribe("TopicA", "*")
//!     .listener(|msgs, _ctx| {
//!         for m in msgs {
//!             println!("{} {:?}", m.msg_id(), m.body);
//!         }
//!         ConsumeStatus::Success
//!     })
//!     .start()?;
//! // … later: drain in-flight batches, commit offsets, unregister.
//! consumer.shutdown();
//! # Ok::<(), rocketmq_push_blocking::StartError>(())
//! ```

mod runtime;

use std::sync::Arc;

pub use rocketmq_push_core::{
    Command, ConsumeContext, ConsumeFromWhere, ConsumeResult, ConsumeStatus, Event, MessageExt, MessageModel,
    MessageQueue,
};
pub use rocketmq_push_io::StartError;
use rocketmq_push_io::run::{self, Handle};
use rocketmq_push_io::{ConsumerOptions, forward_options};

/// A listener: the messages of one batch and a context it may set (`ackIndex`, delay level,
/// orderly suspend time); returns the status.
pub type Listener = rocketmq_push_io::SyncListener;

/// Builder for [`PushConsumer`].
pub struct Builder {
    options: ConsumerOptions,
    listener: Option<Listener>,
}

impl Builder {
    forward_options!();

    /// The listener (`MessageListenerConcurrently`), run on `consumeThreadMin` threads. A panic
    /// counts as RECONSUME_LATER.
    pub fn listener(
        mut self,
        f: impl Fn(&[MessageExt], &mut ConsumeContext) -> ConsumeStatus + Send + Sync + 'static,
    ) -> Self {
        self.listener = Some(Arc::new(f));
        self
    }

    /// An orderly listener (`MessageListenerOrderly`): one batch per queue at a time, in offset
    /// order, under a broker lock. Return `SuspendCurrentQueueAMoment` to retry the batch later.
    pub fn orderly_listener(
        self,
        f: impl Fn(&[MessageExt], &mut ConsumeContext) -> ConsumeStatus + Send + Sync + 'static,
    ) -> Self {
        self.listener(f).orderly()
    }

    /// Start consuming. Errors name the invalid setting; unreachable servers are reported as
    /// events (and logged) and retried, not returned here.
    pub fn start(self) -> Result<PushConsumer, StartError> {
        let listener = self.listener.ok_or(StartError::NoListener)?;
        let handle = run::start(runtime::Threads, self.options, run::Listener::Sync(listener))?;
        Ok(PushConsumer { handle })
    }
}

/// A running push consumer. Dropping it shuts it down gracefully (as [`PushConsumer::shutdown`]).
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

    /// Graceful shutdown: stop pulling, let in-flight batches finish (up to
    /// `awaitTerminationMillisWhenShutdown`, 30 s by default), commit offsets, unregister.
    /// Returns when done; bounded by that deadline plus request timeouts.
    pub fn shutdown(self) {
        self.stop();
    }

    fn stop(&self) {
        if !self.handle.is_terminated() {
            runtime::block_on(self.handle.shutdown());
        }
    }
}

impl Drop for PushConsumer {
    fn drop(&mut self) {
        self.stop();
    }
}
