//! Requests a broker sends us (`ClientRemotingProcessor`): membership changed, reset offsets,
//! consumer status, running info, consume directly. Unknown codes get REQUEST_CODE_NOT_SUPPORTED.

use std::collections::BTreeMap;

use super::Consumer;
use super::lifecycle::RunState;
use super::queues::Phase;
use crate::config::ConsumeMode;
use crate::event::{Batch, BatchKind, PeerAddr, Request};
use crate::message::{MessageQueue, decode_message};
use crate::protocol::body::{
    ConsumeStats, ConsumerRunningInfo, GetConsumerStatusBody, JsonBody, ProcessQueueInfo, ResetOffsetBody,
};
use crate::protocol::header::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader, ResetOffsetRequestHeader,
};
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode};

impl Consumer {
    pub(super) fn on_broker_request(&mut self, peer: PeerAddr, cmd: RemotingCommand) {
        match cmd.request_code() {
            Some(RequestCode::NotifyConsumerIdsChanged) => {
                if self.state == RunState::Running {
                    self.request_rebalance();
                }
            }
            Some(RequestCode::ResetConsumerClientOffset) => self.on_reset_offset(peer, &cmd),
            Some(RequestCode::GetConsumerStatusFromClient) => self.answer_consumer_status(peer, &cmd),
            Some(RequestCode::GetConsumerRunningInfo) => self.answer_running_info(peer, &cmd),
            Some(RequestCode::ConsumeMessageDirectly) => self.consume_directly(peer, &cmd),
            _ => {
                if !cmd.is_oneway() {
                    let reply = RemotingCommand::response_to(&cmd, ResponseCode::RequestCodeNotSupported)
                        .with_remark(format!("request code {} not supported by this client", cmd.code));
                    self.transmit_oneway(peer, Request::Reply(reply));
                }
            }
        }
    }

    fn reply(
        &mut self,
        peer: PeerAddr,
        request: &RemotingCommand,
        code: ResponseCode,
        body: Option<bytes::Bytes>,
        remark: Option<String>,
    ) {
        if request.is_oneway() {
            return;
        }
        let mut reply = RemotingCommand::response_to(request, code);
        if let Some(b) = body {
            reply.body = b;
        }
        reply.remark = remark;
        self.transmit_oneway(peer, Request::Reply(reply));
    }

    /// RESET_CONSUMER_CLIENT_OFFSET (4.9 brokers, and 5.x with server-side reset off): every held
    /// queue in the table restarts at its new offset, which is committed (lower or higher). Work
    /// in flight for those queues is discarded.
    fn on_reset_offset(&mut self, peer: PeerAddr, cmd: &RemotingCommand) {
        if self.state != RunState::Running {
            return;
        }
        let h = match cmd.header::<ResetOffsetRequestHeader>() {
            Ok(h) => h,
            Err(e) => return self.emit_malformed(peer, RequestCode::ResetConsumerClientOffset, e),
        };
        if h.group != self.group {
            return;
        }
        let body = match ResetOffsetBody::decode(&cmd.body) {
            Ok(b) => b,
            Err(e) => return self.emit_malformed(peer, RequestCode::ResetConsumerClientOffset, e),
        };
        for (mq, offset) in body.offset_table {
            if offset < 0 {
                continue;
            }
            if let Some(key) = self.queues.key_of(&mq) {
                if self.queues.get(key).is_some_and(|q| q.phase == Phase::Pulling) {
                    self.on_offset_moved(key, offset);
                }
            } else if self.cfg.message_model == crate::protocol::body::MessageModel::Broadcasting {
                self.local_offsets.insert(mq, offset);
                self.local_offsets_dirty = true;
            }
        }
    }

    fn answer_consumer_status(&mut self, peer: PeerAddr, cmd: &RemotingCommand) {
        let Ok(h) = cmd.header::<GetConsumerStatusRequestHeader>() else {
            return self.reply(peer, cmd, ResponseCode::SystemError, None, Some("bad header".into()));
        };
        let table: Vec<(MessageQueue, i64)> = self
            .queues
            .all_keys()
            .into_iter()
            .filter_map(|k| self.queues.get(k))
            .filter(|q| *q.mq.topic == *h.topic)
            .map(|q| (q.mq.clone(), q.offset.value()))
            .collect();
        let body = GetConsumerStatusBody { message_queue_table: table }.encode();
        self.reply(peer, cmd, ResponseCode::Success, Some(body), None);
    }

    fn answer_running_info(&mut self, peer: PeerAddr, cmd: &RemotingCommand) {
        let group_ok =
            cmd.header::<GetConsumerRunningInfoRequestHeader>().is_ok_and(|h| h.consumer_group == self.group);
        if !group_ok {
            let remark = Some("the consumer group is not online in this client".to_owned());
            return self.reply(peer, cmd, ResponseCode::SystemError, None, remark);
        }
        let body = self.running_info().encode();
        self.reply(peer, cmd, ResponseCode::Success, Some(body), None);
    }

