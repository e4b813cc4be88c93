//! Consumption: batches out to user code, results back, and what failures become — send-back,
//! the retry-topic fallback, a local retry — plus the consume timeout and direct consumption.

use std::time::Instant;

use bytes::Bytes;
use smallvec::SmallVec;

use super::Consumer;
use super::in_flight::{InFlight, MAX_UNITS, unit_in};
use super::lifecycle::RunState;
use super::requests::{Failure, PendingKind};
use crate::config::ConsumeMode;
use crate::error::UsageError;
use crate::event::{
    Batch, BatchId, BatchKind, ConsumeResult, ConsumeStatus, Event, Messages, Output, PeerAddr, Request, Run,
};
use crate::message::{Message, keys};
use crate::process_queue::EntryState;
use crate::producer::{CLIENT_INNER_PRODUCER_GROUP, retry_topic, send_message_parts};
use crate::protocol::body::{CMResult, ConsumeMessageDirectlyResult, JsonBody, MessageModel};
use crate::protocol::header::ConsumerSendMsgBackRequestHeader;
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use crate::timer::{QueueKey, Timer};

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

impl Consumer {
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

    /// Hand out one run from the front of `offsets`: consecutive entries of one pull's chunk
    /// (it shares the chunk, no copies), in batches (units) of `consumeMessageBatchMaxSize`, at
    /// most [`MAX_UNITS`] of them; orderly, one batch. Returns the run (None if the first
    /// offset is not held) and how many offsets it used.
    pub(super) fn dispatch_run(&mut self, key: QueueKey, offsets: &[i64]) -> (Option<BatchId>, usize) {
        let size = self.cfg.consume_message_batch_max_size.max(1);
        let orderly = self.cfg.consume_mode == ConsumeMode::Orderly;
        let most = if orderly { size } else { size.saturating_mul(MAX_UNITS) };
        let wall = self.wall_ms();
        let Some(q) = self.queues.get_mut(key) else { return (None, 0) };
        q.last_consume_ms = wall;
        let Some(mut first) = offsets.first().and_then(|o| q.pq.get_mut(*o)) else { return (None, 1) };
        first.set_state(EntryState::InFlight);
        let (chunk, chunk_id, start) = (first.chunk().clone(), first.chunk_id(), first.index());
        let mut run: SmallVec<[i64; 4]> = SmallVec::new();
        run.push(offsets[0]);
        while run.len() < most && run.len() < offsets.len() {
            match q.pq.get_mut(offsets[run.len()]) {
                Some(mut e) if e.chunk_id() == chunk_id && e.index() == start + run.len() => {
                    e.set_state(EntryState::InFlight);
                    run.push(offsets[run.len()]);
                }
                _ => break,
            }
        }
        let used = run.len();
        let units = used.div_ceil(size);
        let queue = q.user_mq.clone();
        let id = self.next_batch_id();
        // Orderly batches are out at once, with no listener slot.
        self.batches.insert(id, InFlight::run(key, run, size, orderly, self.now_ms));
        if self.starts_reported && !orderly && units > 1 {
            // The adapter queues batches itself: the whole run at once.
            let messages = Messages::new(chunk, start, start + used);
            let unit = u32::try_from(size).unwrap_or(u32::MAX);
            self.outputs.push_back(Output::ConsumeRun(Run { first: id, queue, messages, unit }));
            return (Some(id), used);
        }
        for u in 0..units {
            let from = start + u * size;
            let messages = Messages::new(chunk.clone(), from, (from + size).min(start + used));
            let kind = if orderly { BatchKind::Orderly } else { BatchKind::Concurrent };
            let batch = Batch { id: id.unit(u), queue: queue.clone(), messages, kind };
            if orderly || self.starts_reported {
                // Orderly: one batch per queue at most, and no consume timeout (as in Java).
                // Reported starts: the adapter queues it (see `hand_out`).
                self.outputs.push_back(Output::Consume(batch));
            } else if self.running < self.cfg.consume_thread_min {
                // A listener slot is free: it starts now.
                if let Some(b) = self.batches.get_mut(&id) {
                    b.started |= 1 << u;
                }
                self.run_batch(batch);
            } else {
                self.waiting.push_back(batch);
            }
        }
        (Some(id), used)
    }

