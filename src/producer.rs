//! SEND_MESSAGE_V2 requests and their results: what the send-back fallback, the tests and the CLI
//! need of a producer. Sans-IO: building and reading commands only.

use std::sync::Arc;

use bytes::Bytes;

use crate::message::{CompressionType, Message, MessageQueue, compress, keys};
use crate::protocol::header::{SendMessageRequestHeaderV2, SendMessageResponseHeader};
use crate::protocol::{HeaderError, RemotingCommand, RequestCode, ResponseCode};

/// Producer group of the client-internal producer that carries send-back fallbacks.
pub const CLIENT_INNER_PRODUCER_GROUP: &str = "CLIENT_INNER_PRODUCER";
/// Retry topic prefix (`MixAll.RETRY_GROUP_TOPIC_PREFIX`).
pub const RETRY_TOPIC_PREFIX: &str = "%RETRY%";
/// Dead-letter topic prefix (`MixAll.DLQ_GROUP_TOPIC_PREFIX`).
pub const DLQ_TOPIC_PREFIX: &str = "%DLQ%";

/// `%RETRY%<group>`.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_TOPIC_PREFIX}{group}")
}

/// `%DLQ%<group>`.
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_TOPIC_PREFIX}{group}")
}

/// Body compression for sends, as `DefaultMQProducer` does it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendCompression {
    /// Algorithm (Java default ZLIB, `rocketmq.message.compressType`).
    pub kind: CompressionType,
    /// Compress bodies at least this long (`compressMsgBodyOverHowmuch`, default 4096).
    pub threshold: usize,
}

impl Default for SendCompression {
    fn default() -> Self {
        Self { kind: CompressionType::Zlib, threshold: 4096 }
    }
}

/// Build a SEND_MESSAGE_V2 request for `msg` to `queue`. The caller sets `UNIQ_KEY` if it wants
/// one (see [`UniqIdGenerator`](crate::message::UniqIdGenerator)) and assigns the opaque.
///
/// For `%RETRY%` topics the properties `RECONSUME_TIME` / `MAX_RECONSUME_TIMES` move into header
/// fields `j` / `l`, as the Java producer does.
pub fn send_message_request(
    producer_group: &str,
    msg: &Message,
    queue: &MessageQueue,
    born_timestamp: i64,
    compression: Option<SendCompression>,
) -> RemotingCommand {
    let (header, body) = send_message_parts(producer_group, msg, queue, born_timestamp, compression);
    RemotingCommand::request(RequestCode::SendMessageV2).with_header(&header).with_body(body)
}

/// The header and (possibly compressed) body of a SEND_MESSAGE_V2 for `msg`.
pub fn send_message_parts(
    producer_group: &str,
    msg: &Message,
    queue: &MessageQueue,
    born_timestamp: i64,
    compression: Option<SendCompression>,
) -> (SendMessageRequestHeaderV2, Bytes) {
    let mut properties = msg.properties.clone();
    let mut reconsume_times = None;
    let mut max_reconsume_times = None;
    if msg.topic.starts_with(RETRY_TOPIC_PREFIX) {
        reconsume_times = properties.get(keys::RECONSUME_TIME).and_then(|v| v.parse().ok());
        max_reconsume_times = properties.get(keys::MAX_RECONSUME_TIMES).and_then(|v| v.parse().ok());
        properties = properties.without(keys::RECONSUME_TIME).without(keys::MAX_RECONSUME_TIMES);
    }
    let mut sys_flag = 0;
    let mut body = msg.body.clone();
    if let Some(c) = compression {
        if body.len() >= c.threshold {
            body = compress(c.kind, &body).into();
            sys_flag |= c.kind.sys_flag_bits();
        }
    }
    let header = SendMessageRequestHeaderV2 {
        producer_group: producer_group.to_owned(),
        topic: msg.topic.clone(),
        default_topic: "TBW102".to_owned(),
        default_topic_queue_nums: 4,
        queue_id: queue.queue_id,
        sys_flag,
        born_timestamp,
        flag: msg.flag,
        properties: Some(properties.as_wire_str().to_owned()),
        reconsume_times: Some(reconsume_times.unwrap_or(0)),
        unit_mode: Some(false),
        max_reconsume_times,
        batch: Some(false),
        broker_name: Some(queue.broker_name.to_string()),
    };
    (header, body)
}

/// What a broker said to a send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendResult {
    /// The queue the message went to.
    pub queue: MessageQueue,
    /// Its offset in that queue.
    pub queue_offset: i64,
    /// Offset message id.
    pub offset_msg_id: String,
    /// The response code (SUCCESS, or a flush / slave warning that still means stored).
    pub code: i32,
}

/// Why a send failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The broker refused it.
    #[error("broker answered {code}: {remark}")]
    Broker {
        /// Response code.
        code: i32,
        /// Remark.
        remark: String,
    },
    /// The broker said yes but its header was unreadable.
    #[error("bad send response header: {0}")]
    Header(#[from] HeaderError),
}

/// Read a send response.
pub fn send_result(response: &RemotingCommand, broker_name: &str) -> Result<SendResult, SendError> {
    if !ResponseCode::is_send_ok(response.code) {
        return Err(SendError::Broker { code: response.code, remark: response.remark_str().to_owned() });
    }
    let h: SendMessageResponseHeader = response.header()?;
    let topic: Arc<str> = "".into();
    Ok(SendResult {
        queue: MessageQueue { topic, broker_name: broker_name.into(), queue_id: h.queue_id },
        queue_offset: h.queue_offset,
        offset_msg_id: h.msg_id,
        code: response.code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::CommandHeader;

    #[test]
    fn retry_properties_move_into_the_header() {
        let msg = Message::new("%RETRY%g", "x")
            .with_property(keys::RECONSUME_TIME, "3")
            .with_property(keys::MAX_RECONSUME_TIMES, "16")
            .with_property(keys::RETRY_TOPIC, "T");
        let q = MessageQueue::new("%RETRY%g", "broker-a", 0);
        let cmd = send_message_request("p", &msg, &q, 42, None);
        let h = SendMessageRequestHeaderV2::read_from(&cmd.ext_fields).unwrap();
        assert_eq!((h.reconsume_times, h.max_reconsume_times), (Some(3), Some(16)));
        let props = h.properties.unwrap();
        assert!(props.contains("RETRY_TOPIC\u{1}T") && !props.contains("RECONSUME_TIME"));
        assert_eq!(cmd.code, 310);
    }

    #[test]
    fn compresses_over_threshold() {
        let msg = Message::new("T", vec![b'a'; 5000]);
        let q = MessageQueue::new("T", "b", 1);
        let cmd = send_message_request("p", &msg, &q, 1, Some(SendCompression::default()));
        assert!(cmd.body.len() < 5000);
        assert_eq!(cmd.ext_fields.get("f"), Some("769"), "0x301: compressed + ZLIB");
        let small =
            send_message_request("p", &Message::new("T", "x"), &q, 1, Some(SendCompression::default()));
        assert_eq!(small.ext_fields.get("f"), Some("0"));
    }
}
