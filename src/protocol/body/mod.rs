//! JSON bodies (PROTOCOL.md §6, §7): parsed leniently from fastjson, written as fastjson reads.

mod assignment;
mod batch_ack;
mod check_client;
mod direct;
mod heartbeat;
mod lock;
mod offsets;
mod route;
mod running_info;

use bytes::Bytes;

pub use assignment::{
    MAX_ASSIGNMENTS, MessageQueueAssignment, MessageRequestMode, QueryAssignmentRequestBody,
    QueryAssignmentResponseBody, SetMessageRequestModeRequestBody,
};
pub use batch_ack::{BatchAck, BatchAckMessageRequestBody, MAX_BATCH_ACK_INDEX};
pub use check_client::CheckClientRequestBody;
pub use direct::{CMResult, ConsumeMessageDirectlyResult};
pub use heartbeat::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, ProducerData, SubscriptionData,
};
pub use lock::{LockBatchRequestBody, LockBatchResponseBody};
pub use offsets::{
    ConsumeStatsBody, GetConsumerListByGroupResponseBody, GetConsumerStatusBody, OffsetWrapper,
    ResetOffsetBody,
};
pub use route::{BrokerData, MAX_QUEUES_PER_BROKER, QueueData, TopicRouteData, perm};
pub use running_info::{ConsumeStats, ConsumerRunningInfo, ProcessQueueInfo};

use crate::json::{JsonError, JsonWriter, Value};
use crate::message::MessageQueue;

/// A body that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// Not JSON, even by fastjson's rules.
    #[error("{body}: {source}")]
    Json {
        /// Body type.
        body: &'static str,
        /// Parse error.
        source: JsonError,
    },
    /// JSON, but a field is missing or has the wrong type.
    #[error("{body}: field `{field}` {what}")]
    Field {
        /// Body type.
        body: &'static str,
        /// Field.
        field: &'static str,
        /// What was wrong.
        what: &'static str,
    },
}

/// A JSON body type.
pub trait JsonBody: Sized {
    /// Java class name, for errors.
    const NAME: &'static str;
    /// Read from a parsed value.
    fn from_value(v: &Value) -> Result<Self, BodyError>;
    /// Write as JSON.
    fn write_json(&self, w: &mut JsonWriter);

    /// Parse bytes.
    fn decode(bytes: &[u8]) -> Result<Self, BodyError> {
        let v = Value::parse(bytes).map_err(|source| BodyError::Json { body: Self::NAME, source })?;
        Self::from_value(&v)
    }

    /// Serialise.
    fn encode(&self) -> Bytes {
        let mut w = JsonWriter::new();
        self.write_json(&mut w);
        Bytes::from(w.finish())
    }
}

/// Field accessor over a JSON object, producing [`BodyError`]s that name the body and field.
/// Missing optional fields take Java's defaults, as fastjson leaves them.
pub(crate) struct Obj<'a> {
    v: &'a Value,
    body: &'static str,
}

impl<'a> Obj<'a> {
    pub(crate) fn new(v: &'a Value, body: &'static str) -> Result<Self, BodyError> {
        match v {
            Value::Object(_) => Ok(Self { v, body }),
            _ => Err(BodyError::Field { body, field: "(body)", what: "is not an object" }),
        }
    }

    fn err(&self, field: &'static str, what: &'static str) -> BodyError {
        BodyError::Field { body: self.body, field, what }
    }

