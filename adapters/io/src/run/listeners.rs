//! Listener calls. An async listener's future is polled by the owner task itself: each sits in a
//! slot and is polled at once when the batch is handed out (a listener that answers without
//! waiting costs no task, no channel and no wake-up), and again when its own waker fires.
//! Blocking listeners run on at most `consumeThreadMin` [`Workers`] threads.
//!
//! Both report starts ([`Listeners::reports_starts`]): the core hands out every batch at once,
//! and at most `consumeThreadMin` concurrent calls are in progress here, the rest queued in
//! order. The owner gives a pass's withdrawals before its batches: a concurrent batch starts as
//! it is handed out only if nothing waits before it, a call slot is free and the pass takes
//! nothing back; otherwise it waits until the withdrawals are applied, so a batch the core takes
//! back never reaches user code. An async call that answers before its first poll ends
//! needs no start report at all (it can no longer time out); one that waits reports its start,
//! from which its consume timeout counts. Orderly and direct batches, which the core never takes
//! back, start as they are handed out. A panic counts as RECONSUME_LATER and is reported.
//!
//! An async listener runs on the consumer's task: one that computes for long holds the consumer
//! up. Spawn such work (and await its handle), or use a blocking listener.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use async_channel::Sender;
use rocketmq_push_core::{Batch, BatchId, BatchKind, ConsumeContext};

use super::msg::{Finished, Msg, Started};
use super::stream::Delivery;
use super::workers::{Workers, WorkersRef};
use crate::hook::Hooks;
use crate::{AsyncListener, CallSlot, SyncListener, settled};

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

/// The call in a slot: its batch, and the span it runs in.
struct Call {
    batch: BatchId,
    span: tracing::Span,
}

