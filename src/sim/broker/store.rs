//! The simulated broker's storage: topics, consume queues of cached stored records, held pulls,
//! and the store's `getMessage` walk (`DefaultMessageStore.getMessage`, PROTOCOL.md §8.3).

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::ConnId;
use crate::protocol::body::SubscriptionData;
use crate::protocol::header::BoundaryType;
use crate::protocol::{ExpressionType, RemotingCommand};

/// Bytes of one consume-queue entry; the filter scan limit is counted in these.
const CQ_UNIT_SIZE: i64 = 20;
/// `MessageStoreConfig.maxFilterMessageSize`: consume-queue bytes one pull may scan (~800 entries).
const MAX_FILTER_MESSAGE_SIZE: i64 = 16_000;
/// `DefaultMessageStore.MAX_PULL_MSG_SIZE`: hard byte cap of one pull.
const MAX_PULL_MSG_SIZE: usize = 128 << 20;
/// Queues per topic the simulator allocates at most (storage is eager; real brokers have no cap).
pub(super) const MAX_QUEUES: i32 = 4096;

/// One stored message: its encoded record (what a pull body carries) and the consume-queue data.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    /// The stored record, as `encode_stored` wrote it.
    pub(super) record: Bytes,
    /// Store time, ms since the epoch (`SEARCH_OFFSET_BY_TIMESTAMP`).
    pub(super) store_timestamp: i64,
    /// `hashCode()` of the `TAGS` property, 0 without one.
    pub(super) tags_code: i32,
}

/// A pull's message filter (`ExpressionMessageFilter.isMatchedByConsumeQueue`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Filter {
    /// `*`, class-filter mode, or SQL92 (the simulator does not evaluate SQL).
    All,
    /// Match when the entry's tags code is one of these.
    Codes(Vec<i32>),
}

impl Filter {
    /// The filter a subscription stands for.
    pub(super) fn from_subscription(s: &SubscriptionData) -> Self {
        if s.class_filter_mode || s.expression_type != ExpressionType::Tag || s.sub_string == "*" {
            Self::All
        } else {
            Self::Codes(s.code_set.clone())
        }
    }

    /// Whether an entry with this tags code passes.
    pub(super) fn matches(&self, tags_code: i32) -> bool {
        match self {
            Self::All => true,
            Self::Codes(codes) => codes.contains(&tags_code),
        }
    }
}

/// A pull held by long polling (`PullRequestHoldService`).
#[derive(Clone, Debug)]
pub(super) struct Held {
    /// The client connection to answer on.
    pub(super) conn: ConnId,
    /// The request, re-run with suspension disabled when woken.
    pub(super) request: RemotingCommand,
    /// The offset it asked for.
    pub(super) offset: i64,
    /// Suspend time plus the polling time.
    pub(super) deadline: Instant,
    /// Its filter, for arrival notifications.
    pub(super) filter: Filter,
}

/// One consume queue: entries indexed by `offset - min`.
#[derive(Clone, Debug, Default)]
pub(super) struct Queue {
    /// Offset of `entries[0]`.
    pub(super) min: i64,
    /// Stored messages, oldest first.
    pub(super) entries: Vec<Entry>,
    /// Pulls held on this queue, in arrival order.
    pub(super) held: Vec<Held>,
}

/// A topic's configuration and queues.
#[derive(Clone, Debug)]
pub(super) struct Topic {
    /// Name, shared with every record's `MessageExt`.
    pub(super) name: Arc<str>,
    /// Readable queues (pull checks `queueId < readQueueNums`).
    pub(super) read_queue_nums: i32,
    /// Writable queues.
    pub(super) write_queue_nums: i32,
    /// `PermName` bits.
    pub(super) perm: i32,
    /// Topic sys flag.
    pub(super) topic_sys_flag: i32,
    /// Ordered topic.
    pub(super) order: bool,
    /// Storage; at least `max(read, write)` queues, never shrunk.
    pub(super) queues: Vec<Queue>,
}

impl Topic {
    /// A read-write topic with `queues` queues.
    pub(super) fn new(name: &str, queues: i32) -> Self {
        let mut t = Self {
            name: name.into(),
            read_queue_nums: 0,
            write_queue_nums: 0,
            perm: crate::protocol::body::perm::READ | crate::protocol::body::perm::WRITE,
            topic_sys_flag: 0,
            order: false,
            queues: Vec::new(),
        };
        t.set_queue_nums(queues, queues);
        t
    }

    /// Change the queue counts (clamped to `0..=MAX_QUEUES`); storage grows to cover both and
    /// never shrinks (data is kept).
    pub(super) fn set_queue_nums(&mut self, read: i32, write: i32) {
        self.read_queue_nums = read.clamp(0, MAX_QUEUES);
        self.write_queue_nums = write.clamp(0, MAX_QUEUES);
        self.grow(self.read_queue_nums.max(self.write_queue_nums) as usize);
    }

    /// Make sure queue `n - 1` exists in storage.
    pub(super) fn grow(&mut self, n: usize) {
        if self.queues.len() < n {
            self.queues.resize_with(n, Queue::default);
        }
    }

