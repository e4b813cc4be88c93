//! Batches with user code: one entry per run of batches handed out together (their ids, and
//! per batch whether it started, timed out or finished), the `consumeThreadMin` listener slots,
//! reported starts, the consume timeout and withdrawals. What a result means for the messages is
//! `consume.rs`'s.

use std::time::Instant;

use hashbrown::HashMap;
use smallvec::SmallVec;

use super::Consumer;
use crate::event::{Batch, BatchId, Event, Output};
use crate::protocol::body::MessageModel;
use crate::timer::{QueueKey, Timer};

/// Delay level the consume-timeout path uses (`cleanExpireMsg` sends back with level 3).
const TIMEOUT_DELAY_LEVEL: i32 = 3;

/// The most batches (listener calls) one run holds.
pub(super) const MAX_UNITS: usize = 1 << BatchId::UNIT_BITS;

/// The entry of unit `id` in `batches` and the unit's index, if it is out and not finished.
pub(super) fn unit_in(
    batches: &mut HashMap<BatchId, InFlight>,
    id: BatchId,
) -> Option<(&mut InFlight, usize)> {
    let (run, u) = id.split();
    let b = batches.get_mut(&run)?;
    (u < b.units() && b.done & (1 << u) == 0).then_some((b, u))
}

/// A run of messages handed to user code: consecutive entries of one pull, in listener calls
/// (units) of `consumeMessageBatchMaxSize` each. Each unit is a batch of its own to the
/// adapter and to user code (its own id, start, result and timeout); they share one entry here
/// so that a pull of 32 messages with Java's batch of 1 costs one entry, not 32. Orderly and
/// POP batches are runs of one unit; direct ones are not kept here.
#[derive(Debug)]
pub(super) struct InFlight {
    pub(super) key: QueueKey,
    /// The run's offsets; unit `u` has `offsets[u * unit_len..][..unit_len]`.
    pub(super) offsets: SmallVec<[i64; 4]>,
    /// Messages per unit (the last may have fewer).
    pub(super) unit_len: u32,
    /// Per unit, bit `u`: past `consumeTimeout` (its messages were sent back; the late result
    /// is ignored).
    pub(super) timed_out: u64,
    /// Per unit, bit `u`: handed out to user code (a concurrent unit may wait for a listener
    /// slot first).
    pub(super) started: u64,
    /// Per unit, bit `u`: answered, withdrawn or dropped. The entry goes when every unit is.
    pub(super) done: u64,
    /// Orderly: the queue restarted under a new key while this ran; the result is ignored but
    /// still frees the queue for its next batch.
    pub(super) discard: bool,
    /// How many units (listener calls) the run has, 1 to [`MAX_UNITS`].
    units: u8,
    /// When the run went out, then per unit once one starts later: when it went out or the
    /// adapter reports user code started on it, in ms since the consumer started (consume RT;
    /// 4 bytes, where an `Instant` would be 16). One entry while no unit started apart.
    since_ms: SmallVec<[u32; 1]>,
    /// POP: the receipts to answer with (`offsets` are then only the messages' queue offsets).
    pub(super) pop: Option<Box<super::pop::PopBatch>>,
}

impl InFlight {
    /// A batch of one unit (orderly, POP), started already or not.
    pub(super) fn single(
        key: QueueKey,
        offsets: SmallVec<[i64; 4]>,
        started: bool,
        since_ms: u32,
        pop: Option<Box<super::pop::PopBatch>>,
    ) -> Self {
        let n = offsets.len();
        Self { pop, ..Self::run(key, offsets, n, started, since_ms) }
    }

    /// A run of `units` batches of `unit_len` messages (the last may have fewer), handed out
    /// at `since_ms`; orderly batches are started as they go out.
    pub(super) fn run(
        key: QueueKey,
        offsets: SmallVec<[i64; 4]>,
        unit_len: usize,
        started: bool,
        since_ms: u32,
    ) -> Self {
        let unit_len = unit_len.max(1);
        let units = offsets.len().div_ceil(unit_len).clamp(1, MAX_UNITS);
        Self {
            key,
            offsets,
            unit_len: u32::try_from(unit_len).unwrap_or(u32::MAX),
            timed_out: 0,
            started: u64::from(started),
            done: 0,
            discard: false,
            units: units as u8,
            since_ms: smallvec::smallvec![since_ms],
            pop: None,
        }
    }

    /// How many units (listener calls) the run has.
    pub(super) fn units(&self) -> usize {
        usize::from(self.units)
    }

    /// When unit `u` went out or started.
    pub(super) fn since(&self, u: usize) -> u32 {
        self.since_ms.get(u).copied().unwrap_or(self.since_ms[0])
    }

