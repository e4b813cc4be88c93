//! Consumption: batches out to user code, results back, and what failures become — send-back,
//! the retry-topic fallback, a local retry — plus the consume timeout and direct consumption.

use std::time::Instant;

use bytes::Bytes;
use smallvec::SmallVec;

use super::Consumer;
use super::lifecycle::RunState;
use super::requests::{Failure, PendingKind};
use crate::config::ConsumeMode;
use crate::error::UsageError;
use crate::event::{
    Batch, BatchId, BatchKind, ConsumeResult, ConsumeStatus, Event, Messages, Output, PeerAddr, Request,
};
use crate::message::{Message, keys};
use crate::process_queue::EntryState;
use crate::producer::{CLIENT_INNER_PRODUCER_GROUP, retry_topic, send_message_parts};
use crate::protocol::body::{CMResult, ConsumeMessageDirectlyResult, JsonBody, MessageModel};
use crate::protocol::header::ConsumerSendMsgBackRequestHeader;
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use crate::timer::{QueueKey, Timer};

/// A batch handed to user code.
#[derive(Debug)]
pub(super) struct InFlight {
    pub(super) key: QueueKey,
    pub(super) offsets: SmallVec<[i64; 4]>,
    /// Past `consumeTimeout`: its messages were sent back; the late result is ignored.
    pub(super) timed_out: bool,
    /// Orderly: the queue restarted under a new key while this ran; the result is ignored but
    /// still frees the queue for its next batch.
    pub(super) discard: bool,
    /// Handed out to user code (a concurrent batch may wait for a listener slot first).
    pub(super) started: bool,
    /// When it went out, or when the adapter reports user code started on it, in ms since the
    /// consumer started (consume RT; 4 bytes, where an `Instant` would grow every entry by 16).
    pub(super) since_ms: u32,
    /// POP: the receipts to answer with (`offsets` are then only the messages' queue offsets).
    pub(super) pop: Option<Box<super::pop::PopBatch>>,
}

/// A message on its way back to the broker.
#[derive(Debug)]
pub(super) struct SendBack {
    pub(super) key: QueueKey,
    pub(super) offset: i64,
}

/// Messages to consume again locally after a delay.
#[derive(Debug)]
pub(super) struct LocalRetry {
    pub(super) key: QueueKey,
    pub(super) offsets: Vec<i64>,
}

/// Where the answer to a CONSUME_MESSAGE_DIRECTLY goes.
#[derive(Debug)]
pub(super) struct DirectReply {
    pub(super) peer: PeerAddr,
    pub(super) opaque: i32,
    pub(super) serialize_type: SerializeType,
    pub(super) started: Instant,
}

/// How many of a concurrent batch's `n` messages `result` says succeeded (the first ones).
pub(super) fn succeeded(result: &ConsumeResult, n: usize) -> usize {
    match result.status {
        ConsumeStatus::Success => result.ack_index.map_or(n, |i| (i + 1).min(n)),
        ConsumeStatus::ReconsumeLater | ConsumeStatus::SuspendCurrentQueueAMoment => 0,
    }
}

/// Delay level the consume-timeout path uses (`cleanExpireMsg` sends back with level 3).
const TIMEOUT_DELAY_LEVEL: i32 = 3;

impl Consumer {
    pub(super) fn next_batch_id(&mut self) -> BatchId {
        let id = BatchId(self.next_batch);
        self.next_batch += 1;
        id
    }

    /// Hand `offsets` of `key` to user code in batches of `consumeMessageBatchMaxSize`.
    pub(super) fn dispatch(&mut self, key: QueueKey, offsets: &[i64]) {
        let mut i = 0;
        while i < offsets.len() {
            let (_, used) = self.dispatch_run(key, &offsets[i..]);
            if used == 0 {
                return;
            }
            i += used;
        }
    }

