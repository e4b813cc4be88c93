//! Routes from the name server, the broker address table, and heartbeats.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::Consumer;
use super::lifecycle::RunState;
use super::requests::{Failure, PendingKind};
use crate::event::{Event, PeerAddr, Request};
use crate::message::MessageQueue;
use crate::producer::{CLIENT_INNER_PRODUCER_GROUP, RETRY_TOPIC_PREFIX};
use crate::protocol::body::{
    ConsumeType, ConsumerData, HeartbeatData, JsonBody, ProducerData, TopicRouteData,
};
use crate::protocol::header::GetRouteInfoRequestHeader;
use crate::protocol::{RemotingCommand, ResponseCode};
use crate::timer::Timer;

/// A topic's route and the queues a consumer reads from it.
#[derive(Debug)]
pub(super) struct TopicRoute {
    pub(super) data: TopicRouteData,
    /// Readable queues, in Java's order.
    pub(super) queues: Vec<MessageQueue>,
}

const MAX_ROUTE_RETRY: Duration = Duration::from_secs(30);

/// Early route refreshes after a broker failure are at least this far apart.
const EARLY_ROUTE_REFRESH: Duration = Duration::from_secs(1);

impl Consumer {
    pub(super) fn name_server(&self) -> PeerAddr {
        self.name_servers[self.name_server_index % self.name_servers.len()].clone()
    }

    /// Ask for every subscribed topic's route (and re-arm the refresh).
    pub(super) fn refresh_routes(&mut self) {
        if !matches!(self.state, RunState::Running) {
            return;
        }
        let topics: Vec<String> = self.subs.keys().cloned().collect();
        for topic in topics {
            self.query_route(&topic);
        }
        // Topics with no route yet are asked for again soon, with back-off: a consumer started
        // before its topic existed should not wait 30 s (BROKER.md §5.1).
        let missing = self.subs.keys().any(|t| !self.routes.contains_key(t));
        let next = if missing {
            self.route_retry.min(self.cfg.poll_name_server_interval)
        } else {
            self.cfg.poll_name_server_interval
        };
        if missing {
            self.route_retry = (self.route_retry * 2).min(MAX_ROUTE_RETRY);
        }
        self.timers.set(Timer::RouteRefresh, self.now + next);
    }

    /// A broker node failed (refused a connect, closed or went silent): ask for routes soon
    /// instead of at the next 30 s refresh. The name server drops a dead broker within
    /// moments, so a master's queues move to its slave (and a vanished broker's queues are
    /// released) in about a second, not half a minute. At most one early refresh per
    /// [`EARLY_ROUTE_REFRESH`].
    pub(super) fn broker_failed(&mut self, peer: &PeerAddr) {
        let is_broker = self.brokers.values().any(|addrs| addrs.values().any(|a| a == peer));
        if !is_broker || self.state != RunState::Running {
            return;
        }
        if self.last_early_refresh.is_some_and(|t| self.now < t + EARLY_ROUTE_REFRESH) {
            return;
        }
        self.last_early_refresh = Some(self.now);
        self.timers.set_if_earlier(Timer::RouteRefresh, self.now);
    }

