//! Invariants checked after every simulation step (and liveness at the end):
//!
//! 1. **Nothing is committed past unfinished work**: a broker's committed offset for a group's
//!    queue never passes a message that was not consumed successfully, sent back (accepted by the
//!    broker), filtered out by the subscription, or removed by retention.
//! 2. **A consumer's commits never go down** while it holds a queue (piggy-backed and explicit
//!    alike), except where the broker moved the queue (OFFSET_MOVED, reset).
//! 3. **The cache stays bounded**: per queue, at most `pullThresholdForQueue` plus one pull batch.
//! 4. **Every dispatch gets exactly one result** (checked where results are delivered).
//! 5. **Orderly: one batch per queue in the whole group**: no queue ever has two batches with
//!    user code at once, across every consumer of the group. Forgiven only for batches that ran
//!    across a restart of their broker, which forgets its locks, and (orderly POP) for batches of
//!    messages popped before their broker crashed, which forgot the order infos that lock their
//!    queues (no client can prevent either).
//! 6. **Orderly: offset order per consumer**: each consumer gets a queue's messages in
//!    increasing offsets, and never one at or below an offset it already finished (until the
//!    queue is assigned again or the broker moves it).
//! 7. **POP: one delivery and one ack per receipt** (groups that pop only): a popped message
//!    (one receipt) reaches the listener at most once, is acked at most once, never after its
//!    listener failed on it or before its listener finished, and is not delivered or renewed
//!    (change-invisible) after its ack. A consumer may ack a receipt it never delivered (Java
//!    acks what its own filter drops). Each broker must never hand a popped message to a
//!    second pop (`PopStats::repops`, forgiven after offsets were lost). What a pop commits is
//!    not checked by invariant 1: the broker tracks each message it popped instead.
//! 8. **Liveness**, via [`Sim::all_done`](super::Sim::all_done): once faults heal, every produced
//!    message is consumed successfully or dead-lettered.
//!
//! Commits across owners are not required to be monotonic: a broker stores whatever a client
//! sends, so a former owner's last update landing after the new owner's can move it back. That
//! costs duplicates, never messages, and invariant 1 still holds.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::broker::ConnId;
use super::world::{Consumed, Sim};
use crate::ConsumerConfig;
use crate::event::{Batch, BatchId, Event, QueueSelector};
use crate::message::{DecodeOptions, MessageQueue, decode_message, keys};
use crate::namespace::Namespace;
use crate::producer::retry_topic;
use crate::protocol::body::{BatchAckMessageRequestBody, JsonBody, SubscriptionData};
use crate::protocol::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader, SendMessageRequestHeaderV2, UpdateConsumerOffsetRequestHeader,
};
use crate::protocol::receipt::PopReceipt;
use crate::protocol::{ExpressionType, PullSysFlag, RemotingCommand, RequestCode, ResponseCode};

#[derive(Debug)]
enum Tracked {
    SendBack {
        broker: String,
        commit_log_offset: i64,
    },
    RetrySend {
        key: String,
        reconsume: i32,
    },
    /// A BATCH_ACK's receipts count as acked when the broker serves it: one it does not know
    /// is sent again one by one.
    BatchAck {
        consumer: usize,
        receipts: Vec<String>,
    },
}

#[derive(Debug, Default)]
struct Group {
    ns: Namespace,
    subs: BTreeMap<String, SubscriptionData>,
    threshold: usize,
    batch: usize,
    threshold_bytes: usize,
    /// CONSUME_FROM_FIRST: a new group's queues must start at 0. Otherwise the first commit of a
    /// queue may skip what came before (LAST and TIMESTAMP skip history on purpose).
    from_first: bool,
    /// Broadcasting: every consumer consumes every queue (orderly exclusivity is per consumer).
    broadcasting: bool,
    /// Queue → the furthest a `Command::Seek` moved it: what lies below was skipped on purpose.
    seeked: HashMap<MessageQueue, i64>,
}

/// An orderly batch with user code.
#[derive(Debug)]
struct OrderlyRun {
    consumer: usize,
    batch: BatchId,
    /// Its broker restarted while it ran, or (orderly POP) its messages were popped before
    /// their broker crashed.
    forgiven: bool,
}

