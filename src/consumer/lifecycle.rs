//! Start, commands, and graceful shutdown.
//!
//! Shutdown: stop pulling and rebalancing; wait for in-flight batches and send-backs (up to
//! `awaitTerminationMillisWhenShutdown`); persist every offset and wait for the answers;
//! unregister from every broker and wait; then [`Event::Terminated`]. Every wait is bounded by
//! request timeouts, and the whole by [`shutdown_limit`](Consumer::shutdown_limit) from the
//! command, whatever peers send meanwhile: shutdown always ends.

use super::Consumer;
use super::offsets::Persist;
use super::queues::Phase;
use super::requests::{Failure, PendingKind};
use crate::error::UsageError;
use crate::event::{Command, Event, PeerAddr, QueueSelector, Request};
use crate::producer::retry_topic;
use crate::protocol::ExpressionType;
use crate::protocol::RemotingCommand;
use crate::protocol::body::{MessageModel, SubscriptionData};
use crate::protocol::header::UnregisterClientRequestHeader;
use crate::timer::Timer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RunState {
    Running,
    /// Waiting for in-flight batches and send-backs.
    Draining,
    /// Waiting for the final offset updates.
    Persisting,
    /// Waiting for UNREGISTER_CLIENT answers.
    Unregistering,
    Terminated,
}

impl Consumer {
    pub(super) fn start(&mut self) {
        let version = self.cfg.start_wall_ms;
        for s in self.cfg.subscriptions.clone() {
            let topic = self.ns.wrap(&s.topic);
            let data = SubscriptionData::build(&topic, &s.expression, s.expression_type, version);
            self.subs.insert(topic, data);
        }
        if self.cfg.message_model == MessageModel::Clustering {
            let retry = retry_topic(&self.group);
            self.subs
                .insert(retry.clone(), SubscriptionData::build(&retry, "*", ExpressionType::Tag, version));
        }
        self.rebuild_heartbeat();
        self.timers.set(Timer::RouteRefresh, self.now);
        self.timers.set(Timer::Heartbeat, self.now + self.cfg.heartbeat_broker_interval);
        self.timers.set(Timer::Rebalance, self.now + self.cfg.rebalance_interval);
        self.timers.set(Timer::PersistOffsets, self.now + self.cfg.persist_consumer_offset_interval);
        self.timers.set(Timer::StatsSample, self.now + crate::stats::SAMPLE_EVERY);
        if self.uses_locks() {
            self.timers.set(Timer::LockRenew, self.now + self.cfg.lock_interval);
        }
    }

    pub(super) fn on_command(&mut self, cmd: Command) -> Result<(), UsageError> {
        match cmd {
            Command::Shutdown => {
                self.begin_shutdown();
                Ok(())
            }
            _ if self.state != RunState::Running => {
                Err(UsageError::InvalidCommand("the consumer is shutting down"))
            }
            Command::Suspend => {
                self.paused = true;
                Ok(())
            }
            Command::Resume => {
                self.paused = false;
                for key in self.queues.all_keys() {
                    self.try_pull(key);
                }
                self.request_rebalance();
                Ok(())
            }
            Command::PauseQueues(selector) => {
                let topic = match &selector {
                    QueueSelector::Topic(t) => t.as_str(),
                    QueueSelector::Queue(q) => &*q.topic,
                };
                if !self.subs.contains_key(&self.ns.wrap(topic)) {
                    return Err(UsageError::InvalidCommand("not subscribed to that topic"));
                }
                if !self.paused_queues.contains(&selector) {
                    self.paused_queues.push(selector.clone());
                }
                self.emit(Event::QueuesPaused { selector });
                Ok(())
            }
            Command::ResumeQueues(selector) => {
                let before = self.paused_queues.len();
                self.paused_queues.retain(|s| *s != selector);
                self.emit(Event::QueuesResumed { selector });
                if self.paused_queues.len() < before && !self.paused {
                    for key in self.queues.all_keys() {
                        self.try_pull(key);
                    }
                }
                Ok(())
            }
            Command::Seek { queues, to } => self.on_seek(queues, to),
            Command::Subscribe { topic, expression } => {
                if topic.is_empty()
                    || !topic.bytes().all(|b| b.is_ascii_alphanumeric() || b"%|_-".contains(&b))
                {
                    return Err(UsageError::InvalidCommand(
                        "topic must be 1..=127 characters of [%|a-zA-Z0-9_-]",
                    ));
                }
                let wire = self.ns.wrap(&topic);
                self.add_subscription(&wire, &expression);
                Ok(())
            }
            Command::Unsubscribe { topic } => {
                let wire = self.ns.wrap(&topic);
                if !self.drop_subscription(&wire) {
                    return Err(UsageError::InvalidCommand("not subscribed to that topic"));
                }
                // And what POP added for it: its pop retry topic, its POP queues.
                self.drop_subscription(&super::pop::pop_retry_topic(&self.group, &wire));
                self.pop_queues.retain(|q| *q.topic != *wire);
                Ok(())
            }
        }
    }

