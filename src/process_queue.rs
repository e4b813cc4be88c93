//! `ProcessQueue`: the messages of one queue that were pulled and are not finished yet.
//!
//! It is the only place that decides what may be committed: the **watermark** is the lowest
//! offset still held, or — when nothing is held — the next offset to pull (everything before it
//! was consumed or filtered out). Offsets arrive in increasing order (one pull at a time per
//! queue), so entries live in a `Vec` sorted by offset: insert is a push, finishing a message
//! is a direct index (or a binary search past a filter's gaps), and the watermark is the front.
//! Finished entries in the middle become tombstones until they reach the front.
//!
//! Entries name their pull's [`Chunk`] by a number in the queue's own chunk table rather than
//! each holding an `Arc` of it: a pull of 32 costs one reference-count update, not 32 atomic
//! increments and 32 decrements, and an entry stays 24 bytes with its body size in it, so
//! finishing a message never reads the message.
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

/// One held message: a position in a chunk of the queue's table.
#[derive(Debug)]
struct Entry {
    offset: i64,
    /// Its chunk's number in [`Chunks`].
    chunk: u32,
    /// Its index in the chunk.
    index: u32,
    /// Its body size, as counted in [`ProcessQueue::bytes`].
    size: u32,
    state: EntryState,
}

/// The chunks live entries point into, numbered in the order they came. Numbers wrap (a queue
/// may see more than 2³² pulls in its life); fewer than 2³² are ever held at once, so a number
/// names one chunk while it lives. A chunk goes when its last entry is finished or moved to
/// another chunk; the table's front is trimmed as chunks go.
#[derive(Debug, Default)]
struct Chunks {
    slots: VecDeque<Slot>,
    /// The number of `slots[0]`.
    first: u32,
}

#[derive(Debug)]
struct Slot {
    chunk: Option<Chunk>,
    /// Live entries pointing here.
    refs: u32,
}

impl Chunks {
    /// A number for `chunk`, counting `n` more entries in it: the last one's if it is the same
    /// chunk (the entries of one pull arrive together).
    fn add(&mut self, chunk: &Chunk, n: u32) -> u32 {
        if let Some(last) = self.slots.back_mut()
            && last.chunk.as_ref().is_some_and(|c| Arc::ptr_eq(c, chunk))
        {
            last.refs += n;
            return self.first.wrapping_add(self.slots.len() as u32 - 1);
        }
        self.slots.push_back(Slot { chunk: Some(chunk.clone()), refs: n });
        self.first.wrapping_add(self.slots.len() as u32 - 1)
    }

    /// The number [`add`](Self::add) would give `chunk` now.
    fn number_for(&self, chunk: &Chunk) -> u32 {
        let same = self.slots.back().is_some_and(|s| s.chunk.as_ref().is_some_and(|c| Arc::ptr_eq(c, chunk)));
        self.first.wrapping_add(self.slots.len() as u32 - u32::from(same))
    }

    fn get(&self, id: u32) -> &Chunk {
        let slot = &self.slots[id.wrapping_sub(self.first) as usize];
        slot.chunk.as_ref().expect("an entry's chunk lives while the entry does")
    }

    /// One entry fewer in chunk `id`.
    #[inline(always)]
    fn release(&mut self, id: u32) {
        let slot = &mut self.slots[id.wrapping_sub(self.first) as usize];
        slot.refs -= 1;
        if slot.refs == 0 {
            slot.chunk = None;
            while self.slots.front().is_some_and(|s| s.chunk.is_none()) {
                self.slots.pop_front();
                self.first = self.first.wrapping_add(1);
            }
        }
    }
}

/// A live entry, read-only.
#[derive(Clone, Copy, Debug)]
pub struct Held<'a> {
    entry: &'a Entry,
    chunks: &'a Chunks,
}

impl<'a> Held<'a> {
    /// The message.
    pub fn msg(&self) -> &'a MessageExt {
        &self.chunks.get(self.entry.chunk)[self.entry.index as usize]
    }

    /// Where it is.
    pub fn state(&self) -> EntryState {
        self.entry.state
    }
}

/// A live entry, to change.
#[derive(Debug)]
pub struct HeldMut<'a> {
    entry: &'a mut Entry,
    chunks: &'a mut Chunks,
}

