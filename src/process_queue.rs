//! `ProcessQueue`: the messages of one queue that were pulled and are not finished yet.
//!
//! It is the only place that decides what may be committed: the **watermark** is the lowest
//! offset still held, or — when nothing is held — the next offset to pull (everything before it
//! was consumed or filtered out). Offsets arrive in increasing order (one pull at a time per
//! queue), so entries live in a `VecDeque` sorted by offset: insert is a push, finishing a message
//! is a binary search, and the watermark is the front. Finished entries in the middle become
//! tombstones until they reach the front.
//!
//! Internal; public (hidden) only so that benches can measure it.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::message::MessageExt;

/// The messages one pull brought, shared by the queue's entries and the batches handed out:
/// dispatching a batch clones an `Arc`, never a message.
pub type Chunk = Arc<Vec<MessageExt>>;

/// Where a held message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryState {
    /// Cached, not handed to user code (orderly, or waiting for a local retry).
    Ready,
    /// In a dispatched batch, or being sent back.
    InFlight,
    /// Finished; a tombstone until it reaches the front.
    Removed,
}

/// One held message: a position in a shared [`Chunk`].
#[derive(Debug)]
pub struct Entry {
    /// Its queue offset.
    pub offset: i64,
    /// The pull it came in.
    pub chunk: Chunk,
    /// Its index in the chunk.
    pub index: u32,
    /// Where it is.
    pub state: EntryState,
}

impl Entry {
    /// The message.
    pub fn msg(&self) -> &MessageExt {
        &self.chunk[self.index as usize]
    }

    /// Replace the message with a changed copy (a local retry counts the attempt).
    pub fn replace(&mut self, msg: MessageExt) {
        self.chunk = Arc::new(vec![msg]);
        self.index = 0;
    }

    /// Point at `chunk[index]` instead: changed copies of several messages share one chunk, so
    /// they can be handed out again as one batch.
    pub fn rechunk(&mut self, chunk: Chunk, index: u32) {
        self.chunk = chunk;
        self.index = index;
    }
}

/// Per-queue cache. Counts and sizes cover live (not removed) entries only.
#[derive(Debug, Default)]
pub struct ProcessQueue {
    entries: VecDeque<Entry>,
    live: usize,
    bytes: usize,
    /// Highest offset ever inserted; −1 before the first.
    max_offset: i64,
}