    /// Subscribe `wire` (a topic's wire name) to `expression` (TAG) from now on.
    pub(super) fn add_subscription(&mut self, wire: &str, expression: &str) {
        // A newer subscription version than any the brokers have seen: pulls must wait
        // for a heartbeat carrying it (SUBSCRIPTION_NOT_LATEST otherwise).
        let version = self.subs.get(wire).map_or(0, |s| s.sub_version + 1).max(self.wall_ms());
        self.subs
            .insert(wire.to_owned(), SubscriptionData::build(wire, expression, ExpressionType::Tag, version));
        self.subscriptions_changed();
        self.query_route(wire);
    }

    /// Stop consuming `wire`: its queues are released (offsets persisted first). False if it
    /// was not subscribed.
    pub(super) fn drop_subscription(&mut self, wire: &str) -> bool {
        if self.subs.remove(wire).is_none() {
            return false;
        }
        let revoked: Vec<_> = self
            .queues
            .keys_of_topic(wire)
            .into_iter()
            .filter_map(|k| {
                let q = self
                    .queues
                    .get(k)
                    .filter(|q| q.phase != Phase::Releasing)
                    .map(|q| (*q.user_mq).clone())?;
                self.revoke_queue(k);
                Some(q)
            })
            .collect();
        if !revoked.is_empty() {
            self.emit(Event::QueuesRevoked { topic: self.ns.unwrap(wire).to_owned(), queues: revoked });
        }
        self.routes.remove(wire);
        self.subscriptions_changed();
        true
    }

    /// Brokers must hear the new subscriptions before the next pull: re-register everywhere.
    fn subscriptions_changed(&mut self) {
        self.rebuild_heartbeat();
        let peers: Vec<PeerAddr> = self.peers.keys().cloned().collect();
        for p in &peers {
            self.mark_unregistered(p);
        }
        self.heartbeat_all();
        self.request_rebalance();
    }

    fn begin_shutdown(&mut self) {
        if self.state != RunState::Running {
            return;
        }
        self.state = RunState::Draining;
        // Nothing new starts: no pulls, no rebalance, no route refresh, no local retries.
        self.timers.retain(|t| {
            matches!(
                t,
                Timer::Request(_)
                    | Timer::ShutdownLimit
                    | Timer::Heartbeat
                    | Timer::PersistOffsets
                    | Timer::ConsumeTimeoutScan
                    | Timer::LockRenew
                    | Timer::PopOrderRenew
            )
        });
        self.local_retries.clear();
        self.drop_waiting_batches();
        self.drop_pop_order(None);
        self.timers.set(Timer::ShutdownDeadline, self.now + self.cfg.await_termination_when_shutdown);
        self.timers.set(Timer::ShutdownLimit, self.now + self.shutdown_limit());
    }

    /// The longest a shutdown takes from the command to [`Event::Terminated`]:
    /// `awaitTerminationMillisWhenShutdown` for running batches, then one offset-update timeout
    /// and one request timeout for the final commits and unregistering. (Where a topic's first
    /// update on a broker must answer before the others go and it times out, the others get
    /// what is left of that.)
    pub fn shutdown_limit(&self) -> std::time::Duration {
        self.cfg.await_termination_when_shutdown
            + self.cfg.offset_rpc_timeout
            + self.cfg.mq_client_api_timeout
    }

