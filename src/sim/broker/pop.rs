//! POP consumption on the simulated broker (`docs/pop.md`): SET_MESSAGE_REQUEST_MODE,
//! QUERY_ASSIGNMENT, POP_MESSAGE with long polling, ACK_MESSAGE, BATCH_ACK_MESSAGE,
//! CHANGE_MESSAGE_INVISIBLETIME, checkpoints and their revive into the pop retry topic
//! `%RETRY%{group}_{topic}`. Orderly pops keep order infos instead (`pop_order.rs`).
//!
//! Checkpoints live in memory (the real broker writes them to its revive topic) and revive
//! exactly when `popTime + invisibleTime` passes. The broker also keeps what it knows of every
//! message it popped ([`PopState`]) and counts ([`PopStats`]), for the simulator's invariants.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::pop_order::{Commit, OrderInfos, OrderKey};
use super::store::{Filter, GetStatus, PullLimits};
use super::{ConnId, Draft, FAQ, MAX_WAIT, SimBroker, error, header_error, reply};
use crate::message::{DecodeOptions, MessageQueue, decode_message, encode_stored, keys};
use crate::producer::RETRY_TOPIC_PREFIX;
use crate::protocol::body::{
    BatchAckMessageRequestBody, MessageModel, MessageQueueAssignment, MessageRequestMode,
    QueryAssignmentRequestBody, QueryAssignmentResponseBody, SetMessageRequestModeRequestBody,
    SubscriptionData, perm,
};
use crate::protocol::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    ConsumeInitMode, PopMessageRequestHeader, PopMessageResponseHeader,
};
use crate::protocol::receipt::{POP_ORDER_REVIVE_QUEUE, PopReceipt, RetryFlag};
use crate::protocol::{ExpressionType, JsonBody, RemotingCommand, ResponseCode};
use crate::rebalance::AllocateStrategy;

/// `BrokerConfig.reviveQueueNum`.
const REVIVE_QUEUE_NUM: u32 = 8;
/// `popFromRetryProbability` is 20 %: every 5th pop reads the retry topic first.
const RETRY_FIRST_EVERY: u64 = 5;
/// The most messages one pop may ask for.
const MAX_POP_NUMS: i32 = 32;
/// `isTimeoutTooMuch`: a pop born this long (ms) before its poll time ran out is refused.
const TIMEOUT_TOO_MUCH_MS: i64 = 500;
/// Remark of a response built from a header class whose code was never set.
const NOT_SET: &str = "not set any response code";

/// The pop retry topic of `group` for `topic` (v1 naming, `KeyBuilder.buildPopRetryTopicV1`).
pub fn pop_retry_topic(group: &str, topic: &str) -> String {
    format!("{RETRY_TOPIC_PREFIX}{group}_{topic}")
}

/// Counters of the broker's POP service (monotonic; a restart keeps them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PopStats {
    /// POP_MESSAGE answers that carried messages.
    pub pops: u64,
    /// Messages handed out by pops.
    pub popped: u64,
    /// Acks that acked an invisible message.
    pub acked: u64,
    /// CHANGE_MESSAGE_INVISIBLETIME requests served (each starts a new checkpoint, or for an
    /// orderly receipt sets the message's next visible time).
    pub changed: u64,
    /// Messages re-put to a pop retry topic because their checkpoint expired unacked.
    pub revived: u64,
    /// Acks or changes naming a checkpoint entry that no longer waits: its message was revived
    /// or renewed by a change meanwhile (orderly: a receipt of an earlier pop of the queue, or
    /// of a message behind the group's offset). Answered SUCCESS, no effect (as the real broker).
    pub stale_acks: u64,
    /// Acks of a message acked already. Answered SUCCESS, no effect.
    pub double_acks: u64,
    /// Pops that handed out a stored message the group had popped already (its receipt was
    /// still out or acked): only an offset reset or lost offsets (a crash) cause it. An orderly
    /// redelivery (below) is not one.
    pub repops: u64,
    /// Messages an orderly pop handed out again in place: ones of the queue's earlier orderly
    /// pops, once its lock freed (every unacked one visible again; acked ones behind an unacked
    /// one come again too, read from the first unacked offset; an older pop's offsets the
    /// previous one did not return are forgotten), or to a retry of the previous pop (same
    /// attempt id).
    pub order_redelivered: u64,
    /// POLLING_TIMEOUT answers.
    pub polling_timeouts: u64,
    /// BATCH_ACK_MESSAGE requests served.
    pub batch_acks: u64,
}

/// What the broker knows of one stored message a group popped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PopState {
    /// Out with a consumer: visible again at this broker wall time (ms) unless acked.
    Invisible {
        /// `popTime + invisibleTime` of its latest checkpoint.
        visible_at: i64,
    },
    /// Acked.
    Acked,
    /// Its checkpoint expired: a copy was put to the pop retry topic.
    Revived,
}

/// One checkpoint: the messages one pop read from one queue (or one change-invisible).
#[derive(Clone, Debug)]
struct Checkpoint {
    offsets: Vec<i64>,
    acked: Vec<bool>,
    pop_time: i64,
    invisible_time: i64,
    due: Instant,
}

/// (group, topic read, queue, start offset, popTime, sequence).
type CkKey = (String, String, i32, i64, i64, u64);

/// A pop held by long polling (`PopLongPollingService`).
#[derive(Clone, Debug)]
struct HeldPop {
    conn: ConnId,
    /// With the broker's `bornTime` filled in, re-run when woken.
    request: RemotingCommand,
    group: String,
    topic: String,
    queue_id: i32,
    deadline: Instant,
    filter: Filter,
}

