//! Offset-table bodies keyed by `MessageQueue` (fastjson object keys, PROTOCOL.md §6.11, §7)
//! and the consumer list.

use super::{BodyError, JsonBody, Obj, mq_from_key, write_mq_map};
use crate::json::{JsonWriter, Value};
use crate::message::MessageQueue;

/// RESET_CONSUMER_CLIENT_OFFSET body: queue → offset.
///
/// Reads both `ResetOffsetBody` (`{"offsetTable":{{mq}:100}}`) and the `ResetOffsetBodyForC`
/// array form (`{"offsetTable":[{"brokerName":..,"offset":..,"queueId":..,"topic":..}]}`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResetOffsetBody {
    /// Queue → offset, sorted by queue.
    pub offset_table: Vec<(MessageQueue, i64)>,
}

impl JsonBody for ResetOffsetBody {
    const NAME: &'static str = "ResetOffsetBody";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        let mut table = Vec::new();
        match o.get("offsetTable") {
            None => {}
            Some(Value::Object(entries)) => {
                for (k, off) in entries {
                    let offset = off.as_i64().ok_or(BodyError::Field {
                        body: Self::NAME,
                        field: "offsetTable",
                        what: "has an offset that is not an integer",
                    })?;
                    table.push((mq_from_key(k, Self::NAME)?, offset));
                }
            }
            Some(Value::Array(items)) => {
                for item in items {
                    let e = Obj::new(item, "ResetOffsetBodyForC")?;
                    let q = MessageQueue::new(e.str("topic")?, e.str("brokerName")?, e.i32("queueId")?);
                    table.push((q, e.i64("offset")?));
                }
            }
            Some(_) => {
                return Err(BodyError::Field {
                    body: Self::NAME,
                    field: "offsetTable",
                    what: "is not a map",
                });
            }
        }
        table.sort();
        Ok(Self { offset_table: table })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object().key("offsetTable");
        write_mq_map(w, &self.offset_table, |w, o| {
            w.int(*o);
        });
        w.end_object();
    }
}

/// One queue's progress in a [`ConsumeStatsBody`] (Java's `OffsetWrapper`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffsetWrapper {
    /// The queue's max offset on the broker.
    pub broker_offset: i64,
    /// The group's committed offset.
    pub consumer_offset: i64,
    /// 5.x: the offset the group pulls from next (0 when unknown).
    pub pull_offset: i64,
    /// Store time of the last consumed message, ms since the epoch (0 when unknown).
    pub last_timestamp: i64,
}

/// GET_CONSUME_STATS answer (Java's admin `ConsumeStats`): queue → progress.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConsumeStatsBody {
    /// Queue → progress, sorted by queue.
    pub offset_table: Vec<(MessageQueue, OffsetWrapper)>,
    /// Messages per second.
    pub consume_tps: f64,
}

impl JsonBody for ConsumeStatsBody {
    const NAME: &'static str = "ConsumeStats";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        let mut table = Vec::new();
        if o.get("offsetTable").is_some() {
            for (k, w) in o.object("offsetTable")? {
                let w = Obj::new(w, "OffsetWrapper")?;
                let progress = OffsetWrapper {
                    broker_offset: w.opt_i64("brokerOffset")?.unwrap_or(0),
                    consumer_offset: w.opt_i64("consumerOffset")?.unwrap_or(0),
                    pull_offset: w.opt_i64("pullOffset")?.unwrap_or(0),
                    last_timestamp: w.opt_i64("lastTimestamp")?.unwrap_or(0),
                };
                table.push((mq_from_key(k, Self::NAME)?, progress));
            }
        }
        table.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Self { offset_table: table, consume_tps: o.f64_or("consumeTps", 0.0)? })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object().key("consumeTps").float(self.consume_tps).key("offsetTable");
        write_mq_map(w, &self.offset_table, |w, p| {
            w.begin_object()
                .field_int("brokerOffset", p.broker_offset)
                .field_int("consumerOffset", p.consumer_offset)
                .field_int("lastTimestamp", p.last_timestamp)
                .field_int("pullOffset", p.pull_offset)
                .end_object();
        });
        w.end_object();
    }
}

/// GET_CONSUMER_STATUS_FROM_CLIENT answer: queue → in-memory offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetConsumerStatusBody {
    /// Queue → offset.
    pub message_queue_table: Vec<(MessageQueue, i64)>,
}

