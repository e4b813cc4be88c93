//! Orderly consumption (`MessageListenerOrderly`): one batch per queue at a time, in offset
//! order; suspend; the dead-letter queue. The locks it relies on are in `locks.rs`.
//!
//! The first ready messages of a queue go out as one batch; the next waits for its result.
//! SUSPEND_CURRENT_QUEUE_A_MOMENT (and RECONSUME_LATER, which Java's orderly listener cannot
//! return) holds the queue for the context's suspend time, clamped to 10 ms..=30 s as Java does,
//! then the same messages go out again with their count raised. A message already consumed
//! `maxReconsumeTimes` times (default 16 here, where Java's orderly default is unbounded and a
//! poison message blocks its queue forever) is sent to the dead-letter queue and the queue moves
//! on; its offset is not committed until the broker has it.
//!
//! On revoke a queue with a running batch is `Releasing`: it keeps its lock (renewed) until the
//! batch answers, and only then is released (never unlock under a running batch).

use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;

use super::Consumer;
use super::in_flight::InFlight;
use super::lifecycle::RunState;
use super::queues::Phase;
use crate::event::{ConsumeResult, ConsumeStatus, Event};
use crate::process_queue::EntryState;
use crate::protocol::body::MessageModel;
use crate::timer::{QueueKey, Timer};

/// Java's clamp of `suspendCurrentQueueTimeMillis`.
pub(super) const SUSPEND_MIN: Duration = Duration::from_millis(10);
pub(super) const SUSPEND_MAX: Duration = Duration::from_secs(30);

impl Consumer {
    /// Orderly re-keying (the broker moved the queue): the running batch, if any, still blocks
    /// the queue under its new key, and its result is discarded.
    pub(super) fn carry_orderly(&mut self, old: &super::queues::QueueState, new: QueueKey) {
        let Some(q) = self.queues.get_mut(new) else { return };
        q.locked_at = old.locked_at;
        q.consuming = old.consuming;
        if let Some(b) = old.consuming.and_then(|id| self.batches.get_mut(&id)) {
            b.key = new;
            b.discard = true;
        }
    }

    /// Hand out the next batch of `key` if it may go: pulling, locked, nothing running, not
    /// suspended, not shutting down.
    pub(super) fn orderly_next(&mut self, key: QueueKey) {
        if self.state != RunState::Running || !self.lock_valid(key) {
            return;
        }
        let Some(q) = self.queues.get(key) else { return };
        if q.phase != Phase::Pulling || q.consuming.is_some() || q.suspended || q.dead_letters > 0 {
            return;
        }
        if self.pop_order_running(&q.mq) {
            return;
        }
        let ready = q.pq.ready(self.cfg.consume_message_batch_max_size);
        if ready.is_empty() {
            return;
        }
        let (id, _) = self.dispatch_run(key, &ready);
        if let (Some(id), Some(q)) = (id, self.queues.get_mut(key)) {
            q.consuming = Some(id);
        }
    }

    pub(super) fn on_orderly_result(&mut self, id: crate::BatchId, b: InFlight, result: ConsumeResult) {
        let key = b.key;
        let Some(q) = self.queues.get_mut(key) else { return };
        if q.consuming == Some(id) {
            q.consuming = None;
        }
        if b.discard {
            return self.after_orderly_batch(key);
        }
        let n = b.offsets.len();
        let ok = if result.status == ConsumeStatus::Success { n } else { 0 };
        self.count_consumed(&b, ok);
        let Some(q) = self.queues.get_mut(key) else { return };
        if result.status == ConsumeStatus::Success {
            for o in &b.offsets {
                q.pq.remove(*o);
            }
            self.stats.consumed_ok += n as u64;
        } else {
            self.stats.consumed_failed += n as u64;
            self.suspend_batch(key, &b.offsets, result);
        }
        self.update_commit(key);
        self.after_orderly_batch(key);
    }

