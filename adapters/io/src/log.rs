//! Events as log lines.

use rocketmq_push_core::Event;

/// Log `e` with `tracing` at the level it deserves.
pub fn log_event(e: &Event) {
    match e {
        Event::QueuesAssigned { topic, queues } => tracing::info!(%topic, ?queues, "queues assigned"),
        Event::QueuesRevoked { topic, queues } => tracing::info!(%topic, ?queues, "queues revoked"),
        Event::BrokerError { peer, request, code, remark } => {
            tracing::warn!(%peer, %request, %code, %remark, "error answer")
        }
        Event::Malformed { peer, request, error } => {
            tracing::warn!(%peer, %request, %error, "unreadable frame ignored")
        }
        Event::RequestTimeout { peer, request } => {
            tracing::warn!(%peer, %request, "request timed out")
        }
        Event::TopicNotFound { topic } => {
            tracing::warn!(%topic, "topic not found on the name server; retrying")
        }
        Event::OffsetMoved { queue, from, to } => {
            tracing::warn!(?queue, from, to, "offset moved by the broker")
        }
        Event::CorruptPull { queue, error } => {
            tracing::error!(?queue, %error, "pull body did not decode; retrying")
        }
        Event::ConsumeTimeout { batch, queue } => {
            tracing::warn!(%batch, ?queue, "consume timeout: sent back for retry")
        }
        Event::LocalRetry { queue, offset } => {
            tracing::warn!(?queue, offset, "send-back failed twice: retrying locally")
        }
        Event::FailedMessagesDropped { queue, count } => {
            tracing::warn!(?queue, count, "broadcasting: failed messages are not retried")
        }
        Event::UnexpectedResponse { peer, opaque } => {
            tracing::debug!(%peer, opaque, "response matched no request")
        }
        Event::ConnectionLost { peer, reason } => {
            tracing::warn!(%peer, %reason, "connection lost; will reconnect")
        }
        Event::LockFailed { queue } => tracing::warn!(?queue, "could not lock queue; retrying"),
        Event::Terminated => tracing::info!("consumer terminated"),
        other => tracing::info!(?other, "event"),
    }
}
