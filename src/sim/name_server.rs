//! A fake name server: serves `TopicRouteData` from the simulated brokers' topic tables.
//!
//! Stateless: the route is computed from the brokers passed in with each request, so a topic a
//! broker creates (by heartbeat, auto-create on send, send-back) is routable at once, as a real
//! broker's immediate registration makes it.

use std::collections::BTreeMap;

use super::broker::{SimBroker, reply};
use crate::protocol::body::{BrokerData, TopicRouteData};
use crate::protocol::header::GetRouteInfoRequestHeader;
use crate::protocol::{JsonBody, RemotingCommand, RequestCode, ResponseCode};

/// `MQVersion.V4_9_4`: from this client version on, routes are standard JSON.
const V4_9_4: i32 = 401;

/// A simulated name server.
#[derive(Clone, Debug)]
pub struct SimNameServer {
    addr: String,
}

impl SimNameServer {
    /// A name server listening on `addr`.
    pub fn new(addr: &str) -> Self {
        Self { addr: addr.to_owned() }
    }

    /// Listening address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The route of `topic` over `brokers`, or `None` when no broker has it. Brokers are listed
    /// by name; each is a master (`brokerAddrs {0: addr}`).
    pub fn route(&self, topic: &str, brokers: &[&SimBroker]) -> Option<TopicRouteData> {
        let mut by_name: BTreeMap<&str, &SimBroker> = BTreeMap::new();
        for b in brokers {
            by_name.entry(b.name()).or_insert(b);
        }
        let mut route = TopicRouteData::default();
        for (name, b) in by_name {
            let Some(qd) = b.topic_route(topic) else { continue };
            route.queue_datas.push(qd);
            route.broker_datas.push(BrokerData {
                cluster: b.config().cluster.clone(),
                broker_name: name.to_owned(),
                broker_addrs: BTreeMap::from([(0, b.addr().to_owned())]),
                enable_acting_master: false,
                zone_name: None,
            });
        }
        (!route.queue_datas.is_empty()).then_some(route)
    }

    /// Answer a request: GET_ROUTEINFO_BY_TOPIC (105) from the brokers' topic tables, in
    /// standard JSON when the client's version is at least 401 (or it sets
    /// `acceptStandardJsonOnly`), else fastjson's unquoted `brokerAddrs` keys; TOPIC_NOT_EXIST
    /// (17) when no broker has the topic; REQUEST_CODE_NOT_SUPPORTED for anything else.
    ///
    /// Always returns an answer; use [`handle`](Self::handle) to get none for oneway requests
    /// and responses, as the wire would.
    pub fn answer(&self, cmd: &RemotingCommand, brokers: &[&SimBroker]) -> RemotingCommand {
        if cmd.code != RequestCode::GetRouteInfoByTopic as i32 {
            return reply(cmd, ResponseCode::RequestCodeNotSupported)
                .with_remark(format!(" request type {} not supported", cmd.code));
        }
        let h: GetRouteInfoRequestHeader = match cmd.header() {
            Ok(h) => h,
            Err(e) => {
                return reply(cmd, ResponseCode::SystemError).with_remark(format!(
                    "org.apache.rocketmq.remoting.exception.RemotingCommandException: {e}"
                ));
            }
        };
        let Some(route) = self.route(&h.topic, brokers) else {
            return reply(cmd, ResponseCode::TopicNotExist).with_remark(format!(
                "No topic route info in name server for the topic: {}\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.",
                h.topic
            ));
        };
        let standard = route.encode();
        let body = if cmd.version >= V4_9_4 || h.accept_standard_json_only == Some(true) {
            standard
        } else {
            // fastjson's default form writes the Long map keys bare: {"brokerAddrs":{0:"…"}}.
            let text =
                String::from_utf8_lossy(&standard).replace(r#""brokerAddrs":{"0":"#, r#""brokerAddrs":{0:"#);
            bytes::Bytes::from(text)
        };
        reply(cmd, ResponseCode::Success).with_body(body)
    }

    /// Like [`answer`](Self::answer), but `None` for responses and oneway requests.
    pub fn handle(&self, cmd: &RemotingCommand, brokers: &[&SimBroker]) -> Option<RemotingCommand> {
        (!cmd.is_response() && !cmd.is_oneway()).then(|| self.answer(cmd, brokers))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::protocol::LanguageCode;
    use crate::sim::broker::SimBrokerConfig;

    #[allow(clippy::disallowed_methods)] // tests pick an arbitrary origin
    fn t0() -> Instant {
        Instant::now()
    }

    fn route_request(topic: &str, version: i32) -> RemotingCommand {
        let h = GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: None };
        let mut cmd =
            RemotingCommand::request(RequestCode::GetRouteInfoByTopic).with_header(&h).with_opaque(9);
        cmd.version = version;
        cmd
    }

    #[test]
    fn routes_from_broker_topic_tables() {
        let t = t0();
        let mut a = SimBroker::new("broker-a", "10.0.0.1:10911", SimBrokerConfig::default(), t);
        let mut b = SimBroker::new("broker-b", "10.0.0.2:10911", SimBrokerConfig::default(), t);
        a.create_topic("T", 4);
        b.create_topic("T", 2);
        b.create_topic("OnlyB", 1);
        let ns = SimNameServer::new("10.0.0.9:9876");
        assert_eq!(ns.addr(), "10.0.0.9:9876");

        let r = ns.answer(&route_request("T", 475), &[&b, &a]);
        assert_eq!((r.code, r.opaque, r.is_response(), r.version), (0, 9, true, 479));
        assert_eq!(r.language, LanguageCode::JAVA);
        let text = std::str::from_utf8(&r.body).unwrap();
        assert!(text.contains(r#""brokerAddrs":{"0":"10.0.0.1:10911"}"#), "{text}");
        let route = TopicRouteData::decode(&r.body).unwrap();
        assert_eq!(route.broker_datas[0].broker_name, "broker-a", "sorted by broker name");
        assert_eq!(route.subscribe_queues("T").len(), 6);
        assert_eq!(route.broker("broker-b").unwrap().cluster, "DefaultCluster");

        let old = ns.answer(&route_request("OnlyB", 317), &[&a, &b]);
        let text = std::str::from_utf8(&old.body).unwrap();
        assert!(
            text.contains(r#""brokerAddrs":{0:"10.0.0.2:10911"}"#),
            "fastjson form for old clients: {text}"
        );
        assert_eq!(TopicRouteData::decode(&old.body).unwrap().queue_datas.len(), 1);

        let missing = ns.answer(&route_request("Nope", 475), &[&a, &b]);
        assert_eq!(missing.code, ResponseCode::TopicNotExist as i32);
        assert!(missing.remark_str().starts_with("No topic route info in name server for the topic: Nope"));

        let other = ns.answer(&RemotingCommand::raw_request(999).with_opaque(3), &[&a]);
        assert_eq!((other.code, other.opaque), (3, 3));
        assert_eq!(other.remark_str(), " request type 999 not supported");
        let bad = ns.answer(&RemotingCommand::request(RequestCode::GetRouteInfoByTopic), &[&a]);
        assert_eq!(bad.code, ResponseCode::SystemError as i32);
        assert!(ns.handle(&route_request("T", 475).oneway(), &[&a]).is_none());
        assert!(ns.handle(&r, &[&a]).is_none(), "responses are not answered");
        assert!(ns.handle(&route_request("T", 475), &[&a]).is_some());
    }
}