#[derive(Debug, Default)]
pub(super) struct Checker {
    orderly_running: HashMap<(String, MessageQueue), OrderlyRun>,
    /// (consumer, queue) → the highest offset finished there.
    orderly_done: HashMap<(usize, MessageQueue), i64>,
    groups: BTreeMap<String, Group>,
    consumer_group: HashMap<usize, String>,
    commits: HashMap<(usize, MessageQueue), i64>,
    ok: HashSet<(MessageQueue, i64)>,
    ok_keys: HashSet<String>,
    tracked: HashMap<(ConnId, i32), Tracked>,
    sent_back_phys: HashSet<(String, i64)>,
    /// `UNIQ_KEY` → the highest reconsume count a copy was sent back with (a local retry raises
    /// the count before the copy is sent).
    sent_back_keys: HashMap<String, i32>,
    verified: HashMap<(String, MessageQueue), i64>,
    max_body: usize,
    violation: Option<String>,
    pub(super) skip_broker_commits: bool,
    /// Consumer → the pauses it reported (`Event::QueuesPaused`) and has not resumed.
    paused: HashMap<usize, Vec<QueueSelector>>,
    /// POP receipt → (consumer, its listener succeeded, when the listener finished, its
    /// commit-log offset).
    pop_delivered: HashMap<String, (usize, bool, std::time::Duration, i64)>,
    /// POP receipts acked.
    pop_acked: HashSet<String>,
    /// Broker → its wall clock (ms) when it last crashed, losing its orderly pops' order infos:
    /// a consumer may still hold messages popped up to then, and the queue is free again.
    order_locks_lost: HashMap<String, i64>,
}

impl Checker {
    pub(super) fn consumer_started(&mut self, i: usize, cfg: &ConsumerConfig) {
        // A new instance starts with no pauses.
        self.paused.remove(&i);
        let ns = Namespace::new(cfg.namespace.clone());
        let group = ns.wrap(&cfg.consumer_group);
        let g = self.groups.entry(group.clone()).or_default();
        g.ns = ns.clone();
        for s in &cfg.subscriptions {
            let t = ns.wrap(&s.topic);
            g.subs.insert(t.clone(), SubscriptionData::build(&t, &s.expression, s.expression_type, 0));
        }
        let retry = retry_topic(&group);
        g.subs.insert(retry.clone(), SubscriptionData::build(&retry, "*", ExpressionType::Tag, 0));
        g.threshold = cfg.pull_threshold_for_queue;
        g.batch = cfg.pull_batch_size as usize;
        g.threshold_bytes = cfg.pull_threshold_size_for_queue_bytes();
        g.broadcasting = cfg.message_model == crate::MessageModel::Broadcasting;
        g.from_first = cfg.consume_from_where == crate::ConsumeFromWhere::ConsumeFromFirstOffset;
        self.consumer_group.insert(i, group);
        self.commits.retain(|(c, _), _| *c != i);
        self.orderly_done.retain(|(c, _), _| *c != i);
        self.consumer_gone(i);
    }

    /// Consumer `i` crashed: its batches are gone with it.
    pub(super) fn consumer_gone(&mut self, i: usize) {
        self.orderly_running.retain(|_, r| r.consumer != i);
        self.paused.remove(&i);
    }

    /// Broker `name` restarted and forgot its locks.
    pub(super) fn broker_restarted(&mut self, name: &str) {
        for ((_, mq), r) in &mut self.orderly_running {
            if &*mq.broker_name == name {
                r.forgiven = true;
            }
        }
    }

    /// Broker `name` crashed at its wall clock `wall_ms` and forgot its order infos.
    pub(super) fn broker_crashed(&mut self, name: &str, wall_ms: i64) {
        self.order_locks_lost.insert(name.to_owned(), wall_ms);
    }