    /// Hand out one batch from the front of `offsets`: a run of consecutive entries of one
    /// pull's chunk (it shares the chunk, no copies), at most `consumeMessageBatchMaxSize`.
    /// Returns the batch (None if the first offset is not held) and how many offsets it used.
    pub(super) fn dispatch_run(&mut self, key: QueueKey, offsets: &[i64]) -> (Option<BatchId>, usize) {
        let size = self.cfg.consume_message_batch_max_size;
        let orderly = self.cfg.consume_mode == ConsumeMode::Orderly;
        let wall = self.wall_ms();
        let Some(q) = self.queues.get_mut(key) else { return (None, 0) };
        q.last_consume_ms = wall;
        let Some(mut first) = offsets.first().and_then(|o| q.pq.get_mut(*o)) else { return (None, 1) };
        first.set_state(EntryState::InFlight);
        let (chunk, chunk_id, start) = (first.chunk().clone(), first.chunk_id(), first.index());
        let mut run: SmallVec<[i64; 4]> = SmallVec::new();
        run.push(offsets[0]);
        while run.len() < size && run.len() < offsets.len() {
            match q.pq.get_mut(offsets[run.len()]) {
                Some(mut e) if e.chunk_id() == chunk_id && e.index() == start + run.len() => {
                    e.set_state(EntryState::InFlight);
                    run.push(offsets[run.len()]);
                }
                _ => break,
            }
        }
        let used = run.len();
        let messages = Messages::new(chunk, start, start + used);
        let queue = q.user_mq.clone();
        let id = self.next_batch_id();
        // A concurrent batch with a listener slot free starts now (`hand_out`, without looking
        // it up again).
        let starts_now = !orderly && !self.starts_reported && self.running < self.cfg.consume_thread_min;
        self.batches.insert(
            id,
            InFlight {
                key,
                offsets: run,
                timed_out: false,
                discard: false,
                started: orderly || starts_now,
                since_ms: self.now_ms,
                pop: None,
            },
        );
        let batch = Batch { id, queue, messages, kind: BatchKind::Concurrent };
        if orderly {
            // One batch per queue at most, and no consume timeout (as in Java): out at once.
            self.outputs.push_back(Output::Consume(Batch { kind: BatchKind::Orderly, ..batch }));
        } else if starts_now {
            self.run_batch(batch);
        } else if self.starts_reported {
            // The adapter queues it (see `hand_out`).
            self.outputs.push_back(Output::Consume(batch));
        } else {
            self.hand_out(batch);
        }
        (Some(id), used)
    }

    /// Concurrent batches go to user code only as fast as listener slots (`consumeThreadMin`)
    /// free up; the rest wait here, in order. So a batch starts when it is handed out, and its
    /// consume timeout counts from then — never while it waits behind others (Java times
    /// consumption from the start of the listener call too).
    ///
    /// Where the adapter queues batches itself and reports when each starts
    /// ([`report_starts`](Consumer::report_starts)), every batch goes out at once and its
    /// timeout counts from the reported start instead: one hand-off per batch of ready work
    /// rather than a round trip per listener slot.
    pub(super) fn hand_out(&mut self, batch: Batch) {
        if self.starts_reported {
            self.outputs.push_back(Output::Consume(batch));
            return;
        }
        if self.running >= self.cfg.consume_thread_min {
            self.waiting.push_back(batch);
            return;
        }
        if let Some(b) = self.batches.get_mut(&batch.id) {
            b.started = true;
            b.since_ms = self.now_ms;
        }
        self.run_batch(batch);
    }

    /// `batch` (marked started) goes to user code now.
    fn run_batch(&mut self, batch: Batch) {
        self.running += 1;
        // Every batch gets the same timeout, so deadlines arrive in hand-out order: a FIFO and
        // one timer replace a timer per batch.
        self.time_out_at(batch.id, self.now + self.cfg.consume_timeout);
        self.outputs.push_back(Output::Consume(batch));
    }

    fn time_out_at(&mut self, id: BatchId, deadline: Instant) {
        let first = if self.timeouts.back().is_none_or(|(d, _)| *d <= deadline) {
            self.timeouts.push_back((deadline, id));
            self.timeouts.len() == 1
        } else {
            // Reported starts may come slightly out of order: keep the FIFO sorted.
            let at = self.timeouts.partition_point(|(d, _)| *d <= deadline);
            self.timeouts.insert(at, (deadline, id));
            at == 0
        };
        if self.timeouts.len() > 2 * self.batches.len() + 64 {
            // Entries of finished batches behind a long one: drop them, so the FIFO stays
            // proportional to the batches out rather than to the throughput over a timeout.
            let batches = &self.batches;
            self.timeouts.retain(|(_, id)| batches.contains_key(id));
        }
        // While the FIFO holds entries the scan is armed no later than its front (the scan
        // re-arms itself for the next live one), so only a new front needs the timer.
        if first {
            self.timers.set_if_earlier(Timer::ConsumeTimeoutScan, deadline);
        }
    }

