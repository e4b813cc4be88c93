//! The pull loop of one queue: flow control, the request, and every pull status.

use std::time::Duration;

use super::Consumer;
use super::lifecycle::RunState;
use super::queues::Phase;
use super::requests::{Failure, PendingKind};

use crate::config::ConsumeMode;
use crate::event::{Event, PeerAddr, Request};
use crate::message::{DecodeBudget, decode_messages_within, keys};
use crate::process_queue::EntryState;
use crate::protocol::body::MessageModel;
use crate::protocol::header::{PullMessageRequestHeader, PullMessageResponseHeader};
use crate::protocol::{Code, PullSysFlag, RemotingCommand, ResponseCode};
use crate::timer::{QueueKey, Timer};

/// `PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL`: after a FLOW_CONTROL answer.
const BROKER_FLOW_CONTROL_DELAY: Duration = Duration::from_millis(20);

impl Consumer {
    /// A pull refused for want of permission: the topic is reported once (until a pull of it
    /// is served again).
    /// `topic` (wire name) refused for want of permission: reported once until it is served.
    pub(super) fn topic_refused_by_name(&mut self, topic: &str, peer: &PeerAddr, cmd: &RemotingCommand) {
        if self.refused_topics.insert(topic.to_owned()) {
            let topic = self.ns.unwrap(topic).to_owned();
            let remark = cmd.remark_str().to_owned();
            let code = Code::from_i32(cmd.code);
            self.emit(Event::TopicRefused { topic, peer: peer.clone(), code, remark });
        }
    }

    pub(super) fn retry_pull_later(&mut self, key: QueueKey, delay: Duration) {
        if self.queues.get(key).is_some() {
            self.timers.set(Timer::Pull(key), self.now + delay);
        }
    }

    /// The per-queue count threshold: `pullThresholdForQueue`, or the topic threshold spread over
    /// the queues held when that is set (Java divides by all queues held, as here).
    fn count_threshold(&self) -> usize {
        match self.cfg.pull_threshold_for_topic {
            Some(t) => (t / self.queues.len().max(1)).max(1),
            None => self.cfg.pull_threshold_for_queue,
        }
    }

    fn size_threshold(&self) -> usize {
        match self.cfg.pull_threshold_size_for_topic_mib {
            Some(t) => ((t << 20) / self.queues.len().max(1)).max(1 << 20),
            None => self.cfg.pull_threshold_size_for_queue_bytes(),
        }
    }

    /// Pull `key` now if it may: one pull in flight per queue, flow control, pause, shutdown.
    pub(super) fn try_pull(&mut self, key: QueueKey) {
        if self.state != RunState::Running || self.paused {
            return;
        }
        let (count_limit, size_limit) = (self.count_threshold(), self.size_threshold());
        let Some(q) = self.queues.get(key) else { return };
        if q.phase == Phase::Popping {
            return self.try_pop(key);
        }
        if q.phase != Phase::Pulling || q.pull_in_flight || self.queue_paused(key) {
            return;
        }
        self.timers.stop(Timer::Pull(key));
        // Flow control (B.5 steps 5–7). The span is the highest pulled offset minus the lowest
        // unfinished one, so one stuck message stops the queue once it pins 2000 offsets.
        let over = q.pq.count() > count_limit
            || q.pq.bytes() > size_limit
            || (self.cfg.consume_mode == ConsumeMode::Concurrently
                && q.pq.span() > self.cfg.consume_concurrently_max_span);
        if over {
            self.stats.flow_control_delays += 1;
            self.timers.set(Timer::Pull(key), self.now + self.cfg.pull_time_delay_when_flow_control);
            return;
        }
        let Some(peer) = self.broker_addr(&q.mq.broker_name, q.suggest_broker_id) else {
            // No route to the queue's broker (yet): try again later.
            self.retry_pull_later(key, self.cfg.pull_time_delay_when_exception);
            return;
        };
        if self.park_pull_until_registered(&peer, key) {
            return;
        }
        let header = self.pull_header(key, &peer);
        let wall = self.wall_ms();
        let now = self.now;
        let Some(q) = self.queues.get_mut(key) else { return };
        q.pull_in_flight = true;
        q.pull_commit_sent = PullSysFlag(header.sys_flag).has(PullSysFlag::COMMIT_OFFSET).then_some(now);
        q.last_pull_ms = wall;
        let timeout = self.cfg.consumer_timeout_when_suspend;
        self.transmit(peer, Request::PullMessage(header), PendingKind::Pull { key }, timeout);
    }

