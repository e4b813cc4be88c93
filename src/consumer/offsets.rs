//! Persisting offsets: every `persistConsumerOffsetInterval`, before a queue is released, and at
//! shutdown. UPDATE_CONSUMER_OFFSET is sent as a request (Java sends it oneway), so a value stays
//! dirty until the broker confirms it and a lost update is simply sent again. At most one update
//! per queue is in flight: the broker applies updates on a thread pool, so two in flight may land
//! in either order, the older last — a release or shutdown would then hand the next owner an
//! offset it already passed. An update due while one is in flight waits for its answer.
//!
//! The broker keeps a group's offsets of one topic in one map, created by the first commit with
//! a get-then-put: two first commits of different queues processed together each create a map
//! and the later replaces the earlier, losing its queue's offset (seen on 5.3.3: a queue's
//! final commit at shutdown gone, the queue replayed). Until this consumer has seen one update
//! of a (broker, topic) answered, that update goes alone: the others wait for its answer, and
//! pulls carry no commit. After the link to a broker drops, its maps count as unknown again
//! and its offsets as unconfirmed (sent again at the next persist). Other members may create
//! the same map at the same moment, which no client can order: a map's queues are sent once
//! more at the first periodic persist after this consumer created it (Java re-sends every
//! offset every time, which heals the same loss).

use std::sync::Arc;
use std::time::Duration;

use super::Consumer;
use super::requests::{Failure, PendingKind};
use crate::event::{Output, PeerAddr, Request};
use crate::message::MessageQueue;
use crate::protocol::body::MessageModel;
use crate::protocol::header::UpdateConsumerOffsetRequestHeader;
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode};
use crate::timer::{QueueKey, Timer};

/// Why an offset is persisted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Persist {
    Periodic,
    /// The broker moved the queue: send now whatever is in flight.
    Now,
    /// The queue is being released: send its last value now (nothing newer can follow).
    Release,
    /// Shutdown: counted until answered.
    Shutdown,
}

/// A broker's offset map for one topic of the group: (broker name, topic).
pub(super) type OffsetMapKey = (Arc<str>, Arc<str>);

/// What this consumer knows of one broker's offset map for one topic.
#[derive(Debug)]
pub(super) enum OffsetMap {
    /// An update to it was answered: updates and pull commits may go together. `recheck`:
    /// created by this consumer since the last periodic persist, so another member's first
    /// commit, processed with ours, may have replaced it; its held queues go once more then.
    Exists { recheck: bool },
    /// Its first update is on the way; these wait for the answer, in order.
    Creating(Vec<WaitingUpdate>),
}

/// An update waiting for the first of its map to be answered.
#[derive(Debug)]
pub(super) struct WaitingUpdate {
    peer: PeerAddr,
    mq: MessageQueue,
    key: QueueKey,
    offset: i64,
    shutdown: bool,
    timeout: Duration,
    /// Through the registration gate (`send_to_broker`), or straight out (`transmit`).
    gated: bool,
}

/// An offset update waiting for the one in flight for its queue.
#[derive(Debug)]
pub(super) struct QueuedPersist {
    mq: MessageQueue,
    offset: i64,
    /// Counted in `shutdown_outstanding` until answered.
    shutdown: bool,
}

impl Consumer {
    pub(super) fn persist_offsets_periodic(&mut self) {
        self.timers.set(Timer::PersistOffsets, self.now + self.cfg.persist_consumer_offset_interval);
        self.recheck_new_maps();
        for key in self.queues.all_keys() {
            self.persist_queue(key, Persist::Periodic);
        }
        self.flush_local_offsets();
    }

    /// Maps this consumer created since the last persist may have been replaced by another
    /// member's first commit, processed with ours: their held queues are sent once more.
    pub(super) fn recheck_new_maps(&mut self) {
        let mut recheck: Vec<OffsetMapKey> = Vec::new();
        for (k, m) in self.offset_maps.iter_mut() {
            if let OffsetMap::Exists { recheck: r @ true } = m {
                *r = false;
                recheck.push(k.clone());
            }
        }
        if recheck.is_empty() {
            return;
        }
        for key in self.queues.all_keys() {
            if let Some(q) = self.queues.get_mut(key) {
                if recheck.iter().any(|(b, t)| *b == q.mq.broker_name && *t == q.mq.topic) {
                    q.offset.unconfirm();
                }
            }
        }
    }