impl JsonBody for GetConsumerStatusBody {
    const NAME: &'static str = "GetConsumerStatusBody";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        let mut table = Vec::new();
        for (k, off) in o.object("messageQueueTable")? {
            let offset = off.as_i64().ok_or(BodyError::Field {
                body: Self::NAME,
                field: "messageQueueTable",
                what: "has an offset that is not an integer",
            })?;
            table.push((mq_from_key(k, Self::NAME)?, offset));
        }
        Ok(Self { message_queue_table: table })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object().key("consumerTable").begin_object().end_object().key("messageQueueTable");
        write_mq_map(w, &self.message_queue_table, |w, o| {
            w.int(*o);
        });
        w.end_object();
    }
}

/// GET_CONSUMER_LIST_BY_GROUP answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetConsumerListByGroupResponseBody {
    /// Client ids of the group's live consumers.
    pub consumer_id_list: Vec<String>,
}

impl JsonBody for GetConsumerListByGroupResponseBody {
    const NAME: &'static str = "GetConsumerListByGroupResponseBody";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        let list = o
            .array("consumerIdList")?
            .iter()
            .map(|c| c.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or(BodyError::Field {
                body: Self::NAME,
                field: "consumerIdList",
                what: "holds a non-string",
            })?;
        Ok(Self { consumer_id_list: list })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object().key("consumerIdList").begin_array();
        for c in &self.consumer_id_list {
            w.string(c);
        }
        w.end_array().end_object();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_offset_both_forms() {
        let java = r#"{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"TopicA"}:200,{"brokerName":"broker-a","queueId":0,"topic":"TopicA"}:100}}"#;
        let b = ResetOffsetBody::decode(java.as_bytes()).unwrap();
        assert_eq!(
            b.offset_table,
            [
                (MessageQueue::new("TopicA", "broker-a", 0), 100),
                (MessageQueue::new("TopicA", "broker-a", 1), 200)
            ]
        );
        let back = ResetOffsetBody::decode(&b.encode()).unwrap();
        assert_eq!(back, b);
        let for_c = r#"{"offsetTable":[{"brokerName":"b","offset":7,"queueId":3,"topic":"T"}]}"#;
        assert_eq!(ResetOffsetBody::decode(for_c.as_bytes()).unwrap().offset_table[0].1, 7);
        // A string key holding the queue (the standard-JSON form fastjson also reads).
        let quoted = r#"{"offsetTable":{"{\"brokerName\":\"b\",\"queueId\":1,\"topic\":\"t\"}":5}}"#;
        assert_eq!(ResetOffsetBody::decode(quoted.as_bytes()).unwrap().offset_table[0].1, 5);
        assert!(ResetOffsetBody::decode(br#"{"offsetTable":{{"queueId":1}:5}}"#).is_err());
    }

    #[test]
    fn consumer_status_and_list() {
        let s = GetConsumerStatusBody { message_queue_table: vec![(MessageQueue::new("t", "b", 0), 5)] };
        assert_eq!(
            std::str::from_utf8(&s.encode()).unwrap(),
            r#"{"consumerTable":{},"messageQueueTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}"#
        );
        assert_eq!(GetConsumerStatusBody::decode(&s.encode()).unwrap(), s);
        let l = GetConsumerListByGroupResponseBody::decode(br#"{"consumerIdList":["a@1","b@2"]}"#).unwrap();
        assert_eq!(l.consumer_id_list, ["a@1", "b@2"]);
        assert_eq!(GetConsumerListByGroupResponseBody::decode(&l.encode()).unwrap(), l);
    }
}

#[cfg(test)]
mod consume_stats_tests {
    use super::*;

    #[test]
    fn consume_stats_with_object_keys() {
        // As fastjson writes it: queue objects as map keys.
        let java = br#"{"consumeTps":1.5,"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1700000000000,"pullOffset":8},{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":3,"consumerOffset":3,"lastTimestamp":0}}}"#;
        let b = ConsumeStatsBody::decode(java).unwrap();
        assert_eq!(b.consume_tps, 1.5);
        assert_eq!(b.offset_table.len(), 2);
        assert_eq!(b.offset_table[0].0, MessageQueue::new("T", "b", 0));
        assert_eq!(b.offset_table[1].1.consumer_offset, 7);
        assert_eq!(b.offset_table[1].1.pull_offset, 8);
        assert_eq!(ConsumeStatsBody::decode(&b.encode()).unwrap(), b);
        assert!(ConsumeStatsBody::decode(br#"{"offsetTable":{{"queueId":1}:{}}}"#).is_err());
    }
}
