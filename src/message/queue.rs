//! `MessageQueue`: (topic, broker name, queue id).

use std::fmt;
use std::sync::Arc;

/// One queue of a topic on one broker (`MessageQueue.java`).
///
/// Ordering is Java's `compareTo`: topic, then broker name, then queue id — the order every member
/// of a group sorts queues in before allocation, so it must match exactly. Strings are shared
/// (`Arc<str>`) because a queue key is cloned into every pull, batch and offset entry.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageQueue {
    /// Topic (including `%RETRY%group`).
    pub topic: Arc<str>,
    /// Broker name, e.g. `broker-a`.
    pub broker_name: Arc<str>,
    /// Queue id within the topic on that broker.
    pub queue_id: i32,
}

impl MessageQueue {
    /// A queue.
    pub fn new(topic: impl Into<Arc<str>>, broker_name: impl Into<Arc<str>>, queue_id: i32) -> Self {
        Self { topic: topic.into(), broker_name: broker_name.into(), queue_id }
    }
}

impl fmt::Display for MessageQueue {
    /// Java's `toString()`, the key CONSISTENT_HASH hashes: `MessageQueue [topic=T, brokerName=B, queueId=N]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MessageQueue [topic={}, brokerName={}, queueId={}]",
            self.topic, self.broker_name, self.queue_id
        )
    }
}

impl fmt::Debug for MessageQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}#{}", self.topic, self.broker_name, self.queue_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_order_and_to_string() {
        let mut v = [
            MessageQueue::new("T", "broker-b", 0),
            MessageQueue::new("T", "broker-a", 10),
            MessageQueue::new("T", "broker-a", 2),
            MessageQueue::new("S", "broker-z", 0),
        ];
        v.sort();
        let ids: Vec<_> = v.iter().map(|q| format!("{q:?}")).collect();
        assert_eq!(ids, ["S@broker-z#0", "T@broker-a#2", "T@broker-a#10", "T@broker-b#0"]);
        assert_eq!(v[1].to_string(), "MessageQueue [topic=T, brokerName=broker-a, queueId=2]");
    }
}