    /// An orderly batch went to user code; `ok` = the listener will succeed on all of it.
    pub(super) fn on_orderly_dispatch(&mut self, i: usize, batch: &Batch, ok: bool) {
        let Some(group) = self.consumer_group.get(&i).cloned() else { return };
        let (ns, broadcasting) =
            self.groups.get(&group).map(|g| (g.ns.clone(), g.broadcasting)).unwrap_or_default();
        let q = &batch.queue;
        let mq = MessageQueue::new(ns.wrap(&q.topic), q.broker_name.clone(), q.queue_id);
        let offsets: Vec<i64> = batch.messages.iter().map(|m| m.queue_offset).collect();
        if offsets.windows(2).any(|w| w[0] >= w[1]) {
            self.fail(format!("consumer {i} got {mq:?} out of order in one batch: {offsets:?}"));
        }
        let key = (if broadcasting { format!("{group}#{i}") } else { group }, mq.clone());
        // Popped (orderly) before its broker crashed: that pop's lock on the queue is gone.
        let lock_lost = batch.messages.iter().any(|m| {
            let receipt = m.property(keys::POP_CK).and_then(|p| PopReceipt::parse(p).ok());
            receipt.is_some_and(|r| {
                r.is_order() && self.order_locks_lost.get(&r.broker_name).is_some_and(|at| r.pop_time <= *at)
            })
        });
        if let Some(r) = self.orderly_running.get(&key).filter(|r| !r.forgiven && !lock_lost) {
            let msg = format!(
                "two batches of {mq:?} with user code at once: consumer {} {} and consumer {i} {}",
                r.consumer, r.batch, batch.id
            );
            self.fail(msg);
        }
        self.orderly_running.insert(key, OrderlyRun { consumer: i, batch: batch.id, forgiven: lock_lost });
        // An orderly pop may hand out again what this consumer finished when the broker never
        // applied its ack (lost, or too late), and counts it only if the previous pop returned
        // it: an uncounted one the consumer takes for a replay (an operator's offset reset,
        // which 5.x brokers apply without telling clients) and consumes again. What the broker
        // counts as handed out before, the consumer must not consume twice.
        let uncounted_pop = batch.messages.first().is_some_and(|m| {
            m.reconsume_times == 0
                && m.property(keys::POP_CK)
                    .and_then(|p| PopReceipt::parse(p).ok())
                    .is_some_and(|r| r.is_order())
        });
        let done = self.orderly_done.get(&(i, mq.clone())).copied();
        if let (Some(done), Some(first), true) = (done, offsets.first(), uncounted_pop) {
            // A replay from here: what follows is checked against it.
            if *first <= done {
                self.orderly_done.insert((i, mq.clone()), *first - 1);
            }
        }
        if let (Some(done), Some(first)) = (done, offsets.first()) {
            if *first <= done && !uncounted_pop {
                self.fail(format!("consumer {i} got offset {first} of {mq:?} after finishing {done}"));
            }
        }
        if let (true, Some(last)) = (ok, offsets.last()) {
            self.orderly_done.insert((i, mq), *last);
        }
    }

    /// The result of consumer `i`'s orderly `batch` reached it.
    pub(super) fn on_orderly_result(&mut self, i: usize, batch: BatchId) {
        self.orderly_running.retain(|_, r| !(r.consumer == i && r.batch == batch));
    }

    fn fail(&mut self, msg: String) {
        if self.violation.is_none() {
            self.violation = Some(msg);
        }
    }

    fn commit_sent(&mut self, i: usize, mq: MessageQueue, offset: i64, how: &str) {
        let last = self.commits.entry((i, mq.clone())).or_insert(offset);
        if offset < *last {
            let msg = format!("consumer {i} committed {offset} after {} for {mq:?} ({how})", *last);
            self.fail(msg);
        } else {
            *last = offset;
        }
    }

    /// A consumer's ACK or change-invisible of receipt `receipt` at `at`.
    fn on_pop_ack(&mut self, i: usize, receipt: String, ack: bool, at: std::time::Duration) {
        let what = if ack { "acked" } else { "changed the invisible time of" };
        if self.pop_acked.contains(&receipt) {
            self.fail(format!("consumer {i} {what} receipt {receipt:?} after acking it"));
        }
        if ack {
            self.check_ack_allowed(i, &receipt, at);
            self.pop_acked.insert(receipt);
        }
    }

