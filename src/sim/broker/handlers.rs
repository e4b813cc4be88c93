//! Request processors of the simulated broker, one method per request code.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::store::{Filter, GetStatus, Held, MAX_QUEUES, PullLimits};
use super::{
    ConnId, Draft, FAQ, LockEntry, MAX_MESSAGE_SIZE, MAX_WAIT, REGION_ID, SCHEDULE_TOPIC, SHORT_POLLING,
    Scheduled, SimBroker, error, header_error, offset_reply, reply, v1_as_v2, validate_topic,
};
use crate::MessageQueue;
use crate::message::{
    DecodeOptions, MessageExt, Properties, decode_message, keys, offset_msg_id, stored_size,
};
use crate::producer::{RETRY_TOPIC_PREFIX, dlq_topic, retry_topic};
use crate::protocol::body::{
    CheckClientRequestBody, ConsumeStatsBody, GetConsumerListByGroupResponseBody, HeartbeatData,
    LockBatchRequestBody, LockBatchResponseBody, OffsetWrapper, SubscriptionData, perm,
};
use crate::protocol::header::{
    BoundaryType, ConsumerSendMsgBackRequestHeader, CreateTopicRequestHeader, GetConsumeStatsRequestHeader,
    GetConsumerListByGroupRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
    ResetOffsetRequestHeader, SearchOffsetRequestHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader, UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use crate::protocol::{CommandHeader, ExpressionType, JsonBody, PullSysFlag, RemotingCommand, ResponseCode};

/// `MQVersion.V3_4_9`: from this client version on, the header's `maxReconsumeTimes` counts.
const V3_4_9: i32 = 121;

/// Unwrap a typed header or answer SYSTEM_ERROR the way a failed `decodeCommandCustomHeader` does.
macro_rules! header {
    ($req:expr, $ty:ty) => {
        match $req.header::<$ty>() {
            Ok(h) => h,
            Err(e) => return header_error($req, &e),
        }
    };
}

/// Read a header after defaulting optional Java fields the crate's header types require.
fn header_with_defaults<H: CommandHeader>(
    req: &RemotingCommand,
    defaults: &[(&str, &str)],
) -> Result<H, RemotingCommand> {
    if defaults.iter().all(|(k, _)| req.ext_fields.get(k).is_some()) {
        return req.header().map_err(|e| header_error(req, &e));
    }
    let mut ext = req.ext_fields.clone();
    for (k, v) in defaults {
        if ext.get(k).is_none() {
            ext.insert(*k, *v);
        }
    }
    H::read_from(&ext).map_err(|e| header_error(req, &e))
}

fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// SEND_BATCH_MESSAGE body entries: (flag, body, properties).
fn parse_batch(body: &Bytes) -> Option<Vec<(i32, Bytes, Bytes)>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < body.len() {
        let total = usize::try_from(be_i32(body, pos)?).ok()?;
        let end = pos.checked_add(total).filter(|e| total >= 22 && *e <= body.len())?;
        let flag = be_i32(body, pos + 12)?;
        let body_len = usize::try_from(be_i32(body, pos + 16)?).ok()?;
        let body_end = (pos + 20).checked_add(body_len).filter(|e| e + 2 <= end)?;
        let props_len = usize::try_from(i16::from_be_bytes([body[body_end], body[body_end + 1]])).ok()?;
        if body_end + 2 + props_len != end {
            return None;
        }
        out.push((flag, body.slice(pos + 20..body_end), body.slice(body_end + 2..end)));
        pos = end;
    }
    Some(out)
}