    pub(super) fn query_route(&mut self, topic: &str) {
        if self.route_queries.contains(topic) {
            return;
        }
        self.route_queries.insert(topic.to_owned());
        let header = GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: None };
        let ns = self.name_server();
        let timeout = self.cfg.mq_client_api_timeout;
        self.transmit(
            ns,
            Request::GetRouteInfo(header),
            PendingKind::Route { topic: topic.to_owned() },
            timeout,
        );
    }

    pub(super) fn on_route(
        &mut self,
        _peer: &PeerAddr,
        topic: &str,
        result: Result<RemotingCommand, Failure>,
    ) {
        self.route_queries.remove(topic);
        let cmd = match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => cmd,
            Ok(cmd) if cmd.code == ResponseCode::TopicNotExist as i32 => {
                // The retry topic appears with the first heartbeat; its absence is normal.
                if !topic.starts_with(RETRY_TOPIC_PREFIX) {
                    let user = self.ns.unwrap(topic).to_owned();
                    self.emit(Event::TopicNotFound { topic: user });
                }
                return;
            }
            Ok(cmd) => {
                let peer = self.name_server();
                self.emit_broker_error(peer, crate::RequestCode::GetRouteInfoByTopic, &cmd);
                self.name_server_index += 1;
                return;
            }
            Err(_) => {
                // Try the next name server next time.
                self.name_server_index += 1;
                return;
            }
        };
        let data = match TopicRouteData::decode(&cmd.body) {
            Ok(d) => d,
            Err(e) => {
                let peer = self.name_server();
                self.emit_malformed(peer, crate::RequestCode::GetRouteInfoByTopic, e);
                return;
            }
        };
        let queues = data.subscribe_queues(topic);
        let mut new_peers = Vec::new();
        for b in &data.broker_datas {
            let addrs: BTreeMap<i64, PeerAddr> =
                b.broker_addrs.iter().map(|(id, a)| (*id, PeerAddr::new(a.as_str()))).collect();
            for a in addrs.values() {
                if !self.peers.contains_key(a) {
                    new_peers.push(a.clone());
                }
            }
            self.brokers.insert(b.broker_name.clone(), addrs);
        }
        let changed = self.routes.get(topic).is_none_or(|r| r.queues != queues);
        self.routes.insert(topic.to_owned(), TopicRoute { data, queues });
        if self.subs.keys().all(|t| self.routes.contains_key(t)) {
            self.route_retry = Duration::from_secs(1);
        }
        // New brokers hear from us at once, so they list us when asked for the group's members.
        for peer in new_peers {
            self.ensure_heartbeat(&peer);
        }
        if changed {
            self.request_rebalance();
        }
    }

    /// The address to use for `broker_name`: the suggested node if known, else the master,
    /// else any node (Java's `findBrokerAddressInSubscribe` / `InPublish`).
    pub(super) fn broker_addr(&self, broker_name: &str, broker_id: i64) -> Option<PeerAddr> {
        let addrs = self.brokers.get(broker_name)?;
        addrs.get(&broker_id).or_else(|| addrs.get(&0)).or_else(|| addrs.values().next()).cloned()
    }

    /// The master of `broker_name` (offsets, send-back and locks go there), else any node.
    pub(super) fn master_addr(&self, broker_name: &str) -> Option<PeerAddr> {
        self.broker_addr(broker_name, 0)
    }

    pub(super) fn rebuild_heartbeat(&mut self) {
        let consumer = ConsumerData {
            group_name: self.group.clone(),
            consume_type: ConsumeType::ConsumePassively,
            message_model: self.cfg.message_model,
            consume_from_where: self.cfg.consume_from_where,
            subscription_data_set: self.subs.values().cloned().collect(),
            unit_mode: self.cfg.unit_mode,
        };
        self.heartbeat = Arc::new(HeartbeatData {
            client_id: self.cfg.client_id.as_str().to_owned(),
            producer_data_set: vec![ProducerData { group_name: CLIENT_INNER_PRODUCER_GROUP.to_owned() }],
            consumer_data_set: vec![consumer],
            heartbeat_fingerprint: 0,
            without_sub: false,
        });
    }

    /// Heartbeat every known broker node, masters and slaves (and re-arm).
    pub(super) fn heartbeat_all(&mut self) {
        let peers: Vec<PeerAddr> = self.brokers.values().flat_map(|a| a.values().cloned()).collect();
        for p in peers {
            self.ensure_heartbeat(&p);
        }
        self.timers.set(Timer::Heartbeat, self.now + self.cfg.heartbeat_broker_interval);
    }

    /// Send a heartbeat to `peer` unless one is already on its way.
    pub(super) fn ensure_heartbeat(&mut self, peer: &PeerAddr) {
        if self.peer(peer).heartbeat_in_flight {
            return;
        }
        self.peer(peer).heartbeat_in_flight = true;
        let body = self.heartbeat.clone();
        let timeout = self.cfg.mq_client_api_timeout;
        self.transmit(peer.clone(), Request::HeartBeat(body), PendingKind::Heartbeat, timeout);
    }

    pub(super) fn on_heartbeat(&mut self, peer: &PeerAddr, result: Result<RemotingCommand, Failure>) {
        self.peer(peer).heartbeat_in_flight = false;
        match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => self.on_registered(peer, cmd.version),
            Ok(cmd) => {
                self.emit_broker_error(peer.clone(), crate::RequestCode::HeartBeat, &cmd);
                self.fail_parked(peer);
            }
            Err(_) => self.fail_parked(peer),
        }
    }
}
