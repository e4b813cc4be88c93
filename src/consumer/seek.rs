//! `Command::Seek`: move held queues to the first, the last, an offset or a timestamp.
//!
//! Everything the command can be refused for is checked before anything moves, so a refused
//! seek changes nothing. An offset moves its queues at once; first, last and a timestamp are
//! looked up on each queue's broker (GET_MIN_OFFSET, GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP)
//! and the queue moves when the answer comes. A lookup names the queue, not its key: a queue
//! re-keyed meanwhile (the broker moved it) still gets the seek.

use crate::error::UsageError;
use crate::event::{Event, QueueSelector, Request, SeekTo};
use crate::message::MessageQueue;
use crate::protocol::header::{
    GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, OffsetResponseHeader, SearchOffsetRequestHeader,
};
use crate::protocol::{RemotingCommand, ResponseCode};
use crate::timer::{QueueKey, Timer};

use super::Consumer;
use super::offsets::Persist;
use super::queues::Phase;
use super::requests::{Failure, PendingKind};

impl Consumer {
    pub(super) fn on_seek(&mut self, selector: QueueSelector, to: SeekTo) -> Result<(), UsageError> {
        let topic = match &selector {
            QueueSelector::Topic(t) => t.as_str(),
            QueueSelector::Queue(q) => &*q.topic,
        };
        if !self.subs.contains_key(&self.ns.wrap(topic)) {
            return Err(UsageError::InvalidCommand("not subscribed to that topic"));
        }
        let keys: Vec<QueueKey> = self
            .queues
            .all_keys()
            .into_iter()
            .filter(|k| {
                self.queues
                    .get(*k)
                    .is_some_and(|q| q.phase != Phase::Releasing && selector.matches(&q.user_mq))
            })
            .collect();
        if keys.is_empty() && matches!(selector, QueueSelector::Queue(_)) {
            return Err(UsageError::InvalidCommand("that queue is not held by this consumer"));
        }
        match to {
            SeekTo::Offset(o) if o < 0 => return Err(UsageError::InvalidCommand("a negative offset")),
            SeekTo::Timestamp(t) if t < 0 => return Err(UsageError::InvalidCommand("a negative timestamp")),
            SeekTo::Timestamp(t) if t > self.wall_ms() => {
                return Err(UsageError::InvalidCommand("a timestamp in the future"));
            }
            SeekTo::Offset(o) => {
                // The range as the last pull answer gave it; a queue not pulled yet is not
                // checked here (the broker answers OFFSET_MOVED for an offset out of range).
                let outside = keys.iter().filter_map(|k| self.queues.get(*k)).any(|q| {
                    q.broker_max_offset >= 0 && (o < q.broker_min_offset || o > q.broker_max_offset)
                });
                if outside {
                    return Err(UsageError::InvalidCommand("the offset is outside the queue's range"));
                }
            }
            _ => {}
        }
        for key in keys {
            match to {
                SeekTo::Offset(o) => self.seek_queue(key, o),
                _ => self.look_up_seek(key, to),
            }
        }
        Ok(())
    }

    /// Ask `key`'s broker where `to` is.
    fn look_up_seek(&mut self, key: QueueKey, to: SeekTo) {
        let Some(q) = self.queues.get(key) else { return };
        let mq = q.mq.clone();
        let Some(peer) = self.master_addr(&mq.broker_name) else {
            return self.seek_failed(&mq, to, "no route to the queue's broker".into());
        };
        let (topic, queue_id, bname) = (mq.topic.to_string(), mq.queue_id, Some(mq.broker_name.to_string()));
        let request = match to {
            SeekTo::First => Request::GetMinOffset(GetMinOffsetRequestHeader { topic, queue_id, bname }),
            SeekTo::Last => Request::GetMaxOffset(GetMaxOffsetRequestHeader {
                topic,
                queue_id,
                committed: Some(true),
                bname,
            }),
            SeekTo::Timestamp(timestamp) => Request::SearchOffset(SearchOffsetRequestHeader {
                topic,
                queue_id,
                timestamp,
                boundary_type: None,
                bname,
            }),
            SeekTo::Offset(o) => return self.seek_queue(key, o),
        };
        let timeout = self.cfg.offset_rpc_timeout;
        self.send_to_broker(peer, request, PendingKind::Seek { mq, to }, timeout);
    }