    /// True if the application paused this queue (`Command::PauseQueues`).
    pub(super) fn queue_paused(&self, key: QueueKey) -> bool {
        !self.paused_queues.is_empty()
            && self.queues.get(key).is_some_and(|q| self.paused_queues.iter().any(|s| s.matches(&q.user_mq)))
    }

    fn pull_header(&self, key: QueueKey, peer: &PeerAddr) -> PullMessageRequestHeader {
        // Callers checked the key.
        let q = self.queues.get(key).expect("live queue");
        let sub = self.subs.get(&*q.mq.topic);
        let clustering = self.cfg.message_model == MessageModel::Clustering;
        // Piggy-back the commit on the pull, but never to a slave (slaves must not store offsets).
        let to_master = self.master_addr(&q.mq.broker_name).as_ref() == Some(peer);
        // With locks, only once everything pulled is consumed: the broker may apply a pull's
        // commit after an update sent later (separate pools), and a release's final update must
        // not be undone by an older commit, or the next owner replays. A caught-up queue's commit
        // cannot go stale while its pull is out: only that pull's answer brings new messages.
        // And never before an update of the topic landed on that broker (see offsets.rs).
        let settled = !self.uses_locks() || q.offset.value() == q.next_offset;
        let commit =
            clustering && to_master && q.offset.value() > 0 && settled && self.offset_map_exists(&q.mq);
        let with_sub = self.cfg.post_subscription_when_pull;
        PullMessageRequestHeader {
            consumer_group: self.group.clone(),
            topic: q.mq.topic.to_string(),
            queue_id: q.mq.queue_id,
            queue_offset: q.next_offset,
            max_msg_nums: self.cfg.pull_batch_size,
            sys_flag: PullSysFlag::build(commit, true, with_sub).0,
            commit_offset: if commit { q.offset.value() } else { 0 },
            suspend_timeout_millis: self.cfg.broker_suspend_max_time.as_millis() as i64,
            subscription: if with_sub { sub.map(|s| s.sub_string.clone()) } else { None },
            sub_version: sub.map_or(0, |s| s.sub_version),
            expression_type: sub.map(|s| s.expression_type),
            max_msg_bytes: Some(self.cfg.pull_batch_size_in_bytes),
            bname: Some(q.mq.broker_name.to_string()),
        }
    }

    pub(super) fn on_pull(
        &mut self,
        key: QueueKey,
        peer: &PeerAddr,
        result: Result<RemotingCommand, Failure>,
    ) {
        let paused = self.queue_paused(key);
        let Some(q) = self.queues.get_mut(key) else { return };
        q.pull_in_flight = false;
        q.pull_commit_sent = None;
        if paused {
            // Paused while this pull was out: set the answer aside, so nothing pulled after the
            // pause reaches a listener. `next_offset` has not moved: resuming pulls
            // the same messages again.
            return;
        }
        // An orderly queue that lost its lock or is being released: the answer is not used.
        if self.state != RunState::Running || q.phase != Phase::Pulling {
            // Shutting down: what this pull found is not consumed and its offset not moved.
            return;
        }
        // Timeouts, lost connections, GO_AWAY: already reported; back off and retry.
        let Ok(cmd) = result else {
            self.stats.pull_errors += 1;
            return self.retry_pull_later(key, self.cfg.pull_time_delay_when_exception);
        };
        let status = ResponseCode::from_i32(cmd.code);
        let header = match status {
            Some(
                ResponseCode::Success
                | ResponseCode::PullNotFound
                | ResponseCode::PullRetryImmediately
                | ResponseCode::PullOffsetMoved,
            ) => match cmd.header::<PullMessageResponseHeader>() {
                Ok(h) => Some(h),
                Err(e) => {
                    self.emit_malformed(peer.clone(), crate::RequestCode::PullMessage, e);
                    None
                }
            },
            _ => None,
        };
        let Some(h) = header else {
            self.stats.pull_errors += 1;
            if super::requests::is_permission_refusal(&cmd) {
                // A refusal naming the topic is about the topic (no SUB right, not readable);
                // one that does not is about us (credentials) and reported as such, once.
                match self.queues.get(key).map(|q| q.mq.topic.to_string()) {
                    Some(t) if super::routes::names_topic(cmd.remark_str(), &t) => {
                        self.topic_refused_by_name(&t, peer, &cmd)
                    }
                    _ => self.report_refusal(peer, crate::RequestCode::PullMessage, &cmd),
                }
                return self.retry_pull_later(key, PERMISSION_RETRY);
            }
            let delay = match status {
                Some(ResponseCode::FlowControl) => BROKER_FLOW_CONTROL_DELAY,
                Some(
                    ResponseCode::Success
                    | ResponseCode::PullNotFound
                    | ResponseCode::PullRetryImmediately
                    | ResponseCode::PullOffsetMoved,
                ) => self.cfg.pull_time_delay_when_exception,
                other => {
                    if matches!(
                        other,
                        Some(
                            ResponseCode::SubscriptionNotExist
                                | ResponseCode::SubscriptionNotLatest
                                | ResponseCode::SubscriptionGroupNotExist
                        )
                    ) {
                        // The broker does not know our subscription: heartbeat before the next pull.
                        self.mark_unregistered(peer);
                    }
                    self.emit_broker_error(peer.clone(), crate::RequestCode::PullMessage, &cmd);
                    self.cfg.pull_time_delay_when_exception
                }
            };
            return self.retry_pull_later(key, delay);
        };
        if !self.refused_topics.is_empty() {
            if let Some(q) = self.queues.get(key) {
                self.refused_topics.remove(&*q.mq.topic);
            }
        }
        if let Some(q) = self.queues.get_mut(key) {
            // For lag: every pull answer carries it, so no request of its own is needed.
            q.broker_max_offset = h.max_offset;
            q.broker_min_offset = h.min_offset;
        }
        match status {
            Some(ResponseCode::Success) => self.on_found(key, &h, cmd),
            Some(ResponseCode::PullOffsetMoved) => self.on_offset_moved(key, h.next_begin_offset),
            // NO_NEW_MSG / NO_MATCHED_MSG: move on; an empty cache commits the skipped range.
            _ => {
                if let Some(q) = self.queues.get_mut(key) {
                    q.next_offset = h.next_begin_offset;
                    q.suggest_broker_id = h.suggest_which_broker_id;
                }
                self.update_commit(key);
                self.try_pull(key);
            }
        }
    }

