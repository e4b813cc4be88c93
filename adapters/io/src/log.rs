//! Events as log lines: what each means, and repeats of one cause summarised per interval.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rocketmq_push_core::{DisconnectReason, Event};

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
        Event::TopicRefused { topic, peer, code, remark } => {
            tracing::error!(%topic, %peer, %code, %remark, "no permission to consume this topic: retrying every 30 s")
        }
        Event::OffsetMoved { queue, from, to } => {
            tracing::warn!(?queue, from, to, "offset moved by the broker")
        }
        Event::CorruptPull { queue, error } => {
            tracing::error!(?queue, %error, "pull body did not decode; retrying")
        }
        Event::RecordsOutOfRange { queue, count, requested, max } => {
            tracing::error!(?queue, count, requested, max, "records outside the offsets asked for: dropped")
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
        Event::QueuesPaused { selector } => tracing::info!(?selector, "paused"),
        Event::QueuesResumed { selector } => tracing::info!(?selector, "resumed"),
        Event::Terminated => tracing::info!("consumer terminated"),
        other => tracing::info!(?other, "event"),
    }
}

/// The cause an event reports, for grouping repeats: kind, peer or queue, and the kind of
/// failure — not its details (a remark, an OS message). `None`: always worth its own line.
pub fn cause(e: &Event) -> Option<String> {
    Some(match e {
        Event::BrokerError { peer, request, code, .. } => format!("{peer} answered {request} with {code}"),
        Event::Malformed { peer, request, .. } => format!("unreadable {request} frame from {peer}"),
        Event::RequestTimeout { peer, request } => format!("{request} to {peer} timed out"),
        Event::TopicNotFound { topic } => format!("topic {topic} not found"),
        Event::TopicRefused { topic, .. } => format!("topic {topic} refused"),
        Event::CorruptPull { queue, .. } => format!("unreadable pull from {queue:?}"),
        Event::RecordsOutOfRange { queue, .. } => format!("records out of range from {queue:?}"),
        Event::ConsumeTimeout { queue, .. } => format!("consume timeouts on {queue:?}"),
        Event::LocalRetry { queue, .. } => format!("local retries on {queue:?}"),
        Event::UnexpectedResponse { peer, .. } => format!("unexpected responses from {peer}"),
        Event::LockFailed { queue } => format!("lock refused on {queue:?}"),
        Event::ConnectionLost { peer, reason } => {
            let kind = match reason {
                DisconnectReason::Closed => "closed by the peer",
                DisconnectReason::ClosedUnanswered => "closed unanswered",
                DisconnectReason::Io(_) => "i/o error",
                DisconnectReason::ConnectFailed(_) => "connect failed",
                DisconnectReason::BackingOff => "backing off",
                DisconnectReason::Decode(_) => "undecodable bytes",
                DisconnectReason::Unresponsive { .. } => "unresponsive",
                DisconnectReason::Stalled { .. } => "stalled in a frame",
                _ => "lost",
            };
            format!("connection to {peer}: {kind}")
        }
        _ => return None,
    })
}

/// Repeats of one cause within a window are counted, not reported one by one: a broker that
/// stays down makes one line per interval with a count, not a line per attempt (nor silence).
#[derive(Debug)]
pub struct Repeats {
    window: Duration,
    /// Cause → (when its window started, repeats suppressed since).
    seen: HashMap<String, (Instant, u64)>,
}

impl Repeats {
    /// Group repeats over `window`.
    pub fn new(window: Duration) -> Self {
        Self { window, seen: HashMap::new() }
    }

    /// Whether to report `e` now: `Some(n)` yes, `n` repeats of its cause having been suppressed
    /// since the last report; `None`: a repeat inside the window, counted.
    pub fn note(&mut self, e: &Event, now: Instant) -> Option<u64> {
        let Some(cause) = cause(e) else { return Some(0) };
        match self.seen.get_mut(&cause) {
            Some((since, n)) if now.saturating_duration_since(*since) < self.window => {
                *n += 1;
                None
            }
            Some((since, n)) => {
                let before = std::mem::take(n);
                *since = now;
                Some(before)
            }
            None => {
                self.seen.insert(cause, (now, 0));
                Some(0)
            }
        }
    }

    /// Causes whose window ended with repeats suppressed: `(cause, count)`, each once.
    pub fn due(&mut self, now: Instant) -> Vec<(String, u64)> {
        let window = self.window;
        let mut out = Vec::new();
        self.seen.retain(|cause, (since, n)| {
            let ended = now.saturating_duration_since(*since) >= window;
            if ended && *n > 0 {
                out.push((cause.clone(), *n));
            }
            !ended
        });
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocketmq_push_core::{PeerAddr, RequestCode};

    #[test]
    fn repeats_of_one_cause_make_one_line_per_window_with_a_count() {
        let t0 = Instant::now();
        let mut r = Repeats::new(Duration::from_secs(10));
        let timeout = |peer: &str| Event::RequestTimeout {
            peer: PeerAddr::new(peer),
            request: RequestCode::PullMessage.into(),
        };
        assert_eq!(r.note(&timeout("a:1"), t0), Some(0), "the first is reported");
        for i in 1..=5 {
            assert_eq!(r.note(&timeout("a:1"), t0 + Duration::from_secs(i)), None, "repeats are counted");
        }
        assert_eq!(r.note(&timeout("b:1"), t0), Some(0), "another peer is another cause");
        assert!(r.due(t0 + Duration::from_secs(9)).is_empty(), "the window is still open");
        let due = r.due(t0 + Duration::from_secs(10));
        assert_eq!(due, vec![("PULL_MESSAGE (11) to a:1 timed out".to_owned(), 5)]);
        assert!(r.due(t0 + Duration::from_secs(30)).is_empty(), "each summary once");
        assert_eq!(r.note(&timeout("a:1"), t0 + Duration::from_secs(31)), Some(0));
        assert_eq!(r.note(&Event::Terminated, t0), Some(0), "not grouped");
        assert_eq!(r.note(&Event::Terminated, t0), Some(0));
    }
}
