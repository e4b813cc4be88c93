//! Broker locks for orderly clustering consumption (broadcasting needs none, as in Java).
//!
//! - A newly held queue is `Locking` until LOCK_BATCH_MQ grants it. Only then is its offset
//!   read, so whatever the previous owner persisted before unlocking is seen (Java reads it
//!   before locking and re-reads on the first pull after the lock).
//! - Every `lockInterval` all held queues are renewed, one request per broker. A failed renewal
//!   is retried after `pullTimeDelayMillsWhenException` instead of waiting a whole interval.
//! - The client treats its lock as expired `lockMaxLiveTime` after *sending* the last granted
//!   request (Java counts from the answer, which is later than the broker's clock starts): no new
//!   batch starts on an expired lock.
//! - A refusal, or a lost connection to the broker (it may have restarted and forgotten its
//!   locks), puts the queue back to `Locking`, retried with back-off. A lock that was not held
//!   without a gap is a new lock: the cache is dropped and the offset read again (the higher of
//!   the broker's and ours, so nothing this client finished is replayed).
//! - A released queue is persisted and, once the broker confirmed the update, unlocked — never
//!   before the offset landed (Java sends both oneway and delays the unlock 20 s to paper over
//!   the race). `orderly.rs` makes sure no batch is running by then. At shutdown, a queue whose
//!   batch outlived the deadline is not unlocked at all (Java unlocks it under the batch): its
//!   lock lapses on the broker instead.
//! - A queue whose lock was granted again while its batch ran is renewed like any held lock and
//!   put in doubt like one; if the grant expired by the time the batch answers, it is locked anew.
//!
//! A client can only bound, not exclude, overlap with another owner: a batch that runs longer
//! than the broker's lock lifetime (60 s) minus ours (30 s), or across a broker restart, may
//! overlap the next owner's first batch. Java has the same bound.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Consumer;
use super::lifecycle::RunState;
use super::offsets::Persist;
use super::queues::Phase;
use super::requests::{Failure, PendingKind};
use crate::config::ConsumeMode;
use crate::event::{Event, PeerAddr, Request};
use crate::message::MessageQueue;
use crate::protocol::body::{JsonBody, LockBatchRequestBody, LockBatchResponseBody, MessageModel};
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode};
use crate::timer::{QueueKey, Timer};

/// Java's lock and unlock request timeout.
const LOCK_TIMEOUT: Duration = Duration::from_secs(1);
/// First retry after a refused or failed lock; doubles per failure up to `LOCK_RETRY_MAX`.
const LOCK_RETRY_MIN: Duration = Duration::from_millis(500);
const LOCK_RETRY_MAX: Duration = Duration::from_secs(5);

impl Consumer {
    /// Orderly clustering consumption, the only mode that takes broker locks.
    pub(super) fn uses_locks(&self) -> bool {
        self.cfg.consume_mode == ConsumeMode::Orderly && self.cfg.message_model == MessageModel::Clustering
    }

    /// Whether `key` may start a batch as far as locks go (always true without locks).
    pub(super) fn lock_valid(&self, key: QueueKey) -> bool {
        !self.uses_locks() || self.holds_lock(key)
    }

    /// Whether `key` holds a broker lock the client still trusts (not yet `lockMaxLiveTime` old).
    pub(super) fn holds_lock(&self, key: QueueKey) -> bool {
        self.uses_locks()
            && self
                .queues
                .get(key)
                .and_then(|q| q.locked_at)
                .is_some_and(|t| self.now.saturating_duration_since(t) < self.cfg.lock_max_live_time)
    }

    /// Where a newly held queue starts: locked first when locks are used.
    pub(super) fn begin_queue(&mut self, key: QueueKey) {
        if let Some(q) = self.queues.get_mut(key).filter(|q| self.pop_queues.contains(&q.mq)) {
            q.phase = Phase::Popping;
            return self.try_pop(key);
        }
        if self.uses_locks() {
            if let Some(q) = self.queues.get_mut(key) {
                q.phase = Phase::Locking;
            }
            self.lock_queues(&[key]);
        } else {
            self.compute_start_offset(key);
        }
    }