    /// An ack of `receipt` sent at `at` must follow its listener's success, or (orderly POP)
    /// the broker's taking the message into the dead-letter queue.
    fn check_ack_allowed(&mut self, i: usize, receipt: &str, at: std::time::Duration) {
        if let Some(&(by, ok, done, phys)) = self.pop_delivered.get(receipt) {
            let broker = receipt.split(' ').nth(5).unwrap_or_default().to_owned();
            if !ok && self.sent_back_phys.contains(&(broker, phys)) {
                return;
            }
            if !ok {
                self.fail(format!(
                    "consumer {i} acked receipt {receipt:?}, which consumer {by}'s listener failed"
                ));
            } else if at < done {
                self.fail(format!(
                    "consumer {i} acked receipt {receipt:?} at {at:?}, before its listener finished at {done:?}"
                ));
            }
        }
    }

    pub(super) fn on_request(
        &mut self,
        i: usize,
        conn: ConnId,
        broker: Option<&str>,
        cmd: &RemotingCommand,
        at: std::time::Duration,
    ) {
        let Some(broker) = broker else { return };
        match cmd.request_code() {
            Some(RequestCode::AckMessage) => {
                if let Ok(h) = cmd.header::<AckMessageRequestHeader>() {
                    self.on_pop_ack(i, h.extra_info, true, at);
                }
            }
            Some(RequestCode::ChangeMessageInvisibleTime) => {
                if let Ok(h) = cmd.header::<ChangeInvisibleTimeRequestHeader>() {
                    self.on_pop_ack(i, h.extra_info, false, at);
                }
            }
            Some(RequestCode::BatchAckMessage) => {
                if let Ok(body) = BatchAckMessageRequestBody::decode(&cmd.body) {
                    let receipts: Vec<String> = body
                        .acks
                        .iter()
                        .flat_map(|a| a.receipts(&body.broker_name))
                        .map(|r| r.to_string())
                        .collect();
                    // Whether each may be acked is checked as sent; whether it was acked
                    // before, when the broker serves it.
                    for r in &receipts {
                        self.check_ack_allowed(i, r, at);
                    }
                    let t = Tracked::BatchAck { consumer: i, receipts };
                    self.tracked.insert((conn, cmd.opaque), t);
                }
            }
            Some(RequestCode::PullMessage) => {
                if let Ok(h) = cmd.header::<PullMessageRequestHeader>() {
                    // A paused queue is not pulled.
                    if let Some(pauses) = self.paused.get(&i) {
                        let ns = self.consumer_group.get(&i).and_then(|g| self.groups.get(g)).map(|g| &g.ns);
                        let topic = ns.map_or(h.topic.as_str(), |ns| ns.unwrap(&h.topic));
                        let mq = MessageQueue::new(topic, broker, h.queue_id);
                        if let Some(s) = pauses.iter().find(|s| s.matches(&mq)) {
                            self.fail(format!("consumer {i} pulled {mq:?}, paused by {s:?}"));
                        }
                    }
                    if PullSysFlag(h.sys_flag).has(PullSysFlag::COMMIT_OFFSET) {
                        self.commit_sent(
                            i,
                            MessageQueue::new(h.topic, broker, h.queue_id),
                            h.commit_offset,
                            "pull",
                        );
                    }
                }
            }
            Some(RequestCode::UpdateConsumerOffset) => {
                if let Ok(h) = cmd.header::<UpdateConsumerOffsetRequestHeader>() {
                    self.commit_sent(
                        i,
                        MessageQueue::new(h.topic, broker, h.queue_id),
                        h.commit_offset,
                        "update",
                    );
                }
            }
            Some(RequestCode::ConsumerSendMsgBack) => {
                if let Ok(h) = cmd.header::<ConsumerSendMsgBackRequestHeader>() {
                    let t = Tracked::SendBack { broker: broker.to_owned(), commit_log_offset: h.offset };
                    self.tracked.insert((conn, cmd.opaque), t);
                }
            }
            Some(RequestCode::SendMessageV2) => {
                if let Ok(h) = cmd.header::<SendMessageRequestHeaderV2>() {
                    let props = crate::message::Properties::from_wire(bytes::Bytes::from(
                        h.properties.unwrap_or_default(),
                    ));
                    if let (Some(key), Some(r)) = (props.get(keys::UNIQ_KEY), h.reconsume_times) {
                        let t = Tracked::RetrySend { key: key.to_owned(), reconsume: r - 1 };
                        self.tracked.insert((conn, cmd.opaque), t);
                    }
                }
            }
            _ => {}
        }
    }