    pub(crate) fn get(&self, field: &str) -> Option<&'a Value> {
        self.v.get(field).filter(|v| !matches!(v, Value::Null))
    }

    pub(crate) fn str(&self, field: &'static str) -> Result<String, BodyError> {
        self.opt_str(field)?.ok_or_else(|| self.err(field, "is missing"))
    }

    pub(crate) fn opt_str(&self, field: &'static str) -> Result<Option<String>, BodyError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Int(i)) => Ok(Some(i.to_string())),
            Some(_) => Err(self.err(field, "is not a string")),
        }
    }

    pub(crate) fn i64(&self, field: &'static str) -> Result<i64, BodyError> {
        self.opt_i64(field)?.ok_or_else(|| self.err(field, "is missing"))
    }

    pub(crate) fn opt_i64(&self, field: &'static str) -> Result<Option<i64>, BodyError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v.as_i64().map(Some).ok_or_else(|| self.err(field, "is not an integer")),
        }
    }

    pub(crate) fn i32(&self, field: &'static str) -> Result<i32, BodyError> {
        i32::try_from(self.i64(field)?).map_err(|_| self.err(field, "is out of 32-bit range"))
    }

    pub(crate) fn i32_or(&self, field: &'static str, default: i32) -> Result<i32, BodyError> {
        match self.opt_i64(field)? {
            None => Ok(default),
            Some(v) => i32::try_from(v).map_err(|_| self.err(field, "is out of 32-bit range")),
        }
    }

    pub(crate) fn f64_or(&self, field: &'static str, default: f64) -> Result<f64, BodyError> {
        match self.get(field) {
            None => Ok(default),
            Some(v) => v.as_f64().ok_or_else(|| self.err(field, "is not a number")),
        }
    }

    pub(crate) fn bool_or(&self, field: &'static str, default: bool) -> Result<bool, BodyError> {
        match self.get(field) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| self.err(field, "is not a boolean")),
        }
    }

    pub(crate) fn array(&self, field: &'static str) -> Result<&'a [Value], BodyError> {
        match self.get(field) {
            None => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(_) => Err(self.err(field, "is not an array")),
        }
    }

    pub(crate) fn object(&self, field: &'static str) -> Result<&'a [(Value, Value)], BodyError> {
        match self.get(field) {
            None => Ok(&[]),
            Some(Value::Object(o)) => Ok(o),
            Some(_) => Err(self.err(field, "is not an object")),
        }
    }

    pub(crate) fn enum_or<T>(
        &self,
        field: &'static str,
        parse: fn(&str) -> Option<T>,
        default: T,
    ) -> Result<T, BodyError> {
        match self.opt_str(field)? {
            None => Ok(default),
            Some(s) => parse(&s).ok_or_else(|| self.err(field, "is not a known enum name")),
        }
    }
}

/// Read a `MessageQueue` object.
pub(crate) fn mq_from_value(v: &Value, body: &'static str) -> Result<MessageQueue, BodyError> {
    let o = Obj::new(v, body)?;
    Ok(MessageQueue::new(o.str("topic")?, o.str("brokerName")?, o.i32("queueId")?))
}

/// A `MessageQueue` used as a map key: a bare object (fastjson) or a string holding one.
pub(crate) fn mq_from_key(k: &Value, body: &'static str) -> Result<MessageQueue, BodyError> {
    match k {
        Value::String(s) => {
            let inner = Value::parse(s.as_bytes()).map_err(|source| BodyError::Json { body, source })?;
            mq_from_value(&inner, body)
        }
        other => mq_from_value(other, body),
    }
}

/// Write a `MessageQueue` object (fastjson's alphabetical property order).
pub(crate) fn write_mq(w: &mut JsonWriter, q: &MessageQueue) {
    w.begin_object()
        .field_str("brokerName", &q.broker_name)
        .field_int("queueId", q.queue_id.into())
        .field_str("topic", &q.topic)
        .end_object();
}

/// Write a map keyed by `MessageQueue` the way fastjson does: bare object keys (not standard
/// JSON, but what Java and Go emit and what fastjson reads back).
pub(crate) fn write_mq_map<T>(
    w: &mut JsonWriter,
    entries: &[(MessageQueue, T)],
    mut value: impl FnMut(&mut JsonWriter, &T),
) {
    w.begin_object();
    for (q, v) in entries {
        let mut k = JsonWriter::new();
        write_mq(&mut k, q);
        w.raw_key(&k.finish());
        value(w, v);
    }
    w.end_object();
}
