//! Orderly POP (`orderly_pop`; no Java counterpart: Java's orderly push consumer always pulls
//! with locks). The broker does the locking: an orderly pop (`order=true`) hands out a queue's
//! next messages and hands out nothing more of that queue to the group until each is acked or
//! visible again; one made visible again comes back in place, the messages after it behind it,
//! with its attempts counted in the answer's `orderCountInfo` (`docs/pop.md` §0).
//!
//! One pop (queue id −1) may bring several queues' messages. Each real queue's wait here in
//! offset order and go to the listener one batch at a time, as pulled orderly ones do; other
//! queues run alongside. A success acks its batch and the next one goes out. A failure
//! (SUSPEND_CURRENT_QUEUE_A_MOMENT, or RECONSUME_LATER) makes the batch and every message of
//! that queue still waiting here visible again after the suspend time: nothing runs out of
//! order, and the broker, not a local timer, brings them back, counted.
//!
//! The broker counts hand-outs, not failures: a message popped behind one that failed comes
//! back counted too, though no listener saw it (`reconsumeTimes` shows the broker's count, as
//! Java's gRPC clients show it as the delivery attempt). So the dead-letter decision counts
//! failures here: a message whose listener failed `maxReconsumeTimes` times in this consumer goes
//! to the dead-letter queue (CONSUMER_SEND_MSG_BACK, delay level −1, by its commit-log offset)
//! and is acked once the broker has it; if the send fails it is made visible again like the
//! rest, to be tried next time. (A message that fails in turn on members that come and go is
//! suspended each time, never in a tight loop, but may never reach the dead-letter queue.)

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::Consumer;
use super::in_flight::InFlight;
use super::lifecycle::RunState;
use super::pop::{PopBatch, PopItem};
use super::queues::Phase;
use super::requests::{Failure, PendingKind};
use crate::config::ConsumeMode;
use crate::event::{
    Batch, BatchId, BatchKind, ConsumeResult, ConsumeStatus, Messages, Output, PeerAddr, Request,
};
use crate::message::{MessageExt, MessageQueue};
use crate::protocol::header::ConsumerSendMsgBackRequestHeader;
use crate::protocol::order_count::OrderCounts;
use crate::protocol::receipt::PopReceipt;
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode};
use crate::timer::{QueueKey, Timer};

/// One real queue's popped messages waiting for the listener, and its batch with user code.
#[derive(Debug, Default)]
pub(super) struct PopOrderQueue {
    /// The subscribed topic (wire name), which acks name.
    topic: Arc<str>,
    waiting: VecDeque<(MessageExt, PopItem)>,
    running: Option<BatchId>,
}

/// Failures counted per message at most: past it, new ones are not counted (they are
/// suspended as ever, and reach the dead-letter queue later or not at all).
const MAX_COUNTED_FAILURES: usize = 4096;

/// A popped message by where it is stored: (topic, broker, queue id, offset).
pub(super) type StoredAt = (Arc<str>, String, i32, i64);

/// A real queue: (topic, broker, queue id).
pub(super) type QueueAt = (Arc<str>, String, i32);

/// A message on its way to the dead-letter queue: acked once the broker has it.
#[derive(Clone, Debug)]
pub(super) struct PopDeadLetter {
    pub(super) topic: Arc<str>,
    pub(super) receipt: PopReceipt,
    pub(super) suspend: Duration,
}

impl Consumer {
    /// An orderly consumer that pops where the group pops.
    pub(super) fn pops_orderly(&self) -> bool {
        self.cfg.orderly_pop && self.cfg.consume_mode == ConsumeMode::Orderly
    }

    /// Orderly: each message's attempts from the answer's `orderCountInfo` (unreadable: reported,
    /// counted as none), then queue them per real queue and start what may start.
    pub(super) fn queue_popped_in_order(
        &mut self,
        key: QueueKey,
        topic: Arc<str>,
        counts: Option<&str>,
        peer: &PeerAddr,
        msgs: Vec<MessageExt>,
        items: Vec<PopItem>,
    ) {
        let counts = match counts.map(OrderCounts::parse).transpose() {
            Ok(c) => c.unwrap_or_default(),
            Err(e) => {
                self.emit_malformed(peer.clone(), RequestCode::PopMessage, e);
                OrderCounts::default()
            }
        };
        let mut touched: smallvec::SmallVec<[i32; 4]> = smallvec::SmallVec::new();
        for (mut m, mut item) in msgs.into_iter().zip(items) {
            let count = counts.count(m.queue_id, m.queue_offset);
            m.reconsume_times = count;
            item.reconsume_times = count;
            if !touched.contains(&m.queue_id) {
                touched.push(m.queue_id);
            }
            let o = self.pop_order.entry((key, m.queue_id)).or_insert_with(|| PopOrderQueue {
                topic: topic.clone(),
                waiting: VecDeque::new(),
                running: None,
            });
            o.waiting.push_back((m, item));
        }
        for qid in touched {
            self.pop_order_next(key, qid);
        }
        self.arm_pop_order_renew();
    }

