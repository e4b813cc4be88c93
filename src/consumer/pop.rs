//! POP consumption (5.x brokers): the broker hands out messages, each invisible to the rest of
//! the group until it is acked or its invisible time passes (`docs/pop.md`).
//!
//! Which topics pop is the broker's call: without `clientRebalance`, each rebalance of a topic
//! first asks a broker (QUERY_ASSIGNMENT). An answer with POP queues is applied as it stands
//! (usually one queue id −1 per broker: "pop from every queue there"); any other answer — PULL,
//! none, an error, a 4.x broker — falls back to the consumer list and allocation here, exactly
//! as without POP. So a group an operator switches is followed within one rebalance, both ways.
//!
//! A POP queue lives in the same table as a pulled one (phase [`Phase::Popping`]), so pause,
//! release, flow control timers and listener slots work alike. Its messages carry receipts
//! instead of offsets: a batch's result acks each success (ACK_MESSAGE) and makes each failure
//! visible again after Java's back-off (CHANGE_MESSAGE_INVISIBLETIME); nothing is committed.
//! What is never answered (a crash, a withdrawn batch, a lost ack) comes back after the invisible
//! time: POP trades duplicates for never losing a message, like PULL.

use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;

use super::Consumer;
use super::in_flight::InFlight;
use super::lifecycle::RunState;
use super::queues::Phase;
use super::requests::{Failure, PendingKind};
use crate::config::ConsumeMode;
use crate::event::{Batch, BatchKind, ConsumeResult, Event, Messages, PeerAddr, Request};
use crate::message::{DecodeBudget, MessageQueue, decode_messages_within};
use crate::producer::RETRY_TOPIC_PREFIX;
use crate::protocol::body::ConsumeFromWhere;
use crate::protocol::body::{
    JsonBody, MessageModel, MessageRequestMode, QueryAssignmentRequestBody, QueryAssignmentResponseBody,
};
use crate::protocol::header::{ConsumeInitMode, PopMessageRequestHeader, PopMessageResponseHeader};
use crate::protocol::receipt::{PopReceipt, attach_receipts_each};
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode};
use crate::rebalance::AllocateStrategy;
use crate::timer::{QueueKey, Timer};

/// `MQVersion` ordinal of 5.0.0: older brokers have no POP (they answer code 3).
pub(super) const V5_0_0: i32 = 413;

/// Java's `popDelayLevel`, seconds: a failed message's invisible time by its reconsume count.
const POP_DELAY_LEVELS: [u64; 16] =
    [10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200];

/// Past `maxReconsumeTimes`, a message older than this is acked and dropped (Java's
/// `checkNeedAckOrDelay`: the POP path has no dead-letter queue).
const DROP_AFTER_MS: i64 = 2 * 7200 * 1000;

/// Java re-pops a queue over `popThresholdForQueue` after this.
const POP_FLOW_CONTROL_DELAY: Duration = Duration::from_millis(50);

/// The pop's RPC timeout is its hold plus this (Java: `pollTime + 10 s`).
const POP_TIMEOUT_MARGIN: Duration = Duration::from_secs(10);

/// QUERY_ASSIGNMENT times out after this (Java's `QUERY_ASSIGNMENT_TIMEOUT`).
const POP_RPC_TIMEOUT: Duration = Duration::from_secs(3);

/// An empty pop answered sooner than this was not held (a broker refusing to hold, or one
/// answering at once on purpose): the next goes after [`UNHELD_RETRY`], not at once.
const UNHELD_MS: i64 = 50;
const UNHELD_RETRY: Duration = Duration::from_millis(100);

/// `PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL`.
const BROKER_FLOW_CONTROL_DELAY: Duration = Duration::from_millis(20);

/// The group's pop retry topic for `topic` (wire names): where the broker revives what was
/// popped and not acked (`KeyBuilder.buildPopRetryTopicV1`).
pub(super) fn pop_retry_topic(group: &str, topic: &str) -> String {
    format!("{RETRY_TOPIC_PREFIX}{group}_{topic}")
}

