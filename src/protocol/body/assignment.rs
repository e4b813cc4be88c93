//! QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401) bodies: the broker's side of
//! rebalancing, and the per-(topic, group) switch between PULL and POP (`docs/pop.md` §2).

use super::{BodyError, JsonBody, MessageModel, Obj, mq_from_value, write_mq};
use crate::json::{JsonWriter, Value};
use crate::message::MessageQueue;
use crate::protocol::ext::name_enum;

name_enum! {
    /// How a group reads a queue (`MessageRequestMode.java`).
    #[derive(Default)]
    pub enum MessageRequestMode {
        /// Offsets per queue, committed by the client: the classic push consumer.
        #[default]
        Pull = "PULL",
        /// The broker hands out messages and tracks each one until it is acked.
        Pop = "POP",
    }
}

/// Request body of QUERY_ASSIGNMENT (`QueryAssignmentRequestBody`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryAssignmentRequestBody {
    /// Topic (the group's retry topic too, in its own request).
    pub topic: String,
    /// Group.
    pub consumer_group: String,
    /// Our client id, as in the heartbeat.
    pub client_id: String,
    /// Allocation strategy; the broker knows `"AVG"` and `"AVG_BY_CIRCLE"`.
    pub strategy_name: String,
    /// Clustering or broadcasting.
    pub message_model: MessageModel,
}

impl JsonBody for QueryAssignmentRequestBody {
    const NAME: &'static str = "QueryAssignmentRequestBody";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        Ok(Self {
            topic: o.opt_str("topic")?.unwrap_or_default(),
            consumer_group: o.opt_str("consumerGroup")?.unwrap_or_default(),
            client_id: o.opt_str("clientId")?.unwrap_or_default(),
            strategy_name: o.opt_str("strategyName")?.unwrap_or_default(),
            message_model: o.enum_or(
                "messageModel",
                MessageModel::from_java_name,
                MessageModel::Clustering,
            )?,
        })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object()
            .field_str("clientId", &self.client_id)
            .field_str("consumerGroup", &self.consumer_group)
            .field_str("messageModel", self.message_model.java_name())
            .field_str("strategyName", &self.strategy_name)
            .field_str("topic", &self.topic)
            .end_object();
    }
}

/// One queue of an assignment (`MessageQueueAssignment`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageQueueAssignment {
    /// The queue; queue id -1 under POP means every queue of the topic on that broker.
    pub message_queue: MessageQueue,
    /// How to read it.
    pub mode: MessageRequestMode,
    /// Extra attributes; the broker sends none today.
    pub attachments: Vec<(String, String)>,
}

/// Most assignments read from one answer: a broker assigns at most every queue of a topic, and
/// [`MAX_QUEUES_PER_BROKER`](super::MAX_QUEUES_PER_BROKER) bounds those per broker.
pub const MAX_ASSIGNMENTS: usize = 4096;

/// QUERY_ASSIGNMENT answer (`QueryAssignmentResponseBody`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryAssignmentResponseBody {
    /// The queues assigned to the asking client; `None` when the broker had no answer (the
    /// group is unknown to it, or the strategy name is not one it knows) and left the key out.
    pub message_queue_assignments: Option<Vec<MessageQueueAssignment>>,
}

impl JsonBody for QueryAssignmentResponseBody {
    const NAME: &'static str = "QueryAssignmentResponseBody";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        if o.get("messageQueueAssignments").is_none() {
            return Ok(Self { message_queue_assignments: None });
        }
        let items = o.array("messageQueueAssignments")?;
        if items.len() > MAX_ASSIGNMENTS {
            return Err(BodyError::Field {
                body: Self::NAME,
                field: "messageQueueAssignments",
                what: "has more entries than any broker assigns",
            });
        }
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let a = Obj::new(item, Self::NAME)?;
            let queue = a.get("messageQueue").ok_or(BodyError::Field {
                body: Self::NAME,
                field: "messageQueue",
                what: "is missing",
            })?;
            let mut attachments = Vec::new();
            for (k, v) in a.object("attachments")? {
                if let (Some(k), Some(v)) = (k.as_str(), v.as_str()) {
                    attachments.push((k.to_owned(), v.to_owned()));
                }
            }
            out.push(MessageQueueAssignment {
                message_queue: mq_from_value(queue, Self::NAME)?,
                mode: a.enum_or("mode", MessageRequestMode::from_java_name, MessageRequestMode::Pull)?,
                attachments,
            });
        }
        Ok(Self { message_queue_assignments: Some(out) })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object();
        if let Some(list) = &self.message_queue_assignments {
            w.key("messageQueueAssignments").begin_array();
            for a in list {
                w.begin_object();
                if !a.attachments.is_empty() {
                    w.key("attachments").begin_object();
                    for (k, v) in &a.attachments {
                        w.field_str(k, v);
                    }
                    w.end_object();
                }
                w.key("messageQueue");
                write_mq(w, &a.message_queue);
                w.field_str("mode", a.mode.java_name()).end_object();
            }
            w.end_array();
        }
        w.end_object();
    }
}