    pub(super) fn on_consumed(&mut self, id: BatchId, result: ConsumeResult) -> Result<(), UsageError> {
        if !self.direct.is_empty() {
            if let Some(d) = self.direct.remove(&id) {
                self.reply_direct(d, result);
                return Ok(());
            }
        }
        // Never dispatched, or answered already.
        let (starts_reported, orderly) =
            (self.starts_reported, self.cfg.consume_mode == ConsumeMode::Orderly);
        let Some((b, u)) = unit_in(&mut self.batches, id) else { return Err(UsageError::UnknownBatch(id)) };
        // A batch still waiting for a slot was never handed out (where starts are reported, a
        // result may come without its start: it is as good).
        if !(b.is_started(u) || starts_reported) {
            return Err(UsageError::UnknownBatch(id));
        }
        let (started, timed_out, key, since_ms) = (b.is_started(u), b.is_timed_out(u), b.key, b.since(u));
        if b.pop.is_some() || orderly {
            // One unit: the entry goes.
            let Some(mut b) = self.batches.remove(&id) else { return Err(UsageError::UnknownBatch(id)) };
            if let Some(pop) = b.pop.take() {
                if pop.order.is_some() {
                    self.on_pop_order_consumed(id, &b, *pop, &result);
                    return Ok(());
                }
                if started {
                    self.trim_timeouts(id);
                    self.slot_freed();
                }
                self.on_pop_consumed(&b, *pop, &result);
                return Ok(());
            }
            self.on_orderly_result(id, b, result);
            return Ok(());
        }
        let len = b.unit_len as usize;
        let from = (u * len).min(b.offsets.len());
        let to = (from + len).min(b.offsets.len());
        b.done |= 1 << u;
        let (run, _) = id.split();
        let gone = if b.all_done() { self.batches.remove(&run) } else { None };
        if started {
            self.trim_timeouts(id);
            self.slot_freed();
        }
        if timed_out || self.queues.get(key).is_none() {
            // Timed out (already sent back) or the queue was released or moved: discard.
            return Ok(());
        }
        let n = to - from;
        let ok = succeeded(&result, n);
        self.stats.consumed_ok += ok as u64;
        self.stats.consumed_failed += (n - ok) as u64;
        self.count_done(key, started, since_ms, n, ok);
        // The unit's offsets, where the run's entry is (gone with its last unit, or still held).
        let offsets = match gone.as_ref().or_else(|| self.batches.get(&run)) {
            Some(e) => &e.offsets[from..to],
            None => &[][..],
        };
        let Some(q) = self.queues.get_mut(key) else { return Ok(()) };
        for o in &offsets[..ok] {
            q.pq.remove(*o);
        }
        if ok < n {
            let failed: SmallVec<[i64; 4]> = offsets[ok..].iter().copied().collect();
            if self.cfg.message_model == MessageModel::Broadcasting {
                // Java drops broadcasting failures (there is no per-client retry topic).
                for o in &failed {
                    q.pq.remove(*o);
                }
                let queue = (*q.user_mq).clone();
                self.emit(Event::FailedMessagesDropped { queue, count: failed.len() });
            } else {
                for o in failed {
                    self.send_back(key, o, result.delay_level);
                }
            }
        }
        self.update_commit(key);
        Ok(())
    }

    /// `id` and the results after it, while they are units of the same run that succeeded in
    /// full (the adapter answers a pass's calls together, a run's mostly in order): all
    /// finished at once, as [`on_consumed`](Self::on_consumed) would one by one, with one
    /// look-up and one commit update. Only where the adapter reports starts: no batch waits here
    /// for a slot, so a started unit's end only frees its slot. False (nothing taken) when `id`
    /// is not such a unit; the caller goes the general way.
    pub(super) fn consumed_together<I>(
        &mut self,
        id: BatchId,
        result: &ConsumeResult,
        rest: &mut std::iter::Peekable<I>,
    ) -> bool
    where
        I: Iterator<Item = (BatchId, ConsumeResult)>,
    {
        // Orderly batches are runs of one: no look-up for them (POP ones are told below).
        if !self.starts_reported || self.cfg.consume_mode == ConsumeMode::Orderly {
            return false;
        }
        let (run, _) = id.split();
        let Some(b) = self.batches.get_mut(&run) else { return false };
        let Some(q) = self.queues.get_mut(b.key) else { return false };
        if b.pop.is_some() || b.units() == 1 {
            return false;
        }
        // Unit `u` of this run, out, in time, and every message of it a success.
        let in_full = |b: &InFlight, id: BatchId, result: &ConsumeResult| {
            let (r, u) = id.split();
            r == run && u < b.units() && (b.done | b.timed_out) & (1 << u) == 0 && {
                let n = b.unit_offsets(u).len();
                succeeded(result, n) == n
            }
        };
        if !in_full(b, id, result) {
            return false;
        }
        let (mut units, mut messages, mut freed, mut rt) = (0u64, 0usize, 0usize, 0u64);
        let mut next = Some(id);
        while let Some(id) = next {
            let u = id.split().1;
            b.done |= 1 << u;
            if b.is_started(u) {
                // Its slot frees; its time counts (see `count_done`: one answered without a
                // start took none).
                freed += 1;
                rt += self.now_ms.wrapping_sub(b.since(u)) as u64;
            }
            let offsets = b.unit_offsets(u);
            for o in offsets {
                q.pq.remove(*o);
            }
            units += 1;
            messages += offsets.len();
            next = rest.next_if(|(id, result)| in_full(b, *id, result)).map(|(id, _)| id);
        }
        let (key, slot) = (b.key, q.stats_slot);
        if b.all_done() {
            self.batches.remove(&run);
        }
        if freed > 0 {
            self.running = self.running.saturating_sub(freed);
            self.trim_timeouts(id);
        }
        self.stats.consumed_ok += messages as u64;
        if let Some(w) = self.windows.at(slot) {
            w.consume_rt.add(rt, units);
            w.consume_ok.add(messages as u64, units);
            w.consume_failed.add(0, units);
        }
        self.update_commit(key);
        true
    }

    /// Java's CONSUME_RT, CONSUME_OK_TPS and CONSUME_FAILED_TPS for a finished batch of one
    /// unit, `ok` of its messages consumed.
    pub(super) fn count_consumed(&mut self, b: &InFlight, ok: usize) {
        self.count_done(b.key, b.is_started(0), b.since(0), b.offsets.len(), ok);
    }

    /// The same for a finished unit of `n` messages of `key`, started (or not) at `since_ms`.
    fn count_done(&mut self, key: QueueKey, started: bool, since_ms: u32, n: usize, ok: usize) {
        let Some(slot) = self.queues.get(key).map(|q| q.stats_slot) else { return };
        // Where starts are reported, a batch answered without one answered at once: its wait in
        // the adapter's queue is not consumption time.
        let at_once = self.starts_reported && !started;
        let rt = if at_once { 0 } else { self.now_ms.wrapping_sub(since_ms) as u64 };
        let failed = n.saturating_sub(ok);
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
