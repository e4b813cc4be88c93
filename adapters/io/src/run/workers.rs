//! Threads for blocking listeners, handed work in batches of ready work.
//!
//! The owner queues each batch the core hands out; a thread that finishes a call takes the next
//! one from the queue itself and leaves its result in a list the owner drains. A thread is woken
//! only when no thread is awake to take the work, and the owner only when a thread finds the
//! queue empty: under load a burst of batches costs a wake-up each way, not one per message
//! (Java's consume executor wakes a thread per message, and its results cost no wake-up only
//! because its threads update the shared state themselves, under locks).
//!
//! Neither side waits long on the other:
//! - a batch queued behind a slow call: when the oldest queued batch has waited [`PATIENCE`], the
//!   owner wakes (or starts) another thread, and again after each further `PATIENCE`, up to
//!   `consumeThreadMin` threads — also as many batches as the core hands out at once;
//! - a result left while its thread went on to a slow call: while calls run, the owner looks for
//!   results on its own, `PATIENCE` after the last ones came and then less often, at least every
//!   [`RESULTS_AT_LEAST`].
//!
//! Threads idle for a minute end.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::Waker;
use std::thread;
use std::time::{Duration, Instant};

use rocketmq_push_core::{Batch, BatchId, ConsumeContext};

use super::msg::Finished;
#[cfg(test)]
use crate::sync_listener;
use crate::{SyncListener, guarded};

/// How long a queued batch waits for a busy thread before another one is woken for it.
pub(super) const PATIENCE: Duration = Duration::from_micros(200);

/// The longest a finished call's result waits for the owner while other calls run.
pub(super) const RESULTS_AT_LEAST: Duration = Duration::from_millis(50);

/// How long a thread waits for work before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(60);

/// The owner's side of the listener threads; dropping it lets them end once the queue is empty.
pub(super) struct Workers {
    shared: Arc<Shared>,
    listener: SyncListener,
    max_threads: usize,
    /// When the owner last found results.
    last_results: Instant,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
}

