//! Orderly POP (`order=true`) on the simulated broker: the order info 5.3.3 keeps per (group,
//! topic, queue) in `ConsumerOrderInfoManager`, and the wake-ups of
//! `ConsumerOrderInfoLockManager` (`enableNotifyAfterPopOrderLockRelease`, on by default).
//!
//! An orderly pop records the offsets it returned. The queue stays blocked for the group while
//! one of them is neither acked nor visible again (its own next visible time from a change of
//! invisible time, else `popTime + invisibleTime`). Acks commit the first unacked offset
//! (`commitAndNext`), so the next pop reads the same messages again from the topic itself and
//! counts each attempt. No checkpoint, no revive.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::MAX_WAIT;

/// (group, topic, queue id).
pub(super) type OrderKey = (String, String, i32);

/// What `commitAndNext` decided for an orderly ack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Commit {
    /// Commit `offset`; `newly` when this ack marked the message (false: marked already).
    Next { offset: i64, newly: bool },
    /// A receipt of an earlier pop (not the order info's popTime): no effect (-2).
    Stale,
    /// The offset is not in the order info (-1): MESSAGE_ILLEGAL.
    Illegal,
}

/// A queue's last orderly pop (`ConsumerOrderInfoManager.OrderInfo`).
#[derive(Clone, Debug)]
pub(super) struct OrderInfo {
    attempt_id: Option<String>,
    pop_time: i64,
    invisible_time: i64,
    offsets: Vec<i64>,
    /// `commitOffsetBit`.
    acked: Vec<bool>,
    /// `offsetNextVisibleTime`, set by a change of invisible time.
    next_visible: BTreeMap<i64, i64>,
    /// `offsetConsumedCount`: how often each offset was popped before; only counts > 0.
    counts: BTreeMap<i64, u32>,
}

impl OrderInfo {
    /// The offsets the pop returned.
    pub(super) fn offsets(&self) -> &[i64] {
        &self.offsets
    }

    /// A pop carrying the attempt id of this one: a client retrying it (`needBlock` lets it
    /// through, and its counts are not raised).
    pub(super) fn same_attempt(&self, attempt_id: Option<&str>) -> bool {
        self.attempt_id.is_some() && self.attempt_id.as_deref() == attempt_id
    }

    fn visible_at(&self, i: usize) -> i64 {
        let own = self.next_visible.get(&self.offsets[i]).copied();
        own.unwrap_or_else(|| self.pop_time.saturating_add(self.invisible_time))
    }

    /// `needBlock`.
    fn blocks(&self, attempt_id: Option<&str>, wall: i64) -> bool {
        !self.same_attempt(attempt_id)
            && (0..self.offsets.len()).any(|i| !self.acked[i] && wall < self.visible_at(i))
    }

    /// `getLockFreeTimestamp`: the next visible time of the first unacked offset still
    /// invisible (in list order, not the latest), else now.
    fn lock_free_at(&self, wall: i64) -> Option<i64> {
        if self.offsets.is_empty() {
            return None;
        }
        for i in (0..self.offsets.len()).filter(|i| !self.acked[*i]) {
            if self.invisible_time <= 0 {
                return None;
            }
            let at = self.visible_at(i);
            if wall < at {
                return Some(at);
            }
        }
        Some(wall)
    }
}

/// Every order info of the broker, and the pending lock-release wake-ups.
#[derive(Clone, Debug, Default)]
pub(super) struct OrderInfos {
    infos: BTreeMap<OrderKey, OrderInfo>,
    /// When to wake held pops of a queue whose lock frees; a later update replaces it.
    wakes: BTreeMap<OrderKey, Instant>,
}

impl OrderInfos {
    pub(super) fn get(&self, key: &OrderKey) -> Option<&OrderInfo> {
        self.infos.get(key)
    }

    /// Whether an orderly pop must skip the queue (`checkBlock`).
    pub(super) fn blocked(&self, key: &OrderKey, attempt_id: Option<&str>, wall: i64) -> bool {
        self.infos.get(key).is_some_and(|info| info.blocks(attempt_id, wall))
    }