    fn on_found(&mut self, key: QueueKey, h: &PullMessageResponseHeader, cmd: RemotingCommand) {
        let (count_limit, size_limit) = (self.count_threshold(), self.size_threshold());
        let Some(q) = self.queues.get(key) else { return };
        // What this pull may add to the queue's cache: a hostile or broken broker cannot make it
        // hold more than the thresholds allow (plus one record).
        let budget = DecodeBudget {
            messages: count_limit.saturating_sub(q.pq.count()),
            bytes: size_limit.saturating_sub(q.pq.bytes()),
        };
        let requested = q.next_offset;
        let decoded = match decode_messages_within(&cmd.body, &self.cfg.decode, budget) {
            Ok(d) => d,
            Err(e) => {
                // Never skip what cannot be read: report, keep the offset, try again.
                let queue = self.queues.get(key).map(|q| (*q.user_mq).clone());
                if let Some(queue) = queue {
                    self.emit(Event::CorruptPull { queue, error: e });
                }
                self.stats.pull_errors += 1;
                return self.retry_pull_later(key, self.cfg.pull_time_delay_when_exception);
            }
        };
        let delta = h.offset_delta.unwrap_or(0);
        let mut msgs = decoded.messages;
        for m in msgs.iter_mut() {
            m.queue_offset = m.queue_offset.saturating_add(delta);
        }
        // Only offsets that can be in this answer: from what was asked for up to the broker's
        // max. Anything else (a corrupt or forged record) is dropped and reported; held, it would
        // pin the queue's watermark and span forever.
        let valid = requested..h.max_offset;
        let last_valid = msgs.iter().rev().map(|m| m.queue_offset).find(|o| valid.contains(o));
        let before = msgs.len();
        msgs.retain(|m| valid.contains(&m.queue_offset));
        if let Some(q) = self.queues.get(key).filter(|_| msgs.len() < before) {
            let (queue, count) = ((*q.user_mq).clone(), before - msgs.len());
            self.emit(Event::RecordsOutOfRange { queue, count, requested, max: h.max_offset });
        }
        // Where the next pull starts. Cut short by the budget: at the first record not decoded,
        // if its offset is plausible, else right after the last good one (never skipping what
        // was not seen). Otherwise where the broker says, if that is inside what it could mean.
        let plausible = |o: i64| (requested..=h.max_offset).contains(&o) && last_valid.is_none_or(|l| o > l);
        let after_last = last_valid.map_or(requested, |l| l + 1);
        let next = if decoded.truncated {
            decoded.resume_at.map(|o| o.saturating_add(delta)).filter(|o| plausible(*o)).unwrap_or(after_last)
        } else if (requested..=h.max_offset).contains(&h.next_begin_offset) {
            h.next_begin_offset
        } else {
            after_last
        };
        let Some(q) = self.queues.get(key) else { return };
        // Client-side re-filter (the broker filters by tag hash, which can collide); only a
        // subscription with tags needs it, and only then are properties parsed.
        let filter = self.subs.get(&*q.mq.topic).filter(|s| !s.tags_set.is_empty());
        let retry_topic = q.mq.topic.starts_with(crate::producer::RETRY_TOPIC_PREFIX);
        let orderly = self.cfg.consume_mode == ConsumeMode::Orderly;
        let state = if orderly { EntryState::Ready } else { EntryState::InFlight };
        let unwrap_ns = self.cfg.namespace.is_some();
        if let Some(s) = filter {
            msgs.retain(|m| s.matches_tag(m.tags()));
        }
        let mut fresh = Vec::with_capacity(msgs.len());
        // Pulled from a pop retry topic (left over from POP): shown under the subscribed topic.
        let pop_retry_of =
            if retry_topic { super::pop::topic_of_pop_retry(&self.group, &q.mq.topic) } else { None };
        for m in msgs.iter_mut() {
            // A retry message carries its original topic (resetRetryAndNamespace).
            if retry_topic {
                if let Some(original) = m.properties.get(keys::RETRY_TOPIC) {
                    m.topic = self.ns.unwrap(original).into();
                } else if let Some(t) = pop_retry_of {
                    m.topic = self.ns.unwrap(t).into();
                }
            } else if unwrap_ns {
                let plain = self.ns.unwrap(&m.topic);
                if plain.len() != m.topic.len() {
                    m.topic = plain.into();
                }
            }
        }
        let Some(q) = self.queues.get_mut(key) else { return };
        q.next_offset = next;
        q.suggest_broker_id = h.suggest_which_broker_id;
        let chunk = std::sync::Arc::new(msgs);
        q.pq.put_all(&chunk, state, |offset| fresh.push(offset));
        let (slot, sent_ms) = (q.stats_slot, q.last_pull_ms);
        self.update_commit(key);
        self.found_then_next(key, slot, sent_ms, fresh.len());
        if orderly {
            self.orderly_next(key);
        } else if !fresh.is_empty() {
            self.dispatch(key, &fresh);
        }
    }