impl SimBroker {
    /// PULL_MESSAGE (and LITE_PULL_MESSAGE): `PullMessageProcessor.processRequest`. `None` when
    /// the pull is held; `allow_suspend` is false when a held pull is re-run.
    pub(super) fn on_pull(
        &mut self,
        conn: ConnId,
        req: &RemotingCommand,
        allow_suspend: bool,
        now: Instant,
    ) -> Option<RemotingCommand> {
        let h: PullMessageRequestHeader = match req.header() {
            Ok(h) => h,
            Err(e) => return Some(header_error(req, &e)),
        };
        let Some(&ti) = self.topic_index.get(h.topic.as_str()) else {
            let remark = format!("topic[{}] not exist, apply first please! {FAQ}", h.topic);
            return Some(error(req, ResponseCode::TopicNotExist, remark));
        };
        if self.config.deny_pull.contains(&h.topic) {
            if self.config.deny_as_acl_v1 {
                return Some(error(req, ResponseCode::SystemError, acl_v1_refusal(&h.topic)));
            }
            let remark = format!("user has no permission to Sub on topic {}", h.topic);
            return Some(error(req, ResponseCode::NoPermission, remark));
        }
        let t = &self.topics[ti];
        if t.perm & perm::READ == 0 {
            let remark = format!("the topic[{}] pulling message is forbidden", h.topic);
            return Some(error(req, ResponseCode::NoPermission, remark));
        }
        if h.queue_id < 0 || h.queue_id >= t.read_queue_nums {
            let remark = format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                h.queue_id,
                h.topic,
                t.read_queue_nums,
                Self::born_host(conn)
            );
            return Some(error(req, ResponseCode::InvalidParameter, remark));
        }
        let topic_sys_flag = t.topic_sys_flag;
        let flags = PullSysFlag(h.sys_flag);
        let filter = if flags.has(PullSysFlag::SUBSCRIPTION) {
            let ty = h.expression_type.unwrap_or_default();
            let expr = h.subscription.as_deref().unwrap_or("");
            if ty != ExpressionType::Tag && expr.trim().is_empty() {
                return Some(error(
                    req,
                    ResponseCode::SubscriptionParseFailed,
                    "parse the consumer's subscription failed",
                ));
            }
            Filter::from_subscription(&SubscriptionData::build(&h.topic, expr, ty, h.sub_version))
        } else {
            let Some(g) = self.groups.get(&h.consumer_group) else {
                let remark = format!("the consumer's group info not exist{FAQ}");
                return Some(error(req, ResponseCode::SubscriptionNotExist, remark));
            };
            let Some(sub) = g.subscriptions.get(&h.topic) else {
                let remark = format!("the consumer's subscription not exist{FAQ}");
                return Some(error(req, ResponseCode::SubscriptionNotExist, remark));
            };
            if sub.sub_version < h.sub_version {
                return Some(error(
                    req,
                    ResponseCode::SubscriptionNotLatest,
                    "the consumer's subscription not latest",
                ));
            }
            Filter::from_subscription(sub)
        };
        let limits = PullLimits {
            max_msg_nums: h.max_msg_nums,
            max_transfer_count: self.config.max_transfer_count,
            max_transfer_bytes: self.config.max_transfer_bytes,
        };
        let reset_key = (h.consumer_group.clone(), h.topic.clone(), h.queue_id);
        if let Some(to) = self.reset_offsets.remove(&reset_key) {
            // `PullMessageProcessor`: an admin reset wins over the pull (and its commit).
            let header = PullMessageResponseHeader {
                suggest_which_broker_id: 0,
                next_begin_offset: to,
                min_offset: self.min_offset(&h.topic, h.queue_id),
                max_offset: self.max_offset(&h.topic, h.queue_id),
                offset_delta: None,
                topic_sys_flag: Some(topic_sys_flag),
                group_sys_flag: Some(0),
                forbidden_type: None,
            };
            return Some(
                reply(req, ResponseCode::PullOffsetMoved).with_header(&header).with_remark("OFFSET_RESET"),
            );
        }
        let queue = &self.topics[ti].queues[h.queue_id as usize];
        let result = queue.get(h.queue_offset, &limits, &filter);
        if allow_suspend && flags.has(PullSysFlag::COMMIT_OFFSET) {
            self.commit_offset(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset, now);
        }
        let code = match result.status {
            GetStatus::Found => ResponseCode::Success,
            GetStatus::NoMatchedMessage => ResponseCode::PullRetryImmediately,
            GetStatus::NoMessageInQueue if h.queue_offset != 0 => ResponseCode::PullOffsetMoved,
            GetStatus::NoMessageInQueue | GetStatus::OffsetOverflowOne => ResponseCode::PullNotFound,
            GetStatus::OffsetTooSmall | GetStatus::OffsetOverflowBadly => ResponseCode::PullOffsetMoved,
        };
        if code == ResponseCode::PullNotFound && allow_suspend && flags.has(PullSysFlag::SUSPEND) {
            let hold = if self.config.long_polling {
                Duration::from_millis(h.suspend_timeout_millis.max(0) as u64).min(MAX_WAIT)
            } else {
                SHORT_POLLING
            };
            let held =
                Held { conn, request: req.clone(), offset: h.queue_offset, deadline: now + hold, filter };
            self.topics[ti].queues[h.queue_id as usize].held.push(held);
            self.held_count += 1;
            return None;
        }
        let header = PullMessageResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset: result.next_begin_offset,
            min_offset: result.min_offset,
            max_offset: result.max_offset,
            offset_delta: None,
            topic_sys_flag: Some(topic_sys_flag),
            group_sys_flag: Some(0),
            forbidden_type: None,
        };
        let mut answer = reply(req, code).with_header(&header).with_remark(result.status.name());
        if code == ResponseCode::Success {
            answer.body = result.body;
        }
        Some(answer)
    }

    /// QUERY_CONSUMER_OFFSET: `ConsumerManageProcessor.queryConsumerOffset`.
    pub(super) fn on_query_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header!(req, QueryConsumerOffsetRequestHeader);
        match self.committed_offset(&h.consumer_group, &h.topic, h.queue_id) {
            Some(offset) if offset >= 0 => offset_reply(req, offset),
            _ if h.set_zero_if_not_found == Some(false) => error(
                req,
                ResponseCode::QueryNotFound,
                "Not found, do not set to zero, maybe this group boot first",
            ),
            _ if self.queue(&h.topic, h.queue_id).is_some_and(|q| q.min <= 0 && q.entry(0).is_some()) => {
                offset_reply(req, 0)
            }
            _ => error(
                req,
                ResponseCode::QueryNotFound,
                "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
            ),
        }
    }

    /// UPDATE_CONSUMER_OFFSET: `ConsumerManageProcessor.updateConsumerOffset`.
    pub(super) fn on_update_offset(&mut self, req: &RemotingCommand, now: Instant) -> RemotingCommand {
        let h = header!(req, UpdateConsumerOffsetRequestHeader);
        if !self.topic_index.contains_key(h.topic.as_str()) {
            return error(req, ResponseCode::TopicNotExist, format!("Topic {} not exist!", h.topic));
        }
        // `ConsumerManageProcessor`: a pending admin reset is not undone by a commit.
        if !self.reset_offsets.contains_key(&(h.consumer_group.clone(), h.topic.clone(), h.queue_id)) {
            self.commit_offset(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset, now);
        }
        reply(req, ResponseCode::Success)
    }

    /// INVOKE_BROKER_TO_RESET_OFFSET as a 5.x broker serves it (`AdminBrokerProcessor.resetOffset`
    /// with `useServerSideResetOffset`): one queue to an offset (checked against its range) or
    /// by time, or every queue by time (−1: the max offset); committed at once, and told to the
    /// group's next pull of each queue.
    pub(super) fn on_reset_offset(&mut self, req: &RemotingCommand, now: Instant) -> RemotingCommand {
        let h = header!(req, ResetOffsetRequestHeader);
        let Some(&ti) = self.topic_index.get(h.topic.as_str()) else {
            return error(req, ResponseCode::TopicNotExist, format!("Topic {} does not exist", h.topic));
        };
        let by_time = |b: &Self, q: i32| {
            if h.timestamp < 0 {
                b.max_offset(&h.topic, q)
            } else {
                b.queue(&h.topic, q).map_or(0, |s| s.search_by_time(h.timestamp, BoundaryType::Lower))
            }
        };
        let targets: Vec<(i32, i64)> = match h.queue_id.filter(|q| *q >= 0) {
            Some(q) if q >= self.topics[ti].read_queue_nums => Vec::new(),
            Some(q) => match h.offset.filter(|o| *o != -1) {
                Some(o) => {
                    let (min, max) = (self.min_offset(&h.topic, q), self.max_offset(&h.topic, q));
                    if min >= 0 && o < min || o > max + 1 {
                        let remark = format!("Target offset {o} not in consume queue range [{min}-{max}]");
                        return error(req, ResponseCode::SystemError, remark);
                    }
                    vec![(q, o)]
                }
                None => vec![(q, by_time(self, q))],
            },
            None => (0..self.topics[ti].read_queue_nums).map(|q| (q, by_time(self, q))).collect(),
        };
        if targets.is_empty() {
            return error(req, ResponseCode::SystemError, "No queues to reset.");
        }
        let mut body = crate::protocol::body::ResetOffsetBody::default();
        for (q, o) in targets {
            self.reset_offsets.insert((h.group.clone(), h.topic.clone(), q), o);
            self.commit_offset(&h.group, &h.topic, q, o, now);
            body.offset_table.push((MessageQueue::new(h.topic.as_str(), self.name(), q), o));
        }
        reply(req, ResponseCode::Success).with_body(body.encode())
    }

    /// UPDATE_AND_CREATE_TOPIC: `AdminBrokerProcessor.updateAndCreateTopic`.
    pub(super) fn on_create_topic(&mut self, req: &RemotingCommand) -> RemotingCommand {
        let h: CreateTopicRequestHeader = match header_with_defaults(req, &[("order", "false")]) {
            Ok(h) => h,
            Err(answer) => return answer,
        };
        if let Err(remark) = validate_topic(&h.topic) {
            return error(req, ResponseCode::InvalidParameter, remark);
        }
        if h.topic == SCHEDULE_TOPIC || h.topic == "TBW102" || h.topic.starts_with("rmq_sys_") {
            let remark = format!("The topic[{}] is conflict with system topic.", h.topic);
            return error(req, ResponseCode::InvalidParameter, remark);
        }
        if !(0..=MAX_QUEUES).contains(&h.read_queue_nums) || !(0..=MAX_QUEUES).contains(&h.write_queue_nums) {
            let remark = format!("queue nums out of range: the simulator allows 0..={MAX_QUEUES}");
            return error(req, ResponseCode::InvalidParameter, remark);
        }
        let ti = self.ensure_topic(&h.topic, 0);
        let t = &mut self.topics[ti];
        t.set_queue_nums(h.read_queue_nums, h.write_queue_nums);
        t.perm = h.perm;
        t.topic_sys_flag = h.topic_sys_flag.unwrap_or(0);
        t.order = h.order.unwrap_or(false);
        reply(req, ResponseCode::Success)
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP.
    pub(super) fn on_search_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header!(req, SearchOffsetRequestHeader);
        let boundary = h.boundary_type.unwrap_or(BoundaryType::Lower);
        let offset = self.queue(&h.topic, h.queue_id).map_or(0, |q| q.search_by_time(h.timestamp, boundary));
        offset_reply(req, offset)
    }

    /// GET_CONSUME_STATS: `AdminBrokerProcessor.getConsumeStats`. Of one topic, or of every
    /// topic the group has offsets for; a topic the broker lacks is skipped, and so is one the
    /// group's live members do not subscribe to while they subscribe to others. Every readable
    /// queue is listed, an offset never committed as 0.
    pub(super) fn on_consume_stats(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header!(req, GetConsumeStatsRequestHeader);
        let group = h.consumer_group.as_str();
        let topics: Vec<String> = match h.topic.filter(|t| !t.is_empty()) {
            Some(t) => vec![t],
            None => self.offsets.get(group).map(|t| t.keys().cloned().collect()).unwrap_or_default(),
        };
        let subscribed = self.groups.get(group).map(|g| &g.subscriptions).filter(|s| !s.is_empty());
        let mut body = ConsumeStatsBody::default();
        for topic in topics {
            let Some(&ti) = self.topic_index.get(&topic) else { continue };
            if subscribed.is_some_and(|s| !s.contains_key(&topic)) {
                continue;
            }
            for queue_id in 0..self.topics[ti].read_queue_nums {
                let consumer_offset = self.committed_offset(group, &topic, queue_id).unwrap_or(0).max(0);
                let last_timestamp = self
                    .queue(&topic, queue_id)
                    .and_then(|q| q.entry(consumer_offset - 1))
                    .map_or(0, |e| e.store_timestamp);
                let progress = OffsetWrapper {
                    broker_offset: self.max_offset(&topic, queue_id),
                    consumer_offset,
                    pull_offset: consumer_offset,
                    last_timestamp,
                };
                body.offset_table
                    .push((MessageQueue::new(topic.as_str(), self.name.as_str(), queue_id), progress));
            }
        }
        reply(req, ResponseCode::Success).with_body(body.encode())
    }

    /// CHECK_CLIENT_CONFIG: `ClientManageProcessor.checkClientConfig`. A body that does not
    /// decode fails as the broker's deserialisation does; every expression is accepted (the
    /// simulator filters by tag only and delivers everything to SQL92 subscriptions).
    pub(super) fn on_check_client(&self, req: &RemotingCommand) -> RemotingCommand {
        // No body: nothing to check, and the broker says so with SUCCESS.
        if req.body.is_empty() {
            return reply(req, ResponseCode::Success);
        }
        match json_body::<CheckClientRequestBody>(req) {
            Ok(_) => reply(req, ResponseCode::Success),
            Err(answer) => answer,
        }
    }

    /// GET_MAX_OFFSET (0 for an unknown queue, like the store).
    pub(super) fn on_max_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header!(req, GetMaxOffsetRequestHeader);
        offset_reply(req, self.max_offset(&h.topic, h.queue_id))
    }

    /// GET_MIN_OFFSET.
    pub(super) fn on_min_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header!(req, GetMinOffsetRequestHeader);
        offset_reply(req, self.min_offset(&h.topic, h.queue_id))
    }

    /// HEART_BEAT: `ClientManageProcessor.heartBeat` / `heartBeatV2`.
    pub(super) fn on_heartbeat(
        &mut self,
        conn: ConnId,
        req: &RemotingCommand,
        now: Instant,
    ) -> RemotingCommand {
        if req.body.is_empty() {
            return error(req, ResponseCode::SystemError, "java.lang.NullPointerException");
        }
        let hb = match json_body::<HeartbeatData>(req) {
            Ok(hb) => hb,
            Err(answer) => return answer,
        };
        if self.config.deny_as_acl_v1 {
            // 4.9.x's ACL 1.0 checks every subscription of a heartbeat: one denied topic
            // refuses the whole heartbeat.
            let subs = hb.consumer_data_set.iter().flat_map(|c| &c.subscription_data_set);
            if let Some(s) = subs.into_iter().find(|s| self.config.deny_pull.contains(&s.topic)) {
                return error(req, ResponseCode::SystemError, acl_v1_refusal(&s.topic));
            }
        }
        let fingerprint = hb.heartbeat_fingerprint;
        let mut sub_change = false;
        for cd in &hb.consumer_data_set {
            if fingerprint != 0
                && self.fingerprints.get(&cd.group_name).is_some_and(|old| *old != fingerprint)
            {
                sub_change = true;
            }
            self.fingerprints.insert(cd.group_name.clone(), fingerprint);
            self.ensure_topic(&retry_topic(&cd.group_name), 1);
            let with_subs = fingerprint == 0 || !hb.without_sub;
            if self.register(conn, &hb.client_id, cd, with_subs, now) {
                self.notify_ids_changed(&cd.group_name);
            }
        }
        let mut answer = reply(req, ResponseCode::Success);
        answer.ext_fields.insert("IS_SUPPORT_HEART_BEAT_V2", "true");
        // A v1 heartbeat always gets "true" (5.3.3); v2 says whether the fingerprint changed.
        answer
            .ext_fields
            .insert("IS_SUB_CHANGE", if fingerprint == 0 || sub_change { "true" } else { "false" });
        answer
    }

    /// UNREGISTER_CLIENT: keyed by the channel, not the client id.
    pub(super) fn on_unregister(&mut self, conn: ConnId, req: &RemotingCommand) -> RemotingCommand {
        let h = header!(req, UnregisterClientRequestHeader);
        if let Some(group) = h.consumer_group {
            self.unregister(conn, &group);
        }
        reply(req, ResponseCode::Success)
    }

    /// GET_CONSUMER_LIST_BY_GROUP, in registration order.
    pub(super) fn on_consumer_list(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header!(req, GetConsumerListByGroupRequestHeader);
        match self.groups.get(&h.consumer_group).filter(|g| !g.members.is_empty()) {
            Some(g) => {
                let body = GetConsumerListByGroupResponseBody {
                    consumer_id_list: g.members.iter().map(|m| m.client_id.clone()).collect(),
                };
                reply(req, ResponseCode::Success).with_body(body.encode())
            }
            None => error(
                req,
                ResponseCode::SystemError,
                format!("no consumer for this group, {}", h.consumer_group),
            ),
        }
    }

    /// LOCK_BATCH_MQ: `RebalanceLockManager.tryLockBatch`; answers the queues the requester
    /// now holds.
    pub(super) fn on_lock(&mut self, req: &RemotingCommand, now: Instant) -> RemotingCommand {
        let body = match json_body::<LockBatchRequestBody>(req) {
            Ok(b) => b,
            Err(answer) => return answer,
        };
        let max_live = self.config.lock_max_live_time;
        let table = self.locks.entry(body.consumer_group).or_default();
        let mut ok = Vec::new();
        for mq in body.mq_set {
            if ok.contains(&mq) {
                continue;
            }
            let locked = match table.get_mut(&mq) {
                None => {
                    let entry = LockEntry { client_id: body.client_id.clone(), last_update: now };
                    table.insert(mq.clone(), entry);
                    true
                }
                Some(e) => {
                    let expired = now.saturating_duration_since(e.last_update) > max_live;
                    if e.client_id == body.client_id || expired {
                        e.client_id.clone_from(&body.client_id);
                        e.last_update = now;
                        true
                    } else {
                        false
                    }
                }
            };
            if locked {
                ok.push(mq);
            }
        }
        reply(req, ResponseCode::Success).with_body(LockBatchResponseBody { lock_ok_mq_set: ok }.encode())
    }

    /// UNLOCK_BATCH_MQ: release the queues the requester owns.
    pub(super) fn on_unlock(&mut self, req: &RemotingCommand) -> RemotingCommand {
        let body = match json_body::<LockBatchRequestBody>(req) {
            Ok(b) => b,
            Err(answer) => return answer,
        };
        if let Some(table) = self.locks.get_mut(&body.consumer_group) {
            for mq in &body.mq_set {
                if table.get(mq).is_some_and(|e| e.client_id == body.client_id) {
                    table.remove(mq);
                }
            }
        }
        reply(req, ResponseCode::Success)
    }

    /// CONSUMER_SEND_MSG_BACK: `AbstractSendMessageProcessor.consumerSendMsgBack`.
    pub(super) fn on_send_back(&mut self, req: &RemotingCommand, now: Instant) -> RemotingCommand {
        let h: ConsumerSendMsgBackRequestHeader = match header_with_defaults(req, &[("unitMode", "false")]) {
            Ok(h) => h,
            Err(answer) => return answer,
        };
        let retry = retry_topic(&h.group);
        let retry_ti = self.ensure_topic(&retry, 1);
        let Some(record) = self.lookup(h.offset) else {
            return error(
                req,
                ResponseCode::SystemError,
                format!("look message by offset failed, {}", h.offset),
            );
        };
        let keep_compressed = DecodeOptions { decompress: false, ..DecodeOptions::default() };
        let msg = match decode_message(&record, &keep_compressed) {
            Ok(m) => m,
            Err(e) => return error(req, ResponseCode::SystemError, e.to_string()),
        };
        let mut props = msg.properties.clone();
        if props.get(keys::RETRY_TOPIC).is_none() {
            props = props.with(keys::RETRY_TOPIC, &msg.topic);
        }
        let max_reconsume = match h.max_reconsume_times {
            Some(max) if req.version >= V3_4_9 => max,
            _ => self.config.retry_max_times,
        };
        let dlq = msg.reconsume_times >= max_reconsume || h.delay_level < 0;
        let level = match h.delay_level {
            _ if dlq => 0,
            0 => msg.reconsume_times.saturating_add(3),
            l => l,
        };
        let origin = match props.get(keys::ORIGIN_MESSAGE_ID) {
            Some(id) if !id.trim().is_empty() => id.to_owned(),
            _ => msg.offset_msg_id(),
        };
        props = props.with(keys::DELAY, &level.to_string()).with(keys::ORIGIN_MESSAGE_ID, &origin);
        let draft = Draft {
            body: msg.body,
            flag: msg.flag,
            sys_flag: msg.sys_flag,
            born_timestamp: msg.born_timestamp,
            born_host: msg.born_host,
            reconsume_times: msg.reconsume_times.saturating_add(1),
            properties: props,
        };
        if dlq {
            let ti = self.ensure_topic(&dlq_topic(&h.group), 1);
            self.append(ti, 0, draft, now);
        } else {
            self.put(retry_ti, 0, level, draft, now);
        }
        reply(req, ResponseCode::Success)
    }

    /// The checks SEND_MESSAGE(_V2) and SEND_BATCH_MESSAGE share (`msgCheck`): topic valid or
    /// auto-created, queue id in range (a negative one picks a queue). (topic index, queue id).
    fn send_target(
        &mut self,
        conn: ConnId,
        req: &RemotingCommand,
        h: &SendMessageRequestHeaderV2,
    ) -> Result<(usize, i32), RemotingCommand> {
        if let Err(remark) = validate_topic(&h.topic) {
            return Err(error(req, ResponseCode::InvalidParameter, remark));
        }
        if h.topic == SCHEDULE_TOPIC {
            let remark = format!("Sending message to topic[{}] is forbidden.", h.topic);
            return Err(error(req, ResponseCode::NoPermission, remark));
        }
        let ti = match self.topic_index.get(h.topic.as_str()) {
            Some(&ti) => ti,
            None => {
                let queues = h.default_topic_queue_nums.min(self.config.auto_create_topic_queues).max(0);
                self.ensure_topic(&h.topic, queues)
            }
        };
        let t = &self.topics[ti];
        if h.queue_id >= t.queue_nums() {
            let remark = format!(
                "request queueId[{}] is illegal, TopicConfig [topicName={}, readQueueNums={}, writeQueueNums={}, perm={}, topicFilterType=SINGLE_TAG, topicSysFlag={}, order={}, attributes={{}}] Producer: {}",
                h.queue_id,
                h.topic,
                t.read_queue_nums,
                t.write_queue_nums,
                t.perm,
                t.topic_sys_flag,
                t.order,
                Self::born_host(conn)
            );
            return Err(error(req, ResponseCode::InvalidParameter, remark));
        }
        let queue_id = if h.queue_id < 0 { self.next_round_robin(t.write_queue_nums) } else { h.queue_id };
        if req.body.len() > MAX_MESSAGE_SIZE {
            return Err(Self::illegal(req));
        }
        Ok((ti, queue_id))
    }

    fn illegal(req: &RemotingCommand) -> RemotingCommand {
        error(
            req,
            ResponseCode::MessageIllegal,
            format!(
                "the message is illegal, maybe msg body or properties length not matched. msg body length limit {MAX_MESSAGE_SIZE}B, msg properties length limit 32KB."
            ),
        )
    }

    fn send_reply(req: &RemotingCommand, header: &SendMessageResponseHeader) -> RemotingCommand {
        let mut answer = reply(req, ResponseCode::Success);
        answer.ext_fields.insert("MSG_REGION", REGION_ID);
        answer.ext_fields.insert("TRACE_ON", "true");
        answer.with_header(header)
    }

    /// SEND_MESSAGE (V1 header) and SEND_MESSAGE_V2: `SendMessageProcessor.sendMessage`,
    /// including `handleRetryAndDLQ` and delay levels.
    pub(super) fn on_send(
        &mut self,
        conn: ConnId,
        req: &RemotingCommand,
        v1: bool,
        now: Instant,
    ) -> RemotingCommand {
        let parsed =
            if v1 { SendMessageRequestHeaderV2::read_from(&v1_as_v2(&req.ext_fields)) } else { req.header() };
        let h = match parsed {
            Ok(h) => h,
            Err(e) => return header_error(req, &e),
        };
        let (ti, queue_id) = match self.send_target(conn, req, &h) {
            Ok(t) => t,
            Err(answer) => return answer,
        };
        let mut props = Properties::from_wire(Bytes::from(h.properties.clone().unwrap_or_default()));
        let (mut target_ti, mut target_queue) = (ti, queue_id);
        if let Some(group) = h.topic.strip_prefix(RETRY_TOPIC_PREFIX) {
            let max_reconsume = match h.max_reconsume_times {
                Some(max) if req.version >= V3_4_9 => max,
                _ => self.config.retry_max_times,
            };
            if h.reconsume_times.unwrap_or(0) > max_reconsume || !self.locks_all_expired(group, now) {
                props = props.with(keys::DELAY, "-1");
                target_ti = self.ensure_topic(&dlq_topic(group), 1);
                target_queue = 0;
            }
        }
        let uniq = match props.get(keys::UNIQ_KEY) {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => {
                let id = self.next_uniq_id();
                props = props.with(keys::UNIQ_KEY, &id);
                id
            }
        };
        props = props.with(keys::CLUSTER, &self.config.cluster);
        if props.as_bytes().len() > i16::MAX as usize {
            return Self::illegal(req);
        }
        let level = props.get(keys::DELAY).and_then(|d| d.trim().parse::<i32>().ok()).unwrap_or(0);
        let draft = Draft {
            body: req.body.clone(),
            flag: h.flag,
            sys_flag: h.sys_flag,
            born_timestamp: h.born_timestamp,
            born_host: Self::born_host(conn),
            reconsume_times: h.reconsume_times.unwrap_or(0),
            properties: props,
        };
        let (queue_offset, commit_log_offset) = self.put(target_ti, target_queue, level, draft, now);
        let header = SendMessageResponseHeader {
            msg_id: offset_msg_id(self.store_host, commit_log_offset),
            queue_id,
            queue_offset,
            transaction_id: Some(uniq),
            batch_uniq_id: None,
        };
        Self::send_reply(req, &header)
    }

    /// SEND_BATCH_MESSAGE: each entry stored as its own message (entry properties followed by
    /// the header's, plus `CLUSTER`); no retry/DLQ or delay handling.
    pub(super) fn on_send_batch(
        &mut self,
        conn: ConnId,
        req: &RemotingCommand,
        now: Instant,
    ) -> RemotingCommand {
        let h = header!(req, SendMessageRequestHeaderV2);
        let (ti, queue_id) = match self.send_target(conn, req, &h) {
            Ok(t) => t,
            Err(answer) => return answer,
        };
        let Some(entries) = parse_batch(&req.body).filter(|e| !e.is_empty()) else {
            return error(
                req,
                ResponseCode::SystemError,
                "java.nio.BufferUnderflowException: bad batch body",
            );
        };
        let shared = Properties::from_wire(Bytes::from(h.properties.clone().unwrap_or_default()))
            .with(keys::CLUSTER, &self.config.cluster);
        let mut ids = Vec::with_capacity(entries.len());
        let mut first = None;
        for (flag, body, own) in entries {
            let mut raw = own.to_vec();
            if !raw.is_empty() && !raw.ends_with(&[2]) {
                raw.push(2);
            }
            raw.extend_from_slice(shared.as_bytes());
            if raw.len() > i16::MAX as usize {
                return Self::illegal(req);
            }
            let draft = Draft {
                body,
                flag,
                sys_flag: h.sys_flag,
                born_timestamp: h.born_timestamp,
                born_host: Self::born_host(conn),
                reconsume_times: h.reconsume_times.unwrap_or(0),
                properties: Properties::from_wire(Bytes::from(raw)),
            };
            let (queue_offset, commit_log_offset) = self.append(ti, queue_id, draft, now);
            first.get_or_insert(queue_offset);
            ids.push(offset_msg_id(self.store_host, commit_log_offset));
        }
        let header = SendMessageResponseHeader {
            msg_id: ids.join(","),
            queue_id,
            queue_offset: first.unwrap_or(0),
            transaction_id: None,
            batch_uniq_id: None,
        };
        Self::send_reply(req, &header)
    }

    /// Store now, or, with a delay level > 0, in `SCHEDULE_TOPIC_XXXX` until due
    /// (`HookUtils.transformDelayLevelMessage`: level clamped to the max, `REAL_TOPIC` /
    /// `REAL_QID` added; the delivered copy keeps `DELAY`, as `messageTimeUp` does).
    /// Returns (queue offset, commit-log offset) of what was written.
    fn put(&mut self, ti: usize, queue_id: i32, level: i32, mut draft: Draft, now: Instant) -> (i64, i64) {
        let max_level = self.config.delay_levels_ms.len() as i32;
        if level <= 0 || max_level == 0 {
            return self.append(ti, queue_id, draft, now);
        }
        let level = level.min(max_level);
        let topic = self.topics[ti].name.to_string();
        draft.properties = draft
            .properties
            .with(keys::DELAY, &level.to_string())
            .with(keys::REAL_TOPIC, &topic)
            .with(keys::REAL_QID, &queue_id.to_string());
        // The schedule record takes commit-log space and a schedule-queue offset, as in Java.
        let mut shadow = MessageExt::new(SCHEDULE_TOPIC, draft.body.clone());
        shadow.properties = draft.properties.clone();
        shadow.born_host = draft.born_host;
        shadow.store_host = self.store_host;
        let commit_log_offset = self.commit_cursor;
        self.commit_cursor += stored_size(&shadow) as i64;
        let slot = &mut self.schedule_offsets[(level - 1) as usize];
        let queue_offset = *slot;
        *slot += 1;
        let delay = Duration::from_millis(self.config.delay_levels_ms[(level - 1) as usize]).min(MAX_WAIT);
        self.schedule_seq += 1;
        self.schedule.insert((now + delay, self.schedule_seq), Scheduled { topic, queue_id, draft });
        (queue_offset, commit_log_offset)
    }
}

/// A request's JSON body, or the answer the broker gives when fastjson cannot read it.
fn json_body<T: JsonBody>(req: &RemotingCommand) -> Result<T, RemotingCommand> {
    T::decode(&req.body).map_err(|e| {
        error(req, ResponseCode::SystemError, format!("com.alibaba.fastjson.JSONException: {e}"))
    })
}

/// The remark 4.9.x's ACL 1.0 refuses with (an AclException answered as SYSTEM_ERROR).
fn acl_v1_refusal(topic: &str) -> String {
    format!(
        "org.apache.rocketmq.acl.common.AclException: No default permission for topic:{topic}, \
         org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:610)"
    )
}