    /// `ConsumerOrderInfoManager.update`: record a pop of `offsets` (ascending), an offset of
    /// the previous pop counted once more, and append its `orderCountInfo` entries to `out`:
    /// `"{retry} qo{queueId}%{offset} {count}"` per counted offset (ascending; Java iterates a
    /// HashMap, ascending for small offsets), then `"{retry} {queueId} {least count}"`, the
    /// least count 0 when an offset has none.
    #[allow(clippy::too_many_arguments)] // one order info's fields
    pub(super) fn update(
        &mut self,
        key: OrderKey,
        attempt_id: Option<&str>,
        pop_time: i64,
        invisible_time: i64,
        offsets: &[i64],
        retry: char,
        out: &mut Vec<String>,
    ) {
        let queue_id = key.2;
        let counts = match self.infos.get(&key) {
            None => BTreeMap::new(),
            // `mergeOffsetConsumedCount`: a retried attempt keeps the counts as they were.
            Some(prev) if prev.same_attempt(attempt_id) => prev.counts.clone(),
            Some(prev) => offsets
                .iter()
                .filter(|o| prev.offsets.contains(o))
                .map(|o| (*o, prev.counts.get(o).map_or(1, |c| c + 1)))
                .collect(),
        };
        for (o, c) in &counts {
            out.push(format!("{retry} qo{queue_id}%{o} {c}"));
        }
        let least =
            if counts.len() == offsets.len() { counts.values().min().copied().unwrap_or(0) } else { 0 };
        out.push(format!("{retry} {queue_id} {least}"));
        let info = OrderInfo {
            attempt_id: attempt_id.map(str::to_owned),
            pop_time,
            invisible_time,
            offsets: offsets.to_vec(),
            acked: vec![false; offsets.len()],
            next_visible: BTreeMap::new(),
            counts,
        };
        self.infos.insert(key, info);
    }

    /// `commitAndNext`: mark `offset` acked and say where the group's offset goes: the first
    /// unacked offset, or past the last when all are. Without an order info, past `offset`.
    pub(super) fn commit_and_next(&mut self, key: &OrderKey, offset: i64, pop_time: i64) -> Commit {
        let Some(info) = self.infos.get_mut(key) else {
            return Commit::Next { offset: offset + 1, newly: true };
        };
        if info.offsets.is_empty() {
            return Commit::Illegal;
        }
        if info.pop_time != pop_time {
            return Commit::Stale;
        }
        let Some(i) = info.offsets.iter().position(|o| *o == offset) else { return Commit::Illegal };
        let newly = !info.acked[i];
        info.acked[i] = true;
        let next = match info.acked.iter().position(|a| !a) {
            Some(j) => info.offsets[j],
            None => info.offsets[info.offsets.len() - 1] + 1,
        };
        Commit::Next { offset: next, newly }
    }

    /// `updateNextVisibleTime`: true if the order info is the receipt's (same popTime).
    pub(super) fn update_next_visible(
        &mut self,
        key: &OrderKey,
        offset: i64,
        pop_time: i64,
        at: i64,
    ) -> bool {
        match self.infos.get_mut(key) {
            Some(info) if info.pop_time == pop_time => {
                info.next_visible.insert(offset, at);
                true
            }
            _ => false,
        }
    }

    /// `clearBlock` (an admin reset of the queue's offset).
    pub(super) fn clear(&mut self, key: &OrderKey) {
        self.infos.remove(key);
        self.wakes.remove(key);
    }

    /// Lost with the consumer offsets (persisted together).
    pub(super) fn clear_all(&mut self) {
        self.infos.clear();
        self.wakes.clear();
    }

    /// `updateLockFreeTimestamp`, after each change of the queue's order info: wake its held
    /// pops when its lock frees (exactly then; the real timer ticks every 100 ms).
    pub(super) fn touched(&mut self, key: &OrderKey, wall: i64, now: Instant) {
        let Some(free) = self.infos.get(key).and_then(|info| info.lock_free_at(wall)) else { return };
        let wait = Duration::from_millis(free.saturating_sub(wall).max(0) as u64).min(MAX_WAIT);
        self.wakes.insert(key.clone(), now + wait);
    }

    /// The earliest pending wake-up.
    pub(super) fn next_wake(&self) -> Option<Instant> {
        self.wakes.values().min().copied()
    }

    /// The queues whose wake-up is due at `now`, removed.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<OrderKey> {
        let due: Vec<OrderKey> =
            self.wakes.iter().filter(|(_, at)| **at <= now).map(|(k, _)| k.clone()).collect();
        for k in &due {
            self.wakes.remove(k);
        }
        due
    }
}