/// The listener calls in progress.
pub(super) struct Listeners {
    listener: Listener,
    /// Blocking listeners' threads.
    workers: Option<Workers>,
    /// Where stream deliveries answer.
    results: Sender<Msg>,
    calls: Vec<Option<Call>>,
    /// Each slot's future, reused from call to call (async listeners).
    slots: Vec<Pin<Box<dyn CallSlot>>>,
    wakers: Vec<Waker>,
    free: Vec<usize>,
    woken: Arc<Mutex<Woken>>,
    /// Batches withdrawn by the core since the last [`poll_woken`](Self::poll_woken).
    withdrawn: Vec<BatchId>,
    /// Batches handed out and not started, in order: blocking ones until the pass's
    /// [`hand_over`](Self::hand_over) to the threads, async ones until one of the `limit` calls
    /// in progress ends.
    waiting: VecDeque<Batch>,
    /// `consumeThreadMin`: the most async calls in progress at once.
    limit: usize,
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
            slots: Vec::new(),
            wakers: Vec::new(),
            free: Vec::new(),
            woken: Arc::default(),
            withdrawn: Vec::new(),
            waiting: VecDeque::new(),
            limit: threads.max(1),
        }
    }

    /// True if batches queue here and their starts are reported (async and blocking
    /// listeners): the driver must be told with `Driver::report_starts` before it runs.
    pub(super) fn reports_starts(&self) -> bool {
        !matches!(self.listener, Listener::Stream(_))
    }

    /// The core takes `batch` back: drop it if it has not started. Given before the pass's
    /// batches are.
    pub(super) fn withdraw(&mut self, batch: BatchId) {
        if self.reports_starts() {
            self.withdrawn.push(batch);
        }
    }

    /// Start user code on `batch`, or queue it to start with the rest of the pass (behind the
    /// calls in progress). The pass's withdrawals must be given first ([`withdraw`](Self::withdraw)).
    /// Hooks are told before the call; a call that waits goes to `started`, one that ended to
    /// `done`.
    pub(super) fn consume(
        &mut self,
        batch: Batch,
        now: Instant,
        hooks: &mut Hooks,
        started: &mut Vec<Started>,
        done: &mut Vec<Finished>,
    ) {
        let id = batch.id;
        match &self.listener {
            // Orderly and direct batches cannot be taken back (the core counts them started):
            // they start now, as they always did.
            Listener::Async(_) if batch.kind != BatchKind::Concurrent => {}
            // A concurrent one starts now when nothing waits before it, a slot is free and this
            // pass takes nothing back. Otherwise it waits until the pass's withdrawals are
            // applied (`poll_woken`): one the core takes back in the same pass never reaches
            // user code.
            Listener::Async(_)
                if self.waiting.is_empty()
                    && self.withdrawn.is_empty()
                    && self.in_progress() < self.limit => {}
            // Blocking ones go to the threads with the rest of the pass's (`hand_over`).
            Listener::Async(_) | Listener::Sync(_) => {
                self.waiting.push_back(batch);
                return;
            }
            Listener::Stream(tx) => {
                if tx.try_send(Delivery::new(batch, self.results.clone())).is_err() {
                    // Nobody reads the stream: the delivery answered itself when it was dropped.
                    tracing::debug!(%id, "the delivery stream was dropped");
                }
                return;
            }
        }
        self.start(batch, now, hooks, started, done);
    }

    /// Async calls in progress (their slots are taken).
    fn in_progress(&self) -> usize {
        self.calls.len() - self.free.len()
    }

    /// Run an async listener on `batch`: first poll now. A call that answers during that poll
    /// never takes its slot (the free slot on top is only borrowed), never stores its span and
    /// is never reported started.
    fn start(
        &mut self,
        batch: Batch,
        now: Instant,
        hooks: &mut Hooks,
        started: &mut Vec<Started>,
        done: &mut Vec<Finished>,
    ) {
        let id = batch.id;
        hooks.started(id, now);
        let span = crate::batch_span(&batch);
        let slot = match self.free.last() {
            Some(&slot) => slot,
            None => {
                let slot = self.grow();
                self.free.push(slot);
                slot
            }
        };
        // The queue moves into the context (no reference counts touched per call).
        let Batch { queue, messages, kind, .. } = batch;
        let ctx = ConsumeContext::new(queue, kind);
        let mut cx = Context::from_waker(&self.wakers[slot]);
        let mut fut = self.slots[slot].as_mut();
        let polled = {
            let _in = span.enter();
            catch_unwind(AssertUnwindSafe(|| {
                fut.as_mut().start(messages, ctx);
                fut.poll_call(&mut cx)
            }))
        };
        let panicked = match polled {
            Ok(Poll::Ready(answer)) => {
                let (result, failed) = settled(Ok(answer));
                done.push((id, result, failed));
                return;
            }
            Ok(Poll::Pending) => None,
            Err(p) => Some(p),
        };
        self.free.pop();
        self.calls[slot] = Some(Call { batch: id, span });
        match panicked {
            // It waits: from now on it can time out.
            None => started.push((id, now)),
            // The listener panicked, making its future or in its first poll.
            Some(p) => self.end(slot, Err(p), done),
        }
    }

    /// Queued async batches start while calls in progress end.
    fn start_waiting(
        &mut self,
        now: Instant,
        hooks: &mut Hooks,
        started: &mut Vec<Started>,
        done: &mut Vec<Finished>,
    ) {
        while self.in_progress() < self.limit {
            let Some(batch) = self.waiting.pop_front() else { break };
            self.start(batch, now, hooks, started, done);
        }
    }

    /// Blocking listeners: the batches of this pass go to the threads, together (one lock
    /// taken, not one per batch, while the threads take and answer work under it).
    fn hand_over(&mut self, now: Instant) {
        if let Some(w) = &self.workers {
            if !self.waiting.is_empty() {
                w.submit(self.waiting.drain(..), now);
            }
        }
    }

    /// Poll the calls whose wakers fired and take the threads' starts and results; what
    /// started goes to `started`, what finished to `done`; async batches queued start as calls
    /// end. Batches consumed since the last call go to the threads first (so a withdrawal of
    /// one of them finds it queued there).
    pub(super) fn poll_woken(
        &mut self,
        now: Instant,
        hooks: &mut Hooks,
        started: &mut Vec<Started>,
        done: &mut Vec<Finished>,
    ) {
        if !self.withdrawn.is_empty() {
            // Taken back in the pass it came: it never starts. Those the threads queued since
            // earlier passes are taken back there.
            self.withdrawn.sort_unstable();
            let gone = &self.withdrawn;
            self.waiting.retain(|b| gone.binary_search(&b.id).is_err());
        }
        self.hand_over(now);
        if let Some(w) = &mut self.workers {
            if !self.withdrawn.is_empty() {
                w.withdraw(&self.withdrawn);
            }
            w.take_done(started, done);
        }
        self.withdrawn.clear();
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
        if matches!(self.listener, Listener::Async(_)) {
            self.start_waiting(now, hooks, started, done);
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
        if let Listener::Async(make) = &self.listener {
            self.slots.push(make());
        }
        self.woken.lock().unwrap_or_else(PoisonError::into_inner).flagged.push(false);
        self.wakers.push(Waker::from(Arc::new(SlotWaker { slot, woken: self.woken.clone() })));
        slot
    }

    fn poll_slot(&mut self, slot: usize, done: &mut Vec<Finished>) {
        let Some(call) = self.calls[slot].as_ref() else { return };
        let mut cx = Context::from_waker(&self.wakers[slot]);
        let fut = self.slots[slot].as_mut();
        let polled = {
            let _in = call.span.enter();
            catch_unwind(AssertUnwindSafe(|| fut.poll_call(&mut cx)))
        };
        match polled {
            Ok(Poll::Pending) => {}
            Ok(Poll::Ready(answer)) => self.end(slot, Ok(answer), done),
            Err(p) => self.end(slot, Err(p), done),
        }
    }

    /// The call in `slot` ended: its result to `done`, the slot free again.
    fn end(
        &mut self,
        slot: usize,
        ended: std::thread::Result<Result<rocketmq_push_core::ConsumeResult, String>>,
        done: &mut Vec<Finished>,
    ) {
        let Some(call) = self.calls[slot].take() else { return };
        if ended.is_err() {
            // A future that panicked is not polled or refilled again: the slot gets a new one.
            if let Listener::Async(make) = &self.listener {
                self.slots[slot] = make();
            }
        }
        let (result, failed) = settled(ended);
        self.free.push(slot);
        done.push((call.batch, result, failed));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rocketmq_push_core::{BatchKind, ConsumeStatus, MessageQueue, Messages};

    use super::*;

    fn batch(id: u64, queue_id: i32) -> Batch {
        Batch {
            id: BatchId(id),
            queue: MessageQueue::new("T", "b", queue_id).into(),
            messages: Messages::from_vec(Vec::new()),
            kind: BatchKind::Concurrent,
        }
    }

    /// An async listener whose slots are counted as they are made; queue 1 panics before its
    /// future, queue 2 inside it, queue 3 waits until `go` is set (and its waker fires).
    fn listeners(
        made: Arc<AtomicUsize>,
        go: Arc<Mutex<Option<Waker>>>,
        open: Arc<AtomicUsize>,
        limit: usize,
    ) -> Listeners {
        let f = crate::async_listener(move |_, ctx: ConsumeContext| {
            assert!(ctx.queue.queue_id != 1, "before the future");
            let (go, open) = (go.clone(), open.clone());
            async move {
                assert!(ctx.queue.queue_id != 2, "inside the future");
                if ctx.queue.queue_id == 3 {
                    std::future::poll_fn(|cx| {
                        if open.load(Ordering::SeqCst) == 1 {
                            return Poll::Ready(());
                        }
                        *go.lock().unwrap() = Some(cx.waker().clone());
                        Poll::Pending
                    })
                    .await;
                }
                ConsumeStatus::Success
            }
        });
        let counted: AsyncListener = Arc::new(move || {
            made.fetch_add(1, Ordering::SeqCst);
            f()
        });
        Listeners::new(Listener::Async(counted), async_channel::unbounded().0, limit)
    }

    #[test]
    fn async_calls_reuse_their_slots_and_a_panic_anywhere_is_reconsume_later() {
        let (made, open) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let go: Arc<Mutex<Option<Waker>>> = Arc::default();
        let mut l = listeners(made.clone(), go.clone(), open.clone(), 20);
        let (mut hooks, now) = (Hooks::new(Vec::new(), "G".into()), Instant::now());
        let (mut started, mut done) = (Vec::new(), Vec::new());
        for id in 0..100 {
            l.consume(batch(id, 0), now, &mut hooks, &mut started, &mut done);
        }
        // Nothing taken back in the pass: each started, and answered, as it was handed out.
        assert_eq!(done.len(), 100);
        l.poll_woken(now, &mut hooks, &mut started, &mut done);
        assert!(done.iter().all(|d| d.1 == rocketmq_push_core::ConsumeResult::SUCCESS && d.2.is_none()));
        assert_eq!(made.load(Ordering::SeqCst), 1, "one slot for calls that answer at once");

        done.clear();
        l.consume(batch(100, 1), now, &mut hooks, &mut started, &mut done);
        l.consume(batch(101, 2), now, &mut hooks, &mut started, &mut done);
        l.consume(batch(102, 0), now, &mut hooks, &mut started, &mut done);
        l.poll_woken(now, &mut hooks, &mut started, &mut done);
        let why: Vec<_> = done.iter().map(|d| (d.0.0, d.1.status, d.2.clone())).collect();
        assert_eq!(
            why,
            [
                (100, ConsumeStatus::ReconsumeLater, Some("panicked: before the future".to_owned())),
                (101, ConsumeStatus::ReconsumeLater, Some("panicked: inside the future".to_owned())),
                (102, ConsumeStatus::Success, None),
            ]
        );
        // Each panic cost the slot its future: a new one was made for it.
        assert_eq!(made.load(Ordering::SeqCst), 3);

        // A call that waits keeps its slot; the next call takes another, and the waiting one
        // finishes when its waker fires.
        done.clear();
        l.consume(batch(103, 3), now, &mut hooks, &mut started, &mut done);
        l.consume(batch(104, 0), now, &mut hooks, &mut started, &mut done);
        l.poll_woken(now, &mut hooks, &mut started, &mut done);
        assert_eq!(done.iter().map(|d| d.0.0).collect::<Vec<_>>(), [104]);
        // Only the call that waits reports its start (the others can no longer time out).
        assert_eq!(started, [(BatchId(103), now)]);
        assert_eq!(made.load(Ordering::SeqCst), 4);
        open.store(1, Ordering::SeqCst);
        go.lock().unwrap().take().expect("the waiting call registered its waker").wake();
        l.poll_woken(now, &mut hooks, &mut started, &mut done);
        assert_eq!(
            done.iter().map(|d| (d.0.0, d.1.status)).collect::<Vec<_>>(),
            [(104, ConsumeStatus::Success), (103, ConsumeStatus::Success)]
        );
        // Both slots are free again: nothing new is made for two more calls.
        l.consume(batch(105, 0), now, &mut hooks, &mut started, &mut done);
        l.consume(batch(106, 0), now, &mut hooks, &mut started, &mut done);
        l.poll_woken(now, &mut hooks, &mut started, &mut done);
        assert_eq!((done.len(), made.load(Ordering::SeqCst)), (4, 4));
    }

    #[test]
    fn a_blocking_batch_taken_back_in_the_pass_it_came_never_reaches_a_thread() {
        let ran = Arc::new(Mutex::new(Vec::new()));
        let r = ran.clone();
        let f: SyncListener = Arc::new(move |_, ctx: ConsumeContext| {
            r.lock().unwrap().push(ctx.queue.queue_id);
            Ok(rocketmq_push_core::ConsumeResult::SUCCESS)
        });
        let mut l = Listeners::new(Listener::Sync(f), async_channel::unbounded().0, 4);
        let (mut hooks, now) = (Hooks::new(Vec::new(), "G".into()), Instant::now());
        let (mut started, mut done) = (Vec::new(), Vec::new());
        l.withdraw(BatchId(1));
        l.consume(batch(1, 1), now, &mut hooks, &mut started, &mut done);
        l.consume(batch(2, 2), now, &mut hooks, &mut started, &mut done);
        let limit = Instant::now() + std::time::Duration::from_secs(10);
        while done.is_empty() && Instant::now() < limit {
            l.poll_woken(Instant::now(), &mut hooks, &mut started, &mut done);
            std::thread::yield_now();
        }
        assert_eq!(done.iter().map(|d| d.0.0).collect::<Vec<_>>(), [2]);
        assert_eq!(*ran.lock().unwrap(), [2], "the withdrawn batch ran");
    }

    #[test]
    fn a_batch_taken_back_in_the_pass_it_came_never_runs_and_orderly_ones_start_at_once() {
        let (made, open) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut l = listeners(made, Arc::default(), open, 20);
        let (mut hooks, now) = (Hooks::new(Vec::new(), "G".into()), Instant::now());
        let (mut started, mut done) = (Vec::new(), Vec::new());
        // Free slots, and still: the core hands 1 and 2 out, then takes 1 back (its queue went
        // away) in the same pass. The owner gives the pass's withdrawals first.
        l.withdraw(BatchId(1));
        l.consume(batch(1, 0), now, &mut hooks, &mut started, &mut done);
        l.consume(batch(2, 0), now, &mut hooks, &mut started, &mut done);
        let orderly = Batch { kind: BatchKind::Orderly, ..batch(3, 0) };
        l.consume(orderly, now, &mut hooks, &mut started, &mut done);
        assert_eq!(done.iter().map(|d| d.0.0).collect::<Vec<_>>(), [3], "orderly: at once");
        l.poll_woken(now, &mut hooks, &mut started, &mut done);
        assert_eq!(done.iter().map(|d| d.0.0).collect::<Vec<_>>(), [3, 2], "1 never ran");
        // A pass that takes nothing back: its concurrent batches start as they are handed out.
        l.consume(batch(4, 0), now, &mut hooks, &mut started, &mut done);
        assert_eq!(done.iter().map(|d| d.0.0).collect::<Vec<_>>(), [3, 2, 4], "4 at once");
        assert!(started.is_empty() && l.waiting.is_empty());
    }

    #[test]
    fn async_calls_past_the_limit_wait_in_order_and_a_withdrawn_one_never_starts() {
        let (made, open) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let go: Arc<Mutex<Option<Waker>>> = Arc::default();
        let mut l = listeners(made, go.clone(), open.clone(), 1);
        let (mut hooks, t0) = (Hooks::new(Vec::new(), "G".into()), Instant::now());
        let (mut started, mut done) = (Vec::new(), Vec::new());
        // One call in progress at most: 1 starts at once and waits, 2 to 4 queue behind it
        // (even 2, which would answer at once), and 3 is taken back in a later pass.
        l.consume(batch(1, 3), t0, &mut hooks, &mut started, &mut done);
        assert_eq!((started.clone(), done.len()), (vec![(BatchId(1), t0)], 0));
        for id in 2..=4 {
            l.consume(batch(id, 0), t0, &mut hooks, &mut started, &mut done);
        }
        l.poll_woken(t0, &mut hooks, &mut started, &mut done);
        l.withdraw(BatchId(3));
        l.poll_woken(t0, &mut hooks, &mut started, &mut done);
        assert_eq!((started.clone(), done.len()), (vec![(BatchId(1), t0)], 0));
        // Nothing woke: nothing moves.
        let t1 = t0 + std::time::Duration::from_millis(5);
        l.poll_woken(t1, &mut hooks, &mut started, &mut done);
        assert!(done.is_empty());
        open.store(1, Ordering::SeqCst);
        go.lock().unwrap().take().expect("the waiting call registered its waker").wake();
        l.poll_woken(t1, &mut hooks, &mut started, &mut done);
        assert_eq!(done.iter().map(|d| d.0.0).collect::<Vec<_>>(), [1, 2, 4]);
        assert_eq!(started, [(BatchId(1), t0)], "2 and 4 answered at once, 3 never ran");
        assert!(l.waiting.is_empty() && l.withdrawn.is_empty());
    }
}