    /// Drop the entries of finished batches at the front of the timeout FIFO (`done` has just
    /// finished: batches mostly finish in the order they started).
    fn trim_timeouts(&mut self, done: BatchId) {
        if self.timeouts.front().is_some_and(|(_, id)| *id == done) {
            self.timeouts.pop_front();
        }
        while let Some((_, id)) = self.timeouts.front() {
            if self.batches.get(id).is_some_and(|b| !b.timed_out) {
                return;
            }
            self.timeouts.pop_front();
        }
    }

    /// The adapter started user code on a batch at `at`. Unknown batches (withdrawn, direct,
    /// answered already) and orderly ones (started when handed out) are ignored.
    pub(super) fn on_started(&mut self, id: BatchId, at: Instant) {
        let at_ms = self.ms_since_start(at);
        let Some(b) = self.batches.get_mut(&id) else { return };
        if b.started || b.timed_out {
            return;
        }
        b.started = true;
        b.since_ms = at_ms;
        self.running += 1;
        self.time_out_at(id, at + self.cfg.consume_timeout);
    }

    /// A listener slot freed up: hand out the next waiting batches that still matter.
    fn slot_freed(&mut self) {
        self.running = self.running.saturating_sub(1);
        while self.running < self.cfg.consume_thread_min {
            let Some(batch) = self.waiting.pop_front() else { return };
            // Looked up once: marked started here, as `hand_out` would.
            let live = match self.batches.get_mut(&batch.id) {
                Some(b) if self.queues.get(b.key).is_some() => {
                    b.started = true;
                    b.since_ms = self.now_ms;
                    true
                }
                _ => false,
            };
            if live {
                self.run_batch(batch);
            } else {
                // Its queue was released or moved meanwhile: it never runs.
                self.batches.remove(&batch.id);
            }
        }
    }

    /// The queue `key` goes away: batches of it the adapter has not started never will (Java
    /// checks `ProcessQueue.isDropped` before the listener call). Waiting ones are dropped when
    /// their turn comes (`slot_freed`).
    pub(super) fn withdraw_unstarted(&mut self, key: Option<QueueKey>) {
        if !self.starts_reported {
            return;
        }
        let mut ids: SmallVec<[BatchId; 16]> = self
            .batches
            .iter()
            .filter(|(_, b)| !b.started && key.is_none_or(|k| b.key == k))
            .map(|(id, _)| *id)
            .collect();
        // Deterministic order, whatever the map's.
        ids.sort_unstable();
        for id in ids {
            self.batches.remove(&id);
            self.outputs.push_back(Output::Withdraw(id));
        }
    }

    /// Shutdown: batches still waiting here for a slot are never handed out (their messages
    /// stay uncommitted and are delivered again after a restart). Those an adapter queued for
    /// its threads run, as handed-out batches do everywhere, until the shutdown deadline takes
    /// back the rest: withdrawing them at once would race with threads starting them (a batch
    /// started but not yet reported would run with its result refused, and replay after the
    /// restart though its listener saw it).
    pub(super) fn drop_waiting_batches(&mut self) {
        for batch in std::mem::take(&mut self.waiting) {
            self.batches.remove(&batch.id);
        }
    }