    /// Send `key`'s offset if it changed (clustering), or record it locally (broadcasting).
    /// Periodic persists skip a queue whose previous update is still on its way; the others
    /// (release, moved offset, shutdown) always send. Returns true when a request went out.
    pub(super) fn persist_queue(&mut self, key: QueueKey, why: Persist) -> bool {
        let broadcasting = self.cfg.message_model == MessageModel::Broadcasting;
        let shutdown = why == Persist::Shutdown;
        let Some(q) = self.queues.get_mut(key) else { return false };
        if !q.offset.is_dirty() || (q.persist_in_flight && why == Persist::Periodic) {
            return false;
        }
        let offset = q.offset.value();
        if broadcasting {
            self.local_offsets.insert(q.mq.clone(), offset);
            q.offset.persisted(offset);
            self.local_offsets_dirty = true;
            return false;
        }
        if q.persist_in_flight {
            // Sent when the one in flight answers (`send_queued_persist`).
            let mq = q.mq.clone();
            let counted = self.persist_after.get(&key).is_some_and(|p| p.shutdown);
            self.persist_after.insert(key, QueuedPersist { mq, offset, shutdown: shutdown || counted });
            return shutdown && !counted;
        }
        if why == Persist::Release {
            let mq = q.mq.clone();
            let Some(peer) = self.master_addr(&mq.broker_name) else { return false };
            let timeout = self.cfg.offset_rpc_timeout;
            self.send_update(WaitingUpdate { peer, mq, key, offset, shutdown: false, timeout, gated: true });
            return true;
        }
        let broker = q.mq.broker_name.clone();
        let Some(peer) = self.master_addr(&broker) else { return false };
        if let Some(q) = self.queues.get_mut(key) {
            q.persist_in_flight = true;
        }
        if !self.park_persist_until_registered(&peer, key, shutdown) {
            self.send_persist(key, shutdown);
        }
        true
    }

    fn update_offset_header(&self, mq: &MessageQueue, offset: i64) -> UpdateConsumerOffsetRequestHeader {
        UpdateConsumerOffsetRequestHeader {
            consumer_group: self.group.clone(),
            topic: mq.topic.to_string(),
            queue_id: mq.queue_id,
            commit_offset: offset,
            bname: Some(mq.broker_name.to_string()),
        }
    }

    /// Send the current offset of `key` now (the broker is registered).
    pub(super) fn send_persist(&mut self, key: QueueKey, shutdown: bool) {
        let Some(q) = self.queues.get(key) else {
            // Released meanwhile: its final update went out with the release.
            return self.persist_failed(key, shutdown);
        };
        let (offset, mq) = (q.offset.value(), q.mq.clone());
        let Some(peer) = self.master_addr(&mq.broker_name) else {
            return self.persist_failed(key, shutdown);
        };
        let timeout = self.cfg.offset_rpc_timeout;
        self.send_update(WaitingUpdate { peer, mq, key, offset, shutdown, timeout, gated: false });
    }

    /// Send an update, or hold it while the first update of its map is on the way.
    fn send_update(&mut self, u: WaitingUpdate) {
        let map: OffsetMapKey = (u.mq.broker_name.clone(), u.mq.topic.clone());
        // A shutdown does not wait on a broker that refuses us (see
        // `park_persist_until_registered`), and so not on a first update parked there either.
        let refused = u.shutdown && self.peers.get(&u.peer).is_some_and(|p| p.refused);
        let creates = match self.offset_maps.get_mut(&map) {
            _ if refused => None,
            Some(OffsetMap::Exists { .. }) => None,
            Some(OffsetMap::Creating(waiting)) => return waiting.push(u),
            None => {
                self.offset_maps.insert(map.clone(), OffsetMap::Creating(Vec::new()));
                Some(map)
            }
        };
        let header = self.update_offset_header(&u.mq, u.offset);
        let kind = PendingKind::UpdateOffset { key: u.key, offset: u.offset, shutdown: u.shutdown, creates };
        let request = Request::UpdateConsumerOffset(header);
        match u.gated {
            true => self.send_to_broker(u.peer, request, kind, u.timeout),
            false => self.transmit(u.peer, request, kind, u.timeout),
        }
    }

    /// The first update of `map` answered: if it landed the map exists and the held updates go
    /// together; if not, the next held one goes alone in its place.
    fn offset_map_answered(&mut self, map: OffsetMapKey, landed: bool) {
        let waiting = match self.offset_maps.remove(&map) {
            Some(OffsetMap::Creating(waiting)) => waiting,
            Some(OffsetMap::Exists { .. }) | None => Vec::new(),
        };
        if landed {
            self.offset_maps.insert(map, OffsetMap::Exists { recheck: true });
        }
        for mut u in waiting {
            if self.queues.get(u.key).is_none() && self.queues.key_of(&u.mq).is_some() {
                // Held again since under a new key (released and re-assigned, or moved by a seek
                // or the broker): the new holder's updates supersede this one, which would take
                // the commit back (a seek's updates wait in this same list, behind it).
                self.release_unlocks.remove(&u.key);
                if u.shutdown {
                    self.shutdown_outstanding = self.shutdown_outstanding.saturating_sub(1);
                }
                continue;
            }
            // The queue's latest offset if it is still held (it only rose meanwhile).
            if let Some(q) = self.queues.get(u.key) {
                u.offset = u.offset.max(q.offset.value());
            }
            self.send_update(u);
        }
    }