    /// The broker's answer to a seek lookup.
    pub(super) fn on_seek_lookup(
        &mut self,
        mq: &MessageQueue,
        to: SeekTo,
        result: Result<RemotingCommand, Failure>,
    ) {
        let reason = match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => match cmd.header::<OffsetResponseHeader>()
            {
                Ok(h) if h.offset >= 0 => {
                    return match self.queues.key_of(mq) {
                        Some(key) if self.state == super::lifecycle::RunState::Running => {
                            self.seek_queue(key, h.offset)
                        }
                        _ => self.seek_failed(mq, to, "the queue is no longer held".into()),
                    };
                }
                Ok(h) => format!("the broker answered offset {}", h.offset),
                Err(e) => format!("malformed answer: {e}"),
            },
            Ok(cmd) => format!("broker error {}: {}", cmd.code, cmd.remark_str()),
            Err(Failure::Timeout) => "the lookup timed out".into(),
            Err(Failure::Disconnected) => "the connection was lost".into(),
            Err(Failure::Code(cmd)) => format!("broker error {}: {}", cmd.code, cmd.remark_str()),
        };
        self.seek_failed(mq, to, reason);
    }

    fn seek_failed(&mut self, mq: &MessageQueue, to: SeekTo, reason: String) {
        let queue = MessageQueue::new(self.ns.unwrap(&mq.topic), mq.broker_name.clone(), mq.queue_id);
        self.emit(Event::SeekFailed { queue, to, reason });
    }

    /// Move `key` to `to` now if it pulls; a queue still finding its start (or its orderly
    /// lock) starts there instead.
    fn seek_queue(&mut self, key: QueueKey, to: i64) {
        let Some(q) = self.queues.get_mut(key) else { return };
        match q.phase {
            Phase::Pulling => {
                let (from, queue) = (q.next_offset, (*q.user_mq).clone());
                // Before the commit of `to` goes out, so a reader of the outputs sees why it
                // went back.
                self.emit(Event::Seeked { queue, from, to });
                self.move_queue(key, to);
            }
            Phase::ComputingOffset | Phase::Locking => {
                q.pending_seek = Some(to);
                let queue = (*q.user_mq).clone();
                self.emit(Event::Seeked { queue, from: -1, to });
            }
            Phase::Releasing => {}
            Phase::Popping => {
                // The broker keeps a POP group's position; there is no offset here to move.
                let (mq, to) = (q.mq.clone(), SeekTo::Offset(to));
                self.seek_failed(&mq, to, "the group pops this topic: the broker keeps its position".into());
            }
        }
    }

    /// Drop everything cached and in flight for `key` and go on at `to`, committing it at once.
    /// Results of batches with user code are discarded. Shared by a seek and the broker's
    /// PULL_OFFSET_MOVED.
    pub(super) fn move_queue(&mut self, key: QueueKey, to: i64) {
        let Some(q) = self.queues.get(key) else { return };
        let (mq, user_mq) = (q.mq.clone(), q.user_mq.clone());
        self.timers.stop(Timer::Pull(key));
        self.timers.stop(Timer::ComputeOffset(key));
        self.timers.stop(Timer::OrderlyResume(key));
        self.withdraw_unstarted(Some(key));
        let Some(old) = self.queues.remove(key) else { return };
        let key = self.hold_queue(mq, user_mq);
        self.carry_orderly(&old, key);
        if let Some(q) = self.queues.get_mut(key) {
            q.phase = Phase::Pulling;
            q.next_offset = to;
            q.offset.force(to);
            q.broker_min_offset = old.broker_min_offset;
            q.broker_max_offset = old.broker_max_offset;
        }
        self.persist_queue(key, Persist::Now);
        self.try_pull(key);
    }
}
