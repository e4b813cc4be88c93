//! LOCK_BATCH_MQ / UNLOCK_BATCH_MQ bodies (PROTOCOL.md §6.8).

use super::{BodyError, JsonBody, Obj, mq_from_value, write_mq};
use crate::json::{JsonWriter, Value};
use crate::message::MessageQueue;

/// Request body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ (same fields).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockBatchRequestBody {
    /// Group.
    pub consumer_group: String,
    /// Lock owner.
    pub client_id: String,
    /// Lock only queues of the receiving broker.
    pub only_this_broker: bool,
    /// Queues.
    pub mq_set: Vec<MessageQueue>,
}

impl JsonBody for LockBatchRequestBody {
    const NAME: &'static str = "LockBatchRequestBody";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        Ok(Self {
            consumer_group: o.opt_str("consumerGroup")?.unwrap_or_default(),
            client_id: o.opt_str("clientId")?.unwrap_or_default(),
            only_this_broker: o.bool_or("onlyThisBroker", false)?,
            mq_set: o
                .array("mqSet")?
                .iter()
                .map(|q| mq_from_value(q, Self::NAME))
                .collect::<Result<_, _>>()?,
        })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object()
            .field_str("clientId", &self.client_id)
            .field_str("consumerGroup", &self.consumer_group)
            .key("mqSet")
            .begin_array();
        for q in &self.mq_set {
            write_mq(w, q);
        }
        w.end_array().field_bool("onlyThisBroker", self.only_this_broker).end_object();
    }
}

/// LOCK_BATCH_MQ response: the queues now locked by the requester.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockBatchResponseBody {
    /// Locked queues (key `lockOKMQSet`).
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

impl JsonBody for LockBatchResponseBody {
    const NAME: &'static str = "LockBatchResponseBody";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        let set =
            o.array("lockOKMQSet")?.iter().map(|q| mq_from_value(q, Self::NAME)).collect::<Result<_, _>>()?;
        Ok(Self { lock_ok_mq_set: set })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object().key("lockOKMQSet").begin_array();
        for q in &self.lock_ok_mq_set {
            write_mq(w, q);
        }
        w.end_array().end_object();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_sample_round_trips() {
        let java = r#"{"clientId":"10.0.0.1@1","consumerGroup":"g1","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicA"}],"onlyThisBroker":false}"#;
        let b = LockBatchRequestBody::decode(java.as_bytes()).unwrap();
        assert_eq!(b.mq_set, [MessageQueue::new("TopicA", "broker-a", 0)]);
        assert_eq!(b.encode(), java.as_bytes());
        let r =
            LockBatchResponseBody::decode(br#"{"lockOKMQSet":[{"brokerName":"b","queueId":2,"topic":"T"}]}"#)
                .unwrap();
        assert_eq!(r.lock_ok_mq_set[0].queue_id, 2);
        assert!(LockBatchResponseBody::decode(br#"{"lockOKMQSet":[{"queueId":2}]}"#).is_err());
    }
}
