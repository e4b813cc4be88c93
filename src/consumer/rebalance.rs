//! Rebalance: who holds which queue, and where a newly held queue starts.

use std::time::Duration;

use super::Consumer;
use super::lifecycle::RunState;
use super::offsets::Persist;
use super::queues::Phase;
use super::requests::{Failure, PendingKind};
use crate::event::{Event, PeerAddr, Request};
use crate::message::MessageQueue;
use crate::offset_store::OffsetCell;
use crate::producer::RETRY_TOPIC_PREFIX;
use crate::protocol::body::{ConsumeFromWhere, GetConsumerListByGroupResponseBody, JsonBody, MessageModel};
use crate::protocol::header::{
    GetConsumerListByGroupRequestHeader, GetMaxOffsetRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, SearchOffsetRequestHeader,
};
use crate::protocol::{Code, RemotingCommand, RequestCode, ResponseCode};
use crate::timer::{QueueKey, Timer};

/// Java's `rocketmq.client.rebalance.minInterval`: passes at least this far apart.
const MIN_REBALANCE_GAP: Duration = Duration::from_secs(1);

/// Offsets remembered for queues whose broker vanished, at most (one per queue of a very large
/// cluster; entries leave when their queue comes back).
const MAX_GONE_OFFSETS: usize = 65_536;

impl Consumer {
    /// Rebalance soon: now, or one minimum gap after the previous pass. The first pass waits
    /// for every route asked for at start, as Java's start fetches them all first: begun on
    /// the first answer, it would leave a topic whose route came a moment later to the next
    /// pass, a minimum gap (a second) away.
    pub(super) fn request_rebalance(&mut self) {
        let at = match self.last_rebalance {
            Some(last) => (last + MIN_REBALANCE_GAP).max(self.now),
            None if !self.route_queries.is_empty() => return,
            None => self.now,
        };
        self.timers.set_if_earlier(Timer::Rebalance, at);
    }

    /// One pass over every subscribed topic (and re-arm the periodic pass).
    pub(super) fn rebalance_all(&mut self) {
        if self.state != RunState::Running {
            return;
        }
        self.last_rebalance = Some(self.now);
        self.timers.set(Timer::Rebalance, self.now + self.cfg.rebalance_interval);
        let topics: Vec<String> = self.subs.keys().cloned().collect();
        for t in topics {
            self.rebalance_topic(&t);
        }
    }

    fn rebalance_topic(&mut self, topic: &str) {
        let Some(route) = self.routes.get(topic) else { return };
        if self.cfg.message_model == MessageModel::Broadcasting {
            let all = route.queues.clone();
            self.apply_assignment(topic, all);
            return;
        }
        if let Some(again) = self.rebalancing.get_mut(topic) {
            // One consumer-list request per topic at a time; run again when it answers.
            *again = true;
            return;
        }
        // Ask a broker that serves the topic, rotating through them after failures.
        let mut names: Vec<&str> = route.data.queue_datas.iter().map(|q| q.broker_name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        if names.is_empty() {
            return;
        }
        let name = names[self.rebalance_rotation % names.len()].to_owned();
        let Some(peer) = self.master_addr(&name) else { return };
        self.rebalancing.insert(topic.to_owned(), false);
        // Unless the group reads the topic by POP (see pop.rs), allocation happens here.
        if !self.query_assignment(topic, &peer) {
            self.ask_consumer_list(topic, peer);
        }
    }

    /// GET_CONSUMER_LIST_BY_GROUP for a rebalance of `topic` (marked as rebalancing).
    pub(super) fn ask_consumer_list(&mut self, topic: &str, peer: PeerAddr) {
        let header = GetConsumerListByGroupRequestHeader { consumer_group: self.group.clone() };
        let timeout = self.cfg.mq_client_api_timeout;
        self.send_to_broker(
            peer,
            Request::GetConsumerList(header),
            PendingKind::ConsumerList { topic: topic.to_owned() },
            timeout,
        );
    }

    pub(super) fn on_consumer_list(
        &mut self,
        peer: &PeerAddr,
        topic: &str,
        result: Result<RemotingCommand, Failure>,
    ) {
        let again = self.rebalancing.remove(topic).unwrap_or(false);
        if self.state != RunState::Running {
            return;
        }
        let cids = match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => {
                match GetConsumerListByGroupResponseBody::decode(&cmd.body) {
                    Ok(b) => Some(b.consumer_id_list),
                    Err(e) => {
                        self.emit_malformed(peer.clone(), RequestCode::GetConsumerListByGroup, e);
                        None
                    }
                }
            }
            Ok(cmd) => {
                // "no consumer for this group": the broker lost our registration.
                self.mark_unregistered(peer);
                if super::requests::is_permission_refusal(&cmd) {
                    self.report_refusal(peer, RequestCode::GetConsumerListByGroup, &cmd);
                } else {
                    self.emit_broker_error(peer.clone(), RequestCode::GetConsumerListByGroup, &cmd);
                }
                None
            }
            Err(_) => None,
        };
        let Some(mut cids) = cids else {
            self.rebalance_rotation += 1;
            self.request_rebalance();
            return;
        };
        // Sorted as RebalanceImpl sorts, and deduplicated where Java is not: the broker lists
        // a client once per channel, so after a half-open link it lists us twice until the
        // dead channel expires (2 min), and Java's allocation then leaves a share of the
        // queues to that phantom — consumed by nobody.
        cids.sort();
        cids.dedup();
        let Some(route) = self.routes.get(topic) else { return };
        if cids.is_empty() || route.queues.is_empty() {
            // Java's allocation throws here and the assignment stays as it was; an empty result
            // would release every queue on a transient empty answer.
            return;
        }
        let mine = self.cfg.allocate_strategy.allocate(self.cfg.client_id.as_str(), &route.queues, &cids);
        self.apply_assignment(topic, mine);
        if again {
            self.request_rebalance();
        }
    }

