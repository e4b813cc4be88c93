//! # rocketmq-push-tokio
//!
//! An Apache RocketMQ push consumer on tokio: the `rocketmq-push-core` state machine owned by one
//! task, a reader and a writer task per connection, and listeners run as tasks (at most
//! `consumeThreadMin` at once) — or, for blocking code, on `spawn_blocking`. Prefer pulling?
//! [`Builder::start_stream`] hands out a [`Stream`](futures_core::Stream) of deliveries to
//! acknowledge explicitly.
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
//!             println!("{} {:?}", m.msg_id(), m.body);
//!         }
//!         ConsumeStatus::Success
//!     })
//!     .start()?;
//! // … later: drain in-flight batches, commit offsets, unregister.
//! consumer.shutdown().await;
//! # Ok(()) }
//! ```

mod conn;
mod driver;
mod pool;
mod stream;

use std::future::Future;
use std::sync::Arc;

pub use rocketmq_push_core::{
    Command, ConsumeContext, ConsumeFromWhere, ConsumeResult, ConsumeStatus, Event, MessageExt, MessageModel,
    MessageQueue, Messages,
};
pub use rocketmq_push_io::StartError;
use rocketmq_push_io::{AsyncListener, ConsumerOptions, SyncListener, forward_options};
use tokio::sync::{mpsc, oneshot};

use driver::Msg;
pub use stream::{Deliveries, Delivery};

/// How user code runs.
#[derive(Clone)]
pub(crate) enum Listener {
    /// An async listener, run as a task.
    Async(AsyncListener),
    /// A blocking listener, run on `spawn_blocking`.
    Blocking(SyncListener),
    /// Batches go to a stream the application reads.
    Stream(mpsc::UnboundedSender<Delivery>),
}

/// Builder for [`PushConsumer`].
pub struct Builder {
    options: ConsumerOptions,
    listener: Option<Listener>,
}

impl Builder {
    forward_options!();

    /// An async listener (`MessageListenerConcurrently`): at most `consumeThreadMin` run at once.
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

    /// A blocking listener, run on `spawn_blocking` (at most `consumeThreadMin` at once).
    pub fn blocking_listener(
        mut self,
        f: impl Fn(&[MessageExt], &mut ConsumeContext) -> ConsumeStatus + Send + Sync + 'static,
    ) -> Self {
        self.listener = Some(Listener::Blocking(Arc::new(f)));
        self
    }

    /// An async orderly listener (`MessageListenerOrderly`): one batch per queue at a time, in
    /// offset order, under a broker lock.
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

    /// Start on the current tokio runtime. Errors name the invalid setting; unreachable servers
    /// are reported as events (and logged) and retried.
    pub fn start(self) -> Result<PushConsumer, StartError> {
        let listener = self.listener.clone().ok_or(StartError::NoListener)?;
        self.spawn(listener)
    }

    /// Start with no listener: batches arrive on the returned stream; answer each
    /// [`Delivery`] (`ack`, `ack_up_to`, `reconsume_later`). One dropped unanswered counts as
    /// RECONSUME_LATER, so no batch is ever left without a result.
    pub fn start_stream(self) -> Result<(PushConsumer, Deliveries), StartError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let consumer = self.spawn(Listener::Stream(tx))?;
        Ok((consumer, Deliveries::new(rx)))
    }

    fn spawn(self, listener: Listener) -> Result<PushConsumer, StartError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|e| StartError::Runtime(e.to_string()))?;
        let prepared = self.options.prepare()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = oneshot::channel();
        handle.spawn(driver::run(prepared, listener, tx.clone(), rx, done_tx));
        Ok(PushConsumer { tx, done: Some(done_rx) })
    }
}

/// A running push consumer. Call [`PushConsumer::shutdown`] to stop it gracefully; dropping it
/// asks for the same shutdown without waiting for it.
pub struct PushConsumer {
    tx: mpsc::UnboundedSender<Msg>,
    done: Option<oneshot::Receiver<()>>,
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
        let _ = self.tx.send(Msg::Command(c));
    }

    rocketmq_push_io::consumer_commands!();

    /// Graceful shutdown: stop pulling, let in-flight batches finish (up to
    /// `awaitTerminationMillisWhenShutdown`, 30 s by default), commit offsets, unregister.
    pub async fn shutdown(mut self) {
        let _ = self.tx.send(Msg::Command(Command::Shutdown));
        if let Some(done) = self.done.take() {
            let _ = done.await;
        }
    }
}

impl Drop for PushConsumer {
    fn drop(&mut self) {
        if self.done.is_some() {
            let _ = self.tx.send(Msg::Command(Command::Shutdown));
        }
    }
}