/// The broker's POP state.
#[derive(Clone, Debug, Default)]
pub(super) struct PopService {
    /// (topic, group) → mode and popShareQueueNum (`MessageRequestModeManager`).
    modes: BTreeMap<(String, String), (MessageRequestMode, i32)>,
    /// Topic → the queues the name server routes for it, from every broker.
    routes: BTreeMap<String, Vec<MessageQueue>>,
    cks: BTreeMap<CkKey, Checkpoint>,
    /// (due, sequence) → checkpoint, in revive order.
    due: BTreeMap<(Instant, u64), CkKey>,
    seq: u64,
    ck_number: u32,
    pop_number: u64,
    rotation: u32,
    held: Vec<HeldPop>,
    /// (group, topic read, queue, offset) → state.
    states: BTreeMap<(String, String, i32, i64), PopState>,
    /// Orderly pops' order infos (persisted with the consumer offsets).
    order: OrderInfos,
    stats: PopStats,
}

impl PopService {
    /// Restart: held pops are lost; checkpoints (stored in the revive topic) and modes (a
    /// config file) survive.
    pub(super) fn restart(&mut self) {
        self.held.clear();
    }

    /// Lost offsets make re-pops legitimate: forget what was popped. The order infos are
    /// flushed with the offsets: lost too.
    pub(super) fn forget_states(&mut self) {
        self.states.clear();
        self.order.clear_all();
    }

    /// A client commit moved `queue_id`'s offset back to `offset` (a member still pulling while
    /// another pops, as during a switch to POP): what was popped from there may be popped again.
    pub(super) fn forget_from(&mut self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let from = (group.to_owned(), topic.to_owned(), queue_id, offset);
        let to = (group.to_owned(), topic.to_owned(), queue_id, i64::MAX);
        let keys: Vec<_> = self.states.range(from..=to).map(|(k, _)| k.clone()).collect();
        for k in keys {
            self.states.remove(&k);
        }
    }

    pub(super) fn disconnect(&mut self, conn: ConnId) {
        self.held.retain(|h| h.conn != conn);
    }

    /// When `handle_timeout` has pop work: a checkpoint due, an orderly queue's lock freeing
    /// or a held pop expiring.
    pub(super) fn next_timeout(&self) -> Option<Instant> {
        let ck = self.due.keys().next().map(|(t, _)| *t);
        let held = self.held.iter().map(|h| h.deadline).min();
        ck.into_iter().chain(held).chain(self.order.next_wake()).min()
    }
}

/// What one pop collected.
#[derive(Default)]
struct Collected {
    body: BytesMut,
    count: i32,
    rest: i64,
    start_info: Vec<String>,
    msg_info: Vec<String>,
    /// Orderly: `orderCountInfo` entries.
    order_counts: Vec<String>,
}

/// The numbers of one pop, shared by every queue it reads.
struct PopCtx<'a> {
    group: &'a str,
    /// The subscribed topic.
    topic: &'a str,
    max: i32,
    init_mode: i32,
    invisible_time: i64,
    pop_time: i64,
    revive_qid: i32,
    filter: &'a Filter,
    /// `order=true`.
    order: bool,
    attempt_id: Option<&'a str>,
}

fn pop_header(
    pop_time: i64,
    invisible_time: i64,
    revive_qid: i32,
    rest_num: i64,
) -> PopMessageResponseHeader {
    PopMessageResponseHeader {
        pop_time,
        invisible_time,
        revive_qid,
        rest_num,
        start_offset_info: None,
        msg_offset_info: None,
        order_count_info: None,
    }
}

/// An early POP refusal: `createResponseCommand(PopMessageResponseHeader.class)` sends the
/// header's numbers as "0".
fn pop_error(req: &RemotingCommand, code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    error(req, code, remark).with_header(&pop_header(0, 0, 0, 0))
}

fn change_error(req: &RemotingCommand, code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    let h = ChangeInvisibleTimeResponseHeader { pop_time: 0, invisible_time: 0, revive_qid: 0 };
    error(req, code, remark).with_header(&h)
}

fn flag_digit(topic: &str) -> char {
    match RetryFlag::of_topic(topic) {
        RetryFlag::Normal => '0',
        RetryFlag::RetryV1 => '1',
        RetryFlag::RetryV2 => '2',
    }
}

fn json<T: JsonBody>(req: &RemotingCommand) -> Result<T, RemotingCommand> {
    T::decode(&req.body).map_err(|e| {
        error(req, ResponseCode::SystemError, format!("com.alibaba.fastjson.JSONException: {e}"))
    })
}

impl SimBroker {
    // ----- public API -----------------------------------------------------------------------

    /// Switch how `group` reads `topic` on this broker (what `mqadmin setConsumeMode` does);
    /// consumers learn it at their next QUERY_ASSIGNMENT. `pop_share_queue_num` ≤ 0 lets every
    /// client pop every queue.
    pub fn set_message_request_mode(
        &mut self,
        topic: &str,
        group: &str,
        mode: MessageRequestMode,
        pop_share_queue_num: i32,
    ) {
        self.pop.modes.insert((topic.to_owned(), group.to_owned()), (mode, pop_share_queue_num));
    }

    /// The mode set for (topic, group), if any (unset reads as PULL).
    pub fn message_request_mode(&self, topic: &str, group: &str) -> Option<(MessageRequestMode, i32)> {
        self.pop.modes.get(&(topic.to_owned(), group.to_owned())).copied()
    }

    /// The queues the name server routes for `topic` across every broker, which QUERY_ASSIGNMENT
    /// allocates (the real broker reads the route). Without one, this broker's own readable
    /// queues are used.
    pub fn set_route_queues(&mut self, topic: &str, queues: Vec<MessageQueue>) {
        self.pop.routes.insert(topic.to_owned(), queues);
    }

    /// The POP counters.
    pub fn pop_stats(&self) -> PopStats {
        self.pop.stats
    }

    /// What the broker knows of the message at `offset` of `topic` (the topic it was popped
    /// from: the pop retry topic for a revived copy) for `group`; `None` if never popped.
    pub fn pop_state(&self, group: &str, topic: &str, queue_id: i32, offset: i64) -> Option<PopState> {
        self.pop.states.get(&(group.to_owned(), topic.to_owned(), queue_id, offset)).copied()
    }

    /// Whether `group` has popped anything from `topic` here.
    pub fn pops_topic(&self, group: &str, topic: &str) -> bool {
        let from = (group.to_owned(), topic.to_owned(), i32::MIN, i64::MIN);
        self.pop.states.range(from..).next().is_some_and(|((g, t, _, _), _)| g == group && t == topic)
    }