    /// Send LOCK_BATCH_MQ for `keys`, one request per broker. Queues with an unlock in flight
    /// wait for its answer (a lock overtaking the unlock would be undone by it).
    pub(super) fn lock_queues(&mut self, keys: &[QueueKey]) {
        let mut by_broker: BTreeMap<Arc<str>, (Vec<QueueKey>, Vec<MessageQueue>)> = BTreeMap::new();
        for &key in keys {
            let Some(q) = self.queues.get(key) else { continue };
            if self.unlocking.contains_key(&q.mq) {
                continue;
            }
            let e = by_broker.entry(q.mq.broker_name.clone()).or_default();
            e.0.push(key);
            e.1.push(q.mq.clone());
        }
        for (broker, (keys, mqs)) in by_broker {
            let Some(peer) = self.master_addr(&broker) else {
                for key in keys {
                    self.lock_failed(key);
                }
                continue;
            };
            let body = LockBatchRequestBody {
                consumer_group: self.group.clone(),
                client_id: self.cfg.client_id.as_str().to_owned(),
                only_this_broker: false,
                mq_set: mqs,
            };
            // Locks need no registration: sent at once, past the heartbeat gate.
            let kind = PendingKind::Lock { keys, sent: self.now };
            self.transmit(peer, Request::LockBatchMq(body), kind, LOCK_TIMEOUT);
        }
    }

    /// `lockInterval`: renew every held lock (queues still `Locking` retry on their own timers).
    pub(super) fn renew_locks(&mut self) {
        if !self.uses_locks() || matches!(self.state, RunState::Unregistering | RunState::Terminated) {
            return;
        }
        self.timers.set(Timer::LockRenew, self.now + self.cfg.lock_interval);
        let keys: Vec<QueueKey> = self
            .queues
            .all_keys()
            .into_iter()
            // A `Locking` queue granted again while its batch runs holds a lock to renew too.
            // A POP queue is locked by the broker itself, per pop.
            .filter(|k| {
                self.queues.get(*k).is_some_and(|q| {
                    q.phase != Phase::Popping && (q.phase != Phase::Locking || q.locked_at.is_some())
                })
            })
            .collect();
        self.lock_queues(&keys);
    }

