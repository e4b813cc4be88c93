//! The assigned queues: a generational slab keyed by [`QueueKey`], plus an index by queue.
//! Dropping a queue bumps its slot's generation, so every late response, timer or consume
//! result that names the old key is recognised as stale and ignored.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::message::MessageQueue;
use crate::offset_store::OffsetCell;
use crate::process_queue::ProcessQueue;
use crate::timer::QueueKey;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Orderly: waiting for the broker lock (nothing is consumed until it is held).
    Locking,
    /// Looking up where to start.
    ComputingOffset,
    /// Pulling from `next_offset`.
    Pulling,
    /// POP (5.x): popping from the broker, which assigned the queue in POP mode.
    Popping,
    /// Orderly: released by a rebalance, waiting for its running batch before persisting and
    /// unlocking (never unlock under a running batch).
    Releasing,
}

#[derive(Debug)]
pub(super) struct QueueState {
    /// The queue on the wire (namespace included).
    pub(super) mq: MessageQueue,
    /// The queue as users see it (namespace stripped), shared with the batches handed out (one
    /// reference count per batch).
    pub(super) user_mq: Arc<MessageQueue>,
    pub(super) phase: Phase,
    /// Next offset to pull.
    pub(super) next_offset: i64,
    pub(super) pq: ProcessQueue,
    pub(super) offset: OffsetCell,
    pub(super) pull_in_flight: bool,
    pub(super) persist_in_flight: bool,
    /// Broker id the broker suggested for the next pull (0 = master).
    pub(super) suggest_broker_id: i64,
    pub(super) last_pull_ms: i64,
    pub(super) last_consume_ms: i64,
    /// The queue's max offset as the last pull answer gave it (−1 before one).
    pub(super) broker_max_offset: i64,
    /// The queue's min offset as the last pull answer gave it (0 before one).
    pub(super) broker_min_offset: i64,
    /// A seek that arrived before the queue started pulling: where it starts.
    pub(super) pending_seek: Option<i64>,
    /// Its topic's slot in the consumer's statistics windows.
    pub(super) stats_slot: usize,
    /// Orderly: when the broker last confirmed our lock (`None`: not locked).
    pub(super) locked_at: Option<std::time::Instant>,
    /// Orderly: the one batch in flight.
    pub(super) consuming: Option<crate::event::BatchId>,
    /// Orderly: held back after SUSPEND_CURRENT_QUEUE_A_MOMENT until its timer fires.
    pub(super) suspended: bool,
    /// Orderly: consecutive failed lock attempts (back-off).
    pub(super) lock_failures: u32,
    /// Orderly: messages given up on, on their way to the dead-letter queue. The queue waits for
    /// them, as Java's synchronous send does: nothing after a message overtakes it.
    pub(super) dead_letters: u32,
    /// Released because its broker left the route: its commit is remembered (the broker may
    /// come back having lost it).
    pub(super) broker_gone: bool,
    /// When the pull in flight was sent, if it carries a commit. The broker may apply that
    /// commit after an update sent later (pulls and offset updates run on separate pools), so
    /// shutdown's final updates wait until it is answered or has had [`PULL_SETTLE`] to be
    /// processed; otherwise an older commit could undo the final one and a restart replay.
    pub(super) pull_commit_sent: Option<std::time::Instant>,
    /// POP: messages popped and not yet acked or made invisible again (Java's `waitAckCount`).
    pub(super) pop_unanswered: usize,
}

/// How long after it was sent a pull has surely been processed by the broker (its commit
/// applied), answered or not: a long-polled pull is processed, then held.
pub(super) const PULL_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

impl QueueState {
    fn new(mq: MessageQueue, user_mq: Arc<MessageQueue>) -> Self {
        Self {
            mq,
            user_mq,
            phase: Phase::ComputingOffset,
            next_offset: -1,
            pq: ProcessQueue::new(),
            offset: OffsetCell::default(),
            pull_in_flight: false,
            persist_in_flight: false,
            suggest_broker_id: 0,
            last_pull_ms: 0,
            last_consume_ms: 0,
            broker_max_offset: -1,
            broker_min_offset: 0,
            pending_seek: None,
            stats_slot: 0,
            locked_at: None,
            consuming: None,
            suspended: false,
            lock_failures: 0,
            dead_letters: 0,
            broker_gone: false,
            pull_commit_sent: None,
            pop_unanswered: 0,
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    state: Option<QueueState>,
}

#[derive(Debug, Default)]
pub(super) struct QueueTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    by_mq: BTreeMap<MessageQueue, QueueKey>,
}

impl QueueTable {
    /// Add a queue; it must not be held already.
    pub(super) fn insert(&mut self, mq: MessageQueue, user_mq: Arc<MessageQueue>) -> QueueKey {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.state = Some(QueueState::new(mq.clone(), user_mq));
        let key = QueueKey { index, generation: slot.generation };
        self.by_mq.insert(mq, key);
        key
    }

    /// Drop a queue; its key becomes stale.
    pub(super) fn remove(&mut self, key: QueueKey) -> Option<QueueState> {
        let slot = self.slots.get_mut(key.index as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        let state = slot.state.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(key.index);
        self.by_mq.remove(&state.mq);
        Some(state)
    }

    pub(super) fn get(&self, key: QueueKey) -> Option<&QueueState> {
        let slot = self.slots.get(key.index as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        slot.state.as_ref()
    }

    pub(super) fn get_mut(&mut self, key: QueueKey) -> Option<&mut QueueState> {
        let slot = self.slots.get_mut(key.index as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        slot.state.as_mut()
    }

    pub(super) fn key_of(&self, mq: &MessageQueue) -> Option<QueueKey> {
        self.by_mq.get(mq).copied()
    }

    /// Held queues in queue order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &MessageQueue> + '_ {
        self.by_mq.keys()
    }

    /// Keys in queue order (a snapshot, so the caller may mutate the table).
    pub(super) fn all_keys(&self) -> Vec<QueueKey> {
        self.by_mq.values().copied().collect()
    }

    /// Keys of one topic's queues, in queue order.
    pub(super) fn keys_of_topic(&self, topic: &str) -> Vec<QueueKey> {
        self.by_mq.iter().filter(|(q, _)| &*q.topic == topic).map(|(_, k)| *k).collect()
    }

    pub(super) fn len(&self) -> usize {
        self.by_mq.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_keys_after_remove() {
        let mut t = QueueTable::default();
        let q = MessageQueue::new("T", "b", 0);
        let k1 = t.insert(q.clone(), q.clone().into());
        assert!(t.get(k1).is_some());
        assert!(t.remove(k1).is_some());
        assert!(t.get(k1).is_none(), "generation bumped");
        let k2 = t.insert(q.clone(), q.clone().into());
        assert_eq!(k2.index, k1.index, "slot reused");
        assert_ne!(k2, k1);
        assert!(t.get_mut(k1).is_none() && t.remove(k1).is_none());
        assert_eq!(t.key_of(&q), Some(k2));
        assert_eq!(t.keys_of_topic("T"), vec![k2]);
        assert_eq!(t.len(), 1);
    }
}
