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

/// Which name server a client asks first: Java picks one at random per client so that clients
/// spread over the list; here a hash of the client id does it (deterministic, and still spread).
pub(super) fn first_name_server(client_id: &str, count: usize) -> usize {
    // FNV-1a.
    let h = client_id
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    (h % count.max(1) as u64) as usize
}

impl Consumer {
    pub(super) fn name_server(&self) -> PeerAddr {
        self.name_servers[self.name_server_index % self.name_servers.len()].clone()
    }

    /// Ask for every subscribed topic's route (and re-arm the refresh).
    pub(super) fn refresh_routes(&mut self) {
        if !matches!(self.state, RunState::Running) {
            return;
        }
        self.route_failovers.clear();
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

    /// A route request failed at `peer`: move on from it, and ask the next name server at once
    /// (once round the list per refresh; then the refresh's back-off paces it).
    fn route_failed(&mut self, peer: &PeerAddr, topic: &str) {
        if *peer == self.name_server() {
            // Several requests may fail at one name server: it is left once.
            self.name_server_index += 1;
        }
        let tried = self.route_failovers.entry(topic.to_owned()).or_default();
        if *tried + 1 < self.name_servers.len() && self.state == RunState::Running {
            *tried += 1;
            self.query_route(topic);
        }
    }

    pub(super) fn on_route(
        &mut self,
        peer: &PeerAddr,
        topic: &str,
        result: Result<RemotingCommand, Failure>,
    ) {
        self.route_queries.remove(topic);
        self.take_route(peer, topic, result);
        if self.last_rebalance.is_none() && !self.routes.is_empty() {
            // Once the last route asked for at start has answered, or failed at every name
            // server tried, the first pass goes (`request_rebalance` holds it back until then).
            self.request_rebalance();
        }
    }

    fn take_route(&mut self, peer: &PeerAddr, topic: &str, result: Result<RemotingCommand, Failure>) {
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
                self.emit_broker_error(peer.clone(), crate::RequestCode::GetRouteInfoByTopic, &cmd);
                self.route_failed(peer, topic);
                return;
            }
            Err(_) => {
                self.route_failed(peer, topic);
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
            subscription_data_set: self
                .subs
                .values()
                .filter(|s| !self.unheartbeated.contains_key(&s.topic))
                .cloned()
                .collect(),
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
        // Topics left out after a refusal are tried again (each interval, so a granted
        // permission is picked up).
        let now = self.now;
        let before = self.unheartbeated.len();
        self.unheartbeated.retain(|_, until| *until > now);
        if self.unheartbeated.len() != before {
            self.rebuild_heartbeat();
        }
        let peers: Vec<PeerAddr> = self.brokers.values().flat_map(|a| a.values().cloned()).collect();
        for p in peers {
            // A broker that refused us is asked again here, once per interval.
            self.peer(&p).refused = false;
            self.ensure_heartbeat(&p);
        }
        self.timers.set(Timer::Heartbeat, self.now + self.cfg.heartbeat_broker_interval);
    }

    /// Send a heartbeat to `peer` unless one is already on its way.
    pub(super) fn ensure_heartbeat(&mut self, peer: &PeerAddr) {
        if self.peer(peer).heartbeat_in_flight || self.peer(peer).refused {
            return;
        }
        self.peer(peer).heartbeat_in_flight = true;
        let body = self.heartbeat.clone();
        let timeout = self.cfg.mq_client_api_timeout;
        self.transmit(peer.clone(), Request::HeartBeat(body.clone()), PendingKind::Heartbeat(body), timeout);
    }

    pub(super) fn on_heartbeat(
        &mut self,
        peer: &PeerAddr,
        sent: &Arc<HeartbeatData>,
        result: Result<RemotingCommand, Failure>,
    ) {
        self.peer(peer).heartbeat_in_flight = false;
        match result {
            Ok(_) if !Arc::ptr_eq(sent, &self.heartbeat) => {
                // It said what the consumer no longer says: what waits for registration waits
                // for the heartbeat that says it now.
                self.ensure_heartbeat(peer);
            }
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => self.on_registered(peer, cmd.version),
            Ok(cmd) => {
                if let Some(topic) = self.refused_subscription(&cmd) {
                    // One topic without permission: the rest of the heartbeat goes again
                    // without it, so that the other topics go on.
                    self.topic_refused_by_name(&topic, peer, &cmd);
                    self.unheartbeated.insert(topic, self.now + super::pull::PERMISSION_RETRY);
                    self.rebuild_heartbeat();
                    return self.ensure_heartbeat(peer);
                }
                if super::requests::is_permission_refusal(&cmd) {
                    // The client as a whole is refused (credentials): reported once; what
                    // waits for registration waits for the next periodic heartbeat.
                    self.peer(peer).refused = true;
                    return self.report_refusal(peer, crate::RequestCode::HeartBeat, &cmd);
                }
                self.emit_broker_error(peer.clone(), crate::RequestCode::HeartBeat, &cmd);
                self.fail_parked(peer);
            }
            Err(_) => self.fail_parked(peer),
        }
    }

    /// The subscribed topic (wire name) a permission refusal names, if it names one still in
    /// the heartbeat.
    fn refused_subscription(&self, cmd: &RemotingCommand) -> Option<String> {
        if !super::requests::is_permission_refusal(cmd) {
            return None;
        }
        let remark = cmd.remark_str();
        self.subs
            .keys()
            .filter(|t| !self.unheartbeated.contains_key(*t))
            .find(|t| names_topic(remark, t))
            .cloned()
    }
}

/// `remark` names `topic` as a whole word (topic names are `[A-Za-z0-9_%|-]`).
pub(super) fn names_topic(remark: &str, topic: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '%' | '|' | '-');
    remark.match_indices(topic).any(|(at, _)| {
        let before = remark[..at].chars().next_back();
        let after = remark[at + topic.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_topic_is_found_in_a_refusal_only_as_a_whole_word() {
        let r = "org.apache.rocketmq.acl.common.AclException: No default permission for topic:rmq_denied, org.apache";
        assert!(super::names_topic(r, "rmq_denied"));
        assert!(!super::names_topic(r, "rmq"));
        assert!(!super::names_topic(r, "denied"));
        assert!(!super::names_topic(r, "T"));
    }
}