    pub(super) fn on_lock(
        &mut self,
        keys: &[QueueKey],
        sent: Instant,
        peer: &PeerAddr,
        result: Result<RemotingCommand, Failure>,
    ) {
        let granted = match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => {
                match LockBatchResponseBody::decode(&cmd.body) {
                    Ok(b) => Some(b.lock_ok_mq_set),
                    Err(e) => {
                        self.emit_malformed(peer.clone(), RequestCode::LockBatchMq, e);
                        None
                    }
                }
            }
            Ok(cmd) => {
                self.emit_broker_error(peer.clone(), RequestCode::LockBatchMq, &cmd);
                None
            }
            Err(_) => None,
        };
        let Some(mut granted) = granted else {
            for &key in keys {
                self.lock_failed(key);
            }
            return;
        };
        granted.sort();
        for &key in keys {
            let Some(q) = self.queues.get(key) else { continue };
            if granted.binary_search(&q.mq).is_ok() {
                self.lock_granted(key, sent);
            } else {
                self.lock_refused(key);
            }
        }
        // Granted queues we no longer hold (released while the request was out) go back at
        // once, or the next owner would wait for the broker's lock to expire.
        // A queue whose release is persisting is unlocked after its offset lands, not here.
        let stray: Vec<MessageQueue> = granted
            .into_iter()
            .filter(|mq| self.queues.key_of(mq).is_none())
            .filter(|mq| !self.release_unlocks.values().any(|(r, _)| r == mq))
            .collect();
        if !stray.is_empty() && self.state == RunState::Running {
            self.unlock(stray, false);
        }
    }

    fn lock_granted(&mut self, key: QueueKey, sent: Instant) {
        let was_valid = self.lock_valid(key);
        let Some(q) = self.queues.get_mut(key) else { return };
        q.locked_at = Some(q.locked_at.map_or(sent, |t| t.max(sent)));
        q.lock_failures = 0;
        let (phase, busy) = (q.phase, q.consuming.is_some());
        self.timers.stop(Timer::Lock(key));
        match phase {
            // With a batch running, the refresh waits for its result.
            Phase::Locking if !busy => self.refresh_after_lock(key),
            Phase::Pulling if !was_valid => {
                // Not held without a gap: someone else may have consumed meanwhile.
                if let Some(q) = self.queues.get_mut(key) {
                    q.phase = Phase::Locking;
                }
                self.timers.stop(Timer::Pull(key));
                if !busy {
                    self.refresh_after_lock(key);
                }
            }
            Phase::Pulling => self.orderly_next(key),
            Phase::Locking | Phase::ComputingOffset | Phase::Releasing | Phase::Popping => {}
        }
    }

    fn lock_refused(&mut self, key: QueueKey) {
        let Some(q) = self.queues.get(key) else { return };
        let queue = (*q.user_mq).clone();
        self.emit(Event::LockFailed { queue });
        self.lose_lock(key);
    }

    /// No usable answer: a queue waiting for its first lock retries with back-off; a held one
    /// keeps its lock until it expires, and the renewal is tried again soon.
    fn lock_failed(&mut self, key: QueueKey) {
        let Some(q) = self.queues.get(key) else { return };
        if q.phase == Phase::Locking {
            let queue = (*q.user_mq).clone();
            self.emit(Event::LockFailed { queue });
            self.lose_lock(key);
        } else if self.state == RunState::Running {
            let at = self.now + self.cfg.pull_time_delay_when_exception;
            self.timers.set_if_earlier(Timer::LockRenew, at);
        }
    }

    /// The lock is gone (or may be): stop pulling and starting batches, retry with back-off.
    /// A running batch finishes; its result still counts.
    pub(super) fn lose_lock(&mut self, key: QueueKey) {
        let Some(q) = self.queues.get_mut(key) else { return };
        q.locked_at = None;
        if q.phase == Phase::Releasing {
            return;
        }
        q.phase = Phase::Locking;
        q.lock_failures = q.lock_failures.saturating_add(1);
        let shift = (q.lock_failures - 1).min(8);
        let delay = (LOCK_RETRY_MIN * (1 << shift)).min(LOCK_RETRY_MAX);
        self.timers.stop(Timer::Pull(key));
        self.timers.stop(Timer::ComputeOffset(key));
        if self.state == RunState::Running {
            self.timers.set(Timer::Lock(key), self.now + delay);
        }
    }

    /// The connection to a broker is gone: it may have restarted and forgotten every lock.
    pub(super) fn locks_in_doubt(&mut self, peer: &PeerAddr) {
        if !self.uses_locks() {
            return;
        }
        for key in self.queues.all_keys() {
            let Some(q) = self.queues.get(key) else { continue };
            let on_peer = self.master_addr(&q.mq.broker_name).as_ref() == Some(peer);
            let held = matches!(q.phase, Phase::ComputingOffset | Phase::Pulling)
                || (q.phase == Phase::Locking && q.locked_at.is_some());
            if on_peer && held {
                self.lose_lock(key);
            }
        }
    }

    /// A new lock: start the queue afresh (stale pull answers and offset lookups are ignored
    /// under the new key), keeping what this client knows of its offset.
    pub(super) fn refresh_after_lock(&mut self, key: QueueKey) {
        for t in [Timer::Pull(key), Timer::ComputeOffset(key), Timer::Lock(key), Timer::OrderlyResume(key)] {
            self.timers.stop(t);
        }
        let Some(old) = self.queues.remove(key) else { return };
        let new = self.hold_queue(old.mq, old.user_mq);
        if let Some(q) = self.queues.get_mut(new) {
            q.phase = Phase::ComputingOffset;
            q.offset = old.offset;
            q.locked_at = old.locked_at;
            q.last_pull_ms = old.last_pull_ms;
            q.last_consume_ms = old.last_consume_ms;
        }
        self.compute_start_offset(new);
    }

    /// A `Releasing` queue was assigned to us again before its batch ended: keep it, and lock
    /// it afresh (what it holds is refreshed once the batch answers).
    pub(super) fn keep_releasing_queue(&mut self, key: QueueKey) {
        let locks = self.uses_locks();
        let Some(q) = self.queues.get_mut(key) else { return };
        if locks {
            q.phase = Phase::Locking;
            self.lock_queues(&[key]);
        } else {
            q.phase = Phase::Pulling;
            self.try_pull(key);
        }
    }

    /// Release with locks: persist, and unlock once the broker confirmed the offset.
    pub(super) fn release_locked(&mut self, key: QueueKey) {
        let Some(q) = self.queues.get(key) else { return };
        let (mq, offset) = (q.mq.clone(), q.offset.value());
        if self.persist_queue(key, Persist::Release) {
            self.release_unlocks.insert(key, (mq, offset));
        } else {
            self.unlock(vec![mq], false);
        }
    }

    /// An offset update of `key` for `offset` answered. Once one at or past the release's offset
    /// did (or failed: unlocking anyway costs the next owner duplicates, not unlocking would
    /// stall it until the broker's lock expires), the released queue is unlocked.
    pub(super) fn unlock_after_persist(&mut self, key: QueueKey, offset: i64) {
        let Some((mq, wanted)) = self.release_unlocks.get(&key).cloned() else { return };
        if offset < wanted {
            return;
        }
        self.release_unlocks.remove(&key);
        // Taken back meanwhile: it is ours again, keep the lock.
        if self.queues.key_of(&mq).is_none() {
            self.unlock(vec![mq], false);
        }
    }

    /// UNLOCK_BATCH_MQ, one request per broker. At shutdown each counts as outstanding.
    pub(super) fn unlock(&mut self, mut mqs: Vec<MessageQueue>, shutdown: bool) {
        mqs.sort();
        let mut by_broker: BTreeMap<Arc<str>, Vec<MessageQueue>> = BTreeMap::new();
        for mq in mqs {
            by_broker.entry(mq.broker_name.clone()).or_default().push(mq);
        }
        for (broker, mqs) in by_broker {
            let Some(peer) = self.master_addr(&broker) else { continue };
            for mq in &mqs {
                *self.unlocking.entry(mq.clone()).or_default() += 1;
            }
            let body = LockBatchRequestBody {
                consumer_group: self.group.clone(),
                client_id: self.cfg.client_id.as_str().to_owned(),
                only_this_broker: false,
                mq_set: mqs.clone(),
            };
            if shutdown {
                self.shutdown_outstanding += 1;
            }
            self.transmit(
                peer,
                Request::UnlockBatchMq(body),
                PendingKind::Unlock { mqs, shutdown },
                LOCK_TIMEOUT,
            );
        }
    }

    pub(super) fn on_unlock(&mut self, mqs: &[MessageQueue], shutdown: bool) {
        if shutdown {
            self.shutdown_outstanding = self.shutdown_outstanding.saturating_sub(1);
        }
        let mut relock = Vec::new();
        for mq in mqs {
            if let Some(n) = self.unlocking.get_mut(mq) {
                *n -= 1;
                if *n == 0 {
                    self.unlocking.remove(mq);
                }
            }
            if let Some(key) = self.queues.key_of(mq) {
                if self.queues.get(key).is_some_and(|q| q.phase == Phase::Locking) {
                    relock.push(key);
                }
            }
        }
        if !relock.is_empty() && self.state == RunState::Running {
            self.lock_queues(&relock);
        }
    }

    /// Shutdown, after the final offsets landed: give every lock back — except those of queues
    /// whose batch outlived the shutdown deadline: user code still runs there, so the lock stays
    /// until the broker expires it.
    pub(super) fn unlock_all(&mut self) {
        if !self.uses_locks() {
            return;
        }
        let mqs: Vec<MessageQueue> = self
            .queues
            .all_keys()
            .into_iter()
            .filter_map(|k| self.queues.get(k))
            .filter(|q| q.consuming.is_none() && q.phase != Phase::Popping)
            .map(|q| q.mq.clone())
            .collect();
        if !mqs.is_empty() {
            self.unlock(mqs, true);
        }
    }

    /// Milliseconds since the epoch of the last granted lock (0 = none).
    pub(super) fn lock_wall_ms(&self, key: QueueKey) -> i64 {
        let Some(t) = self.queues.get(key).and_then(|q| q.locked_at) else { return 0 };
        self.cfg.start_wall_ms + t.saturating_duration_since(self.start).as_millis() as i64
    }
}