    /// Renew held messages every third of the invisible time.
    fn arm_pop_order_renew(&mut self) {
        if !self.pop_order.is_empty() {
            self.timers.set_if_earlier(Timer::PopOrderRenew, self.now + self.cfg.pop_invisible_time / 3);
        }
    }

    /// Extend the invisible time of every message held here (waiting, or with the listener),
    /// every third of the invisible time: it stays invisible unless two renewals in a row are
    /// lost; otherwise the broker would hand it, and its queue with it, to another member while
    /// this one works through it. Everything held is renewed, whatever its receipt says: the
    /// receipt's times are the broker's clock, which ours may not agree with.
    pub(super) fn renew_pop_order(&mut self) {
        if matches!(self.state, RunState::Unregistering | RunState::Terminated) {
            return;
        }
        let full = self.cfg.pop_invisible_time;
        let mut renew: Vec<(Arc<str>, PopReceipt)> = Vec::new();
        for o in self.pop_order.values() {
            renew.extend(o.waiting.iter().map(|(_, item)| (o.topic.clone(), item.receipt.clone())));
        }
        for b in self.batches.values() {
            let Some(pop) = b.pop.as_ref().filter(|p| p.order.is_some()) else { continue };
            renew.extend(pop.items.iter().map(|item| (pop.topic.clone(), item.receipt.clone())));
        }
        let held = !renew.is_empty();
        self.renew_all(renew, full);
        if held {
            self.timers.set(Timer::PopOrderRenew, self.now + full / 3);
        }
    }

    /// Whether a batch popped in order from the real queue `mq` (wire names) is with the
    /// listener: a pulled queue of the same real queue waits for it (after a switch to PULL).
    pub(super) fn pop_order_running(&self, mq: &MessageQueue) -> bool {
        self.pops_orderly()
            && self.batches.values().any(|b| {
                b.pop.as_ref().is_some_and(|p| {
                    p.order.as_ref().is_some_and(|(qid, _)| *qid == mq.queue_id)
                        && *p.topic == *mq.topic
                        && p.items.first().is_some_and(|i| *i.receipt.broker_name == *mq.broker_name)
                })
            })
    }

    /// Start every real queue of `key` that has messages waiting and no batch out (after a
    /// pause of the queue or of the consumer).
    pub(super) fn pop_order_resume(&mut self, key: QueueKey) {
        let mut idle: smallvec::SmallVec<[i32; 4]> = self
            .pop_order
            .iter()
            .filter(|((k, _), o)| *k == key && o.running.is_none() && !o.waiting.is_empty())
            .map(|((_, qid), _)| *qid)
            .collect();
        idle.sort_unstable();
        for qid in idle {
            self.pop_order_next(key, qid);
        }
    }