/// Request body of SET_MESSAGE_REQUEST_MODE (`SetMessageRequestModeRequestBody`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetMessageRequestModeRequestBody {
    /// Topic (not a `%RETRY%` one: the broker refuses those).
    pub topic: String,
    /// Group.
    pub consumer_group: String,
    /// The new mode.
    pub mode: MessageRequestMode,
    /// POP only: how many other clients' queues each client also pops from; 0 (the default)
    /// lets every client pop from every queue.
    pub pop_share_queue_num: i32,
}

impl JsonBody for SetMessageRequestModeRequestBody {
    const NAME: &'static str = "SetMessageRequestModeRequestBody";

    fn from_value(v: &Value) -> Result<Self, BodyError> {
        let o = Obj::new(v, Self::NAME)?;
        Ok(Self {
            topic: o.opt_str("topic")?.unwrap_or_default(),
            consumer_group: o.opt_str("consumerGroup")?.unwrap_or_default(),
            mode: o.enum_or("mode", MessageRequestMode::from_java_name, MessageRequestMode::Pull)?,
            pop_share_queue_num: o.i32_or("popShareQueueNum", 0)?,
        })
    }

    fn write_json(&self, w: &mut JsonWriter) {
        w.begin_object()
            .field_str("consumerGroup", &self.consumer_group)
            .field_str("mode", self.mode.java_name())
            .field_int("popShareQueueNum", self.pop_share_queue_num.into())
            .field_str("topic", &self.topic)
            .end_object();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignment_answer_reads_modes_and_the_absent_key() {
        let json = br#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"broker-a","queueId":-1,"topic":"T"},"mode":"POP"},{"messageQueue":{"brokerName":"b","queueId":3,"topic":"T"},"mode":"PULL","attachments":{"k":"v"}}]}"#;
        let body = QueryAssignmentResponseBody::decode(json).unwrap();
        let list = body.message_queue_assignments.clone().unwrap();
        assert_eq!(list[0].message_queue, MessageQueue::new("T", "broker-a", -1));
        assert_eq!((list[0].mode, list[1].mode), (MessageRequestMode::Pop, MessageRequestMode::Pull));
        assert_eq!(list[1].attachments, [("k".to_owned(), "v".to_owned())]);
        assert_eq!(QueryAssignmentResponseBody::decode(&body.encode()).unwrap(), body);
        assert_eq!(QueryAssignmentResponseBody::decode(b"{}").unwrap().message_queue_assignments, None);
        let bad = br#"{"messageQueueAssignments":[{"mode":"POP"}]}"#;
        assert!(QueryAssignmentResponseBody::decode(bad).is_err(), "an assignment without a queue");
        let odd = br#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"b","queueId":1,"topic":"T"},"mode":"PUSH"}]}"#;
        assert!(QueryAssignmentResponseBody::decode(odd).is_err(), "an unknown mode is an error");
    }

    #[test]
    fn requests_round_trip() {
        let q = QueryAssignmentRequestBody {
            topic: "T".into(),
            consumer_group: "g".into(),
            client_id: "127.0.0.1@1".into(),
            strategy_name: "AVG".into(),
            message_model: MessageModel::Clustering,
        };
        assert_eq!(QueryAssignmentRequestBody::decode(&q.encode()).unwrap(), q);
        let s = SetMessageRequestModeRequestBody {
            topic: "T".into(),
            consumer_group: "g".into(),
            mode: MessageRequestMode::Pop,
            pop_share_queue_num: 0,
        };
        assert_eq!(
            &s.encode()[..],
            br#"{"consumerGroup":"g","mode":"POP","popShareQueueNum":0,"topic":"T"}"#
        );
        assert_eq!(SetMessageRequestModeRequestBody::decode(&s.encode()).unwrap(), s);
    }
}