    pub(super) fn on_broker_output(&mut self, conn: ConnId, cmd: &RemotingCommand) {
        if !cmd.is_response() {
            return;
        }
        let Some(t) = self.tracked.remove(&(conn, cmd.opaque)) else { return };
        match t {
            Tracked::SendBack { broker, commit_log_offset } if cmd.code == ResponseCode::Success as i32 => {
                self.sent_back_phys.insert((broker, commit_log_offset));
            }
            Tracked::RetrySend { key, reconsume } if ResponseCode::is_send_ok(cmd.code) => {
                let best = self.sent_back_keys.entry(key).or_insert(reconsume);
                *best = (*best).max(reconsume);
            }
            Tracked::BatchAck { consumer, receipts } if cmd.code == ResponseCode::Success as i32 => {
                for r in receipts {
                    if self.pop_acked.contains(&r) {
                        self.fail(format!("consumer {consumer} acked receipt {r:?} after acking it"));
                    }
                    self.pop_acked.insert(r);
                }
            }
            _ => {}
        }
    }

    pub(super) fn on_event(&mut self, i: usize, e: &Event) {
        match e {
            Event::QueuesPaused { selector } => self.paused.entry(i).or_default().push(selector.clone()),
            Event::QueuesResumed { selector } => {
                self.paused.entry(i).or_default().retain(|s| s != selector);
            }
            _ => {}
        }
        let Some(group) = self.consumer_group.get(&i) else { return };
        let ns = self.groups.get(group).map(|g| g.ns.clone()).unwrap_or_default();
        let wire = |q: &MessageQueue| MessageQueue::new(ns.wrap(&q.topic), q.broker_name.clone(), q.queue_id);
        let reset: Vec<MessageQueue> = match e {
            Event::QueuesAssigned { queues, .. } | Event::QueuesRevoked { queues, .. } => {
                queues.iter().map(wire).collect()
            }
            Event::OffsetMoved { queue, .. } => vec![wire(queue)],
            Event::Seeked { queue, to, .. } => {
                let q = wire(queue);
                if let Some(g) = self.groups.get_mut(group) {
                    let skipped = g.seeked.entry(q.clone()).or_insert(*to);
                    *skipped = (*skipped).max(*to);
                }
                vec![q]
            }
            _ => return,
        };
        for q in reset {
            self.commits.remove(&(i, q.clone()));
            self.orderly_done.remove(&(i, q));
        }
    }

    pub(super) fn on_consumed(&mut self, c: &Consumed) {
        if let Some(receipt) = &c.receipt {
            if let Some((by, ..)) = self.pop_delivered.get(receipt) {
                let msg =
                    format!("receipt {receipt:?} delivered twice: to consumer {by}, then to {}", c.consumer);
                self.fail(msg);
            } else if self.pop_acked.contains(receipt) {
                self.fail(format!("receipt {receipt:?} delivered to consumer {} after its ack", c.consumer));
            }
            self.pop_delivered.insert(receipt.clone(), (c.consumer, c.ok, c.at, c.commit_log_offset));
        }
        if c.ok {
            let group = self.consumer_group.get(&c.consumer);
            let ns = group.and_then(|g| self.groups.get(g)).map(|g| g.ns.clone()).unwrap_or_default();
            let q = MessageQueue::new(ns.wrap(&c.queue.topic), c.queue.broker_name.clone(), c.queue.queue_id);
            self.ok.insert((q, c.offset));
            self.ok_keys.insert(c.key.clone());
        }
    }

