//! Every timer the consumer uses, in one table. Timers fire in (deadline, arming order) order,
//! so the same inputs always give the same sequence of actions.

use std::collections::BTreeMap;
use std::time::Instant;

use hashbrown::HashMap;

/// A slot in the queue table: index plus generation, so a timer or response for a queue that was
/// dropped (and maybe re-added) is recognised as stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct QueueKey {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

/// What a timer is for. Periodic timers re-arm themselves when they fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Timer {
    /// Fetch routes for every subscribed topic (`pollNameServerInterval`).
    RouteRefresh,
    /// Heartbeat every broker (`heartbeatBrokerInterval`).
    Heartbeat,
    /// Rebalance every topic (`rebalance.waitInterval`).
    Rebalance,
    /// Persist offsets (`persistConsumerOffsetInterval`).
    PersistOffsets,
    /// Next pull of a queue (back-off, flow control, pull interval, or "now").
    Pull(QueueKey),
    /// Retry the start-offset lookup of a queue.
    ComputeOffset(QueueKey),
    /// Sample the windowed statistics (every 10 s, as Java's `StatsItem`).
    StatsSample,
    /// Orderly: renew every lock (`lockInterval`).
    LockRenew,
    /// Orderly: try to lock one queue again.
    Lock(QueueKey),
    /// Orderly: a suspended queue may consume again.
    OrderlyResume(QueueKey),
    /// Orderly POP: extend the invisible time of popped messages still held here.
    PopOrderRenew,
    /// A request's response is overdue.
    Request(i32),
    /// The oldest in-flight batch reaches `consumeTimeout`.
    ConsumeTimeoutScan,
    /// Re-consume messages whose send-back failed twice.
    LocalRetry(u64),
    /// Graceful shutdown gave up waiting for in-flight work.
    ShutdownDeadline,
    /// Shutdown: the pulls carrying commits have been processed; the final updates may go.
    PullCommitsSettled,
    /// Shutdown ends now, whatever is still unanswered.
    ShutdownLimit,
}

/// Deadline-ordered timers, at most one per [`Timer`] value.
#[derive(Debug, Default)]
pub(crate) struct TimerQueue {
    by_deadline: BTreeMap<(Instant, u64), Timer>,
    by_timer: HashMap<Timer, (Instant, u64)>,
    seq: u64,
}

impl TimerQueue {
    /// Arm `timer` at `at`, replacing an earlier arming of the same timer.
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        self.stop(timer);
        self.seq += 1;
        self.by_deadline.insert((at, self.seq), timer);
        self.by_timer.insert(timer, (at, self.seq));
    }

    /// Arm `timer` at `at` unless it is already armed earlier.
    pub(crate) fn set_if_earlier(&mut self, timer: Timer, at: Instant) {
        match self.by_timer.get(&timer) {
            Some((existing, _)) if *existing <= at => {}
            _ => self.set(timer, at),
        }
    }

    /// Disarm `timer`.
    pub(crate) fn stop(&mut self, timer: Timer) {
        if let Some(key) = self.by_timer.remove(&timer) {
            self.by_deadline.remove(&key);
        }
    }

    /// When `timer` fires, if armed.
    #[cfg(test)]
    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        self.by_timer.get(&timer).map(|(at, _)| *at)
    }

    /// The earliest deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.by_deadline.keys().next().map(|(at, _)| *at)
    }

    /// Remove and return the earliest timer due at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Timer> {
        let (&(at, seq), _) = self.by_deadline.iter().next()?;
        if at > now {
            return None;
        }
        let timer = self.by_deadline.remove(&(at, seq))?;
        self.by_timer.remove(&timer);
        Some(timer)
    }

    /// Disarm every timer matching `pred`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Timer) -> bool) {
        let drop: Vec<Timer> = self.by_timer.keys().filter(|t| !keep(t)).copied().collect();
        for t in drop {
            self.stop(t);
        }
    }

    /// Number of armed timers.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_timer.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn fires_in_deadline_then_arming_order() {
        #[allow(clippy::disallowed_methods)] // a test needs one real instant to add to
        let t0 = Instant::now();
        let mut q = TimerQueue::default();
        q.set(Timer::Heartbeat, t0 + Duration::from_secs(2));
        q.set(Timer::Rebalance, t0 + Duration::from_secs(1));
        q.set(Timer::RouteRefresh, t0 + Duration::from_secs(1));
        q.set(Timer::PersistOffsets, t0 + Duration::from_secs(5));
        q.set_if_earlier(Timer::PersistOffsets, t0 + Duration::from_secs(9));
        assert_eq!(q.get(Timer::PersistOffsets), Some(t0 + Duration::from_secs(5)));
        q.set(Timer::Heartbeat, t0 + Duration::from_secs(3)); // re-arm replaces
        assert_eq!(q.len(), 4);
        assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(1)));
        let now = t0 + Duration::from_secs(3);
        let fired: Vec<_> = std::iter::from_fn(|| q.pop_due(now)).collect();
        assert_eq!(fired, [Timer::Rebalance, Timer::RouteRefresh, Timer::Heartbeat]);
        q.stop(Timer::PersistOffsets);
        assert_eq!(q.next_deadline(), None);
    }
}
