//! `TopicRouteData`: the name server's answer to GET_ROUTEINFO_BY_TOPIC (PROTOCOL.md §6.1).

use std::collections::BTreeMap;

use super::{BodyError, JsonBody, Obj};
use crate::json::{JsonWriter, Value};
use crate::message::MessageQueue;

/// Permission bits (`PermName.java`).
pub mod perm {
    /// Inherit.
    pub const INHERIT: i32 = 1;
    /// Writable.
    pub const WRITE: i32 = 2;
    /// Readable.
    pub const READ: i32 = 4;
    /// Priority.
    pub const PRIORITY: i32 = 8;
}

/// Most queues of one topic on one broker that a route may declare. Brokers serve a topic's
/// queues from one consume-queue file set each; real topics have 4–256. A route beyond this is
/// corrupt or hostile and is refused whole (the previous route stays), not clamped.
pub const MAX_QUEUES_PER_BROKER: i32 = 4096;

/// A topic's route.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicRouteData {
    /// `orderTopicConf`, e.g. `broker-a:4;broker-b:4`.
    pub order_topic_conf: Option<String>,
    /// Queues per broker.
    pub queue_datas: Vec<QueueData>,
    /// Brokers and their addresses.
    pub broker_datas: Vec<BrokerData>,
}

/// The topic's queues on one broker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueData {
    /// Broker name.
    pub broker_name: String,
    /// Readable queues.
    pub read_queue_nums: i32,
    /// Writable queues.
    pub write_queue_nums: i32,
    /// [`perm`] bits.
    pub perm: i32,
    /// Topic sys flag.
    pub topic_sys_flag: i32,
}

/// One broker (master and slaves).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokerData {
    /// Cluster.
    pub cluster: String,
    /// Broker name.
    pub broker_name: String,
    /// Broker id → `ip:port`; id 0 is the master.
    pub broker_addrs: BTreeMap<i64, String>,
    /// 5.x.
    pub enable_acting_master: bool,
    /// 5.x zone.
    pub zone_name: Option<String>,
}

impl BrokerData {
    /// The master's address (id 0), else the lowest id (Java falls back to any node).
    pub fn master_or_any(&self) -> Option<&str> {
        self.broker_addrs.get(&0).or_else(|| self.broker_addrs.values().next()).map(String::as_str)
    }
}