    /// Hand out the next batch of real queue `qid` popped through `key`, if none runs.
    fn pop_order_next(&mut self, key: QueueKey, qid: i32) {
        if self.state != RunState::Running || self.paused || self.queue_paused(key) {
            return;
        }
        let Some(q) = self.queues.get(key).filter(|q| q.phase == Phase::Popping) else { return };
        // The same queue pulled until the group switched to POP, its last batch still running:
        // this waits for it (`release_queue` starts it then).
        let pulled = MessageQueue::new(q.mq.topic.clone(), q.mq.broker_name.clone(), qid);
        if self.queues.key_of(&pulled).is_some_and(|k| k != key) {
            return;
        }
        let queue = MessageQueue::new(q.user_mq.topic.clone(), q.user_mq.broker_name.clone(), qid);
        let size = self.cfg.consume_message_batch_max_size.max(1);
        let Some(o) = self.pop_order.get_mut(&(key, qid)) else { return };
        if o.running.is_some() {
            return;
        }
        // Handed out again though consumed here already (its ack came too late, or was lost):
        // acked with the new receipt, not consumed twice, nothing overtaken. Only what the
        // broker counts as handed out before: an operator's offset reset (5.x brokers apply it
        // themselves, telling no client) starts the queue afresh, uncounted, and is consumed.
        let mut again: smallvec::SmallVec<[PopReceipt; 2]> = smallvec::SmallVec::new();
        while let Some((m, item)) = o.waiting.front() {
            let at = (o.topic.clone(), item.receipt.broker_name.clone(), m.queue_id);
            let Some(done) = self.pop_order_done.get_mut(&at).filter(|done| m.queue_offset <= **done) else {
                break;
            };
            if m.reconsume_times == 0 {
                // A replay: from here on, nothing of it counts as done.
                *done = m.queue_offset - 1;
                break;
            }
            again.push(item.receipt.clone());
            o.waiting.pop_front();
        }
        let (topic, empty) = (o.topic.clone(), o.waiting.is_empty());
        if !again.is_empty() {
            for r in &again {
                self.ack(&topic, r);
            }
            if let Some(q) = self.queues.get_mut(key) {
                q.pop_unanswered = q.pop_unanswered.saturating_sub(again.len());
            }
        }
        if empty {
            return;
        }
        let Some(o) = self.pop_order.get_mut(&(key, qid)) else { return };
        let n = size.min(o.waiting.len());
        let topic = o.topic.clone();
        let (msgs, items): (Vec<MessageExt>, smallvec::SmallVec<[PopItem; 1]>) = o.waiting.drain(..n).unzip();
        let id = self.next_batch_id();
        if let Some(o) = self.pop_order.get_mut(&(key, qid)) {
            o.running = Some(id);
        }
        let wall = self.wall_ms();
        if let Some(q) = self.queues.get_mut(key) {
            q.last_consume_ms = wall;
        }
        let chunk = Arc::new(msgs);
        let pop = PopBatch { topic, items, order: Some((qid, chunk.clone())) };
        self.batches.insert(
            id,
            // As pulled orderly batches: out at once, no listener slot, no consume timeout.
            InFlight::single(
                key,
                chunk.iter().map(|m| m.queue_offset).collect(),
                true,
                self.now_ms,
                Some(Box::new(pop)),
            ),
        );
        let messages = Messages::new(chunk, 0, n);
        self.outputs.push_back(Output::Consume(Batch {
            id,
            queue: queue.into(),
            messages,
            kind: BatchKind::Orderly,
        }));
    }

    /// An orderly POP batch's result: ack it and go on, or suspend the queue (above).
    pub(super) fn on_pop_order_consumed(
        &mut self,
        id: BatchId,
        b: &InFlight,
        pop: PopBatch,
        result: &ConsumeResult,
    ) {
        let Some((qid, chunk)) = pop.order else { return };
        let n = pop.items.len();
        let ok = result.status == ConsumeStatus::Success;
        if ok {
            self.stats.consumed_ok += n as u64;
        } else {
            self.stats.consumed_failed += n as u64;
        }
        self.count_consumed(b, if ok { n } else { 0 });
        let entry = (b.key, qid);
        if let Some(o) = self.pop_order.get_mut(&entry).filter(|o| o.running == Some(id)) {
            o.running = None;
        }
        let mut answered = n;
        if ok {
            if let Some(last) = chunk.last() {
                let r = &pop.items[pop.items.len() - 1].receipt;
                let done =
                    self.pop_order_done.entry((pop.topic.clone(), r.broker_name.clone(), qid)).or_insert(-1);
                *done = (*done).max(last.queue_offset);
                let (done, broker) = (*done, r.broker_name.clone());
                // Failures of what is done (this batch, or what another member consumed after
                // failing here) no longer count.
                if !self.pop_order_failures.is_empty() {
                    self.pop_order_failures.retain(|(t, b, q, o), _| {
                        !(*q == qid && *o <= done && *b == broker && **t == *pop.topic)
                    });
                }
            }
            for item in &pop.items {
                self.ack(&pop.topic, &item.receipt);
            }
        } else {
            // Not done from the failed batch on (a replay may have consumed past it before).
            if let (Some(first), Some(item)) = (chunk.first(), pop.items.first()) {
                let at = (pop.topic.clone(), item.receipt.broker_name.clone(), qid);
                if let Some(done) = self.pop_order_done.get_mut(&at) {
                    *done = (*done).min(first.queue_offset - 1);
                }
            }
            let wait = result
                .suspend_millis
                .map_or(self.cfg.suspend_current_queue_time, Duration::from_millis)
                .clamp(super::orderly::SUSPEND_MIN, super::orderly::SUSPEND_MAX);
            let max = self.cfg.effective_max_reconsume_times();
            for (m, item) in chunk.iter().zip(&pop.items) {
                let r = &item.receipt;
                let at: StoredAt = (pop.topic.clone(), r.broker_name.clone(), m.queue_id, m.queue_offset);
                let room = self.pop_order_failures.len() < MAX_COUNTED_FAILURES;
                let failures = match self.pop_order_failures.get_mut(&at) {
                    Some(n) => {
                        *n += 1;
                        *n
                    }
                    None => {
                        if room {
                            self.pop_order_failures.insert(at.clone(), 1);
                        }
                        1
                    }
                };
                if failures > max {
                    self.pop_order_failures.remove(&at);
                    self.pop_dead_letter(&pop.topic, m, r, wait);
                } else {
                    self.change_invisible_time(&pop.topic, r, wait);
                }
            }
            // What waits behind the batch must not overtake it: back to the broker too.
            if let Some(o) = self.pop_order.remove(&entry) {
                answered += o.waiting.len();
                for (_, item) in &o.waiting {
                    self.change_invisible_time(&pop.topic, &item.receipt, wait);
                }
            }
        }
        if let Some(q) = self.queues.get_mut(b.key) {
            q.pop_unanswered = q.pop_unanswered.saturating_sub(answered);
        }
        if ok {
            self.pop_order_next(b.key, qid);
        }
        // Switched back to PULL meanwhile: the pulled queue waited for this batch.
        if let Some(item) = pop.items.first() {
            let pulled = MessageQueue::new(pop.topic.clone(), item.receipt.broker_name.as_str(), qid);
            if let Some(k) = self.queues.key_of(&pulled).filter(|k| *k != b.key) {
                self.orderly_next(k);
            }
        }
        self.try_pop(b.key);
    }