    /// The queue count shown by the inspection API and the route: `max(read, write)`.
    pub(super) fn queue_nums(&self) -> i32 {
        self.read_queue_nums.max(self.write_queue_nums)
    }
}

/// The store's verdict on one pull (`GetMessageStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GetStatus {
    /// Messages returned.
    Found,
    /// Everything scanned was filtered out.
    NoMatchedMessage,
    /// The queue never held a message.
    NoMessageInQueue,
    /// Below the min offset.
    OffsetTooSmall,
    /// Exactly at the max offset: caught up.
    OffsetOverflowOne,
    /// Beyond the max offset.
    OffsetOverflowBadly,
}

impl GetStatus {
    /// The Java enum name, which the broker puts in the response remark.
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Found => "FOUND",
            Self::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            Self::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
            Self::OffsetTooSmall => "OFFSET_TOO_SMALL",
            Self::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            Self::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
        }
    }
}

/// What one pull gets from the store.
#[derive(Clone, Debug)]
pub(super) struct GetResult {
    /// Status.
    pub(super) status: GetStatus,
    /// Next offset the client should ask for.
    pub(super) next_begin_offset: i64,
    /// Queue min offset.
    pub(super) min_offset: i64,
    /// Queue max offset.
    pub(super) max_offset: i64,
    /// Concatenated records when FOUND.
    pub(super) body: Bytes,
}

/// The caps of one pull.
#[derive(Clone, Copy, Debug)]
pub(super) struct PullLimits {
    /// The request's `maxMsgNums`.
    pub(super) max_msg_nums: i32,
    /// `maxTransferCountOnMessageInMemory`.
    pub(super) max_transfer_count: usize,
    /// `maxTransferBytesOnMessageInMemory`.
    pub(super) max_transfer_bytes: usize,
}

impl PullLimits {
    /// `DefaultMessageStore.isTheBatchFull` for in-memory data: the first message always fits.
    fn batch_full(&self, size: usize, count: usize, total: usize) -> bool {
        if total == 0 || count == 0 {
            return false;
        }
        count as i64 + 1 > i64::from(self.max_msg_nums)
            || total + size > MAX_PULL_MSG_SIZE
            || total + size > self.max_transfer_bytes
            || count >= self.max_transfer_count
    }
}

impl Queue {
    /// One past the last offset.
    pub(super) fn max_offset(&self) -> i64 {
        self.min + self.entries.len() as i64
    }

    /// The entry at `offset`, if still stored.
    pub(super) fn entry(&self, offset: i64) -> Option<&Entry> {
        let i = offset.checked_sub(self.min)?;
        usize::try_from(i).ok().and_then(|i| self.entries.get(i))
    }

    pub(super) fn entry_mut(&mut self, offset: i64) -> Option<&mut Entry> {
        let i = offset.checked_sub(self.min)?;
        usize::try_from(i).ok().and_then(|i| self.entries.get_mut(i))
    }

    /// `DefaultMessageStore.getMessage`: status, corrected next offset and the records.
    ///
    /// The scan stops after ~800 consume-queue entries (`maxFilterMessageSize`), when the batch
    /// is full, or at the max offset. `nextBeginOffset` moves past filtered-out entries too.
    pub(super) fn get(&self, offset: i64, limits: &PullLimits, filter: &Filter) -> GetResult {
        let min = self.min;
        let max = self.max_offset();
        let mut result = GetResult {
            status: GetStatus::NoMessageInQueue,
            next_begin_offset: offset,
            min_offset: min,
            max_offset: max,
            body: Bytes::new(),
        };
        if max == 0 {
            result.next_begin_offset = 0;
            return result;
        }
        if offset < min {
            result.status = GetStatus::OffsetTooSmall;
            result.next_begin_offset = min;
            return result;
        }
        if offset == max {
            result.status = GetStatus::OffsetOverflowOne;
            return result;
        }
        if offset > max {
            result.status = GetStatus::OffsetOverflowBadly;
            result.next_begin_offset = max;
            return result;
        }
        result.status = GetStatus::NoMatchedMessage;
        let scan_limit =
            MAX_FILTER_MESSAGE_SIZE.max(i64::from(limits.max_msg_nums).saturating_mul(CQ_UNIT_SIZE));
        let (mut count, mut total, mut first) = (0usize, 0usize, None);
        let mut i = offset;
        while i < max {
            if (i - offset).saturating_mul(CQ_UNIT_SIZE) > scan_limit {
                break;
            }
            let e = &self.entries[(i - min) as usize];
            let size = e.record.len();
            if limits.batch_full(size, count, total) {
                break;
            }
            result.next_begin_offset = i + 1;
            i += 1;
            if !filter.matches(e.tags_code) {
                continue;
            }
            first.get_or_insert(e);
            count += 1;
            total += size;
            result.status = GetStatus::Found;
        }
        if let Some(first) = first {
            result.body = if count == 1 {
                first.record.clone()
            } else {
                // Every match in [offset, next) was taken: the loop breaks before advancing.
                let mut body = BytesMut::with_capacity(total);
                for e in &self.entries[(offset - min) as usize..(result.next_begin_offset - min) as usize] {
                    if filter.matches(e.tags_code) {
                        body.extend_from_slice(&e.record);
                    }
                }
                body.freeze()
            };
        }
        result
    }