    /// The shutdown limit passed: end now. Offsets not confirmed by then are the ones a
    /// restart may consume again (never any that were not finished).
    pub(super) fn on_shutdown_limit(&mut self) {
        if self.state != RunState::Terminated {
            self.terminate();
        }
    }

    pub(super) fn on_shutdown_deadline(&mut self) {
        if self.state == RunState::Draining {
            // What the adapter has not started by now never runs.
            self.withdraw_unstarted(None);
            self.begin_persist();
        }
    }

    /// Move shutdown on when what it waits for is done.
    pub(super) fn check_shutdown(&mut self) {
        loop {
            match self.state {
                RunState::Draining => {
                    let busy = self.batches.values().any(super::in_flight::InFlight::any_live)
                        || !self.send_backs.is_empty()
                        || self.pop_requests_out > 0
                        || !self.pop_acks.is_empty();
                    if busy {
                        return;
                    }
                    if let Some(at) = self.pull_commits_settle_at() {
                        self.timers.set(Timer::PullCommitsSettled, at);
                        return;
                    }
                    self.begin_persist();
                }
                RunState::Persisting if self.shutdown_outstanding == 0 => self.begin_unregister(),
                RunState::Unregistering if self.shutdown_outstanding == 0 => self.terminate(),
                _ => return,
            }
        }
    }

    /// When the last pull that carries a commit, sent shortly before the shutdown and not yet
    /// answered, has surely been processed (`None`: none is left). The final updates go after
    /// it, so that the broker cannot apply its older commit last.
    fn pull_commits_settle_at(&self) -> Option<std::time::Instant> {
        self.queues
            .all_keys()
            .into_iter()
            .filter_map(|k| self.queues.get(k)?.pull_commit_sent)
            .map(|sent| sent + super::queues::PULL_SETTLE)
            .filter(|at| *at > self.now)
            .max()
    }

    fn begin_persist(&mut self) {
        self.state = RunState::Persisting;
        self.timers.stop(Timer::ShutdownDeadline);
        self.shutdown_outstanding = 0;
        self.recheck_new_maps();
        for key in self.queues.all_keys() {
            self.update_commit(key);
            if self.persist_queue(key, Persist::Shutdown) {
                self.shutdown_outstanding += 1;
            }
        }
        self.flush_local_offsets();
    }

    fn begin_unregister(&mut self) {
        self.state = RunState::Unregistering;
        self.shutdown_outstanding = 0;
        // The final offsets landed: give the locks back first, so the next owner need not wait
        // for them to expire.
        self.unlock_all();
        let registered: Vec<PeerAddr> =
            self.peers.iter().filter(|(_, p)| p.registered).map(|(a, _)| a.clone()).collect();
        self.shutdown_outstanding += registered.len();
        for peer in registered {
            let header = UnregisterClientRequestHeader {
                client_id: self.cfg.client_id.as_str().to_owned(),
                producer_group: None,
                consumer_group: Some(self.group.clone()),
            };
            let timeout = self.cfg.mq_client_api_timeout;
            self.transmit(peer, Request::UnregisterClient(header), PendingKind::Unregister, timeout);
        }
    }

    pub(super) fn on_unregistered(&mut self, peer: &PeerAddr, _result: Result<RemotingCommand, Failure>) {
        self.mark_unregistered(peer);
        self.shutdown_outstanding = self.shutdown_outstanding.saturating_sub(1);
    }

    fn terminate(&mut self) {
        self.state = RunState::Terminated;
        self.timers.retain(|_| false);
        self.pending.clear();
        // Results that came after the shutdown deadline: their messages come back after the
        // invisible time; nothing is sent after Terminated.
        self.stats.pop_request_failures += self.pop_acks.len() as u64;
        self.pop_acks.clear();
        self.emit(Event::Terminated);
    }
}