    fn pop_dead_letter(&mut self, topic: &Arc<str>, m: &MessageExt, receipt: &PopReceipt, suspend: Duration) {
        let Some(peer) = self.master_addr(&receipt.broker_name) else {
            return self.change_invisible_time(topic, receipt, suspend);
        };
        let header = ConsumerSendMsgBackRequestHeader {
            offset: m.commit_log_offset,
            group: self.group.clone(),
            delay_level: -1,
            origin_msg_id: Some(m.msg_id().into_owned()),
            origin_topic: Some(self.ns.wrap(&m.topic)),
            unit_mode: Some(self.cfg.unit_mode),
            max_reconsume_times: Some(self.cfg.effective_max_reconsume_times()),
            bname: Some(receipt.broker_name.clone()),
        };
        self.stats.sent_back += 1;
        self.pop_requests_out += 1;
        let kind = PendingKind::PopDeadLetter(Box::new(PopDeadLetter {
            topic: topic.clone(),
            receipt: receipt.clone(),
            suspend,
        }));
        let timeout = self.cfg.offset_rpc_timeout;
        self.send_to_broker(peer, Request::SendMsgBack(header), kind, timeout);
    }

    /// The dead-letter send answered: ack the message, or (failed) let it come back to be
    /// tried again.
    pub(super) fn on_pop_dead_letter(
        &mut self,
        d: PopDeadLetter,
        peer: &PeerAddr,
        result: Result<RemotingCommand, Failure>,
    ) {
        self.pop_requests_out = self.pop_requests_out.saturating_sub(1);
        match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => self.ack(&d.topic, &d.receipt),
            other => {
                if let Ok(cmd) = other {
                    self.emit_broker_error(peer.clone(), RequestCode::ConsumerSendMsgBack, &cmd);
                }
                self.change_invisible_time(&d.topic, &d.receipt, d.suspend);
            }
        }
    }

    /// `key` is released (or, `None`, the consumer shuts down): what waits here for the
    /// listener goes back to the broker at once, for the next owner (a batch with the listener
    /// still holds its queue until it is answered).
    pub(super) fn drop_pop_order(&mut self, key: Option<QueueKey>) {
        let keys: Vec<(QueueKey, i32)> =
            self.pop_order.keys().filter(|(k, _)| key.is_none_or(|key| *k == key)).copied().collect();
        let mut back: Vec<(Arc<str>, PopReceipt)> = Vec::new();
        for k in keys {
            let Some(o) = self.pop_order.get_mut(&k) else { continue };
            back.extend(o.waiting.drain(..).map(|(_, item)| (o.topic.clone(), item.receipt)));
            if key.is_some() || o.running.is_none() {
                self.pop_order.remove(&k);
            }
        }
        self.renew_all(back, super::orderly::SUSPEND_MIN);
    }

    /// Make each (topic, receipt) visible again `after` from now, as renewals (no retries
    /// counted), in a deterministic order whatever the maps' they came from.
    fn renew_all(&mut self, mut held: Vec<(Arc<str>, PopReceipt)>, after: Duration) {
        held.sort_by(|a, b| {
            (&a.1.broker_name, a.1.queue_id, a.1.queue_offset).cmp(&(
                &b.1.broker_name,
                b.1.queue_id,
                b.1.queue_offset,
            ))
        });
        for (topic, r) in held {
            self.send_change_invisible(&topic, &r, after, PendingKind::PopRenew);
        }
    }
}