    /// `ConsumerRunningInfo`, as Java's `consumerRunningInfo()` fills it.
    pub(super) fn running_info(&self) -> ConsumerRunningInfo {
        let c = &self.cfg;
        let mut props = BTreeMap::new();
        let mut p = |k: &str, v: String| {
            props.insert(k.to_owned(), v);
        };
        p("consumerGroup", self.group.clone());
        p("messageModel", c.message_model.java_name().to_owned());
        p("consumeFromWhere", c.consume_from_where.java_name().to_owned());
        p("allocateMessageQueueStrategy", c.allocate_strategy.name().to_owned());
        p("consumeThreadMin", c.consume_thread_min.to_string());
        p("consumeThreadMax", c.consume_thread_max.to_string());
        p("consumeConcurrentlyMaxSpan", c.consume_concurrently_max_span.to_string());
        p("pullThresholdForQueue", c.pull_threshold_for_queue.to_string());
        p("pullThresholdSizeForQueue", c.pull_threshold_size_for_queue_mib.to_string());
        p("pullInterval", c.pull_interval.as_millis().to_string());
        p("pullBatchSize", c.pull_batch_size.to_string());
        p("consumeMessageBatchMaxSize", c.consume_message_batch_max_size.to_string());
        p("maxReconsumeTimes", c.max_reconsume_times.to_string());
        p("consumeTimeout", (c.consume_timeout.as_secs() / 60).to_string());
        p("PROP_NAMESERVER_ADDR", c.name_servers.join(";"));
        p("PROP_CONSUME_TYPE", "CONSUME_PASSIVELY".to_owned());
        p("PROP_CONSUMEORDERLY", (c.consume_mode == ConsumeMode::Orderly).to_string());
        p("PROP_THREADPOOL_CORE_SIZE", c.consume_thread_min.to_string());
        p("PROP_CONSUMER_START_TIMESTAMP", c.start_wall_ms.to_string());
        p("PROP_CLIENT_VERSION", format!("rocketmq-push-rust {}", env!("CARGO_PKG_VERSION")));
        let mq_table = self
            .queues
            .all_keys()
            .into_iter()
            .filter_map(|k| Some((k, self.queues.get(k)?)))
            .map(|(k, q)| {
                let first = q.pq.first_live().unwrap_or(0);
                (
                    q.mq.clone(),
                    ProcessQueueInfo {
                        commit_offset: q.offset.value(),
                        cached_msg_min_offset: first,
                        cached_msg_max_offset: q.pq.max_offset().max(0),
                        cached_msg_count: q.pq.count() as i32,
                        cached_msg_size_in_mib: (q.pq.bytes() >> 20) as i32,
                        last_pull_timestamp: q.last_pull_ms,
                        last_consume_timestamp: q.last_consume_ms,
                        locked: self.holds_lock(k),
                        last_lock_timestamp: self.lock_wall_ms(k),
                        ..Default::default()
                    },
                )
            })
            .collect();
        let status_table = self
            .subs
            .keys()
            .map(|t| {
                let s = self.topic_report(t, t);
                let stats = ConsumeStats {
                    pull_rt: s.pull_rt_ms,
                    pull_tps: s.pull_tps,
                    consume_rt: s.consume_rt_ms,
                    consume_ok_tps: s.consume_ok_tps,
                    consume_failed_tps: s.consume_failed_tps,
                    consume_failed_msgs: s.consume_failed_last_hour as i64,
                };
                (t.clone(), stats)
            })
            .collect();
        ConsumerRunningInfo {
            properties: props,
            subscription_set: self.subs.values().cloned().collect(),
            mq_table,
            status_table,
            jstack: None,
        }
    }

    fn consume_directly(&mut self, peer: PeerAddr, cmd: &RemotingCommand) {
        let h = cmd.header::<ConsumeMessageDirectlyResultRequestHeader>();
        let msg = decode_message(&cmd.body, &self.cfg.decode);
        let (h, mut msg) = match (h, msg) {
            (Ok(h), Ok(m)) if h.consumer_group == self.group => (h, m),
            (Ok(_), Ok(_)) => {
                let remark = Some("the consumer group is not online in this client".to_owned());
                return self.reply(peer, cmd, ResponseCode::SystemError, None, remark);
            }
            (Err(e), _) => {
                return self.reply(peer, cmd, ResponseCode::SystemError, None, Some(e.to_string()));
            }
            (_, Err(e)) => {
                return self.reply(peer, cmd, ResponseCode::SystemError, None, Some(e.to_string()));
            }
        };
        msg.topic = self.ns.unwrap(&msg.topic).into();
        let queue = MessageQueue::new(msg.topic.clone(), h.broker_name.unwrap_or_default(), msg.queue_id);
        let batch = Batch {
            id: crate::event::BatchId(0),
            queue: queue.into(),
            messages: vec![msg].into(),
            kind: BatchKind::Direct,
        };
        self.dispatch_direct(peer, cmd, batch);
    }
}