impl TopicRouteData {
    /// The queues a consumer reads (`topicRouteData2TopicSubscribeInfo`): for every readable
    /// queue data, ids `0..readQueueNums` on that broker. Sorted in Java's order.
    pub fn subscribe_queues(&self, topic: &str) -> Vec<MessageQueue> {
        let topic: std::sync::Arc<str> = topic.into();
        let mut out = Vec::new();
        for qd in &self.queue_datas {
            if qd.perm & perm::READ == 0 {
                continue;
            }
            let broker: std::sync::Arc<str> = qd.broker_name.as_str().into();
            for id in 0..qd.read_queue_nums.clamp(0, MAX_QUEUES_PER_BROKER) {
                out.push(MessageQueue { topic: topic.clone(), broker_name: broker.clone(), queue_id: id });
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The queues a producer writes (writable queue data, ids `0..writeQueueNums`).
    pub fn publish_queues(&self, topic: &str) -> Vec<MessageQueue> {
        let mut out = Vec::new();
        for qd in &self.queue_datas {
            if qd.perm & perm::WRITE == 0 {
                continue;
            }
            for id in 0..qd.write_queue_nums.clamp(0, MAX_QUEUES_PER_BROKER) {
                out.push(MessageQueue::new(topic, qd.broker_name.as_str(), id));
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The broker named `name`.
    pub fn broker(&self, name: &str) -> Option<&BrokerData> {
        self.broker_datas.iter().find(|b| b.broker_name == name)
    }
}

impl JsonBody for TopicRouteData {
    const NAME: &'static str = "TopicRouteData";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        let mut queue_datas = Vec::new();
        let queue_nums = |q: &Obj<'_>, field: &'static str| {
            let n = q.i32_or(field, 0)?;
            if (0..=MAX_QUEUES_PER_BROKER).contains(&n) {
                Ok(n)
            } else {
                Err(BodyError::Field { body: "QueueData", field, what: "is negative or beyond 4096 queues" })
            }
        };
        for q in o.array("queueDatas")? {
            let q = Obj::new(q, "QueueData")?;
            queue_datas.push(QueueData {
                broker_name: q.str("brokerName")?,
                read_queue_nums: queue_nums(&q, "readQueueNums")?,
                write_queue_nums: queue_nums(&q, "writeQueueNums")?,
                perm: q.i32_or("perm", 0)?,
                topic_sys_flag: q.i32_or("topicSysFlag", 0)?,
            });
        }
        let mut broker_datas = Vec::new();
        for b in o.array("brokerDatas")? {
            let b = Obj::new(b, "BrokerData")?;
            let mut broker_addrs = BTreeMap::new();
            // fastjson writes these Long keys bare (`{0:"addr"}`) unless asked for standard JSON.
            for (k, addr) in b.object("brokerAddrs")? {
                let id = k.as_i64().ok_or(BodyError::Field {
                    body: "BrokerData",
                    field: "brokerAddrs",
                    what: "has a key that is not a broker id",
                })?;
                let addr = addr.as_str().ok_or(BodyError::Field {
                    body: "BrokerData",
                    field: "brokerAddrs",
                    what: "has an address that is not a string",
                })?;
                broker_addrs.insert(id, addr.to_owned());
            }
            broker_datas.push(BrokerData {
                cluster: b.opt_str("cluster")?.unwrap_or_default(),
                broker_name: b.str("brokerName")?,
                broker_addrs,
                enable_acting_master: b.bool_or("enableActingMaster", false)?,
                zone_name: b.opt_str("zoneName")?,
            });
        }
        Ok(Self { order_topic_conf: o.opt_str("orderTopicConf")?, queue_datas, broker_datas })
    }

    /// Standard JSON, as a name server answers clients with version ≥ 401.
    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object().key("brokerDatas").begin_array();
        for b in &self.broker_datas {
            w.begin_object().key("brokerAddrs").begin_object();
            for (id, addr) in &b.broker_addrs {
                w.field_str(&id.to_string(), addr);
            }
            w.end_object()
                .field_str("brokerName", &b.broker_name)
                .field_str("cluster", &b.cluster)
                .field_bool("enableActingMaster", b.enable_acting_master)
                .field_opt_str("zoneName", b.zone_name.as_deref())
                .end_object();
        }
        w.end_array().key("filterServerTable").begin_object().end_object();
        w.field_opt_str("orderTopicConf", self.order_topic_conf.as_deref());
        w.key("queueDatas").begin_array();
        for q in &self.queue_datas {
            w.begin_object()
                .field_str("brokerName", &q.broker_name)
                .field_int("perm", q.perm.into())
                .field_int("readQueueNums", q.read_queue_nums.into())
                .field_int("topicSysFlag", q.topic_sys_flag.into())
                .field_int("writeQueueNums", q.write_queue_nums.into())
                .end_object();
        }
        w.end_array().end_object();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FASTJSON: &str = r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4},{"brokerName":"broker-b","perm":2,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}"#;

    #[test]
    fn absurd_queue_counts_are_refused_not_clamped() {
        for n in ["2147483647", "4097", "-1"] {
            let body = FASTJSON.replacen(r#""readQueueNums":4"#, &format!(r#""readQueueNums":{n}"#), 1);
            let err = TopicRouteData::decode(body.as_bytes()).unwrap_err();
            assert!(err.to_string().contains("readQueueNums"), "{n}: {err}");
        }
        let body = FASTJSON.replacen(r#""readQueueNums":4"#, r#""readQueueNums":4096"#, 1);
        assert_eq!(TopicRouteData::decode(body.as_bytes()).unwrap().subscribe_queues("T").len(), 4096);
    }

    #[test]
    fn parses_fastjson_and_standard_forms() {
        let r = TopicRouteData::decode(FASTJSON.as_bytes()).unwrap();
        assert_eq!(r.broker("broker-a").unwrap().master_or_any(), Some("127.0.0.1:10911"));
        assert_eq!(r.broker_datas[0].broker_addrs.len(), 2);
        let qs = r.subscribe_queues("T");
        assert_eq!(qs.len(), 4, "broker-b is write-only");
        assert_eq!(r.publish_queues("T").len(), 6);
        let standard = r.encode();
        assert!(std::str::from_utf8(&standard).unwrap().contains(r#"{"0":"127.0.0.1:10911","1":"#));
        assert_eq!(TopicRouteData::decode(&standard).unwrap(), r);
    }

    #[test]
    fn errors_name_the_field() {
        let e = TopicRouteData::decode(br#"{"queueDatas":[{"perm":6}]}"#).unwrap_err();
        assert_eq!(e.to_string(), "QueueData: field `brokerName` is missing");
        let e = TopicRouteData::decode(br#"{"brokerDatas":[{"brokerName":"b","brokerAddrs":{x:"1"}}]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("brokerAddrs"), "{e}");
        assert!(TopicRouteData::decode(b"[]").is_err());
    }
}