    /// Make the held queues of `topic` equal `target`: release the others (persisting first),
    /// start the new ones.
    pub(super) fn apply_assignment(&mut self, topic: &str, mut target: Vec<MessageQueue>) {
        target.sort();
        target.dedup();
        let mut revoked = Vec::new();
        for key in self.queues.keys_of_topic(topic) {
            let routed = self.routes.get(topic);
            let Some(q) = self.queues.get_mut(key) else { continue };
            // A queue whose mode changed (PULL ↔ POP) is released and held again.
            let mode_changed = (q.phase == Phase::Popping) != self.pop_queues.contains(&q.mq);
            if q.phase != Phase::Releasing && (target.binary_search(&q.mq).is_err() || mode_changed) {
                q.broker_gone = routed.is_some_and(|r| !r.queues.contains(&q.mq));
                revoked.push((*q.user_mq).clone());
                self.revoke_queue(key);
            }
        }
        let mut assigned = Vec::new();
        for mq in target {
            if let Some(key) = self.queues.key_of(&mq) {
                // Revoked with a batch running and assigned back before it ended: keep it.
                if let Some(q) = self.queues.get(key).filter(|q| q.phase == Phase::Releasing) {
                    assigned.push((*q.user_mq).clone());
                    self.keep_releasing_queue(key);
                }
                continue;
            }
            let user_mq = MessageQueue::new(self.ns.unwrap(&mq.topic), mq.broker_name.clone(), mq.queue_id);
            assigned.push(user_mq.clone());
            let user_mq = std::sync::Arc::new(user_mq);
            let remembered = self.gone_offsets.remove(&mq);
            let key = self.hold_queue(mq, user_mq);
            if let (Some(offset), Some(q)) = (remembered, self.queues.get_mut(key)) {
                // Back after its broker vanished: start no lower than what was committed then,
                // whatever the broker lost meanwhile (a kill -9 loses its recent offsets).
                q.offset.force(offset);
            }
            self.begin_queue(key);
        }
        let user_topic = self.ns.unwrap(topic).to_owned();
        let changed = !revoked.is_empty() || !assigned.is_empty();
        if !revoked.is_empty() {
            self.emit(Event::QueuesRevoked { topic: user_topic.clone(), queues: revoked });
        }
        if !assigned.is_empty() {
            self.emit(Event::QueuesAssigned { topic: user_topic, queues: assigned });
        }
        if changed {
            self.new_sub_version(topic);
        }
    }