impl HeldMut<'_> {
    /// The message.
    pub fn msg(&self) -> &MessageExt {
        &self.chunks.get(self.entry.chunk)[self.entry.index as usize]
    }

    /// The chunk it is in.
    pub fn chunk(&self) -> &Chunk {
        self.chunks.get(self.entry.chunk)
    }

    /// Its chunk's number: two entries are in the same chunk exactly when these are equal.
    pub fn chunk_id(&self) -> u32 {
        self.entry.chunk
    }

    /// Its index in its chunk.
    pub fn index(&self) -> usize {
        self.entry.index as usize
    }

    /// Where it is.
    pub fn state(&self) -> EntryState {
        self.entry.state
    }

    /// Move it (`Ready` or `InFlight`; finishing is [`ProcessQueue::remove`]).
    pub fn set_state(&mut self, state: EntryState) {
        debug_assert_ne!(state, EntryState::Removed, "finish with ProcessQueue::remove");
        self.entry.state = state;
    }

    /// Replace the message with a changed copy (a local retry counts the attempt). The body
    /// counted for it stays the one it came with.
    pub fn replace(&mut self, msg: MessageExt) {
        self.rechunk(&Arc::new(vec![msg]), 0);
    }

    /// Point at `chunk[index]` instead: changed copies of several messages share one chunk, so
    /// they can be handed out again as one batch.
    pub fn rechunk(&mut self, chunk: &Chunk, index: u32) {
        let old = self.entry.chunk;
        self.entry.chunk = self.chunks.add(chunk, 1);
        self.entry.index = index;
        self.chunks.release(old);
    }
}