    /// Unit `u` starts at `ms`.
    fn start_unit(&mut self, u: usize, ms: u32) {
        self.started |= 1 << u;
        if self.units > 1 && self.since_ms.len() == 1 {
            let sent = self.since_ms[0];
            self.since_ms.resize(self.units(), sent);
        }
        self.since_ms[u] = ms;
    }

    /// Unit `u`'s offsets.
    #[inline]
    pub(super) fn unit_offsets(&self, u: usize) -> &[i64] {
        let len = self.unit_len as usize;
        let start = (u * len).min(self.offsets.len());
        &self.offsets[start..(start + len).min(self.offsets.len())]
    }

    pub(super) fn is_started(&self, u: usize) -> bool {
        self.started & (1 << u) != 0
    }

    pub(super) fn is_timed_out(&self, u: usize) -> bool {
        self.timed_out & (1 << u) != 0
    }

    /// Unit `u` is out and may still answer in time.
    pub(super) fn is_live(&self, u: usize) -> bool {
        (self.done | self.timed_out) & (1 << u) == 0
    }

    /// Some unit is out and may still answer in time (shutdown waits for these).
    pub(super) fn any_live(&self) -> bool {
        (0..self.units()).any(|u| self.is_live(u))
    }

    pub(super) fn all_done(&self) -> bool {
        let units = self.units();
        let all = if units >= 64 { u64::MAX } else { (1 << units) - 1 };
        self.done & all == all
    }
}

impl Consumer {
    /// A new run's id (its unit 0).
    pub(super) fn next_batch_id(&mut self) -> BatchId {
        let id = BatchId(self.next_batch << BatchId::UNIT_BITS);
        self.next_batch += 1;
        id
    }

    /// The entry of unit `id` and the unit's index, if it is out and not finished.
    pub(super) fn unit_mut(&mut self, id: BatchId) -> Option<(&mut InFlight, usize)> {
        unit_in(&mut self.batches, id)
    }

    /// Unit `id` is out and may still answer in time.
    pub(super) fn unit_live(&self, id: BatchId) -> bool {
        let (run, u) = id.split();
        self.batches.get(&run).is_some_and(|b| u < b.units() && b.is_live(u))
    }

    /// Unit `id` is finished; its run's entry goes once every unit of it is.
    pub(super) fn finish_unit(&mut self, id: BatchId) {
        let (run, u) = id.split();
        let Some(b) = self.batches.get_mut(&run) else { return };
        b.done |= 1 << u;
        if b.all_done() {
            self.batches.remove(&run);
        }
    }

    /// Concurrent batches go to user code only as fast as listener slots (`consumeThreadMin`)
    /// free up; the rest wait here, in order. So a batch starts when it is handed out, and its
    /// consume timeout counts from then — never while it waits behind others (Java times
    /// consumption from the start of the listener call too).
    ///
    /// Where the adapter queues batches itself and reports when each starts
    /// ([`report_starts`](Consumer::report_starts)), every batch goes out at once and its
    /// timeout counts from the reported start instead: one hand-off per batch of ready work
    /// rather than a round trip per listener slot.
    pub(super) fn hand_out(&mut self, batch: Batch) {
        if self.starts_reported {
            self.outputs.push_back(Output::Consume(batch));
            return;
        }
        if self.running >= self.cfg.consume_thread_min {
            self.waiting.push_back(batch);
            return;
        }
        let now_ms = self.now_ms;
        if let Some((b, u)) = self.unit_mut(batch.id) {
            b.start_unit(u, now_ms);
        }
        self.run_batch(batch);
    }

    /// `batch` (marked started) goes to user code now.
    pub(super) fn run_batch(&mut self, batch: Batch) {
        self.running += 1;
        // Every batch gets the same timeout, so deadlines arrive in hand-out order: a FIFO and
        // one timer replace a timer per batch.
        self.time_out_at(batch.id, self.now + self.cfg.consume_timeout);
        self.outputs.push_back(Output::Consume(batch));
    }

    fn time_out_at(&mut self, id: BatchId, deadline: Instant) {
        let first = if self.timeouts.back().is_none_or(|(d, _)| *d <= deadline) {
            self.timeouts.push_back((deadline, id));
            self.timeouts.len() == 1
        } else {
            // Reported starts may come slightly out of order: keep the FIFO sorted.
            let at = self.timeouts.partition_point(|(d, _)| *d <= deadline);
            self.timeouts.insert(at, (deadline, id));
            at == 0
        };
        if self.timeouts.len() > 2 * self.running + 64 {
            // Entries of finished batches behind a long one: drop them, so the FIFO stays
            // proportional to the batches out rather than to the throughput over a timeout.
            let mut timeouts = std::mem::take(&mut self.timeouts);
            timeouts.retain(|(_, id)| self.unit_live(*id));
            self.timeouts = timeouts;
        }
        // While the FIFO holds entries the scan is armed no later than its front (the scan
        // re-arms itself for the next live one), so only a new front needs the timer.
        if first {
            self.timers.set_if_earlier(Timer::ConsumeTimeoutScan, deadline);
        }
    }