#[derive(Default)]
struct State {
    /// Batches waiting for a thread, and when each was queued.
    jobs: VecDeque<(Batch, Instant)>,
    /// Calls started (and when) that the owner has not reported yet.
    started: Vec<(BatchId, Instant)>,
    /// Finished calls the owner has not taken yet.
    done: Vec<Finished>,
    /// Calls in progress.
    busy: usize,
    threads: usize,
    /// Threads running a call or about to look for one (a parked thread that was woken counts).
    awake: usize,
    /// Parked threads.
    idle: usize,
    /// Wake-ups sent to parked threads and not yet taken.
    wakeups: usize,
    /// When a thread was last woken for a batch that waited.
    escalated: Option<Instant>,
    /// The owner, waiting for results.
    owner: Option<Waker>,
    closed: bool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Workers {
    pub(super) fn new(listener: SyncListener, max_threads: usize) -> Self {
        let shared = Arc::new(Shared { state: Mutex::default(), work: Condvar::new() });
        Self { shared, listener, max_threads: max_threads.max(1), last_results: Instant::now() }
    }

    /// Queue `batches` (one owner pass's, in order) for the threads, under one lock; a thread is
    /// woken only if none is awake to take them.
    pub(super) fn submit(&self, batches: impl IntoIterator<Item = Batch>, now: Instant) {
        let mut s = lock(&self.shared.state);
        let before = s.jobs.len();
        s.jobs.extend(batches.into_iter().map(|b| (b, now)));
        if s.jobs.len() > before && s.awake == 0 {
            self.wake_one(&mut s);
        }
    }

    /// Wake another thread if the oldest queued batch has waited [`PATIENCE`]; when to look
    /// again (for queued batches, or for results while calls run).
    pub(super) fn check(&self, now: Instant) -> Option<Instant> {
        let mut s = lock(&self.shared.state);
        let results = (s.busy > 0).then(|| {
            // Soon after results came, less often the longer the calls run.
            now + now.saturating_duration_since(self.last_results).clamp(PATIENCE, RESULTS_AT_LEAST)
        });
        let Some(&(_, oldest)) = s.jobs.front() else { return results };
        let since = s.escalated.map_or(oldest, |e| e.max(oldest));
        let next = if now < since + PATIENCE {
            since + PATIENCE
        } else {
            // Every awake thread is in a call (one looking for work would have taken it by now).
            self.wake_one(&mut s);
            s.escalated = Some(now);
            now + PATIENCE
        };
        Some(results.map_or(next, |r| r.min(next)))
    }

    /// Drop queued batches whose ids are in `ids` (sorted); those already started run on.
    pub(super) fn withdraw(&self, ids: &[BatchId]) {
        let mut s = lock(&self.shared.state);
        s.jobs.retain(|(b, _)| ids.binary_search(&b.id).is_err());
    }

    /// Move calls started to `started` and finished ones to `done` (starts first: a call's
    /// start is always reported before its result).
    pub(super) fn take_done(&mut self, started: &mut Vec<(BatchId, Instant)>, done: &mut Vec<Finished>) {
        let mut s = lock(&self.shared.state);
        // The owner is awake: no thread need wake it until it waits again (`ready_or_register`
        // registers anew, and sees results left meanwhile under the same lock). A stale waker
        // woke a busy owner for nothing, a system call and often a context switch each.
        s.owner = None;
        started.append(&mut s.started);
        if !s.done.is_empty() {
            done.append(&mut s.done);
            self.last_results = Instant::now();
        }
    }

    /// A handle for the owner's wait.
    pub(super) fn handle(&self) -> WorkersRef {
        WorkersRef(self.shared.clone())
    }

    fn wake_one(&self, s: &mut State) {
        if s.idle > 0 {
            s.idle -= 1;
            s.awake += 1;
            s.wakeups += 1;
            self.shared.work.notify_one();
            return;
        }
        if s.threads >= self.max_threads {
            return;
        }
        s.threads += 1;
        s.awake += 1;
        let (shared, listener) = (self.shared.clone(), self.listener.clone());
        if let Err(e) =
            thread::Builder::new().name("rmq-consume".into()).spawn(move || work(&shared, &listener))
        {
            // The threads there take the batch when they are free.
            tracing::warn!(error = %e, "cannot start a listener thread");
            s.threads -= 1;
            s.awake -= 1;
        }
    }
}

/// A clonable reference to the threads' shared state, for the owner's wait.
#[derive(Clone)]
pub(super) struct WorkersRef(Arc<Shared>);

impl WorkersRef {
    /// True if results wait; otherwise `waker` is woken when one arrives.
    pub(super) fn ready_or_register(&self, waker: &Waker) -> bool {
        let mut s = lock(&self.0.state);
        if s.done.is_empty() {
            s.owner = Some(waker.clone());
            false
        } else {
            true
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.work.notify_all();
    }
}

fn work(shared: &Shared, listener: &SyncListener) {
    let mut s = lock(&shared.state);
    loop {
        if let Some((batch, _)) = s.jobs.pop_front() {
            // The consume timeout counts from here.
            s.started.push((batch.id, Instant::now()));
            s.busy += 1;
            drop(s);
            let span = crate::batch_span(&batch);
            // The batch's parts move into the call (no reference counts touched).
            let Batch { id, queue, messages, kind, .. } = batch;
            let ctx = ConsumeContext::new(queue, kind);
            let (result, failed) = span.in_scope(|| guarded(|| listener(messages, ctx)));
            s = lock(&shared.state);
            s.busy -= 1;
            s.done.push((id, result, failed));
            // With more work queued, the results wait for this thread to run out of it (or for
            // the owner's own look): one wake-up for the lot.
            let owner = if s.jobs.is_empty() { s.owner.take() } else { None };
            if let Some(owner) = owner {
                drop(s);
                owner.wake();
                s = lock(&shared.state);
            }
            continue;
        }
        s.awake -= 1;
        if s.closed {
            s.threads -= 1;
            return;
        }
        s.idle += 1;
        loop {
            let (g, waited) = shared.work.wait_timeout(s, IDLE_EXIT).unwrap_or_else(PoisonError::into_inner);
            s = g;
            if s.wakeups > 0 {
                // `wake_one` counted this thread awake already.
                s.wakeups -= 1;
                break;
            }
            if s.closed || waited.timed_out() {
                s.idle -= 1;
                s.threads -= 1;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    use rocketmq_push_core::{BatchId, BatchKind, ConsumeStatus, MessageQueue, Messages};

    use super::*;

    fn batch(id: u64) -> Batch {
        Batch {
            id: BatchId(id),
            queue: MessageQueue::new("T", "b", 0).into(),
            messages: Messages::from_vec(Vec::new()),
            kind: BatchKind::Concurrent,
        }
    }

    /// Drive `w` as the owner does until `n` results arrived (or 10 s).
    fn results(w: &mut Workers, n: usize) -> Vec<Finished> {
        let (mut done, until) = (Vec::new(), Instant::now() + Duration::from_secs(10));
        while done.len() < n && Instant::now() < until {
            w.check(Instant::now());
            w.take_done(&mut Vec::new(), &mut done);
            thread::sleep(Duration::from_micros(50));
        }
        done
    }

    #[test]
    fn a_burst_of_quick_calls_wakes_one_thread() {
        let threads = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let seen = threads.clone();
        let listener = sync_listener(move |_, _| {
            seen.lock().unwrap().insert(thread::current().id());
            ConsumeStatus::Success
        });
        let mut w = Workers::new(listener, 20);
        let now = Instant::now();
        for i in 0..20 {
            w.submit([batch(i)], now);
        }
        // No `check`: only patience adds threads, and it is not asked here.
        let until = Instant::now() + Duration::from_secs(10);
        let mut done = Vec::new();
        while done.len() < 20 && Instant::now() < until {
            w.take_done(&mut Vec::new(), &mut done);
            thread::yield_now();
        }
        assert_eq!(done.len(), 20);
        assert_eq!(threads.lock().unwrap().len(), 1, "one thread took the whole burst");
        let mut ids: Vec<u64> = done.iter().map(|d| d.0.0).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn a_batch_behind_a_slow_call_gets_another_thread() {
        // The first call blocks until the second has started: without another thread, never.
        let (started_tx, started_rx) = mpsc::channel::<u64>();
        let started_rx = Mutex::new(started_rx);
        let listener = sync_listener(move |_, ctx| {
            if ctx.queue.queue_id == 1 {
                let second = started_rx.lock().unwrap().recv_timeout(Duration::from_secs(10));
                return if second.is_ok() { ConsumeStatus::Success } else { ConsumeStatus::ReconsumeLater };
            }
            started_tx.send(0).unwrap();
            ConsumeStatus::Success
        });
        let mut w = Workers::new(listener, 20);
        let mut slow = batch(1);
        std::sync::Arc::make_mut(&mut slow.queue).queue_id = 1;
        w.submit([slow], Instant::now());
        thread::sleep(Duration::from_millis(5));
        w.submit([batch(2)], Instant::now());
        let done = results(&mut w, 2);
        assert_eq!(done.len(), 2);
        assert!(done.iter().all(|d| d.1.status == ConsumeStatus::Success), "{done:?}");
    }

    #[test]
    fn withdrawn_batches_never_start_and_starts_come_before_results() {
        // The first call holds the only thread until told to go on.
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let go_rx = Mutex::new(go_rx);
        let listener = sync_listener(move |_, ctx| {
            if ctx.queue.queue_id == 1 {
                let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(10));
            }
            ConsumeStatus::Success
        });
        let mut w = Workers::new(listener, 1);
        let mut slow = batch(1);
        std::sync::Arc::make_mut(&mut slow.queue).queue_id = 1;
        w.submit([slow, batch(2), batch(3), batch(4)], Instant::now());
        let (mut started, mut done) = (Vec::new(), Vec::new());
        let until = Instant::now() + Duration::from_secs(10);
        while started.is_empty() && Instant::now() < until {
            w.take_done(&mut started, &mut done);
            thread::yield_now();
        }
        w.withdraw(&[BatchId(2), BatchId(4)]);
        go_tx.send(()).unwrap();
        while done.len() < 2 && Instant::now() < until {
            w.take_done(&mut started, &mut done);
            thread::yield_now();
        }
        thread::sleep(Duration::from_millis(20));
        w.take_done(&mut started, &mut done);
        assert_eq!(started.iter().map(|s| s.0.0).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(done.iter().map(|d| d.0.0).collect::<Vec<_>>(), vec![1, 3]);
        assert!(started[0].1 <= started[1].1);
    }

    #[test]
    fn threads_never_exceed_the_limit_and_a_panic_is_reconsume_later() {
        let live = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (l, m) = (live, most.clone());
        let listener = sync_listener(move |_, ctx| {
            let n = l.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(n, Ordering::SeqCst);
            thread::sleep(Duration::from_millis(2));
            l.fetch_sub(1, Ordering::SeqCst);
            assert!(ctx.queue.queue_id != 7, "boom");
            ConsumeStatus::Success
        });
        let mut w = Workers::new(listener, 3);
        for i in 0..30 {
            let mut b = batch(i);
            std::sync::Arc::make_mut(&mut b.queue).queue_id = i as i32 % 10;
            w.submit([b], Instant::now());
        }
        let done = results(&mut w, 30);
        assert_eq!(done.len(), 30);
        assert!(most.load(Ordering::SeqCst) <= 3);
        let panicked: Vec<_> = done.iter().filter(|d| d.2.is_some()).collect();
        assert_eq!(panicked.len(), 3);
        assert!(panicked.iter().all(|d| d.1.status == ConsumeStatus::ReconsumeLater));
    }
}