    /// An answer (pull or pop) that found `n` new messages for `key`, sent at `sent_ms`: count
    /// it, then send the next request before the batches go out — its round trip to the broker
    /// then overlaps the handing out (Java's callback also asks again at once, but hands out on
    /// a thread).
    pub(super) fn found_then_next(&mut self, key: QueueKey, slot: usize, sent_ms: i64, n: usize) {
        self.stats.pulled += n as u64;
        // Java's PULL_RT and PULL_TPS: only answers that found messages count.
        let rt = (self.wall_ms() - sent_ms).max(0) as u64;
        if let Some(w) = self.windows.at(slot) {
            w.pull_rt.add(rt, 1);
            if n > 0 {
                w.pull_tps.add(n as u64, 1);
            }
        }
        // `try_pull` pops a POP queue.
        if self.cfg.pull_interval.is_zero() {
            self.try_pull(key);
        } else {
            self.retry_pull_later(key, self.cfg.pull_interval);
        }
    }

    /// PULL_OFFSET_MOVED: the broker says the queue continues at `to` (out of range, or an admin
    /// reset, which 5.x brokers deliver this way). Cached and in-flight work of the queue is
    /// dropped (its results are discarded), the new offset is committed, and pulling resumes.
    pub(super) fn on_offset_moved(&mut self, key: QueueKey, to: i64) {
        let Some(q) = self.queues.get(key) else { return };
        self.emit(Event::OffsetMoved { queue: (*q.user_mq).clone(), from: q.next_offset, to });
        self.move_queue(key, to);
    }

    /// Raise the committable offset to the watermark: everything below the lowest message still
    /// held is finished (in orderly mode the held ones include those not handed out yet).
    pub(super) fn update_commit(&mut self, key: QueueKey) {
        if let Some(q) = self.queues.get_mut(key) {
            if q.next_offset >= 0 {
                let w = q.pq.watermark(q.next_offset);
                q.offset.advance(w);
            }
        }
    }
}

/// How often a topic the broker refuses (no permission) is pulled again. Java retries every
/// `pullTimeDelayMillsWhenException` (3 s) and logs each refusal; an operator fixes a permission
/// in minutes, not seconds.
pub(super) const PERMISSION_RETRY: Duration = Duration::from_secs(30);
