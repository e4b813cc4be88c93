//! The one run loop every adapter uses, generic over a small [`Runtime`].
//!
//! ```text
//!  connect task ─Connected/ConnectFailed─┐
//!  reader task ──Received/Closed─────────┤                            ┌─▶ socket, or writer task ─▶ socket
//!  PushConsumer ─Command─────────────────┼─▶ inbox ─▶ owner (Driver) ─┼─▶ connect task
//!  Deliveries ───Consumed────────────────┘   timer: poll_timeout      ├─▶ async listener, polled in place
//!                                               ▲                     └─▶ listener threads (blocking)
//!                                               └──── results ────────────────┘
//! ```
//!
//! One owner task holds the [`Driver`](rocketmq_push_core::Driver): it carries out every
//! [`DriverOutput`](rocketmq_push_core::DriverOutput) in one exhaustive `match`, then waits for
//! the next message, listener result or deadline and feeds it in (with whatever else is queued).
//! Each connection has a reader and a writer task; what one pass writes to a link goes out as
//! one buffer, by the owner itself while the socket takes it at once, else by the link's writer.
//! Async listeners are polled by the owner task itself; blocking ones run on threads that take
//! queued batches without waking the owner per message. The tasks talk over [`async_channel`]s, which need no particular executor.
//!
//! A runtime supplies only spawning, a timer, and TCP: [`Runtime`]. tokio, async-std and smol
//! implement it with their own calls; the blocking adapter implements it with one thread per task
//! (each driving its future to completion, its socket calls blocking that thread).

mod adapter;
#[cfg(feature = "async-net")]
pub mod async_net;
mod direct;
mod handle;
mod link;
mod listeners;
mod msg;
mod outgoing;
mod owner;
mod stream;
mod workers;

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

pub use handle::Handle;
pub use listeners::Listener;
pub use msg::Snapshot;
pub use stream::{Deliveries, Delivery, channel as delivery_channel};

use crate::{ConsumerOptions, StartError};

/// What the run loop needs from an async runtime (or from plain threads).
pub trait Runtime: Clone + Send + Sync + 'static {
    /// A connection's read half.
    type Reader: Send + 'static;
    /// A connection's write half.
    type Writer: Send + 'static;
    /// A timer that can be re-armed (its output is ignored).
    type Timer: Future + Send + Unpin;

    /// Run `task` in the background (`name` names its thread where there is one).
    fn spawn(&self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()>;

    /// A timer that fires at `at`.
    fn timer(&self, at: Instant) -> Self::Timer;

    /// Re-arm `timer` to fire at `at`.
    fn reset(&self, timer: &mut Self::Timer, at: Instant);

    /// Open a TCP connection to `addr` (`host:port`) within `timeout`, with `TCP_NODELAY`.
    fn connect(
        &self,
        addr: &str,
        timeout: Duration,
    ) -> impl Future<Output = io::Result<(Self::Reader, Self::Writer)>> + Send;

    /// Read into `buf`; `Ok(0)` at end of stream.
    fn read<'a>(
        r: &'a mut Self::Reader,
        buf: &'a mut [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a;

    /// Write all of `buf`.
    fn write_all<'a>(
        w: &'a mut Self::Writer,
        buf: &'a [u8],
    ) -> impl Future<Output = io::Result<()>> + Send + 'a;

    /// Close the connection (at least the write side; a read in progress ends soon after).
    fn close(w: &mut Self::Writer) -> impl Future<Output = ()> + Send + '_;

    /// A duplicate of `w`'s socket, through which the owner writes what the socket takes at once
    /// (without a hop to the writer task). `None`, the default, sends every write through the
    /// writer task.
    #[cfg(unix)]
    fn direct(w: &Self::Writer) -> Option<std::os::fd::OwnedFd> {
        let _ = w;
        None
    }
}

/// How long a connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Build the consumer from `options` and run it on `rt` with `listener`: the owner task, the
/// listener workers, and (as the driver asks) connections.
pub fn start<R: Runtime>(rt: R, options: ConsumerOptions, listener: Listener) -> Result<Handle, StartError> {
    let mut prepared = options.prepare()?;
    let inbox = owner::Inbox::new();
    let control = inbox.control_tx.clone();
    let (done_tx, done_rx) = async_channel::bounded::<()>(1);
    let listeners = listeners::Listeners::new(listener, control.clone(), prepared.consume_threads);
    if listeners.reports_starts() {
        prepared.driver.report_starts();
    }
    let owner = owner::run(rt.clone(), prepared, listeners, inbox, done_tx);
    rt.spawn("rmq-driver", owner).map_err(|e| StartError::Runtime(e.to_string()))?;
    Ok(Handle::new(control, done_rx))
}