    /// Checkpoints with messages neither acked nor revived yet.
    pub fn checkpoints(&self) -> usize {
        self.pop.cks.len()
    }

    /// Pops held by long polling.
    pub fn held_pops(&self) -> usize {
        self.pop.held.len()
    }

    // ----- QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE -------------------------------------

    /// SET_MESSAGE_REQUEST_MODE: `QueryAssignmentProcessor.setMessageRequestMode`.
    pub(super) fn on_set_request_mode(&mut self, req: &RemotingCommand) -> RemotingCommand {
        let body = match json::<SetMessageRequestModeRequestBody>(req) {
            Ok(b) => b,
            Err(answer) => return answer,
        };
        if body.topic.starts_with(RETRY_TOPIC_PREFIX) {
            return error(req, ResponseCode::NoPermission, "retry topic is not allowed to set mode");
        }
        if !self.topic_index.contains_key(body.topic.as_str()) {
            let remark = format!("topic[{}] not exist, apply first please! {FAQ}", body.topic);
            return error(req, ResponseCode::TopicNotExist, remark);
        }
        self.set_message_request_mode(&body.topic, &body.consumer_group, body.mode, body.pop_share_queue_num);
        reply(req, ResponseCode::Success)
    }

    /// QUERY_ASSIGNMENT: `QueryAssignmentProcessor.doLoadBalance`. SUCCESS always; no list (the
    /// key left out) when the group has no live member here, the strategy is unknown or the
    /// topic has no route.
    pub(super) fn on_query_assignment(&self, req: &RemotingCommand) -> RemotingCommand {
        let body = match json::<QueryAssignmentRequestBody>(req) {
            Ok(b) => b,
            Err(answer) => return answer,
        };
        let set = self.message_request_mode(&body.topic, &body.consumer_group);
        // Unset: PULL (`defaultMessageRequestMode`, and always for a retry topic).
        let (mode, share) = set.unwrap_or((MessageRequestMode::Pull, 0));
        let list = self.assign(&body, set.is_some(), mode, share).map(|mut queues| {
            queues.sort();
            queues.dedup();
            queues
                .into_iter()
                .map(|message_queue| MessageQueueAssignment { message_queue, mode, attachments: Vec::new() })
                .collect()
        });
        let answer = QueryAssignmentResponseBody { message_queue_assignments: list };
        reply(req, ResponseCode::Success).with_body(answer.encode())
    }

    fn assign(
        &self,
        body: &QueryAssignmentRequestBody,
        mode_set: bool,
        mode: MessageRequestMode,
        share: i32,
    ) -> Option<Vec<MessageQueue>> {
        let mut mq_all = match self.pop.routes.get(&body.topic) {
            Some(r) if r.is_empty() => return None,
            Some(r) => r.clone(),
            None => {
                let t = &self.topics[*self.topic_index.get(body.topic.as_str())?];
                if t.perm & perm::READ == 0 {
                    return None;
                }
                (0..t.read_queue_nums)
                    .map(|q| MessageQueue::new(body.topic.as_str(), self.name(), q))
                    .collect()
            }
        };
        mq_all.sort();
        if body.message_model == MessageModel::Broadcasting {
            return Some(mq_all);
        }
        let cids = self.members(&body.consumer_group);
        if cids.is_empty() {
            return None;
        }
        let strategy = match body.strategy_name.as_str() {
            "AVG" => AllocateStrategy::Averagely,
            "AVG_BY_CIRCLE" => AllocateStrategy::AveragelyByCircle,
            _ => return None,
        };
        let me = body.client_id.as_str();
        if !(mode_set && mode == MessageRequestMode::Pop) {
            return Some(strategy.allocate(me, &mq_all, &cids));
        }
        // `allocate4Pop`.
        if share <= 0 || share as usize >= cids.len() - 1 {
            return Some(
                mq_all
                    .iter()
                    .map(|q| MessageQueue::new(q.topic.clone(), q.broker_name.clone(), -1))
                    .collect(),
            );
        }
        let Some(index) = cids.iter().position(|c| c == me) else { return Some(Vec::new()) };
        if mq_all.is_empty() {
            return Some(Vec::new());
        }
        if cids.len() > mq_all.len() {
            return Some(vec![mq_all[index % mq_all.len()].clone()]);
        }
        let mut out = strategy.allocate(me, &mq_all, &cids);
        for i in 1..=share as usize {
            out.extend(strategy.allocate(&cids[(index + i) % cids.len()], &mq_all, &cids));
        }
        Some(out)
    }

    // ----- POP_MESSAGE ---------------------------------------------------------------------

    /// POP_MESSAGE: `PopMessageProcessor.processRequest`. `None` when the pop is held;
    /// `may_hold` is false when a held pop's time ran out.
    pub(super) fn on_pop(
        &mut self,
        conn: ConnId,
        req: &RemotingCommand,
        may_hold: bool,
        now: Instant,
    ) -> Option<RemotingCommand> {
        let wall = self.wall_ms(now);
        // The broker fills in a missing or zero `bornTime` with its own clock before decoding.
        let mut req = req.clone();
        if req.ext_fields.get("bornTime").is_none_or(|v| v == "0") {
            req.ext_fields.insert("bornTime", wall.to_string());
        }
        let req = &req;
        let h: PopMessageRequestHeader = match req.header() {
            Ok(h) => h,
            Err(e) => return Some(header_error(req, &e).with_header(&pop_header(0, 0, 0, 0))),
        };
        if wall - h.born_time - h.poll_time > TIMEOUT_TOO_MUCH_MS {
            self.pop.stats.polling_timeouts += 1;
            let remark = format!("the broker[{}] pop message is timeout too much", self.store_host.ip());
            return Some(pop_error(req, ResponseCode::PollingTimeout, remark));
        }
        if h.max_msg_nums > MAX_POP_NUMS {
            let remark = format!(
                "the broker[{}] pop message's num is greater than {MAX_POP_NUMS}",
                self.store_host.ip()
            );
            return Some(pop_error(req, ResponseCode::InvalidParameter, remark));
        }
        let Some(&ti) = self.topic_index.get(h.topic.as_str()) else {
            let remark = format!("topic[{}] not exist, apply first please! {FAQ}", h.topic);
            return Some(pop_error(req, ResponseCode::TopicNotExist, remark));
        };
        let t = &self.topics[ti];
        if t.perm & perm::READ == 0 {
            let remark = format!("the topic[{}] peeking message is forbidden", h.topic);
            return Some(pop_error(req, ResponseCode::NoPermission, remark));
        }
        if h.queue_id >= t.read_queue_nums {
            let remark = format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                h.queue_id,
                h.topic,
                t.read_queue_nums,
                Self::born_host(conn)
            );
            return Some(pop_error(req, ResponseCode::InvalidParameter, remark));
        }
        let exp = h.exp.as_deref().filter(|e| !e.trim().is_empty()).unwrap_or("*");
        let ty = if exp == "*" { ExpressionType::Tag } else { h.exp_type.unwrap_or_default() };
        let filter = Filter::from_subscription(&SubscriptionData::build(&h.topic, exp, ty, 0));