    /// Drop the entries of finished batches at the front of the timeout FIFO (`done` has just
    /// finished: batches mostly finish in the order they started).
    pub(super) fn trim_timeouts(&mut self, done: BatchId) {
        if self.timeouts.front().is_some_and(|(_, id)| *id == done) {
            self.timeouts.pop_front();
        }
        while let Some((_, id)) = self.timeouts.front() {
            if self.unit_live(*id) {
                return;
            }
            self.timeouts.pop_front();
        }
    }

    /// The adapter started user code on a batch at `at`. Unknown batches (withdrawn, direct,
    /// answered already) and orderly ones (started when handed out) are ignored.
    pub(super) fn on_started(&mut self, id: BatchId, at: Instant) {
        let at_ms = self.ms_since_start(at);
        let Some((b, u)) = self.unit_mut(id) else { return };
        if b.is_started(u) || b.is_timed_out(u) {
            return;
        }
        b.start_unit(u, at_ms);
        self.running += 1;
        self.time_out_at(id, at + self.cfg.consume_timeout);
    }

    /// A listener slot freed up: hand out the next waiting batches that still matter.
    pub(super) fn slot_freed(&mut self) {
        self.running = self.running.saturating_sub(1);
        while self.running < self.cfg.consume_thread_min {
            let Some(batch) = self.waiting.pop_front() else { return };
            // Looked up once: marked started here, as `hand_out` would.
            let now_ms = self.now_ms;
            let live = match unit_in(&mut self.batches, batch.id) {
                Some((b, u)) if self.queues.get(b.key).is_some() => {
                    b.start_unit(u, now_ms);
                    true
                }
                _ => false,
            };
            if live {
                self.run_batch(batch);
            } else {
                // Its queue was released or moved meanwhile: it never runs.
                self.finish_unit(batch.id);
            }
        }
    }

    /// The queue `key` goes away: batches of it the adapter has not started never will (Java
    /// checks `ProcessQueue.isDropped` before the listener call). Waiting ones are dropped when
    /// their turn comes (`slot_freed`).
    pub(super) fn withdraw_unstarted(&mut self, key: Option<QueueKey>) {
        if !self.starts_reported {
            return;
        }
        let mut ids: SmallVec<[BatchId; 16]> = SmallVec::new();
        for (run, b) in &self.batches {
            if key.is_some_and(|k| b.key != k) {
                continue;
            }
            let unstarted = !(b.started | b.done);
            ids.extend((0..b.units()).filter(|u| unstarted & (1 << u) != 0).map(|u| run.unit(u)));
        }
        // Deterministic order, whatever the map's.
        ids.sort_unstable();
        for id in ids {
            self.finish_unit(id);
            self.outputs.push_back(Output::Withdraw(id));
        }
    }

    /// Shutdown: batches still waiting here for a slot are never handed out (their messages
    /// stay uncommitted and are delivered again after a restart). Those an adapter queued for
    /// its threads run, as handed-out batches do everywhere, until the shutdown deadline takes
    /// back the rest: withdrawing them at once would race with threads starting them (a batch
    /// started but not yet reported would run with its result refused, and replay after the
    /// restart though its listener saw it).
    pub(super) fn drop_waiting_batches(&mut self) {
        for batch in std::mem::take(&mut self.waiting) {
            self.finish_unit(batch.id);
        }
    }

    /// Batches past `consumeTimeout` are sent back (Java's `cleanExpireMsg`, but on time rather
    /// than on a 15-minute sweep); their late results are ignored.
    pub(super) fn scan_consume_timeouts(&mut self) {
        while let Some(&(deadline, id)) = self.timeouts.front() {
            if !self.unit_live(id) {
                self.timeouts.pop_front();
                continue;
            }
            if deadline > self.now {
                self.timers.set(Timer::ConsumeTimeoutScan, deadline);
                return;
            }
            self.timeouts.pop_front();
            let Some((b, u)) = self.unit_mut(id) else { continue };
            b.timed_out |= 1 << u;
            // POP: nothing to send back; unanswered, the message comes back after its invisible time.
            let popped = b.pop.is_some();
            let (key, offsets): (_, SmallVec<[i64; 4]>) =
                (b.key, b.unit_offsets(u).iter().copied().collect());
            self.stats.consume_timeouts += 1;
            let Some(q) = self.queues.get(key) else { continue };
            let queue = (*q.user_mq).clone();
            self.emit(Event::ConsumeTimeout { batch: id, queue });
            if self.cfg.message_model == MessageModel::Clustering && !popped {
                for o in offsets {
                    self.send_back(key, o, TIMEOUT_DELAY_LEVEL);
                }
            }
        }
    }
}