impl ProcessQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self { max_offset: -1, ..Self::default() }
    }

    /// Insert `chunk[index]` if its offset is above everything inserted so far (pull results
    /// arrive in order; anything else is a duplicate). Returns whether it was inserted.
    pub fn put(&mut self, chunk: &Chunk, index: usize, state: EntryState) -> bool {
        let Some(msg) = chunk.get(index) else { return false };
        let offset = msg.queue_offset;
        if offset <= self.max_offset {
            return false;
        }
        self.max_offset = offset;
        self.live += 1;
        self.bytes += msg.body.len();
        self.entries.push_back(Entry { offset, chunk: chunk.clone(), index: index as u32, state });
        true
    }

    fn index(&self, offset: i64) -> Option<usize> {
        // Offsets are nearly contiguous (gaps only where a filter dropped messages): try the
        // direct position first, then search.
        let front = self.entries.front()?.offset;
        let guess = usize::try_from(offset.checked_sub(front)?).ok()?;
        if self.entries.get(guess).is_some_and(|e| e.offset == offset) {
            return Some(guess);
        }
        self.entries.binary_search_by_key(&offset, |e| e.offset).ok()
    }

    /// The live entry at `offset`.
    pub fn get(&self, offset: i64) -> Option<&Entry> {
        self.index(offset).map(|i| &self.entries[i]).filter(|e| e.state != EntryState::Removed)
    }

    /// The live entry at `offset`, mutably.
    pub fn get_mut(&mut self, offset: i64) -> Option<&mut Entry> {
        let i = self.index(offset)?;
        Some(&mut self.entries[i]).filter(|e| e.state != EntryState::Removed)
    }

    /// Finish the message at `offset`. Returns false if it was not held (already finished, or
    /// never inserted).
    pub fn remove(&mut self, offset: i64) -> bool {
        let Some(i) = self.index(offset) else { return false };
        let e = &mut self.entries[i];
        if e.state == EntryState::Removed {
            return false;
        }
        e.state = EntryState::Removed;
        self.live -= 1;
        self.bytes -= e.msg().body.len();
        while self.entries.front().is_some_and(|e| e.state == EntryState::Removed) {
            self.entries.pop_front();
        }
        true
    }

    /// The first `max` offsets waiting to be handed out, lowest first (orderly consumption
    /// takes them from the front; entries being sent back are skipped).
    pub fn ready(&self, max: usize) -> smallvec::SmallVec<[i64; 8]> {
        self.entries.iter().filter(|e| e.state == EntryState::Ready).take(max).map(|e| e.offset).collect()
    }

    /// Lowest live offset.
    pub fn first_live(&self) -> Option<i64> {
        // The front is never a tombstone.
        self.entries.front().map(|e| e.offset)
    }

    /// What may be committed: the lowest live offset, else `next_offset`.
    pub fn watermark(&self, next_offset: i64) -> i64 {
        self.first_live().unwrap_or(next_offset)
    }

    /// Highest pulled offset minus the lowest unfinished one: how far a restart could replay.
    /// Measured from the highest offset ever pulled, not the highest still cached, so one stuck
    /// message makes it grow however fast the rest is consumed.
    pub fn span(&self) -> i64 {
        self.first_live().map_or(0, |low| self.max_offset - low)
    }

    /// Live messages.
    pub fn count(&self) -> usize {
        self.live
    }

    /// Body bytes of live messages.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Highest offset ever inserted (−1 if none).
    pub fn max_offset(&self) -> i64 {
        self.max_offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn msg(offset: i64, size: usize) -> Chunk {
        let mut m = MessageExt::new("T", vec![0u8; size]);
        m.queue_offset = offset;
        Arc::new(vec![m])
    }

    #[test]
    fn watermark_is_lowest_unfinished_or_next() {
        let mut pq = ProcessQueue::new();
        assert_eq!(pq.watermark(7), 7);
        for o in [10, 11, 12, 15] {
            assert!(pq.put(&msg(o, 10), 0, EntryState::InFlight));
        }
        assert!(!pq.put(&msg(12, 10), 0, EntryState::InFlight), "duplicate");
        assert_eq!((pq.count(), pq.bytes(), pq.watermark(16), pq.span()), (4, 40, 10, 5));
        assert!(pq.remove(11));
        assert!(!pq.remove(11), "twice");
        assert_eq!(pq.watermark(16), 10, "a hole does not move it");
        assert!(pq.remove(10));
        assert_eq!(pq.watermark(16), 12);
        assert!(pq.remove(15));
        assert_eq!((pq.watermark(16), pq.span()), (12, 3), "span keeps the highest pulled offset");
        assert!(pq.remove(12));
        assert_eq!((pq.count(), pq.bytes(), pq.watermark(16), pq.span()), (0, 0, 16, 0));
        assert!(!pq.remove(99));
    }

    proptest! {
        /// The watermark equals the lowest offset not yet removed, whatever the removal order.
        #[test]
        fn watermark_matches_a_model(n in 1usize..60, order in proptest::collection::vec(any::<prop::sample::Index>(), 0..60)) {
            let mut pq = ProcessQueue::new();
            let mut live: std::collections::BTreeSet<i64> = (0..n as i64).map(|i| i * 2).collect();
            for o in &live {
                pq.put(&msg(*o, 1), 0, EntryState::InFlight);
            }
            let next = n as i64 * 2;
            for idx in order {
                let all: Vec<i64> = (0..n as i64).map(|i| i * 2).collect();
                let o = all[idx.index(all.len())];
                prop_assert_eq!(pq.remove(o), live.remove(&o));
                prop_assert_eq!(pq.watermark(next), live.first().copied().unwrap_or(next));
                prop_assert_eq!(pq.count(), live.len());
            }
        }
    }
}