        let order = h.order == Some(true);
        let revive_qid = if order {
            POP_ORDER_REVIVE_QUEUE
        } else {
            let qid = (self.pop.ck_number % REVIVE_QUEUE_NUM) as i32;
            self.pop.ck_number = self.pop.ck_number.wrapping_add(1);
            qid
        };
        self.pop.pop_number += 1;
        let retry_first = self.pop.pop_number % RETRY_FIRST_EVERY == 0;
        let random_q = self.pop.rotation;
        self.pop.rotation = self.pop.rotation.wrapping_add(1);
        let ctx = PopCtx {
            group: &h.consumer_group,
            topic: &h.topic,
            max: h.max_msg_nums,
            init_mode: h.init_mode,
            invisible_time: h.invisible_time,
            pop_time: wall,
            revive_qid,
            filter: &filter,
            order,
            attempt_id: h.attempt_id.as_deref(),
        };
        let retry = pop_retry_topic(&h.consumer_group, &h.topic);
        let mut got = Collected::default();
        // Orderly pops never read the pop retry topic.
        if retry_first && !order {
            self.pop_topic(&ctx, &retry, random_q, &mut got, now);
        }
        if h.queue_id < 0 {
            self.pop_topic(&ctx, &h.topic, random_q, &mut got, now);
        } else {
            self.pop_queue(&ctx, ti, h.queue_id, &mut got, now);
        }
        if !retry_first && !order && got.count < h.max_msg_nums {
            self.pop_topic(&ctx, &retry, random_q, &mut got, now);
        }
        let mut header = pop_header(wall, h.invisible_time, revive_qid, got.rest);
        header.start_offset_info = Some(got.start_info.join(";"));
        header.msg_offset_info = Some(got.msg_info.join(";"));
        header.order_count_info = order.then(|| got.order_counts.join(";"));
        if got.count > 0 {
            self.pop.stats.pops += 1;
            self.pop.stats.popped += got.count as u64;
            let mut answer = reply(req, ResponseCode::Success).with_header(&header).with_remark("FOUND");
            answer.body = got.body.freeze();
            return Some(answer);
        }
        let deadline_ms = h.born_time.saturating_add(h.poll_time);
        if h.poll_time > 0 && may_hold && wall < deadline_ms {
            let wait = Duration::from_millis((deadline_ms - wall) as u64).min(MAX_WAIT);
            self.pop.held.push(HeldPop {
                conn,
                request: req.clone(),
                group: h.consumer_group.clone(),
                topic: h.topic.clone(),
                queue_id: h.queue_id,
                deadline: now + wait,
                filter,
            });
            return None;
        }
        self.pop.stats.polling_timeouts += 1;
        Some(reply(req, ResponseCode::PollingTimeout).with_header(&header).with_remark("NO_MESSAGE_IN_QUEUE"))
    }

    /// `popMsgFromTopic`: every read queue of `topic`, from `random_q` on.
    fn pop_topic(&mut self, ctx: &PopCtx<'_>, topic: &str, random_q: u32, got: &mut Collected, now: Instant) {
        let Some(&ti) = self.topic_index.get(topic) else { return };
        let n = self.topics[ti].read_queue_nums;
        if n <= 0 || self.topics[ti].perm & perm::READ == 0 {
            return;
        }
        for i in 0..n {
            let q = ((random_q as i64 + i as i64) % n as i64) as i32;
            self.pop_queue(ctx, ti, q, got, now);
        }
    }

    /// Where the group's pop of a queue starts (`getPopOffset` / `getInitOffset`), committed
    /// when new.
    fn pop_offset(&mut self, group: &str, topic: &str, queue_id: i32, init_mode: i32) -> i64 {
        let key = (group.to_owned(), topic.to_owned(), queue_id);
        if let Some(to) = self.reset_offsets.remove(&key) {
            // An admin reset: what lies past it may be popped again, legitimately.
            let from = (key.0.clone(), key.1.clone(), queue_id, i64::MIN);
            let to_key = (key.0.clone(), key.1.clone(), queue_id, i64::MAX);
            let stale: Vec<_> = self.pop.states.range(from..=to_key).map(|(k, _)| k.clone()).collect();
            for k in stale {
                self.pop.states.remove(&k);
            }
            // `resetPopOffset` clears the queue's orderly lock (`clearBlock`).
            self.pop.order.clear(&key);
            self.pop_commit(group, topic, queue_id, to);
            return to;
        }
        if let Some(o) = self.committed_offset(group, topic, queue_id).filter(|o| *o >= 0) {
            return o;
        }
        let q = self.queue(topic, queue_id);
        let (min, max) = q.map_or((0, 0), |q| (q.min, q.max_offset()));
        let offset = if init_mode == ConsumeInitMode::Min.value() || topic.starts_with(RETRY_TOPIC_PREFIX) {
            min
        } else if min <= 0 && q.is_some_and(|q| q.entry(0).is_some()) {
            // `initPopOffsetByCheckMsgInMem`: everything here is in memory.
            0
        } else {
            (max - 1).max(0)
        };
        self.pop_commit(group, topic, queue_id, offset);
        offset
    }

    /// Pops commit directly: several queues are committed at the same instant, which the pull
    /// path's first-commit race model would treat as racing.
    fn pop_commit(&mut self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let topics = self.offsets.entry(group.to_owned()).or_default();
        topics.entry(topic.to_owned()).or_default().insert(queue_id, offset);
    }

    /// `popMsgFromQueue`: read one queue from the group's offset, commit past what was read, and
    /// record a checkpoint of what was found. Orderly: skip a blocked queue, record an order
    /// info instead, and leave the offset at the first message returned (acks move it).
    fn pop_queue(&mut self, ctx: &PopCtx<'_>, ti: usize, queue_id: i32, got: &mut Collected, now: Instant) {
        let topic = self.topics[ti].name.to_string();
        let mut offset = self.pop_offset(ctx.group, &topic, queue_id, ctx.init_mode);
        let order_key: OrderKey = (ctx.group.to_owned(), topic.clone(), queue_id);
        if ctx.order && self.pop.order.blocked(&order_key, ctx.attempt_id, ctx.pop_time) {
            return; // its backlog is not counted in restNum either
        }
        let Some(q) = self.queue(&topic, queue_id) else { return };
        if got.count >= ctx.max {
            got.rest += q.max_offset() - offset;
            return;
        }
        let limits = PullLimits {
            max_msg_nums: ctx.max - got.count,
            max_transfer_count: self.config.max_transfer_count,
            max_transfer_bytes: self.config.max_transfer_bytes,
        };
        let mut r = q.get(offset, &limits, ctx.filter);
        if matches!(r.status, GetStatus::OffsetTooSmall | GetStatus::OffsetOverflowBadly) {
            // "CorrectOffset": commit the store's correction and read from there.
            offset = r.next_begin_offset;
            r = q.get(offset, &limits, ctx.filter);
        }
        got.rest += r.max_offset - r.next_begin_offset;
        let found: Vec<i64> = if r.status == GetStatus::Found {
            (offset..r.next_begin_offset)
                .filter(|o| q.entry(*o).is_some_and(|e| ctx.filter.matches(e.tags_code)))
                .collect()
        } else {
            Vec::new()
        };
        let retry = topic.starts_with(RETRY_TOPIC_PREFIX);
        if !found.is_empty() {
            if retry {
                // Revived copies go out re-encoded: under the subscribed topic, with the
                // broker's receipt (`popResponseReturnActualRetryTopic=false`).
                for &o in &found {
                    let Some(e) = q.entry(o) else { continue };
                    let raw = DecodeOptions { decompress: false, ..DecodeOptions::default() };
                    let Ok(mut m) = decode_message(&e.record, &raw) else { continue };
                    if m.property(keys::POP_CK).is_none() {
                        let receipt = PopReceipt {
                            ck_queue_offset: offset,
                            pop_time: ctx.pop_time,
                            invisible_time: ctx.invisible_time,
                            revive_qid: ctx.revive_qid,
                            retry: RetryFlag::of_topic(&topic),
                            broker_name: self.name.clone(),
                            queue_id,
                            queue_offset: o,
                        };
                        m.properties = m.properties.with(keys::POP_CK, &receipt.to_string());
                    }
                    m.topic = ctx.topic.into();
                    encode_stored(&m, &mut got.body);
                }
            } else {
                got.body.extend_from_slice(&r.body);
            }
        }
        if ctx.order && !found.is_empty() {
            self.pop_commit(ctx.group, &topic, queue_id, offset);
        } else if r.status != GetStatus::NoMessageInQueue {
            self.pop_commit(ctx.group, &topic, queue_id, r.next_begin_offset);
        }
        if found.is_empty() {
            return;
        }
        let flag = flag_digit(&topic);
        got.count += found.len() as i32;
        got.start_info.push(format!("{flag} {queue_id} {offset}"));
        let list: Vec<String> = found.iter().map(i64::to_string).collect();
        got.msg_info.push(format!("{flag} {queue_id} {}", list.join(",")));
        if ctx.order {
            self.order_popped(ctx, order_key, &found, got, now);
            return;
        }
        let visible_at = ctx.pop_time.saturating_add(ctx.invisible_time);
        for &o in &found {
            let key = (ctx.group.to_owned(), topic.clone(), queue_id, o);
            if self.pop.states.insert(key, PopState::Invisible { visible_at }).is_some() {
                self.pop.stats.repops += 1;
            }
        }
        self.add_checkpoint(
            ctx.group,
            &topic,
            queue_id,
            offset,
            found,
            ctx.pop_time,
            ctx.invisible_time,
            now,
        );
    }

    /// An orderly pop found `found` in the queue of `key`: its new order info and the states of
    /// its messages. A message popped before is counted as redelivered when it is no longer
    /// invisible (the lock let the pop through), or when this pop retries the previous one
    /// (same attempt id) that returned it; else as a repop. It need not be in the previous
    /// order info: each pop replaces the order info (`ConsumerOrderInfoManager.update` keeps
    /// only the counts), so an earlier pop's offsets past what the next one returned (it hit
    /// maxMsgNums) are forgotten, and come again once their lease has lapsed.
    fn order_popped(
        &mut self,
        ctx: &PopCtx<'_>,
        key: OrderKey,
        found: &[i64],
        got: &mut Collected,
        now: Instant,
    ) {
        let visible_at = ctx.pop_time.saturating_add(ctx.invisible_time);
        let prev = self.pop.order.get(&key);
        let retried = prev.is_some_and(|info| info.same_attempt(ctx.attempt_id));
        for &o in found {
            let state_key = (key.0.clone(), key.1.clone(), key.2, o);
            let Some(before) = self.pop.states.insert(state_key, PopState::Invisible { visible_at }) else {
                continue;
            };
            let early = matches!(before, PopState::Invisible { visible_at } if visible_at > ctx.pop_time);
            if !early || (retried && prev.is_some_and(|info| info.offsets().contains(&o))) {
                self.pop.stats.order_redelivered += 1;
            } else {
                self.pop.stats.repops += 1;
            }
        }
        let flag = flag_digit(&key.1);
        let (pop_time, invisible_time) = (ctx.pop_time, ctx.invisible_time);
        self.pop.order.update(
            key.clone(),
            ctx.attempt_id,
            pop_time,
            invisible_time,
            found,
            flag,
            &mut got.order_counts,
        );
        self.pop.order.touched(&key, pop_time, now);
    }

    #[allow(clippy::too_many_arguments)] // one checkpoint's fields
    fn add_checkpoint(
        &mut self,
        group: &str,
        topic: &str,
        queue_id: i32,
        start: i64,
        offsets: Vec<i64>,
        pop_time: i64,
        invisible_time: i64,
        now: Instant,
    ) {
        self.pop.seq += 1;
        let seq = self.pop.seq;
        let due = now + Duration::from_millis(invisible_time.max(0) as u64).min(MAX_WAIT);
        let key = (group.to_owned(), topic.to_owned(), queue_id, start, pop_time, seq);
        let acked = vec![false; offsets.len()];
        self.pop.due.insert((due, seq), key.clone());
        self.pop.cks.insert(key, Checkpoint { offsets, acked, pop_time, invisible_time, due });
    }

    // ----- ACK / CHANGE_INVISIBLE ------------------------------------------------------------

    /// The checks ACK and CHANGE_INVISIBLE share: topic, queue id, offset in [min, max].
    fn ack_target(
        &self,
        conn: ConnId,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> Result<(), (ResponseCode, String)> {
        let Some(&ti) = self.topic_index.get(topic) else {
            return Err((
                ResponseCode::TopicNotExist,
                format!("topic[{topic}] not exist, apply first please! {FAQ}"),
            ));
        };
        let t = &self.topics[ti];
        if queue_id < 0 || queue_id >= t.read_queue_nums {
            let remark = format!(
                "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                t.read_queue_nums,
                Self::born_host(conn)
            );
            return Err((ResponseCode::MessageIllegal, remark));
        }
        let (min, max) = (self.min_offset(topic, queue_id), self.max_offset(topic, queue_id));
        if offset < min || offset > max {
            let remark =
                format!("offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{min}~{max}");
            return Err((ResponseCode::NoMessage, remark));
        }
        Ok(())
    }

    /// Mark a checkpoint entry acked; true if it was waiting. Fully acked checkpoints go.
    fn ack_entry(
        &mut self,
        group: &str,
        topic: &str,
        queue_id: i32,
        receipt: &PopReceipt,
        offset: i64,
    ) -> bool {
        let (g, t) = (group.to_owned(), topic.to_owned());
        let start = receipt.ck_queue_offset;
        let from = (g.clone(), t.clone(), queue_id, start, receipt.pop_time, 0);
        let to = (g, t, queue_id, start, receipt.pop_time, u64::MAX);
        let mut hit = None;
        for (key, ck) in self.pop.cks.range_mut(from..=to) {
            if let Some(i) = ck.offsets.iter().zip(&ck.acked).position(|(o, a)| *o == offset && !a) {
                ck.acked[i] = true;
                hit = Some((key.clone(), ck.acked.iter().all(|a| *a), ck.due));
                break;
            }
        }
        let Some((key, done, due)) = hit else { return false };
        if done {
            self.pop.due.remove(&(due, key.5));
            self.pop.cks.remove(&key);
        }
        true
    }

    /// ACK_MESSAGE: `AckMessageProcessor.appendAck`.
    pub(super) fn on_ack(&mut self, conn: ConnId, req: &RemotingCommand, now: Instant) -> RemotingCommand {
        let h: AckMessageRequestHeader = match req.header() {
            Ok(h) => h,
            Err(e) => return header_error(req, &e),
        };
        if let Err((code, remark)) = self.ack_target(conn, &h.topic, h.queue_id, h.offset) {
            return error(req, code, remark);
        }
        let receipt = match PopReceipt::parse(&h.extra_info) {
            Ok(r) => r,
            Err(e) => return error(req, ResponseCode::SystemError, e.to_string()),
        };
        let target = (h.consumer_group.as_str(), h.topic.as_str(), h.queue_id);
        match self.ack_one(conn, target, &receipt, h.offset, now) {
            Some(illegal) => error(req, ResponseCode::MessageIllegal, illegal),
            None => reply(req, ResponseCode::Success),
        }
    }

    /// Ack one message whose request passed the checks; `Some(remark)` for MESSAGE_ILLEGAL.
    fn ack_one(
        &mut self,
        conn: ConnId,
        (group, topic, queue_id): (&str, &str, i32),
        receipt: &PopReceipt,
        offset: i64,
        now: Instant,
    ) -> Option<String> {
        if receipt.is_order() {
            return self.ack_orderly(conn, (group, topic, queue_id), receipt.pop_time, offset, now);
        }
        let key = (group.to_owned(), topic.to_owned(), queue_id, offset);
        if self.ack_entry(group, topic, queue_id, receipt, offset) {
            self.pop.stats.acked += 1;
            // As for a revive: a state forgotten with lost offsets stays forgotten.
            if let Some(state) = self.pop.states.get_mut(&key) {
                *state = PopState::Acked;
            }
        } else if self.pop.states.get(&key) == Some(&PopState::Acked) {
            self.pop.stats.double_acks += 1;
        } else {
            self.pop.stats.stale_acks += 1;
        }
        None
    }

    /// `AckMessageProcessor.ackOrderly`: an offset behind the group's is ignored; else
    /// `commitAndNext` marks it in the order info and the group's offset moves to the first
    /// unacked one. An offset the order info does not list is MESSAGE_ILLEGAL.
    fn ack_orderly(
        &mut self,
        conn: ConnId,
        (group, topic, queue_id): (&str, &str, i32),
        pop_time: i64,
        offset: i64,
        now: Instant,
    ) -> Option<String> {
        let old = self.committed_offset(group, topic, queue_id).unwrap_or(-1);
        let key: OrderKey = (group.to_owned(), topic.to_owned(), queue_id);
        let commit =
            if offset < old { Commit::Stale } else { self.pop.order.commit_and_next(&key, offset, pop_time) };
        let state_key = (key.0.clone(), key.1.clone(), queue_id, offset);
        match commit {
            Commit::Next { offset: next, newly } => {
                // `hasOffsetReset`: a pending admin reset wins.
                if !self.reset_offsets.contains_key(&key) {
                    self.pop_commit(group, topic, queue_id, next);
                }
                let wall = self.wall_ms(now);
                self.pop.order.touched(&key, wall, now);
                if newly {
                    self.pop.stats.acked += 1;
                    if let Some(state) = self.pop.states.get_mut(&state_key) {
                        *state = PopState::Acked;
                    }
                } else {
                    self.pop.stats.double_acks += 1;
                }
                None
            }
            Commit::Stale if self.pop.states.get(&state_key) == Some(&PopState::Acked) => {
                self.pop.stats.double_acks += 1;
                None
            }
            Commit::Stale => {
                self.pop.stats.stale_acks += 1;
                None
            }
            Commit::Illegal => Some(format!(
                "offset is illegal, key:{topic}@{group}@{queue_id}, old:{old}, commit:{offset}, next:-1, /{}",
                Self::born_host(conn)
            )),
        }
    }

    /// BATCH_ACK_MESSAGE (`AckMessageProcessor`, batch branch): an entry naming a topic or
    /// queue the broker does not have is skipped, as are offsets outside the queue; the answer
    /// is SUCCESS all the same. An empty body is NO_MESSAGE. Entries with revive queue 999 are
    /// orderly: each bit goes through `ackOrderly` as a single ack does, and one the order info
    /// does not list makes the answer MESSAGE_ILLEGAL (the later bits still served).
    pub(super) fn on_batch_ack(
        &mut self,
        conn: ConnId,
        req: &RemotingCommand,
        now: Instant,
    ) -> RemotingCommand {
        if req.body.is_empty() {
            return reply(req, ResponseCode::NoMessage);
        }
        let body = match BatchAckMessageRequestBody::decode(&req.body) {
            Ok(b) if !b.acks.is_empty() => b,
            Ok(_) => return reply(req, ResponseCode::NoMessage),
            Err(e) => return error(req, ResponseCode::SystemError, e.to_string()),
        };
        self.pop.stats.batch_acks += 1;
        let mut illegal = None;
        for a in &body.acks {
            let topic = a.retry.real_topic(&a.topic, &a.consumer_group);
            for receipt in a.receipts(&body.broker_name) {
                let offset = receipt.queue_offset;
                match self.ack_target(conn, &topic, a.queue_id, offset) {
                    Ok(()) => {
                        let target = (a.consumer_group.as_str(), topic.as_str(), a.queue_id);
                        illegal = self.ack_one(conn, target, &receipt, offset, now).or(illegal);
                    }
                    Err((ResponseCode::NoMessage, _)) => {}
                    // No such topic or queue: the broker logs and skips the entry.
                    Err(_) => break,
                }
            }
        }
        match illegal {
            Some(remark) => error(req, ResponseCode::MessageIllegal, remark),
            None => reply(req, ResponseCode::Success),
        }
    }

    /// CHANGE_MESSAGE_INVISIBLETIME: a new one-message checkpoint from now, then an ack of the
    /// old one (`ChangeInvisibleTimeProcessor`). The new checkpoint is written even when the
    /// old entry no longer waits, as the real broker does.
    pub(super) fn on_change_invisible(
        &mut self,
        conn: ConnId,
        req: &RemotingCommand,
        now: Instant,
    ) -> RemotingCommand {
        let h: ChangeInvisibleTimeRequestHeader = match req.header() {
            Ok(h) => h,
            Err(e) => return header_error(req, &e),
        };
        if let Err((code, remark)) = self.ack_target(conn, &h.topic, h.queue_id, h.offset) {
            // Only the topic check sets a remark; the others keep the default one.
            let remark = if code == ResponseCode::TopicNotExist { remark } else { NOT_SET.to_owned() };
            return change_error(req, code, remark);
        }
        let receipt = match PopReceipt::parse(&h.extra_info) {
            Ok(r) => r,
            Err(e) => return change_error(req, ResponseCode::SystemError, e.to_string()),
        };
        if receipt.is_order() {
            return self.change_orderly(req, &h, &receipt, now);
        }
        let wall = self.wall_ms(now);
        if !self.ack_entry(&h.consumer_group, &h.topic, h.queue_id, &receipt, h.offset) {
            self.pop.stats.stale_acks += 1;
        }
        self.pop.stats.changed += 1;
        let key = (h.consumer_group.clone(), h.topic.clone(), h.queue_id, h.offset);
        let visible_at = wall.saturating_add(h.invisible_time);
        if let Some(state) = self.pop.states.get_mut(&key) {
            *state = PopState::Invisible { visible_at };
        }
        self.add_checkpoint(
            &h.consumer_group,
            &h.topic,
            h.queue_id,
            h.offset,
            vec![h.offset],
            wall,
            h.invisible_time,
            now,
        );
        let header = ChangeInvisibleTimeResponseHeader {
            pop_time: wall,
            invisible_time: h.invisible_time,
            revive_qid: receipt.revive_qid,
        };
        reply(req, ResponseCode::Success).with_header(&header).with_remark(NOT_SET)
    }

    /// `processChangeInvisibleTimeForOrder`: the message's next visible time in its queue's
    /// order info becomes now + invisibleTime (no checkpoint). The answer keeps the receipt's
    /// popTime and gives invisibleTime from it; for an offset behind the group's (acked) it is
    /// SUCCESS with the header's zeros.
    fn change_orderly(
        &mut self,
        req: &RemotingCommand,
        h: &ChangeInvisibleTimeRequestHeader,
        receipt: &PopReceipt,
        now: Instant,
    ) -> RemotingCommand {
        self.pop.stats.changed += 1;
        let old = self.committed_offset(&h.consumer_group, &h.topic, h.queue_id).unwrap_or(-1);
        if h.offset < old {
            self.pop.stats.stale_acks += 1;
            let zeros = ChangeInvisibleTimeResponseHeader { pop_time: 0, invisible_time: 0, revive_qid: 0 };
            return reply(req, ResponseCode::Success).with_header(&zeros).with_remark(NOT_SET);
        }
        let wall = self.wall_ms(now);
        let visible_at = wall.saturating_add(h.invisible_time);
        let key: OrderKey = (h.consumer_group.clone(), h.topic.clone(), h.queue_id);
        if self.pop.order.update_next_visible(&key, h.offset, receipt.pop_time, visible_at) {
            let state_key = (key.0.clone(), key.1.clone(), h.queue_id, h.offset);
            if let Some(state @ PopState::Invisible { .. }) = self.pop.states.get_mut(&state_key) {
                *state = PopState::Invisible { visible_at };
            }
            self.pop.order.touched(&key, wall, now);
        } else {
            // Not the queue's last pop: the broker logs it and answers as if done.
            self.pop.stats.stale_acks += 1;
        }
        let header = ChangeInvisibleTimeResponseHeader {
            pop_time: receipt.pop_time,
            invisible_time: visible_at - receipt.pop_time,
            revive_qid: receipt.revive_qid,
        };
        reply(req, ResponseCode::Success).with_header(&header).with_remark(NOT_SET)
    }

    // ----- revive and long polling -------------------------------------------------------------

    /// Revive checkpoints due at `now`, then answer held pops whose time ran out.
    pub(super) fn pop_timeouts(&mut self, now: Instant) {
        while let Some(entry) = self.pop.due.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            let Some(ck) = self.pop.cks.remove(&key) else { continue };
            debug_assert!(self.wall_ms(now) >= ck.pop_time + ck.invisible_time, "revived early");
            for (o, acked) in ck.offsets.iter().zip(&ck.acked) {
                if !acked {
                    self.revive(&key, &ck, *o, now);
                }
            }
        }
        for (group, topic, queue_id) in self.pop.order.take_due(now) {
            // `notifyLongPollingRequestIfNeed`: only when the queue has messages past the
            // group's offset.
            let offset = self.committed_offset(&group, &topic, queue_id).unwrap_or(-1);
            if self.max_offset(&topic, queue_id) > offset {
                self.wake_held(now, |h| {
                    h.group == group && h.topic == topic && (h.queue_id < 0 || h.queue_id == queue_id)
                });
            }
        }
        if self.pop.held.iter().any(|h| h.deadline <= now) {
            let (expired, keep): (Vec<HeldPop>, Vec<HeldPop>) =
                std::mem::take(&mut self.pop.held).into_iter().partition(|h| h.deadline <= now);
            self.pop.held = keep;
            for h in expired {
                if let Some(answer) = self.on_pop(h.conn, &h.request, false, now) {
                    self.respond(h.conn, &h.request, answer);
                }
            }
        }
    }

    /// `PopReviveService.reviveRetry`: put a copy of an unacked message to the pop retry topic,
    /// queue 0, with one more reconsume and `1ST_POP_TIME` (the born timestamp and properties
    /// kept, the born host the broker's).
    fn revive(&mut self, key: &CkKey, ck: &Checkpoint, offset: i64, now: Instant) {
        let (group, topic, queue_id) = (&key.0, &key.1, key.2);
        let state_key = (group.clone(), topic.clone(), queue_id, offset);
        // A state forgotten with lost offsets stays forgotten: the message may be popped from
        // its queue again as well as revived (a crash's duplicates).
        if let Some(state) = self.pop.states.get_mut(&state_key) {
            *state = PopState::Revived;
        }
        let Some(record) =
            self.queue(topic, queue_id).and_then(|q| q.entry(offset)).map(|e| e.record.clone())
        else {
            return; // removed by retention meanwhile
        };
        let raw = DecodeOptions { decompress: false, ..DecodeOptions::default() };
        let Ok(m) = decode_message(&record, &raw) else { return };
        let retry =
            if topic.starts_with(RETRY_TOPIC_PREFIX) { topic.clone() } else { pop_retry_topic(group, topic) };
        let mut props = m.properties.clone();
        if m.reconsume_times == 0 || props.get(keys::FIRST_POP_TIME).is_none() {
            props = props.with(keys::FIRST_POP_TIME, &ck.pop_time.to_string());
        }
        let draft = Draft {
            body: m.body,
            flag: m.flag,
            sys_flag: m.sys_flag,
            born_timestamp: m.born_timestamp,
            born_host: self.store_host,
            reconsume_times: m.reconsume_times.saturating_add(1),
            properties: props,
        };
        let ti = self.ensure_topic(&retry, 1);
        self.pop.stats.revived += 1;
        self.append(ti, 0, draft, now);
    }

    /// A message was stored: wake held pops of its topic (filter permitting), or of the topic
    /// whose pop retry topic it is. They are re-run and may be held again.
    pub(super) fn pop_arrival(&mut self, ti: usize, queue_id: i32, tags_code: i32, now: Instant) {
        if self.pop.held.is_empty() {
            return;
        }
        let name = self.topics[ti].name.clone();
        self.wake_held(now, |h| {
            (*h.topic == *name && (h.queue_id < 0 || h.queue_id == queue_id) && h.filter.matches(tags_code))
                || *name == pop_retry_topic(&h.group, &h.topic)
        });
    }

    /// Re-run the held pops `wake` picks; they may be held again.
    fn wake_held(&mut self, now: Instant, wake: impl Fn(&HeldPop) -> bool) {
        let (woken, keep): (Vec<HeldPop>, Vec<HeldPop>) =
            std::mem::take(&mut self.pop.held).into_iter().partition(|h| wake(h));
        self.pop.held = keep;
        for h in woken {
            if let Some(answer) = self.on_pop(h.conn, &h.request, true, now) {
                self.respond(h.conn, &h.request, answer);
            }
        }
    }
}