/// Per-queue cache. Counts and sizes cover live (not removed) entries only.
#[derive(Debug, Default)]
pub struct ProcessQueue {
    /// Entries by offset; `entries[head..]` are held (a `Vec` with a moving front indexes
    /// without `VecDeque`'s wrap-around arithmetic; the front is compacted away now and then).
    entries: Vec<Entry>,
    head: usize,
    chunks: Chunks,
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
        let Some(entry) = self.entry(msg, self.chunks.number_for(chunk), index, state) else { return false };
        self.chunks.add(chunk, 1);
        self.compact();
        self.entries.push(entry);
        true
    }

    /// Drop the finished front before adding, once it is at least half of the `Vec`: each entry
    /// is moved at most once per doubling, and the `Vec` grows only while at least half of it is
    /// held.
    #[inline]
    fn compact(&mut self) {
        if self.head > 0 && self.head * 2 >= self.entries.len() {
            self.entries.drain(..self.head);
            self.head = 0;
        }
    }

    /// Insert a whole pull, in order, skipping each message whose offset is not above everything
    /// inserted before it (a duplicate, or a broker answer out of order); `inserted` hears each
    /// offset taken. One table slot and one reference count for the lot. Returns how many.
    pub fn put_all(&mut self, chunk: &Chunk, state: EntryState, mut inserted: impl FnMut(i64)) -> usize {
        let number = self.chunks.number_for(chunk);
        self.compact();
        self.entries.reserve(chunk.len());
        let mut n = 0;
        for (index, msg) in chunk.iter().enumerate() {
            if let Some(entry) = self.entry(msg, number, index, state) {
                inserted(entry.offset);
                self.entries.push(entry);
                n += 1;
            }
        }
        if n > 0 {
            // A pull is far under 2³² messages (a frame is under 2 GiB).
            self.chunks.add(chunk, u32::try_from(n).unwrap_or(u32::MAX));
        }
        n
    }

    /// The entry for `msg` at `chunk[index]`, counted as live, if its offset is new.
    #[inline]
    fn entry(&mut self, msg: &MessageExt, chunk: u32, index: usize, state: EntryState) -> Option<Entry> {
        let offset = msg.queue_offset;
        if offset <= self.max_offset {
            return None;
        }
        // A frame is under 2 GiB, so neither fits a u32 only in theory; saturate rather than wrap.
        let size = u32::try_from(msg.body.len()).unwrap_or(u32::MAX);
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        self.max_offset = offset;
        self.live += 1;
        self.bytes += size as usize;
        Some(Entry { offset, chunk, index, size, state })
    }

    #[inline]
    fn index(&self, offset: i64) -> Option<usize> {
        // Offsets are nearly contiguous (gaps only where a filter dropped messages): try the
        // direct position first, then search.
        let held = &self.entries[self.head..];
        let front = held.first()?.offset;
        let guess = usize::try_from(offset.checked_sub(front)?).ok()?;
        if held.get(guess).is_some_and(|e| e.offset == offset) {
            return Some(self.head + guess);
        }
        held.binary_search_by_key(&offset, |e| e.offset).ok().map(|i| self.head + i)
    }

    /// The live entry at `offset`.
    pub fn get(&self, offset: i64) -> Option<Held<'_>> {
        let entry = &self.entries[self.index(offset)?];
        (entry.state != EntryState::Removed).then_some(Held { entry, chunks: &self.chunks })
    }

    /// The live entry at `offset`, to change.
    pub fn get_mut(&mut self, offset: i64) -> Option<HeldMut<'_>> {
        let i = self.index(offset)?;
        let entry = &mut self.entries[i];
        (entry.state != EntryState::Removed).then_some(HeldMut { entry, chunks: &mut self.chunks })
    }

    /// Finish the message at `offset`. Returns false if it was not held (already finished, or
    /// never inserted).
    pub fn remove(&mut self, offset: i64) -> bool {
        let Some(e) = self.index(offset).and_then(|i| self.entries.get_mut(i)) else { return false };
        if e.state == EntryState::Removed {
            return false;
        }
        e.state = EntryState::Removed;
        self.live -= 1;
        self.bytes -= e.size as usize;
        // A tombstone needs no message: its chunk may go now.
        self.chunks.release(e.chunk);
        while self.entries.get(self.head).is_some_and(|e| e.state == EntryState::Removed) {
            self.head += 1;
        }
        if self.head == self.entries.len() {
            self.entries.clear();
            self.head = 0;
        }
        true
    }

    /// The first `max` offsets waiting to be handed out, lowest first (orderly consumption
    /// takes them from the front; entries being sent back are skipped).
    pub fn ready(&self, max: usize) -> smallvec::SmallVec<[i64; 8]> {
        self.entries[self.head..]
            .iter()
            .filter(|e| e.state == EntryState::Ready)
            .take(max)
            .map(|e| e.offset)
            .collect()
    }

    /// Lowest live offset.
    #[inline]
    pub fn first_live(&self) -> Option<i64> {
        // The front is never a tombstone.
        self.entries.get(self.head).map(|e| e.offset)
    }

    /// What may be committed: the lowest live offset, else `next_offset`.
    #[inline]
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

    /// Chunks still referenced (for tests: finished messages must not pin their pull).
    #[cfg(test)]
    fn chunks_held(&self) -> usize {
        self.chunks.slots.iter().filter(|s| s.chunk.is_some()).count()
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

    fn pull(first: i64, n: i64) -> Chunk {
        Arc::new(
            (first..first + n)
                .map(|o| {
                    let mut m = MessageExt::new("T", vec![0u8; 3]);
                    m.queue_offset = o;
                    m
                })
                .collect(),
        )
    }

    #[test]
    fn a_pull_is_kept_while_any_of_its_messages_is_held_and_no_longer() {
        let mut pq = ProcessQueue::new();
        let (a, b) = (pull(0, 4), pull(4, 4));
        for c in [&a, &b] {
            for i in 0..4 {
                assert!(pq.put(c, i, EntryState::InFlight));
            }
        }
        assert_eq!((Arc::strong_count(&a), Arc::strong_count(&b), pq.chunks_held()), (2, 2, 2));
        for o in [0, 1, 2] {
            pq.remove(o);
        }
        // A finished message in the middle of the next pull does not pin the first.
        pq.remove(5);
        assert_eq!(Arc::strong_count(&a), 2, "offset 3 still holds the first pull");
        pq.remove(3);
        assert_eq!((Arc::strong_count(&a), pq.chunks_held()), (1, 1));
        assert_eq!(pq.get(4).map(|e| e.msg().queue_offset), Some(4));
        for o in [4, 6, 7] {
            pq.remove(o);
        }
        assert_eq!((Arc::strong_count(&b), pq.chunks_held(), pq.count(), pq.bytes()), (1, 0, 0, 0));
    }

    #[test]
    fn a_replaced_message_leaves_its_pull_and_keeps_its_counted_size() {
        let mut pq = ProcessQueue::new();
        let a = pull(0, 2);
        pq.put(&a, 0, EntryState::InFlight);
        pq.put(&a, 1, EntryState::InFlight);
        let mut again = pq.get(1).unwrap().msg().clone();
        again.reconsume_times = 1;
        again.body = vec![0u8; 100].into();
        let mut e = pq.get_mut(1).unwrap();
        e.replace(again);
        e.set_state(EntryState::Ready);
        assert_eq!((e.msg().reconsume_times, e.state()), (1, EntryState::Ready));
        pq.remove(0);
        assert_eq!(Arc::strong_count(&a), 1, "neither entry points into the pull any more");
        assert_eq!((pq.chunks_held(), pq.bytes()), (1, 3));
        assert_eq!(pq.ready(8).as_slice(), &[1]);
        pq.remove(1);
        assert_eq!((pq.chunks_held(), pq.bytes(), pq.count()), (0, 0, 0));
    }

    #[test]
    fn a_whole_pull_is_put_once_in_offset_order() {
        let mut pq = ProcessQueue::new();
        // A broker answer out of order: 4 comes after 6 and is not above what was put.
        let c: Chunk = Arc::new(
            [5, 6, 4, 7]
                .map(|o| {
                    let mut m = MessageExt::new("T", vec![0u8; 10]);
                    m.queue_offset = o;
                    m
                })
                .to_vec(),
        );
        let mut taken = Vec::new();
        assert_eq!(pq.put_all(&c, EntryState::InFlight, |o| taken.push(o)), 3);
        assert_eq!(taken, [5, 6, 7]);
        assert_eq!((pq.count(), pq.bytes(), pq.max_offset(), Arc::strong_count(&c)), (3, 30, 7, 2));
        assert_eq!(pq.put_all(&c, EntryState::InFlight, |_| panic!("a duplicate was taken")), 0);
        assert_eq!((pq.count(), pq.chunks_held(), Arc::strong_count(&c)), (3, 1, 2));
        assert_eq!(pq.get(7).map(|e| e.msg().queue_offset), Some(7), "the entry names its index");
        for o in [7, 5, 6] {
            assert!(pq.remove(o));
        }
        assert_eq!((pq.count(), pq.chunks_held(), Arc::strong_count(&c)), (0, 0, 1));
        // A new pull after the queue emptied and compacted still finds its entries.
        let d = pull(8, 40);
        assert_eq!(pq.put_all(&d, EntryState::Ready, |_| {}), 40);
        assert_eq!(pq.ready(2).as_slice(), &[8, 9]);
        assert_eq!((pq.watermark(48), pq.span()), (8, 39));
    }

    #[test]
    fn chunk_numbers_wrap_around() {
        let mut pq = ProcessQueue::new();
        pq.chunks.first = u32::MAX - 2;
        let mut next = 0;
        for round in 0..6 {
            let c = pull(next, 3);
            for i in 0..3 {
                assert!(pq.put(&c, i, EntryState::InFlight));
            }
            // Keep one of each pull for a round, so live numbers straddle the wrap.
            if round > 0 {
                for o in next - 3..next {
                    assert!(pq.remove(o));
                }
            }
            assert_eq!(pq.get_mut(next + 1).map(|e| e.msg().queue_offset), Some(next + 1));
            next += 3;
        }
        assert_eq!((pq.count(), pq.chunks_held()), (3, 1));
    }

    proptest! {
        /// Pulls and finishes interleaved (so the front is compacted while entries are held): the
        /// watermark, counts and lookups agree with a set of the held offsets.
        #[test]
        fn interleaved_pulls_and_finishes_match_a_model(ops in proptest::collection::vec((0u8..40, any::<prop::sample::Index>()), 1..200)) {
            let mut pq = ProcessQueue::new();
            let mut live = std::collections::BTreeSet::new();
            let mut next = 0i64;
            for (n, pick) in ops {
                if n < 8 {
                    // A pull of n messages; a filter's gap now and then.
                    next += i64::from(n % 3 == 0);
                    let c = pull(next, i64::from(n));
                    pq.put_all(&c, EntryState::InFlight, |o| { live.insert(o); });
                    next += i64::from(n);
                } else if !live.is_empty() {
                    let o = *live.iter().nth(pick.index(live.len())).unwrap();
                    prop_assert!(pq.remove(o));
                    live.remove(&o);
                }
                prop_assert_eq!(pq.watermark(next), live.first().copied().unwrap_or(next));
                prop_assert_eq!((pq.count(), pq.bytes()), (live.len(), live.len() * 3));
                for o in live.iter().take(3) {
                    prop_assert_eq!(pq.get(*o).map(|e| e.msg().queue_offset), Some(*o));
                }
            }
        }

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