    /// The assignment of `topic` changed: a newer subscription version, heartbeated to every
    /// broker before the next pull, as Java's `messageQueueChanged` does. A member whose own
    /// newer version the broker missed (Java skips a heartbeat when its lock is busy) has its
    /// pulls refused with SUBSCRIPTION_NOT_LATEST until some member raises the group's version;
    /// in a mixed group we are that member too.
    fn new_sub_version(&mut self, topic: &str) {
        let wall = self.wall_ms();
        let Some(s) = self.subs.get_mut(topic) else { return };
        s.sub_version = wall.max(s.sub_version + 1);
        self.rebuild_heartbeat();
        let peers: Vec<PeerAddr> = self.peers.keys().cloned().collect();
        for p in &peers {
            self.mark_unregistered(p);
        }
        self.heartbeat_all();
    }

    /// Stop consuming a queue: persist its offset, drop its state. In-flight results for it are
    /// discarded when they arrive (its key is stale).
    pub(super) fn release_queue(&mut self, key: QueueKey) {
        self.update_commit(key);
        if let Some(q) = self.queues.get(key).filter(|q| q.broker_gone && q.offset.value() >= 0) {
            let (mq, offset) = (q.mq.clone(), q.offset.value());
            if self.gone_offsets.len() < MAX_GONE_OFFSETS {
                self.gone_offsets.insert(mq, offset);
            }
        }
        self.drop_pop_order(Some(key));
        let popping = self.queues.get(key).is_some_and(|q| q.phase == Phase::Popping);
        if self.uses_locks() && !popping {
            self.release_locked(key);
        } else {
            self.persist_queue(key, Persist::Release);
        }
        for t in [Timer::Pull(key), Timer::ComputeOffset(key), Timer::Lock(key), Timer::OrderlyResume(key)] {
            self.timers.stop(t);
        }
        self.withdraw_unstarted(Some(key));
        let mq = self.queues.remove(key).map(|q| q.mq);
        // A pulled queue gone after a switch to POP: its popped messages may go now.
        if let Some(mq) = mq.filter(|mq| mq.queue_id >= 0 && self.pops_orderly()) {
            let pop = MessageQueue::new(mq.topic.clone(), mq.broker_name, -1);
            if let Some(k) = self.queues.key_of(&pop) {
                self.pop_order_resume(k);
            }
        }
    }