    pub(super) fn on_consumed(&mut self, id: BatchId, result: ConsumeResult) -> Result<(), UsageError> {
        if !self.direct.is_empty() {
            if let Some(d) = self.direct.remove(&id) {
                self.reply_direct(d, result);
                return Ok(());
            }
        }
        // Never dispatched, or answered already.
        let Some(mut b) = self.batches.remove(&id) else { return Err(UsageError::UnknownBatch(id)) };
        // A batch still waiting for a slot was never handed out (where starts are reported, a
        // result may come without its start: it is as good).
        if !(b.started || self.starts_reported) {
            self.batches.insert(id, b);
            return Err(UsageError::UnknownBatch(id));
        }
        if let Some(pop) = b.pop.take() {
            if pop.order.is_some() {
                self.on_pop_order_consumed(id, &b, *pop, &result);
                return Ok(());
            }
            if b.started {
                self.trim_timeouts(id);
                self.slot_freed();
            }
            self.on_pop_consumed(&b, *pop, &result);
            return Ok(());
        }
        if self.cfg.consume_mode == ConsumeMode::Orderly {
            self.on_orderly_result(id, b, result);
            return Ok(());
        }
        if b.started {
            self.trim_timeouts(id);
            self.slot_freed();
        }
        if b.timed_out || self.queues.get(b.key).is_none() {
            // Timed out (already sent back) or the queue was released or moved: discard.
            return Ok(());
        }
        let n = b.offsets.len();
        let ok = succeeded(&result, n);
        self.stats.consumed_ok += ok as u64;
        self.stats.consumed_failed += (n - ok) as u64;
        self.count_consumed(&b, ok);
        let Some(q) = self.queues.get_mut(b.key) else { return Ok(()) };
        for o in &b.offsets[..ok] {
            q.pq.remove(*o);
        }
        let failed = &b.offsets[ok..];
        if !failed.is_empty() {
            if self.cfg.message_model == MessageModel::Broadcasting {
                // Java drops broadcasting failures (there is no per-client retry topic).
                for o in failed {
                    q.pq.remove(*o);
                }
                let queue = (*q.user_mq).clone();
                self.emit(Event::FailedMessagesDropped { queue, count: failed.len() });
            } else {
                for o in failed.iter().copied().collect::<SmallVec<[i64; 4]>>() {
                    self.send_back(b.key, o, result.delay_level);
                }
            }
        }
        self.update_commit(b.key);
        Ok(())
    }

    /// Java's CONSUME_RT, CONSUME_OK_TPS and CONSUME_FAILED_TPS for a finished batch, `ok` of
    /// its messages consumed.
    pub(super) fn count_consumed(&mut self, b: &InFlight, ok: usize) {
        let Some(slot) = self.queues.get(b.key).map(|q| q.stats_slot) else { return };
        // Where starts are reported, a batch answered without one answered at once: its wait in
        // the adapter's queue is not consumption time.
        let at_once = self.starts_reported && !b.started;
        let rt = if at_once { 0 } else { self.now_ms.wrapping_sub(b.since_ms) as u64 };
        let failed = b.offsets.len().saturating_sub(ok);
        if let Some(w) = self.windows.at(slot) {
            w.consume_rt.add(rt, 1);
            w.consume_ok.add(ok as u64, 1);
            w.consume_failed.add(failed as u64, 1);
        }
    }

    /// Send one failed message back for a later retry. It stays held (pinning the watermark)
    /// until the broker has it.
    pub(super) fn send_back(&mut self, key: QueueKey, offset: i64, delay_level: i32) {
        let Some(q) = self.queues.get(key) else { return };
        let Some(e) = q.pq.get(offset) else { return };
        let m = e.msg();
        let header = ConsumerSendMsgBackRequestHeader {
            offset: m.commit_log_offset,
            group: self.group.clone(),
            delay_level,
            origin_msg_id: Some(m.msg_id().into_owned()),
            origin_topic: Some(self.ns.wrap(&m.topic)),
            unit_mode: Some(self.cfg.unit_mode),
            max_reconsume_times: Some(self.cfg.effective_max_reconsume_times()),
            bname: Some(q.mq.broker_name.to_string()),
        };
        let peer = self.master_addr(&q.mq.broker_name);
        let id = self.next_job;
        self.next_job += 1;
        self.stats.sent_back += 1;
        self.send_backs.insert(id, SendBack { key, offset });
        match peer {
            Some(peer) => {
                let timeout = self.cfg.offset_rpc_timeout;
                self.send_to_broker(
                    peer,
                    Request::SendMsgBack(header),
                    PendingKind::SendBack { id },
                    timeout,
                );
            }
            None => self.retry_send(id),
        }
    }

