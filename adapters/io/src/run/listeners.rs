//! Listener calls. An async listener's future is polled by the owner task itself: each sits in a
//! slot and is polled at once when the batch is handed out (a listener that answers without
//! waiting costs no task, no channel and no wake-up), and again when its own waker fires. At most
//! `consumeThreadMin` concurrent batches are out at a time (the core holds the rest), so the
//! slots stay few. Blocking listeners run on at most `consumeThreadMin` [`Workers`] threads;
//! there the core hands out every batch at once, the threads queue them, and their starts are
//! reported back ([`Listeners::reports_starts`]). A panic counts as RECONSUME_LATER and is
//! reported.
//!
//! An async listener runs on the consumer's task: one that computes for long holds the consumer
//! up. Spawn such work (and await its handle), or use a blocking listener.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use async_channel::Sender;
use rocketmq_push_core::{Batch, BatchId, ConsumeContext};

use super::msg::{Finished, Msg, Started};
use super::stream::Delivery;
use super::workers::{Workers, WorkersRef};
use crate::{AsyncListener, BoxFuture, SyncListener, settled};

/// How user code runs.
#[derive(Clone)]
pub enum Listener {
    /// An async listener, polled by the consumer's own task.
    Async(AsyncListener),
    /// A blocking listener, run on threads of its own.
    Sync(SyncListener),
    /// Batches go to a [`Deliveries`](super::Deliveries) stream the application reads.
    Stream(Sender<Delivery>),
}

/// Which slots were woken, and the owner task to wake for them.
#[derive(Default)]
struct Woken {
    slots: Vec<usize>,
    flagged: Vec<bool>,
    owner: Option<Waker>,
}

struct SlotWaker {
    slot: usize,
    woken: Arc<Mutex<Woken>>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let owner = {
            let mut w = self.woken.lock().unwrap_or_else(PoisonError::into_inner);
            if !w.flagged[self.slot] {
                w.flagged[self.slot] = true;
                w.slots.push(self.slot);
            }
            w.owner.take()
        };
        if let Some(o) = owner {
            o.wake();
        }
    }
}

struct Call {
    batch: BatchId,
    // The listener's own box, in its batch's span: no second allocation per call.
    fut: tracing::instrument::Instrumented<BoxFuture>,
}

/// The listener calls in progress.
pub(super) struct Listeners {
    listener: Listener,
    /// Blocking listeners' threads.
    workers: Option<Workers>,
    /// Where stream deliveries answer.
    results: Sender<Msg>,
    calls: Vec<Option<Call>>,
    wakers: Vec<Waker>,
    free: Vec<usize>,
    woken: Arc<Mutex<Woken>>,
    /// Batches withdrawn by the core since the last [`poll_woken`](Self::poll_woken), in order.
    withdrawn: Vec<BatchId>,
}

impl Listeners {
    /// `threads`: `consumeThreadMin`, the most calls the core hands out at once.
    pub(super) fn new(listener: Listener, results: Sender<Msg>, threads: usize) -> Self {
        let workers = match &listener {
            Listener::Sync(f) => Some(Workers::new(f.clone(), threads)),
            _ => None,
        };
        Self {
            listener,
            workers,
            results,
            calls: Vec::new(),
            wakers: Vec::new(),
            free: Vec::new(),
            woken: Arc::default(),
            withdrawn: Vec::new(),
        }
    }

    /// True if batches queue here and their starts are reported (blocking listeners): the
    /// driver must be told with `Driver::report_starts` before it runs.
    pub(super) fn reports_starts(&self) -> bool {
        self.workers.is_some()
    }

    /// The core takes `batch` back: drop it if it has not started.
    pub(super) fn withdraw(&mut self, batch: BatchId) {
        if self.workers.is_some() {
            self.withdrawn.push(batch);
        }
    }

    /// Start user code on `batch`; what finishes at once goes to `done`.
    pub(super) fn consume(&mut self, batch: Batch, now: Instant, done: &mut Vec<Finished>) {
        let id = batch.id;
        let fut = match &self.listener {
            Listener::Async(f) => {
                let span = crate::batch_span(&batch);
                // The queue moves into the context (no reference counts touched per call).
                let Batch { queue, messages, kind, .. } = batch;
                let ctx = ConsumeContext::new(queue, kind);
                let fut = span.in_scope(|| f(messages, ctx));
                tracing::Instrument::instrument(fut, span)
            }
            Listener::Sync(_) => {
                if let Some(w) = &self.workers {
                    w.submit(batch, now);
                }
                return;
            }
            Listener::Stream(tx) => {
                if tx.try_send(Delivery::new(batch, self.results.clone())).is_err() {
                    // Nobody reads the stream: the delivery answered itself when it was dropped.
                    tracing::debug!(%id, "the delivery stream was dropped");
                }
                return;
            }
        };
        let slot = self.free.pop().unwrap_or_else(|| self.grow());
        self.calls[slot] = Some(Call { batch: id, fut });
        self.poll_slot(slot, done);
    }

    /// Poll the calls whose wakers fired and take the threads' starts and results; what
    /// started goes to `started`, what finished to `done`.
    pub(super) fn poll_woken(&mut self, started: &mut Vec<Started>, done: &mut Vec<Finished>) {
        if let Some(w) = &mut self.workers {
            if !self.withdrawn.is_empty() {
                self.withdrawn.sort_unstable();
                w.withdraw(&self.withdrawn);
                self.withdrawn.clear();
            }
            w.take_done(started, done);
        }
        let woken = {
            let mut w = self.woken.lock().unwrap_or_else(PoisonError::into_inner);
            let slots = std::mem::take(&mut w.slots);
            for s in &slots {
                w.flagged[*s] = false;
            }
            slots
        };
        for slot in woken {
            self.poll_slot(slot, done);
        }
    }

    /// Let blocking calls that waited too long have another thread; when to look again.
    pub(super) fn check(&self, now: Instant) -> Option<Instant> {
        self.workers.as_ref().and_then(|w| w.check(now))
    }

    /// Resolves when some call's waker fired or a thread finished a call (for the owner's wait).
    pub(super) fn ready(&self) -> impl Future<Output = ()> + Send + 'static {
        let woken = self.woken.clone();
        let workers: Option<WorkersRef> = self.workers.as_ref().map(Workers::handle);
        std::future::poll_fn(move |cx| {
            if workers.as_ref().is_some_and(|w| w.ready_or_register(cx.waker())) {
                return Poll::Ready(());
            }
            let mut w = woken.lock().unwrap_or_else(PoisonError::into_inner);
            if w.slots.is_empty() {
                w.owner = Some(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
    }

    fn grow(&mut self) -> usize {
        let slot = self.calls.len();
        self.calls.push(None);
        self.woken.lock().unwrap_or_else(PoisonError::into_inner).flagged.push(false);
        self.wakers.push(Waker::from(Arc::new(SlotWaker { slot, woken: self.woken.clone() })));
        slot
    }

    fn poll_slot(&mut self, slot: usize, done: &mut Vec<Finished>) {
        let Some(call) = self.calls[slot].as_mut() else { return };
        let mut cx = Context::from_waker(&self.wakers[slot]);
        let polled = catch_unwind(AssertUnwindSafe(|| std::pin::Pin::new(&mut call.fut).poll(&mut cx)));
        let ended = match polled {
            Ok(Poll::Pending) => return,
            Ok(Poll::Ready(answer)) => Ok(answer),
            Err(p) => Err(p),
        };
        let (result, failed) = settled(ended);
        let finished = (call.batch, result, failed);
        self.calls[slot] = None;
        self.free.push(slot);
        done.push(finished);
    }
}
