//! # rocketmq-push-async-std
//!
//! An Apache RocketMQ push consumer on async-std: the `rocketmq-push-core` state machine owned by
//! one task, a reader and a writer task per connection, and `consumeThreadMin` worker tasks
//! running the listener (async, or blocking on the blocking pool).
//!
//! **async-std is discontinued upstream** (RUSTSEC-2025-0052). Every runtime call of this crate
//! is in `src/runtime.rs`; a move to smol rewrites that file only.
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
//!             println!("{} {:?}", m.msg_id(), m.body);
//!         }
//!         ConsumeStatus::Success
//!     })
//!     .start()?;
//! consumer.shutdown().await;
//! # Ok(()) }
//! ```

mod conn;
mod driver;
mod pool;
mod runtime;

use std::future::Future;
use std::sync::Arc;

pub use rocketmq_push_core::{
    Command, ConsumeContext, ConsumeFromWhere, ConsumeResult, ConsumeStatus, Event, MessageExt, MessageModel,
    MessageQueue, Messages,
};
pub use rocketmq_push_io::StartError;
use rocketmq_push_io::{AsyncListener, ConsumerOptions, SyncListener, forward_options};

use driver::Msg;

#[derive(Clone)]
pub(crate) enum Listener {
    Async(AsyncListener),
    Blocking(SyncListener),
}

/// Builder for [`PushConsumer`].
pub struct Builder {
    options: ConsumerOptions,
    listener: Option<Listener>,
}

impl Builder {
    forward_options!();

    /// An async listener (`MessageListenerConcurrently`) on `consumeThreadMin` worker tasks.
    /// Return a `ConsumeStatus`, or `ctx.result(status)` after setting `ack_index` or the delay
    /// level. A panic counts as RECONSUME_LATER.
    pub fn listener<F, Fut, R>(mut self, f: F) -> Self
    where
        F: Fn(Messages, ConsumeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: Into<ConsumeResult>,
    {
        self.listener = Some(Listener::Async(rocketmq_push_io::async_listener(f)));
        self
    }

    /// A blocking listener, run on the blocking pool by `consumeThreadMin` workers.
    pub fn blocking_listener(
        mut self,
        f: impl Fn(&[MessageExt], &mut ConsumeContext) -> ConsumeStatus + Send + Sync + 'static,
    ) -> Self {
        self.listener = Some(Listener::Blocking(Arc::new(f)));
        self
    }

    /// An async orderly listener (`MessageListenerOrderly`).
    pub fn orderly_listener<F, Fut, R>(self, f: F) -> Self
    where
        F: Fn(Messages, ConsumeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: Into<ConsumeResult>,
    {
        let mut b = self.listener(f);
        b.options = b.options.orderly();
        b
    }

    /// Start. Errors name the invalid setting; unreachable servers are reported as events (and
    /// logged) and retried.
    pub fn start(self) -> Result<PushConsumer, StartError> {
        let listener = self.listener.ok_or(StartError::NoListener)?;
        let prepared = self.options.prepare()?;
        let (tx, rx) = runtime::unbounded();
        let (done_tx, done_rx) = runtime::unbounded();
        runtime::spawn(driver::run(prepared, listener, tx.clone(), rx, done_tx));
        Ok(PushConsumer { tx, done: Some(done_rx) })
    }
}

/// A running push consumer. Call [`PushConsumer::shutdown`] to stop it gracefully; dropping it
/// asks for the same shutdown without waiting for it.
pub struct PushConsumer {
    tx: runtime::Sender<Msg>,
    done: Option<runtime::Receiver<()>>,
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
        let _ = self.tx.try_send(Msg::Command(c));
    }

    rocketmq_push_io::consumer_commands!();

    /// Graceful shutdown: stop pulling, let in-flight batches finish (up to
    /// `awaitTerminationMillisWhenShutdown`, 30 s by default), commit offsets, unregister.
    pub async fn shutdown(mut self) {
        self.command(Command::Shutdown);
        if let Some(done) = self.done.take() {
            let _ = done.recv().await;
        }
    }
}

impl Drop for PushConsumer {
    fn drop(&mut self) {
        if self.done.is_some() {
            self.command(Command::Shutdown);
        }
    }
}