/// The subscribed topic of a message pulled from one of `group`'s pop retry topics (v1 `_` or
/// v2 `+`; `KeyBuilder.parseNormalTopic`).
pub(super) fn topic_of_pop_retry<'a>(group: &str, retry: &'a str) -> Option<&'a str> {
    let rest = retry.strip_prefix(RETRY_TOPIC_PREFIX)?.strip_prefix(group)?;
    rest.strip_prefix('_').or_else(|| rest.strip_prefix('+')).filter(|t| !t.is_empty())
}

/// What a POP batch needs to answer for each message.
#[derive(Debug)]
pub(super) struct PopBatch {
    /// The subscribed topic (wire name): acks name the real topic derived from it.
    pub(super) topic: Arc<str>,
    pub(super) items: SmallVec<[PopItem; 1]>,
    /// Orderly (`pop_orderly.rs`): the real queue id and the messages (a dead letter is sent
    /// back by its commit-log offset).
    pub(super) order: Option<(i32, Arc<Vec<crate::MessageExt>>)>,
}

#[derive(Debug)]
pub(super) struct PopItem {
    pub(super) receipt: PopReceipt,
    pub(super) reconsume_times: i32,
    pub(super) born_timestamp: i64,
}

impl Consumer {
    /// This consumer follows the broker's mode: clustering, concurrent, `clientRebalance` off.
    pub(super) fn follows_pop(&self) -> bool {
        !self.cfg.client_rebalance
            && (self.cfg.consume_mode == ConsumeMode::Concurrently || self.pops_orderly())
            && self.cfg.message_model == MessageModel::Clustering
    }

    /// Ask `peer` how the group reads `topic`; false when that is not asked (the caller then
    /// allocates here at once).
    pub(super) fn query_assignment(&mut self, topic: &str, peer: &PeerAddr) -> bool {
        if !self.follows_pop() || topic.starts_with(RETRY_TOPIC_PREFIX) || self.no_pop.contains(peer) {
            return false;
        }
        let version = self.peers.get(peer).map_or(0, |p| p.version);
        if version != 0 && version < V5_0_0 {
            return false;
        }
        let body = QueryAssignmentRequestBody {
            topic: topic.to_owned(),
            consumer_group: self.group.clone(),
            client_id: self.cfg.client_id.as_str().to_owned(),
            // The broker knows only these two; either gives POP's "every queue" answer.
            strategy_name: match self.cfg.allocate_strategy {
                AllocateStrategy::AveragelyByCircle => "AVG_BY_CIRCLE",
                _ => "AVG",
            }
            .to_owned(),
            message_model: MessageModel::Clustering,
        };
        let kind = PendingKind::Assignment { topic: topic.to_owned() };
        self.send_to_broker(peer.clone(), Request::QueryAssignment(body), kind, POP_RPC_TIMEOUT);
        true
    }