    pub(super) fn on_send_back(
        &mut self,
        id: u64,
        peer: &PeerAddr,
        result: Result<RemotingCommand, Failure>,
    ) {
        match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => self.finish_send_back(id),
            // An error answer, a timeout or a lost connection: re-send it as a normal message.
            Ok(cmd) => {
                self.emit_broker_error(peer.clone(), RequestCode::ConsumerSendMsgBack, &cmd);
                self.retry_send(id)
            }
            Err(_) => self.retry_send(id),
        }
    }

    fn finish_send_back(&mut self, id: u64) {
        let Some(sb) = self.send_backs.remove(&id) else { return };
        let orderly = self.cfg.consume_mode == ConsumeMode::Orderly;
        if let Some(q) = self.queues.get_mut(sb.key) {
            if q.pq.remove(sb.offset) && orderly {
                q.dead_letters = q.dead_letters.saturating_sub(1);
            }
        }
        self.update_commit(sb.key);
        if orderly {
            self.after_orderly_batch(sb.key);
        }
    }

    /// The fallback (`sendMessageBackAsNormalMessage`): a copy to `%RETRY%group` with
    /// SEND_MESSAGE_V2, carrying the retry properties.
    fn retry_send(&mut self, id: u64) {
        let Some(sb) = self.send_backs.get(&id) else { return };
        let (key, offset) = (sb.key, sb.offset);
        let Some(q) = self.queues.get(key) else {
            self.send_backs.remove(&id);
            return;
        };
        let Some(e) = q.pq.get(offset) else {
            self.send_backs.remove(&id);
            return;
        };
        let retry = retry_topic(&self.group);
        let target = self.routes.get(&retry).and_then(|r| {
            let queues = r.data.publish_queues(&retry);
            queues.iter().find(|w| w.broker_name == q.mq.broker_name).or_else(|| queues.first()).cloned()
        });
        let Some(target) = target else { return self.local_retry(id) };
        let Some(peer) = self.master_addr(&target.broker_name) else { return self.local_retry(id) };
        let m = e.msg();
        let max = self.cfg.effective_max_reconsume_times();
        let origin_id = m
            .properties
            .get(keys::ORIGIN_MESSAGE_ID)
            .map(str::to_owned)
            .unwrap_or_else(|| m.msg_id().into_owned());
        let properties = m
            .properties
            .without(keys::TRAN_MSG)
            .with(keys::ORIGIN_MESSAGE_ID, &origin_id)
            .with(keys::RETRY_TOPIC, &self.ns.wrap(&m.topic))
            .with(keys::RECONSUME_TIME, &(m.reconsume_times + 1).to_string())
            .with(keys::MAX_RECONSUME_TIMES, &max.to_string())
            .with(keys::DELAY, &(3 + m.reconsume_times).max(1).to_string());
        let copy = Message { topic: retry, body: m.body.clone(), flag: m.flag, properties };
        let (header, body): (_, Bytes) =
            send_message_parts(CLIENT_INNER_PRODUCER_GROUP, &copy, &target, self.wall_ms(), None);
        self.stats.sent_back_fallback += 1;
        let timeout = self.cfg.offset_rpc_timeout;
        self.send_to_broker(
            peer,
            Request::SendMessage { header, body },
            PendingKind::RetrySend { id },
            timeout,
        );
    }

    pub(super) fn on_retry_send(
        &mut self,
        id: u64,
        peer: &PeerAddr,
        result: Result<RemotingCommand, Failure>,
    ) {
        match result {
            Ok(cmd) if ResponseCode::is_send_ok(cmd.code) => self.finish_send_back(id),
            Ok(cmd) => {
                self.emit_broker_error(peer.clone(), RequestCode::SendMessageV2, &cmd);
                self.local_retry(id)
            }
            Err(_) => self.local_retry(id),
        }
    }

    /// Both ways back failed: consume it again here after a delay, counting the attempt.
    /// Orderly (where only dead-lettering sends back): try the send-back again after the delay
    /// instead, since consuming it again here would break the order.
    fn local_retry(&mut self, id: u64) {
        let Some(sb) = self.send_backs.remove(&id) else { return };
        if self.cfg.consume_mode == ConsumeMode::Orderly {
            if self.state == RunState::Running && self.queues.get(sb.key).is_some() {
                let job = self.next_job;
                self.next_job += 1;
                self.local_retries.insert(job, LocalRetry { key: sb.key, offsets: vec![sb.offset] });
                self.timers.set(Timer::LocalRetry(job), self.now + self.cfg.send_back_local_retry_delay);
            }
            return;
        }
        let Some(q) = self.queues.get_mut(sb.key) else { return };
        let Some(mut e) = q.pq.get_mut(sb.offset) else { return };
        let mut again = e.msg().clone();
        again.reconsume_times += 1;
        e.replace(again);
        e.set_state(EntryState::Ready);
        let queue = (*q.user_mq).clone();
        self.stats.local_retries += 1;
        self.emit(Event::LocalRetry { queue, offset: sb.offset });
        if self.state != RunState::Running {
            return;
        }
        let job = self.next_job;
        self.next_job += 1;
        self.local_retries.insert(job, LocalRetry { key: sb.key, offsets: vec![sb.offset] });
        self.timers.set(Timer::LocalRetry(job), self.now + self.cfg.send_back_local_retry_delay);
    }

    pub(super) fn run_local_retry(&mut self, job: u64) {
        let Some(r) = self.local_retries.remove(&job) else { return };
        let Some(q) = self.queues.get(r.key) else { return };
        if self.cfg.consume_mode == ConsumeMode::Orderly {
            for o in r.offsets {
                self.send_back(r.key, o, -1);
            }
            return;
        }
        let ready: Vec<i64> = r
            .offsets
            .into_iter()
            .filter(|o| q.pq.get(*o).is_some_and(|e| e.state() == EntryState::Ready))
            .collect();
        if !ready.is_empty() {
            self.dispatch(r.key, &ready);
        }
    }

    /// Batches past `consumeTimeout` are sent back (Java's `cleanExpireMsg`, but on time rather
    /// than on a 15-minute sweep); their late results are ignored.
    pub(super) fn scan_consume_timeouts(&mut self) {
        while let Some(&(deadline, id)) = self.timeouts.front() {
            let live = self.batches.get(&id).is_some_and(|b| !b.timed_out);
            if !live {
                self.timeouts.pop_front();
                continue;
            }
            if deadline > self.now {
                self.timers.set(Timer::ConsumeTimeoutScan, deadline);
                return;
            }
            self.timeouts.pop_front();
            let Some(b) = self.batches.get_mut(&id) else { continue };
            b.timed_out = true;
            // POP: nothing to send back; unanswered, the message comes back after its invisible time.
            let popped = b.pop.is_some();
            let (key, offsets) = (b.key, b.offsets.clone());
            self.stats.consume_timeouts += 1;
            let Some(q) = self.queues.get(key) else { continue };
            let queue = (*q.user_mq).clone();
            self.emit(Event::ConsumeTimeout { batch: id, queue });
            if self.cfg.message_model == MessageModel::Clustering && !popped {
                for o in offsets {
                    self.send_back(key, o, TIMEOUT_DELAY_LEVEL);
                }
            }
        }
    }

    /// CONSUME_MESSAGE_DIRECTLY: run user code on one message; offsets are not touched.
    pub(super) fn dispatch_direct(&mut self, peer: PeerAddr, request: &RemotingCommand, batch: Batch) {
        let id = self.next_batch_id();
        self.direct.insert(
            id,
            DirectReply {
                peer,
                opaque: request.opaque,
                serialize_type: request.serialize_type,
                started: self.now,
            },
        );
        self.outputs.push_back(Output::Consume(Batch { id, ..batch }));
    }

    fn reply_direct(&mut self, d: DirectReply, result: ConsumeResult) {
        let consume_result = match result.status {
            ConsumeStatus::Success => CMResult::Success,
            ConsumeStatus::ReconsumeLater | ConsumeStatus::SuspendCurrentQueueAMoment => CMResult::Later,
        };
        let body = ConsumeMessageDirectlyResult {
            order: self.cfg.consume_mode == ConsumeMode::Orderly,
            auto_commit: true,
            consume_result,
            remark: None,
            spent_time_mills: (self.now - d.started).as_millis() as i64,
        };
        let mut reply = RemotingCommand::raw_request(ResponseCode::Success as i32).with_body(body.encode());
        reply.flag = crate::protocol::FLAG_RESPONSE;
        reply.opaque = d.opaque;
        reply.serialize_type = d.serialize_type;
        self.transmit_oneway(d.peer, Request::Reply(reply));
    }
}