    /// Drop entries below `new_min` (retention), clamped to `[min, max]`.
    pub(super) fn truncate(&mut self, new_min: i64) {
        let new_min = new_min.clamp(self.min, self.max_offset());
        self.entries.drain(..(new_min - self.min) as usize);
        self.min = new_min;
    }

    /// `getOffsetInQueueByTime`. LOWER: the first offset stored at or after `timestamp`, else
    /// the max offset. UPPER: the last offset stored at or before it, else 0 (as Java).
    pub(super) fn search_by_time(&self, timestamp: i64, boundary: BoundaryType) -> i64 {
        if self.entries.is_empty() {
            return if boundary == BoundaryType::Lower { self.max_offset() } else { 0 };
        }
        match boundary {
            BoundaryType::Lower => {
                self.min + self.entries.partition_point(|e| e.store_timestamp < timestamp) as i64
            }
            BoundaryType::Upper => match self.entries.partition_point(|e| e.store_timestamp <= timestamp) {
                0 => 0,
                n => self.min + n as i64 - 1,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(tags: &[i32]) -> Queue {
        let entries = tags
            .iter()
            .enumerate()
            .map(|(i, t)| Entry {
                record: Bytes::from(vec![i as u8; 10]),
                store_timestamp: 100 + i as i64,
                tags_code: *t,
            })
            .collect();
        Queue { min: 0, entries, held: Vec::new() }
    }

    const LIMITS: PullLimits =
        PullLimits { max_msg_nums: 32, max_transfer_count: 32, max_transfer_bytes: 256 << 10 };

    #[test]
    fn statuses_and_corrections() {
        let empty = Queue::default();
        let r = empty.get(5, &LIMITS, &Filter::All);
        assert_eq!((r.status, r.next_begin_offset), (GetStatus::NoMessageInQueue, 0));
        let mut q = queue(&[0; 10]);
        q.truncate(4);
        assert_eq!((q.min, q.max_offset()), (4, 10));
        assert_eq!(q.get(1, &LIMITS, &Filter::All).next_begin_offset, 4);
        assert_eq!(q.get(1, &LIMITS, &Filter::All).status, GetStatus::OffsetTooSmall);
        assert_eq!(q.get(10, &LIMITS, &Filter::All).status, GetStatus::OffsetOverflowOne);
        let r = q.get(12, &LIMITS, &Filter::All);
        assert_eq!((r.status, r.next_begin_offset), (GetStatus::OffsetOverflowBadly, 10));
        let r = q.get(4, &LIMITS, &Filter::All);
        assert_eq!((r.status, r.next_begin_offset, r.body.len()), (GetStatus::Found, 10, 60));
        q.truncate(100);
        assert_eq!((q.min, q.max_offset(), q.entries.len()), (10, 10, 0));
    }

    #[test]
    fn caps_and_filter_scan() {
        let q = queue(&[0; 100]);
        let few = PullLimits { max_msg_nums: 5, ..LIMITS };
        assert_eq!(q.get(0, &few, &Filter::All).next_begin_offset, 5);
        let bytes = PullLimits { max_transfer_bytes: 25, ..LIMITS };
        assert_eq!(q.get(0, &bytes, &Filter::All).body.len(), 20);
        let tiny = PullLimits { max_transfer_bytes: 1, ..LIMITS };
        assert_eq!(q.get(0, &tiny, &Filter::All).body.len(), 10, "the first message always goes");
        assert_eq!(q.get(0, &LIMITS, &Filter::All).next_begin_offset, 32);

        let mut tags = vec![1; 2000];
        tags[1500] = 7;
        tags[3] = 7;
        let q = queue(&tags);
        let f = Filter::Codes(vec![7]);
        let r = q.get(0, &LIMITS, &f);
        assert_eq!((r.status, r.next_begin_offset, r.body.len()), (GetStatus::Found, 801, 10));
        let r = q.get(4, &LIMITS, &f);
        assert_eq!(
            (r.status, r.next_begin_offset),
            (GetStatus::NoMatchedMessage, 805),
            "801 entries scanned"
        );
        let r = q.get(1000, &LIMITS, &f);
        assert_eq!((r.status, r.next_begin_offset), (GetStatus::Found, 1801));
        assert_eq!(&r.body[..], &[1500u16 as u8; 10][..]);
    }

    #[test]
    fn search_by_time() {
        let mut q = queue(&[0; 5]); // store times 100..=104
        assert_eq!(q.search_by_time(102, BoundaryType::Lower), 2);
        assert_eq!(q.search_by_time(0, BoundaryType::Lower), 0);
        assert_eq!(q.search_by_time(999, BoundaryType::Lower), 5);
        assert_eq!(q.search_by_time(102, BoundaryType::Upper), 2);
        assert_eq!(q.search_by_time(50, BoundaryType::Upper), 0);
        q.truncate(2);
        assert_eq!(q.search_by_time(0, BoundaryType::Lower), 2);
    }
}