    fn finished(
        &self,
        sim: &Sim,
        (name, group): (&str, &Group),
        broker: usize,
        mq: &MessageQueue,
        offset: i64,
    ) -> bool {
        let b = &sim.brokers[broker];
        // A popped message is the POP invariants' business (7): its pop committed past it.
        if offset < b.min_offset(&mq.topic, mq.queue_id)
            || b.pop_state(name, &mq.topic, mq.queue_id, offset).is_some()
            || self.ok.contains(&(mq.clone(), offset))
            || group.seeked.get(mq).is_some_and(|to| offset < *to)
        {
            return true;
        }
        let Some(record) = b.record(&mq.topic, mq.queue_id, offset) else { return false };
        let Ok(m) = decode_message(&record, &DecodeOptions::default()) else { return false };
        if group.subs.get(&*mq.topic).is_some_and(|s| !s.matches_tag(m.tags())) {
            return true;
        }
        self.sent_back_phys.contains(&(b.name().to_owned(), m.commit_log_offset))
            || self.sent_back_keys.get(&*m.msg_id()).is_some_and(|r| *r >= m.reconsume_times)
    }

    pub(super) fn check(&mut self, sim: &Sim) -> Result<(), String> {
        if let Some(v) = self.violation.take() {
            return Err(v);
        }
        // 1. Committed offsets never pass unfinished work.
        let groups = if self.skip_broker_commits { &BTreeMap::new() } else { &self.groups };
        for (group_name, group) in groups {
            for (bi, b) in sim.brokers.iter().enumerate() {
                for topic in group.subs.keys() {
                    let Some(q) =
                        group.subs.get(topic).and_then(|_| b.topics().into_iter().find(|(t, _)| t == topic))
                    else {
                        continue;
                    };
                    for queue_id in 0..q.1 {
                        let Some(committed) = b.committed_offset(group_name, topic, queue_id) else {
                            continue;
                        };
                        let mq = MessageQueue::new(topic.as_str(), b.name(), queue_id);
                        let key = (group_name.clone(), mq.clone());
                        let baseline =
                            if group.from_first || topic.starts_with(crate::producer::RETRY_TOPIC_PREFIX) {
                                0
                            } else {
                                committed
                            };
                        let from = self.verified.get(&key).copied().unwrap_or(baseline).min(committed);
                        let mut off = from.max(b.min_offset(topic, queue_id));
                        while off < committed {
                            if !self.finished(sim, (group_name, group), bi, &mq, off) {
                                return Err(format!(
                                    "{group_name} committed {committed} on {mq:?} but offset {off} is not finished"
                                ));
                            }
                            off += 1;
                        }
                        self.verified.insert(key, committed);
                    }
                }
            }
        }
        // 7. A broker never pops a message twice.
        for b in &sim.brokers {
            let repops = b.pop_stats().repops;
            if repops > 0 {
                return Err(format!("{} handed {repops} popped message(s) to a second pop", b.name()));
            }
        }
        // 3. Bounded caches.
        for (i, c) in sim.consumers.iter().enumerate() {
            let Some(consumer) = c.consumer() else { continue };
            let Some(group) = self.consumer_group.get(&i).and_then(|g| self.groups.get(g)) else { continue };
            for s in consumer.queue_snapshots() {
                if s.cached_count > group.threshold + group.batch {
                    return Err(format!("consumer {i} caches {} messages on {:?}", s.cached_count, s.queue));
                }
                if s.cached_bytes > group.threshold_bytes + group.batch * self.max_body.max(4 << 20) {
                    return Err(format!("consumer {i} caches {} bytes on {:?}", s.cached_bytes, s.queue));
                }
                if s.pulling && s.commit_offset > s.watermark {
                    return Err(format!(
                        "consumer {i} would commit {} above its watermark {} on {:?}",
                        s.commit_offset, s.watermark, s.queue
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every produced message consumed successfully at least once, or dead-lettered.
    pub(super) fn all_done(&self, sim: &Sim) -> bool {
        let mut dead: HashSet<String> = HashSet::new();
        for g in self.groups.keys() {
            for m in sim.dead_lettered(g) {
                dead.insert(m.msg_id().into_owned());
            }
        }
        // A message a seek moved past was skipped on purpose.
        let skipped = |p: &super::world::Produced| {
            self.groups.values().any(|g| g.seeked.get(&p.queue).is_some_and(|to| p.offset < *to))
        };
        sim.produced.iter().all(|p| self.ok_keys.contains(&p.key) || dead.contains(&p.key) || skipped(p))
    }
}