    /// The link to `peer` is gone. A broker can come back without its offsets (a crash loses
    /// what it had not flushed): its maps count as unknown, and the offsets of the queues held
    /// there as unconfirmed, until an update lands again. Java re-sends every offset every
    /// persist interval and so restores them too.
    pub(super) fn forget_offset_maps(&mut self, peer: &PeerAddr) {
        let on_peer = |c: &Self, broker: &str| c.master_addr(broker).as_ref().is_none_or(|a| a == peer);
        let gone: Vec<OffsetMapKey> = self
            .offset_maps
            .iter()
            .filter(|(k, m)| matches!(m, OffsetMap::Exists { .. }) && on_peer(self, &k.0))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            self.offset_maps.remove(&k);
        }
        if self.cfg.message_model != MessageModel::Clustering {
            return;
        }
        for key in self.queues.all_keys() {
            let here = self.queues.get(key).is_some_and(|q| on_peer(self, &q.mq.broker_name));
            if let Some(q) = self.queues.get_mut(key).filter(|_| here) {
                q.offset.unconfirm();
            }
        }
    }

    /// Whether a pull of `mq` may carry a commit: its map exists on the broker.
    pub(super) fn offset_map_exists(&self, mq: &MessageQueue) -> bool {
        let map = (mq.broker_name.clone(), mq.topic.clone());
        matches!(self.offset_maps.get(&map), Some(OffsetMap::Exists { .. }))
    }

    /// An update that never went out (its broker could not be registered).
    pub(super) fn persist_failed(&mut self, key: QueueKey, shutdown: bool) {
        if let Some(q) = self.queues.get_mut(key) {
            q.persist_in_flight = false;
        }
        if shutdown {
            self.shutdown_outstanding = self.shutdown_outstanding.saturating_sub(1);
        }
        self.send_queued_persist(key);
    }

    /// The update in flight for `key` is done: send the one that waited for it, with the
    /// queue's latest offset if it is still held (a released queue's last one otherwise).
    fn send_queued_persist(&mut self, key: QueueKey) {
        let Some(p) = self.persist_after.remove(&key) else { return };
        if self.queues.get(key).is_none() && self.queues.key_of(&p.mq).is_some() {
            // Released, and held again since: the new holder's updates supersede this one
            // (sent now it would take the commit back), and the lock stays.
            self.release_unlocks.remove(&key);
            if p.shutdown {
                self.shutdown_outstanding = self.shutdown_outstanding.saturating_sub(1);
            }
            return;
        }
        let offset = self.queues.get(key).map_or(p.offset, |q| q.offset.value().max(p.offset));
        let Some(peer) = self.master_addr(&p.mq.broker_name) else {
            if p.shutdown {
                self.shutdown_outstanding = self.shutdown_outstanding.saturating_sub(1);
            }
            return;
        };
        if let Some(q) = self.queues.get_mut(key) {
            q.persist_in_flight = true;
        }
        let timeout = self.cfg.offset_rpc_timeout;
        let (mq, shutdown) = (p.mq, p.shutdown);
        self.send_update(WaitingUpdate { peer, mq, key, offset, shutdown, timeout, gated: true });
    }

    /// Broadcasting: emit the whole local offset table when it changed. Entries of queues not
    /// held now are kept (Java drops them, which loses them after a partition: apache/rocketmq#4016).
    pub(super) fn flush_local_offsets(&mut self) {
        if self.cfg.message_model != MessageModel::Broadcasting {
            return;
        }
        for key in self.queues.all_keys() {
            self.persist_queue(key, Persist::Periodic);
        }
        if self.local_offsets_dirty {
            self.local_offsets_dirty = false;
            let table = self.local_offsets.iter().map(|(q, o)| (q.clone(), *o)).collect();
            self.outputs.push_back(Output::PersistLocalOffsets(table));
        }
    }

    pub(super) fn on_update_offset(
        &mut self,
        key: QueueKey,
        offset: i64,
        shutdown: bool,
        creates: Option<OffsetMapKey>,
        peer: &PeerAddr,
        result: Result<RemotingCommand, Failure>,
    ) {
        let ok = matches!(&result, Ok(cmd) if cmd.code == ResponseCode::Success as i32);
        if let Some(map) = creates {
            self.offset_map_answered(map, ok);
        }
        if let Some(q) = self.queues.get_mut(key) {
            q.persist_in_flight = false;
            if ok {
                q.offset.persisted(offset);
            }
        }
        if let (Ok(cmd), false) = (&result, ok) {
            self.emit_broker_error(peer.clone(), RequestCode::UpdateConsumerOffset, cmd);
        }
        if shutdown {
            self.shutdown_outstanding = self.shutdown_outstanding.saturating_sub(1);
        }
        self.unlock_after_persist(key, offset);
        self.send_queued_persist(key);
    }
}