    /// Find where a new queue starts. "No stored offset" and "the lookup failed" are kept apart:
    /// only the first consults `consumeFromWhere`; the second retries and never guesses.
    pub(super) fn compute_start_offset(&mut self, key: QueueKey) {
        let Some(q) = self.queues.get(key) else { return };
        if q.phase != Phase::ComputingOffset || self.state != RunState::Running {
            return;
        }
        let mq = q.mq.clone();
        if self.cfg.message_model == MessageModel::Broadcasting {
            match self.local_offsets.get(&mq).copied() {
                Some(offset) => self.start_at(key, offset, true),
                None => self.no_stored_offset(key),
            }
            return;
        }
        let Some(peer) = self.master_addr(&mq.broker_name) else {
            self.timers.set(Timer::ComputeOffset(key), self.now + self.cfg.pull_time_delay_when_exception);
            return;
        };
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: self.group.clone(),
            topic: mq.topic.to_string(),
            queue_id: mq.queue_id,
            // As Java, unset: a broker answers 0 for a new group on a young queue, which is then
            // read from its start whatever consumeFromWhere says. The opt-in asks 5.x brokers
            // not to (4.9 brokers ignore the field).
            set_zero_if_not_found: self.cfg.new_group_skips_history.then_some(false),
            bname: Some(mq.broker_name.to_string()),
        };
        let timeout = self.cfg.offset_rpc_timeout;
        self.send_to_broker(
            peer,
            Request::QueryConsumerOffset(header),
            PendingKind::QueryOffset { key },
            timeout,
        );
    }

    pub(super) fn on_query_offset(
        &mut self,
        key: QueueKey,
        peer: &PeerAddr,
        result: Result<RemotingCommand, Failure>,
    ) {
        if self.queues.get(key).is_none_or(|q| q.phase != Phase::ComputingOffset) {
            return;
        }
        match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => match cmd.header::<OffsetResponseHeader>()
            {
                Ok(h) if h.offset >= 0 => self.start_at(key, h.offset, true),
                Ok(_) => self.no_stored_offset(key),
                Err(e) => {
                    self.emit_malformed(peer.clone(), RequestCode::QueryConsumerOffset, e);
                    self.retry_start_offset(key)
                }
            },
            Ok(cmd) if cmd.code == ResponseCode::QueryNotFound as i32 => self.no_stored_offset(key),
            // Any other answer, a timeout or a lost connection is not "no offset": retry.
            Ok(cmd) => {
                self.emit_broker_error(peer.clone(), RequestCode::QueryConsumerOffset, &cmd);
                self.retry_start_offset(key)
            }
            Err(_) => self.retry_start_offset(key),
        }
    }

    fn retry_start_offset(&mut self, key: QueueKey) {
        self.timers.set(Timer::ComputeOffset(key), self.now + self.cfg.pull_time_delay_when_exception);
    }

    /// The start-offset matrix for a queue with no stored offset (BEHAVIOUR.md §B.4).
    fn no_stored_offset(&mut self, key: QueueKey) {
        let Some(q) = self.queues.get(key) else { return };
        let mq = q.mq.clone();
        let retry_topic = mq.topic.starts_with(RETRY_TOPIC_PREFIX);
        enum Next {
            At(i64),
            Max,
            Search(i64),
        }
        let next = match self.cfg.consume_from_where {
            ConsumeFromWhere::ConsumeFromFirstOffset => Next::At(0),
            ConsumeFromWhere::ConsumeFromTimestamp if retry_topic => Next::Max,
            ConsumeFromWhere::ConsumeFromTimestamp => {
                Next::Search(self.cfg.consume_timestamp.unwrap_or(self.cfg.start_wall_ms - 30 * 60 * 1000))
            }
            // LAST and its three deprecated aliases; pending retries are never skipped.
            _ if retry_topic => Next::At(0),
            _ => Next::Max,
        };
        let peer = match next {
            Next::At(offset) => return self.start_at(key, offset, false),
            _ => self.master_addr(&mq.broker_name),
        };
        let Some(peer) = peer else { return self.retry_start_offset(key) };
        let timeout = self.cfg.offset_rpc_timeout;
        let bname = Some(mq.broker_name.to_string());
        let (request, kind) = match next {
            Next::Search(ts) => (
                Request::SearchOffset(SearchOffsetRequestHeader {
                    topic: mq.topic.to_string(),
                    queue_id: mq.queue_id,
                    timestamp: ts,
                    boundary_type: None,
                    bname,
                }),
                PendingKind::SearchOffset { key },
            ),
            _ => (
                Request::GetMaxOffset(GetMaxOffsetRequestHeader {
                    topic: mq.topic.to_string(),
                    queue_id: mq.queue_id,
                    committed: Some(true),
                    bname,
                }),
                PendingKind::MaxOffset { key },
            ),
        };
        self.send_to_broker(peer, request, kind, timeout);
    }

    pub(super) fn on_found_start_offset(
        &mut self,
        key: QueueKey,
        peer: &PeerAddr,
        request: Code<RequestCode>,
        result: Result<RemotingCommand, Failure>,
    ) {
        if self.queues.get(key).is_none_or(|q| q.phase != Phase::ComputingOffset) {
            return;
        }
        match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => match cmd.header::<OffsetResponseHeader>()
            {
                Ok(h) if h.offset >= 0 => self.start_at(key, h.offset, false),
                Ok(_) => self.retry_start_offset(key),
                Err(e) => {
                    self.emit_malformed(peer.clone(), request, e);
                    self.retry_start_offset(key)
                }
            },
            Ok(cmd) => {
                self.emit_broker_error(peer.clone(), request, &cmd);
                self.retry_start_offset(key)
            }
            Err(_) => self.retry_start_offset(key),
        }
    }

    /// Start pulling `key` at `offset`. A start point that was not read from the store is
    /// committed right away, so a crash before the first message cannot move it (a new group on
    /// LAST would otherwise skip what arrived in between). An orderly queue locked again starts
    /// no lower than its own commit: what this client finished is not replayed.
    pub(super) fn start_at(&mut self, key: QueueKey, offset: i64, stored: bool) {
        let Some(q) = self.queues.get_mut(key) else { return };
        // A seek that came while the start was looked up wins over it.
        let seek = q.pending_seek.take();
        let (offset, stored) = seek.map_or((offset, stored), |to| (to, false));
        let start = if seek.is_some() { offset } else { offset.max(q.offset.value()) };
        q.phase = Phase::Pulling;
        q.next_offset = start;
        q.offset = if stored { OffsetCell::stored(offset) } else { OffsetCell::default() };
        if !stored || start != offset {
            q.offset.force(start);
            self.persist_queue(key, Persist::Now);
        }
        self.try_pull(key);
    }
}
