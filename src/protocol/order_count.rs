//! `orderCountInfo` of an orderly POP answer: how often the broker handed out each message
//! before (`ExtraInfoUtil.parseOrderCountInfo`), which becomes the message's `reconsumeTimes`.
//!
//! Entries are joined by `;`, each `"{retry} {key} {count}"`: key `qo{queueId}%{offset}` counts
//! one message; a bare `{queueId}` gives the least count of that queue's messages (for clients
//! older than per-offset counts). The broker lists only messages counted more than zero:
//! 5.3.3 answered `"0 qo0%1 1;0 0 0"` for a re-pop of offsets 1 and 2 of queue 0.

use super::receipt::{ReceiptError, RetryFlag};

/// The counts of one answer; [`OrderCounts::count`] looks a message up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderCounts {
    /// (queue id, offset, count), in the answer's order.
    offsets: Vec<(i32, i64, i32)>,
    /// (queue id, least count).
    queues: Vec<(i32, i32)>,
}

const LIST: &str = "orderCountInfo";

impl OrderCounts {
    /// Read `orderCountInfo`. An empty text has no counts. Allocates at most one entry per
    /// five bytes of `text`.
    pub fn parse(text: &str) -> Result<Self, ReceiptError> {
        let mut counts = Self::default();
        for entry in text.split(';').filter(|e| !e.is_empty()) {
            let bad = || ReceiptError::Entry { list: LIST, entry: entry.chars().take(128).collect() };
            let mut parts = entry.split(' ');
            let (Some(retry), Some(key), Some(count), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(bad());
            };
            RetryFlag::from_digit(retry).ok_or_else(bad)?;
            let count: i32 = count.parse().map_err(|_| bad())?;
            match key.strip_prefix("qo") {
                Some(rest) => {
                    let (queue, offset) = rest.split_once('%').ok_or_else(bad)?;
                    let queue = queue.parse().map_err(|_| bad())?;
                    counts.offsets.push((queue, offset.parse().map_err(|_| bad())?, count));
                }
                None => counts.queues.push((key.parse().map_err(|_| bad())?, count)),
            }
        }
        Ok(counts)
    }

    /// How often the message at `offset` of `queue_id` was handed out before: its own count,
    /// else its queue's least count, else 0 (as Java's client sets `reconsumeTimes`).
    pub fn count(&self, queue_id: i32, offset: i64) -> i32 {
        self.offsets
            .iter()
            .find(|(q, o, _)| *q == queue_id && *o == offset)
            .map(|e| e.2)
            .or_else(|| self.queues.iter().find(|(q, _)| *q == queue_id).map(|e| e.1))
            .unwrap_or(0)
            .max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_brokers_answer_counts_per_offset_then_per_queue() {
        let c = OrderCounts::parse("0 qo0%1 1;0 0 0").unwrap();
        assert_eq!((c.count(0, 1), c.count(0, 2), c.count(3, 9)), (1, 0, 0));
        let c = OrderCounts::parse("0 qo2%7 3;0 2 2;0 qo1%4 5").unwrap();
        assert_eq!((c.count(2, 7), c.count(2, 8), c.count(1, 4), c.count(1, 5)), (3, 2, 5, 0));
        assert_eq!(OrderCounts::parse("").unwrap(), OrderCounts::default());
    }

    #[test]
    fn malformed_entries_are_typed_errors() {
        for bad in ["0 qo0%1", "0 qo0%1 1 2", "x 0 0", "0 qo01 1", "0 qoa%1 1", "0 q 1", "0 0 z", " ; "] {
            assert!(
                matches!(OrderCounts::parse(bad), Err(ReceiptError::Entry { list: LIST, .. })),
                "{bad:?}"
            );
        }
        assert_eq!(OrderCounts::parse("0 0 -4").unwrap().count(0, 0), 0, "a negative count is none");
    }
}