    /// A failed batch: messages out of attempts go to the dead-letter queue, the rest wait for
    /// the suspend time and go out again, in order, counted.
    fn suspend_batch(&mut self, key: QueueKey, offsets: &[i64], result: ConsumeResult) {
        let max = self.cfg.effective_max_reconsume_times();
        let clustering = self.cfg.message_model == MessageModel::Clustering;
        let Some(q) = self.queues.get_mut(key) else { return };
        let mut again = Vec::with_capacity(offsets.len());
        let mut give_up: SmallVec<[i64; 4]> = SmallVec::new();
        for &o in offsets {
            let Some(e) = q.pq.get(o) else { continue };
            let m = e.msg();
            if m.reconsume_times >= max {
                give_up.push(o);
            } else {
                let mut m = m.clone();
                m.reconsume_times += 1;
                again.push((o, m));
            }
        }
        // The retried messages share one chunk, so they go out as one batch again.
        let (retry_offsets, msgs): (Vec<i64>, Vec<_>) = again.into_iter().unzip();
        let chunk = Arc::new(msgs);
        for (i, o) in retry_offsets.iter().enumerate() {
            if let Some(mut e) = q.pq.get_mut(*o) {
                e.rechunk(&chunk, i as u32);
                e.set_state(EntryState::Ready);
            }
        }
        let dropped = if clustering {
            for &o in &give_up {
                // Held (pinning the commit, holding the queue) until the broker has it in the
                // dead-letter queue.
                if let Some(mut e) = q.pq.get_mut(o) {
                    e.set_state(EntryState::InFlight);
                    q.dead_letters += 1;
                }
            }
            0
        } else {
            // Broadcasting has no retry topic to send to: give up locally, as Java drops.
            give_up.iter().filter(|o| q.pq.remove(**o)).count()
        };
        let queue = (*q.user_mq).clone();
        if !retry_offsets.is_empty() {
            q.suspended = true;
            let wait =
                result.suspend_millis.map_or(self.cfg.suspend_current_queue_time, Duration::from_millis);
            let at = self.now + wait.clamp(SUSPEND_MIN, SUSPEND_MAX);
            self.timers.set(Timer::OrderlyResume(key), at);
        }
        if dropped > 0 {
            self.emit(Event::FailedMessagesDropped { queue, count: dropped });
        }
        if clustering {
            for o in give_up {
                self.send_back(key, o, -1);
            }
        }
    }

    /// After a batch answered (or a dead letter landed): finish a release, refresh a regained
    /// lock, lock again, or go on.
    pub(super) fn after_orderly_batch(&mut self, key: QueueKey) {
        let valid = self.lock_valid(key);
        let Some(q) = self.queues.get(key) else { return };
        if q.consuming.is_some() {
            return;
        }
        match q.phase {
            // Released once nothing of it is with user code or on its way to the DLQ.
            Phase::Releasing if q.dead_letters == 0 => self.release_queue(key),
            Phase::Releasing => {}
            Phase::Locking if valid => self.refresh_after_lock(key),
            // Granted again while the batch ran, and expired since: lock anew.
            Phase::Locking if q.locked_at.is_some() => self.lose_lock(key),
            Phase::Pulling => {
                self.orderly_next(key);
                self.try_pull(key);
            }
            _ => {}
        }
    }

    pub(super) fn on_orderly_resume(&mut self, key: QueueKey) {
        if let Some(q) = self.queues.get_mut(key) {
            q.suspended = false;
        }
        self.orderly_next(key);
    }

    /// Stop holding a queue. A running orderly batch is waited for (the queue is `Releasing`
    /// meanwhile, its lock kept); otherwise the queue goes now.
    pub(super) fn revoke_queue(&mut self, key: QueueKey) {
        let Some(q) = self.queues.get_mut(key) else { return };
        if q.consuming.is_some() || q.dead_letters > 0 {
            q.phase = Phase::Releasing;
            for t in
                [Timer::Pull(key), Timer::ComputeOffset(key), Timer::Lock(key), Timer::OrderlyResume(key)]
            {
                self.timers.stop(t);
            }
        } else {
            self.release_queue(key);
        }
    }
}