    pub(super) fn on_assignment(
        &mut self,
        peer: &PeerAddr,
        topic: &str,
        result: Result<RemotingCommand, Failure>,
    ) {
        if self.state != RunState::Running {
            self.rebalancing.remove(topic);
            return;
        }
        // `Some`: the broker said how the group reads the topic. `None`: it did not (a timeout,
        // a lost link, an error, or `{}` from a broker that does not know us yet), which says
        // nothing about the mode: a popping topic keeps popping, a pulling one is allocated here.
        let answer: Option<Vec<_>> = match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => {
                match QueryAssignmentResponseBody::decode(&cmd.body) {
                    Ok(b) => b.message_queue_assignments,
                    Err(e) => {
                        self.emit_malformed(peer.clone(), RequestCode::QueryAssignment, e);
                        None
                    }
                }
            }
            Ok(cmd) if cmd.code == ResponseCode::RequestCodeNotSupported as i32 => {
                // A 4.x broker: never asked again; it pulls.
                self.no_pop.insert(peer.clone());
                Some(Vec::new())
            }
            Ok(cmd) => {
                if super::requests::is_permission_refusal(&cmd) {
                    // About our credentials, as the consumer list that follows will be: once.
                    self.report_refusal(peer, RequestCode::QueryAssignment, &cmd);
                } else {
                    self.emit_broker_error(peer.clone(), RequestCode::QueryAssignment, &cmd);
                }
                None
            }
            Err(_) => None,
        };
        let Some(answer) = answer else {
            // An orderly consumer that may pop does not guess PULL either: pulling with client
            // locks while the others pop under the broker's would let two members run one queue.
            if self.pop_queues.iter().any(|q| &*q.topic == topic) || self.pops_orderly() {
                // The queues stay as they are; the next periodic rebalance asks again (another
                // broker, if there is one).
                self.rebalancing.remove(topic);
                self.rebalance_rotation += 1;
            } else {
                self.ask_consumer_list(topic, peer.clone());
            }
            return;
        };
        // Only this topic's queues: an answer naming others is not applied.
        let assigned: Vec<_> = answer.into_iter().filter(|a| &*a.message_queue.topic == topic).collect();
        let pops: Vec<MessageQueue> = assigned
            .iter()
            .filter(|a| a.mode == MessageRequestMode::Pop)
            .map(|a| a.message_queue.clone())
            .collect();
        // A POP queue on a broker without POP (a 4.x one in a mixed cluster) cannot be popped:
        // the topic is pulled, allocated here, as a whole.
        let unpoppable =
            pops.iter().any(|q| self.master_addr(&q.broker_name).is_some_and(|a| self.no_pop.contains(&a)));
        if pops.is_empty() || unpoppable {
            // PULL: allocate here, as always.
            self.set_pop_queues(topic, Vec::new());
            self.ask_consumer_list(topic, peer.clone());
            return;
        }
        let again = self.rebalancing.remove(topic).unwrap_or(false);
        self.set_pop_queues(topic, pops);
        let target = assigned.into_iter().map(|a| a.message_queue).collect();
        self.apply_assignment(topic, target);
        if again {
            self.request_rebalance();
        }
    }

    /// Record which queues of `topic` are popped from now on; report a change of mode.
    fn set_pop_queues(&mut self, topic: &str, pops: Vec<MessageQueue>) {
        let before = self.pop_queues.iter().any(|q| &*q.topic == topic);
        self.pop_queues.retain(|q| &*q.topic != topic);
        let now = !pops.is_empty();
        self.pop_queues.extend(pops);
        if before != now {
            let mode = if now { MessageRequestMode::Pop } else { MessageRequestMode::Pull };
            let user = self.ns.unwrap(topic).to_owned();
            self.emit(Event::MessageRequestModeChanged { topic: user, mode });
            // Messages popped before the switch and never answered are revived into the pop
            // retry topic: pulled, they are not stranded there (as Java does). Popping, the
            // broker reads that topic itself, so pulling it would hand its messages out twice.
            let retry = pop_retry_topic(&self.group, topic);
            if now {
                self.drop_subscription(&retry);
            } else {
                self.add_subscription(&retry, "*");
            }
        }
    }

    /// Pop `key` now if it may: one pop in flight, flow control by messages not yet answered.
    pub(super) fn try_pop(&mut self, key: QueueKey) {
        if self.state != RunState::Running || self.paused {
            return;
        }
        if self.pops_orderly() {
            self.pop_order_resume(key);
        }
        let Some(q) = self.queues.get(key) else { return };
        // No longer POP (the topic went back to PULL): released at the coming allocation.
        if q.phase != Phase::Popping
            || q.pull_in_flight
            || self.queue_paused(key)
            || !self.pop_queues.contains(&q.mq)
        {
            return;
        }
        self.timers.stop(Timer::Pull(key));
        let Some(q) = self.queues.get(key) else { return };
        if q.pop_unanswered > self.cfg.pop_threshold_for_queue {
            self.stats.flow_control_delays += 1;
            self.timers.set(Timer::Pull(key), self.now + POP_FLOW_CONTROL_DELAY);
            return;
        }
        let Some(peer) = self.master_addr(&q.mq.broker_name) else {
            return self.retry_pull_later(key, self.cfg.pull_time_delay_when_exception);
        };
        if self.park_pull_until_registered(&peer, key) {
            return;
        }
        let Some(q) = self.queues.get(key) else { return };
        let sub = self.subs.get(&*q.mq.topic);
        let header = PopMessageRequestHeader {
            consumer_group: self.group.clone(),
            topic: q.mq.topic.to_string(),
            queue_id: q.mq.queue_id,
            max_msg_nums: self.cfg.pop_batch_nums,
            invisible_time: self.cfg.pop_invisible_time.as_millis() as i64,
            poll_time: self.cfg.broker_suspend_max_time.as_millis() as i64,
            // 0: the broker times the hold by its own clock. Java sends its clock, and a client
            // behind the broker's by more than the hold is answered at once, every time, in a
            // tight loop (checked against 5.3.3: tests/broker_pop.rs).
            born_time: 0,
            init_mode: match self.cfg.consume_from_where {
                ConsumeFromWhere::ConsumeFromFirstOffset => ConsumeInitMode::Min,
                _ => ConsumeInitMode::Max,
            }
            .value(),
            exp_type: sub.map(|s| s.expression_type),
            exp: sub.map(|s| s.sub_string.clone()),
            order: Some(self.pops_orderly()),
            attempt_id: None,
            bname: Some(q.mq.broker_name.to_string()),
        };
        let wall = self.wall_ms();
        let Some(q) = self.queues.get_mut(key) else { return };
        q.pull_in_flight = true;
        q.last_pull_ms = wall;
        let timeout = self.cfg.broker_suspend_max_time + POP_TIMEOUT_MARGIN;
        self.transmit(peer, Request::PopMessage(header), PendingKind::Pop { key }, timeout);
    }

    pub(super) fn on_pop(
        &mut self,
        key: QueueKey,
        peer: &PeerAddr,
        result: Result<RemotingCommand, Failure>,
    ) {
        let paused = self.queue_paused(key);
        let Some(q) = self.queues.get_mut(key) else { return };
        q.pull_in_flight = false;
        // Not consumed now (shutting down, released, paused): what it popped comes back after
        // its invisible time.
        if paused || self.state != RunState::Running || q.phase != Phase::Popping {
            return;
        }
        let Ok(cmd) = result else {
            self.stats.pull_errors += 1;
            return self.retry_pull_later(key, self.cfg.pull_time_delay_when_exception);
        };
        match ResponseCode::from_i32(cmd.code) {
            Some(ResponseCode::Success) => self.on_popped(key, peer, cmd),
            // The hold ended with nothing: pop again at once — unless it was not held at all,
            // which a working broker does not do: then not faster than ten times a second.
            Some(ResponseCode::PollingTimeout | ResponseCode::PullNotFound) => {
                let held_ms = self.queues.get(key).map_or(0, |q| self.wall_ms() - q.last_pull_ms);
                if held_ms < UNHELD_MS {
                    self.retry_pull_later(key, UNHELD_RETRY);
                } else {
                    self.try_pop(key);
                }
            }
            Some(ResponseCode::FlowControl) => self.retry_pull_later(key, BROKER_FLOW_CONTROL_DELAY),
            Some(ResponseCode::PollingFull) => {
                self.retry_pull_later(key, self.cfg.pull_time_delay_when_exception)
            }
            Some(ResponseCode::RequestCodeNotSupported) => {
                // The broker cannot pop after all: pull its queues, allocated here.
                self.no_pop.insert(peer.clone());
                self.emit_broker_error(peer.clone(), RequestCode::PopMessage, &cmd);
                if let Some(topic) = self.queues.get(key).map(|q| q.mq.topic.to_string()) {
                    self.set_pop_queues(&topic, Vec::new());
                }
                self.request_rebalance();
            }
            other => {
                self.stats.pull_errors += 1;
                if super::requests::is_permission_refusal(&cmd) {
                    if let Some(t) = self.queues.get(key).map(|q| q.mq.topic.to_string()) {
                        self.topic_refused_by_name(&t, peer, &cmd);
                    }
                    return self.retry_pull_later(key, super::pull::PERMISSION_RETRY);
                }
                if matches!(
                    other,
                    Some(ResponseCode::SubscriptionNotExist | ResponseCode::SubscriptionGroupNotExist)
                ) {
                    self.mark_unregistered(peer);
                }
                self.emit_broker_error(peer.clone(), RequestCode::PopMessage, &cmd);
                self.retry_pull_later(key, self.cfg.pull_time_delay_when_exception);
            }
        }
    }

    fn on_popped(&mut self, key: QueueKey, peer: &PeerAddr, cmd: RemotingCommand) {
        let header = match cmd.header::<PopMessageResponseHeader>() {
            Ok(h) => h,
            Err(e) => {
                self.emit_malformed(peer.clone(), RequestCode::PopMessage, e);
                self.stats.pull_errors += 1;
                return self.retry_pull_later(key, self.cfg.pull_time_delay_when_exception);
            }
        };
        let Some(q) = self.queues.get(key) else { return };
        // A pop returns at most what it asked for; a broker sending more cannot make us hold it.
        let budget = DecodeBudget {
            messages: self.cfg.pop_batch_nums.max(1) as usize,
            bytes: self.cfg.pull_threshold_size_for_queue_bytes(),
        };
        let (topic, broker) = (q.mq.topic.clone(), q.mq.broker_name.clone());
        let mut msgs = match decode_messages_within(&cmd.body, &self.cfg.decode, budget) {
            Ok(d) => d.messages,
            Err(e) => {
                let queue = (*q.user_mq).clone();
                self.emit(Event::CorruptPull { queue, error: e });
                self.stats.pull_errors += 1;
                return self.retry_pull_later(key, self.cfg.pull_time_delay_when_exception);
            }
        };
        // A message without a usable receipt cannot be acked: it is reported and left to come
        // back after its invisible time; the others go on.
        let mut receipts = Vec::with_capacity(msgs.len());
        let mut unreadable = None;
        for r in attach_receipts_each(&mut msgs, &header, &broker, &topic) {
            match r {
                Ok(r) => receipts.push(Some(r)),
                Err(e) => {
                    unreadable = unreadable.or(Some(e));
                    receipts.push(None);
                }
            }
        }
        if let Some(e) = unreadable {
            self.emit_malformed(peer.clone(), RequestCode::PopMessage, e);
            self.stats.pull_errors += 1;
        }
        if self.cfg.namespace.is_some() {
            let plain: Arc<str> = self.ns.unwrap(&topic).into();
            for m in msgs.iter_mut() {
                m.topic = plain.clone();
            }
        }
        // Client-side re-filter (tag hashes can collide): what does not match is acked.
        let filter = self.subs.get(&*topic).filter(|s| !s.tags_set.is_empty()).cloned();
        let mut kept = Vec::with_capacity(msgs.len());
        let mut items: Vec<PopItem> = Vec::with_capacity(msgs.len());
        for (m, receipt) in msgs.into_iter().zip(receipts) {
            let Some(receipt) = receipt else { continue };
            if filter.as_ref().is_some_and(|s| !s.matches_tag(m.tags())) {
                self.ack(&topic, &receipt);
                continue;
            }
            items.push(PopItem {
                receipt,
                reconsume_times: m.reconsume_times,
                born_timestamp: m.born_timestamp,
            });
            kept.push(m);
        }
        let Some(q) = self.queues.get_mut(key) else { return };
        q.pop_unanswered += kept.len();
        let (slot, sent_ms) = (q.stats_slot, q.last_pull_ms);
        self.found_then_next(key, slot, sent_ms, kept.len());
        if self.pops_orderly() {
            let counts = header.order_count_info.as_deref();
            self.queue_popped_in_order(key, topic, counts, peer, kept, items);
        } else {
            self.dispatch_popped(key, topic, kept, items);
        }
    }

    /// Hand popped messages to user code in batches of `consumeMessageBatchMaxSize`.
    fn dispatch_popped(
        &mut self,
        key: QueueKey,
        topic: Arc<str>,
        msgs: Vec<crate::MessageExt>,
        items: Vec<PopItem>,
    ) {
        let wall = self.wall_ms();
        let Some(q) = self.queues.get_mut(key) else { return };
        q.last_consume_ms = wall;
        let queue = q.user_mq.clone();
        let size = self.cfg.consume_message_batch_max_size.max(1);
        let offsets: Vec<i64> = msgs.iter().map(|m| m.queue_offset).collect();
        let chunk = Arc::new(msgs);
        let mut items = items.into_iter();
        let mut start = 0;
        while start < chunk.len() {
            let end = (start + size).min(chunk.len());
            let id = self.next_batch_id();
            let pop = PopBatch {
                topic: topic.clone(),
                items: items.by_ref().take(end - start).collect(),
                order: None,
            };
            self.batches.insert(
                id,
                InFlight::single(
                    key,
                    offsets[start..end].iter().copied().collect(),
                    false,
                    self.now_ms,
                    Some(Box::new(pop)),
                ),
            );
            let messages = Messages::new(chunk.clone(), start, end);
            self.hand_out(Batch { id, queue: queue.clone(), messages, kind: BatchKind::Concurrent });
            start = end;
        }
    }

    /// A POP batch's result: ack what succeeded, make the rest visible again later. Answered
    /// even when its queue was released meanwhile: a receipt needs only its broker.
    pub(super) fn on_pop_consumed(&mut self, b: &InFlight, pop: PopBatch, result: &ConsumeResult) {
        let n = pop.items.len();
        let ok = super::consume::succeeded(result, n);
        self.stats.consumed_ok += ok as u64;
        self.stats.consumed_failed += (n - ok) as u64;
        self.count_consumed(b, ok);
        if let Some(q) = self.queues.get_mut(b.key) {
            q.pop_unanswered = q.pop_unanswered.saturating_sub(n);
        }
        let wall = self.wall_ms();
        let max = self.cfg.effective_max_reconsume_times();
        let mut dropped = 0;
        for (i, item) in pop.items.iter().enumerate() {
            if wall.saturating_sub(item.receipt.pop_time) >= item.receipt.invisible_time {
                // Visible again already: the broker hands it out anew whatever we say.
                self.stats.pop_expired += 1;
                continue;
            }
            if i < ok {
                self.ack(&pop.topic, &item.receipt);
                continue;
            }
            let age = wall.saturating_sub(item.born_timestamp);
            let level = if result.delay_level < 0 || (item.reconsume_times >= max && age > DROP_AFTER_MS) {
                None
            } else if item.reconsume_times >= max {
                // Out of retries but young: wait about as long as it has lived, then once more.
                Some(
                    POP_DELAY_LEVELS
                        .iter()
                        .position(|s| (*s as i64) * 1000 > age)
                        .unwrap_or(POP_DELAY_LEVELS.len() - 1),
                )
            } else if result.delay_level > 0 {
                Some(result.delay_level as usize)
            } else {
                Some(item.reconsume_times.max(0) as usize)
            };
            match level {
                Some(level) => {
                    let secs = POP_DELAY_LEVELS[level.min(POP_DELAY_LEVELS.len() - 1)];
                    self.change_invisible_time(&pop.topic, &item.receipt, Duration::from_secs(secs));
                }
                None => {
                    // No dead-letter queue in POP: acked, reported, gone.
                    self.ack(&pop.topic, &item.receipt);
                    dropped += 1;
                }
            }
        }
        if dropped > 0 {
            if let Some(q) = self.queues.get(b.key) {
                let queue = (*q.user_mq).clone();
                self.emit(Event::FailedMessagesDropped { queue, count: dropped });
            }
        }
        // Flow control may have held the queue back.
        self.try_pop(b.key);
    }
}
