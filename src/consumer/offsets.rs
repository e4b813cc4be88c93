//! Persisting offsets: every `persistConsumerOffsetInterval`, before a queue is released, and at
//! shutdown. UPDATE_CONSUMER_OFFSET is sent as a request (Java sends it oneway), so a value stays
//! dirty until the broker confirms it and a lost update is simply sent again. At most one update
//! per queue is in flight: the broker applies updates on a thread pool, so two in flight may land
//! in either order, the older last — a release or shutdown would then hand the next owner an
//! offset it already passed. An update due while one is in flight waits for its answer.

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
        for key in self.queues.all_keys() {
            self.persist_queue(key, Persist::Periodic);
        }
        self.flush_local_offsets();
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
            let header = self.update_offset_header(&mq, offset);
            let Some(peer) = self.master_addr(&mq.broker_name) else { return false };
            let kind = PendingKind::UpdateOffset { key, offset, shutdown: false };
            let timeout = self.cfg.offset_rpc_timeout;
            self.send_to_broker(peer, Request::UpdateConsumerOffset(header), kind, timeout);
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
        let offset = q.offset.value();
        let header = self.update_offset_header(&q.mq, offset);
        let Some(peer) = self.master_addr(&q.mq.broker_name) else {
            return self.persist_failed(key, shutdown);
        };
        let timeout = self.cfg.offset_rpc_timeout;
        self.transmit(
            peer,
            Request::UpdateConsumerOffset(header),
            PendingKind::UpdateOffset { key, offset, shutdown },
            timeout,
        );
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
        let header = self.update_offset_header(&p.mq, offset);
        let kind = PendingKind::UpdateOffset { key, offset, shutdown: p.shutdown };
        let timeout = self.cfg.offset_rpc_timeout;
        self.send_to_broker(peer, Request::UpdateConsumerOffset(header), kind, timeout);
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
        peer: &PeerAddr,
        result: Result<RemotingCommand, Failure>,
    ) {
        let ok = matches!(&result, Ok(cmd) if cmd.code == ResponseCode::Success as i32);
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
