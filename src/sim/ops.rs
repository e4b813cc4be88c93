//! Operations on a simulated world, decoded from bytes: shared by the `consumer_ops` fuzz target
//! and the property test, so a failing input from either replays in both.

use std::time::Duration;

use super::SimBrokerConfig;
use super::world::{Fault, Faults, Sim, Verdict};
use crate::event::ConsumeResult;
use crate::message::MessageQueue;
use crate::{Command, ConsumeFromWhere, ConsumeMode, QueueSelector, SeekTo};

/// One step of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub enum SimOp {
    /// Produce this many messages.
    Produce(u8),
    /// Let this many tens of milliseconds pass.
    Advance(u16),
    /// Close every connection to broker `n % brokers`.
    ResetBroker(u8),
    /// Restart broker `n % brokers`, down for this many hundreds of milliseconds.
    RestartBroker(u8, u8),
    /// Crash consumer `n % consumers`.
    Crash(u8),
    /// Start consumer `n % consumers` again if it is not running.
    Restart(u8),
    /// Shut consumer `n % consumers` down gracefully.
    Shutdown(u8),
    /// Suspend consumer `n % consumers`.
    Suspend(u8),
    /// Resume consumer `n % consumers`.
    Resume(u8),
    /// Pause queue `q % 7` of consumer `n % consumers` (0..6: a queue of broker-a or -b; 6: the
    /// whole topic), or resume it if paused.
    TogglePause(u8, u8),
    /// Seek consumer `n % consumers`'s queue `q % 7` (as [`TogglePause`](Self::TogglePause)): by
    /// `k % 3` to its first, to offset `k / 3 % 8`, or to `k / 3` seconds ago. What a seek moves
    /// past counts as done; a refusal is fine.
    Seek(u8, u8, u8),
    /// Network faults: drop, duplicate, delay (percent).
    Faults(u8, u8, u8),
    /// No more network faults.
    Heal,
}

impl SimOp {
    /// Decode operations from bytes (two or three bytes each); trailing bytes are ignored.
    pub fn decode_all(mut data: &[u8]) -> Vec<Self> {
        let mut ops = Vec::new();
        while let [tag, a, rest @ ..] = data {
            let (op, used) = match tag % 13 {
                0 => (Self::Produce(*a % 64), 0),
                1 => (Self::Advance(u16::from(*a) * 4), 0),
                2 => (Self::ResetBroker(*a), 0),
                3 => (Self::RestartBroker(*a, rest.first().copied().unwrap_or(0)), 1),
                4 => (Self::Crash(*a), 0),
                5 => (Self::Restart(*a), 0),
                6 => (Self::Shutdown(*a), 0),
                7 => (Self::Suspend(*a), 0),
                8 => (Self::Resume(*a), 0),
                9 => (
                    Self::Faults(
                        *a % 30,
                        rest.first().copied().unwrap_or(0) % 30,
                        rest.get(1).copied().unwrap_or(0) % 30,
                    ),
                    2,
                ),
                11 => (Self::TogglePause(*a, rest.first().copied().unwrap_or(0)), 1),
                12 => {
                    (Self::Seek(*a, rest.first().copied().unwrap_or(0), rest.get(1).copied().unwrap_or(0)), 2)
                }
                _ => (Self::Heal, 0),
            };
            ops.push(op);
            data = rest.get(used..).unwrap_or(&[]);
        }
        ops
    }
}

/// Queue `q % 7` of the world [`run_ops`] builds: 0..6 a queue of broker-a or -b, 6 the topic.
fn selector(q: u8) -> QueueSelector {
    match q % 7 {
        6 => QueueSelector::Topic("T".into()),
        q => QueueSelector::Queue(MessageQueue::new(
            "T",
            if q < 3 { "broker-a" } else { "broker-b" },
            i32::from(q % 3),
        )),
    }
}

/// Run `ops` against a small world (2 brokers × 3 queues, 2 consumers, a listener that fails
/// some messages and is sometimes slow), then heal and require that everything is consumed.
/// Odd seeds consume orderly.
/// The invariants are checked after every step; a violation panics.
pub fn run_ops(seed: u64, ops: &[SimOp]) -> Result<(), String> {
    let mut sim = Sim::builder(seed)
        .jitter(Duration::from_millis(2))
        .broker_config(SimBrokerConfig {
            delay_levels_ms: vec![1000; 18],
            hold_check_interval: Duration::ZERO,
            ..Default::default()
        })
        .broker("broker-a", &[("T", 3)])
        .broker("broker-b", &[("T", 3)])
        .listener(|_, b, rng| {
            let m = &b.messages[0];
            let result = if m.reconsume_times == 0 && m.queue_offset % 7 == 3 {
                ConsumeResult::LATER
            } else {
                ConsumeResult::SUCCESS
            };
            Verdict { result, took: Duration::from_millis(rng.below(50)) }
        })
        .build();
    let cfg = sim
        .config("G")
        .subscribe("T", "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .max_reconsume_times(2)
        .consume_mode(if seed % 2 == 1 { ConsumeMode::Orderly } else { ConsumeMode::Concurrently });
    let n = 2;
    for _ in 0..n {
        sim.add_consumer(cfg.clone());
    }
    let mut paused: Vec<(usize, QueueSelector)> = Vec::new();
    for op in ops.iter().take(200) {
        match *op {
            SimOp::Produce(k) => sim.produce("T", usize::from(k)),
            SimOp::Advance(t) => sim.run_for(Duration::from_millis(u64::from(t) * 10)),
            SimOp::ResetBroker(b) => sim.inject(Fault::ResetBroker(usize::from(b) % 2)),
            SimOp::RestartBroker(b, d) => sim
                .inject(Fault::RestartBroker(usize::from(b) % 2, Duration::from_millis(u64::from(d) * 100))),
            SimOp::Crash(c) => sim.inject(Fault::CrashConsumer(usize::from(c) % n)),
            SimOp::Restart(c) => sim.inject(Fault::RestartConsumer(usize::from(c) % n)),
            SimOp::Shutdown(c) => sim.inject(Fault::ShutdownConsumer(usize::from(c) % n)),
            SimOp::Suspend(c) => sim.command(usize::from(c) % n, Command::Suspend),
            SimOp::Resume(c) => sim.command(usize::from(c) % n, Command::Resume),
            SimOp::Seek(c, q, k) => {
                let to = match k % 3 {
                    0 => SeekTo::First,
                    1 => SeekTo::Offset(i64::from(k / 3 % 8)),
                    _ => SeekTo::Timestamp(sim.broker(0).wall_ms(sim.now()) - i64::from(k / 3) * 1000),
                };
                let _ = sim.try_command(usize::from(c) % n, Command::Seek { queues: selector(q), to });
            }
            SimOp::TogglePause(c, q) => {
                let c = usize::from(c) % n;
                let selector = selector(q);
                let entry = (c, selector.clone());
                if let Some(at) = paused.iter().position(|p| *p == entry) {
                    paused.remove(at);
                    sim.command(c, Command::ResumeQueues(selector));
                } else {
                    paused.push(entry);
                    sim.command(c, Command::PauseQueues(selector));
                }
            }
            SimOp::Faults(d, u, l) => sim.inject(Fault::SetFaults(Faults {
                drop: f64::from(d) / 100.0,
                duplicate: f64::from(u) / 100.0,
                delay: f64::from(l) / 100.0,
                delay_by: Duration::from_millis(500),
                ..Faults::default()
            })),
            SimOp::Heal => sim.heal(),
        }
    }
    sim.heal();
    let shutting = |s: &Sim| (0..n).any(|i| s.consumer(i).is_some_and(|c| c.is_shutting_down()));
    sim.run_until(|s| !shutting(s), Duration::from_secs(120))?;
    for (c, selector) in paused {
        sim.command(c, Command::ResumeQueues(selector));
    }
    for i in 0..n {
        sim.command(i, Command::Resume);
        if sim.consumer(i).is_none_or(|c| c.is_terminated()) {
            sim.inject(Fault::CrashConsumer(i));
            sim.inject(Fault::RestartConsumer(i));
        }
    }
    sim.run_until(|s| s.all_done(), Duration::from_secs(400))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_is_total_and_bounded() {
        assert!(SimOp::decode_all(&[]).is_empty());
        assert_eq!(SimOp::decode_all(&[0, 5, 9]), [SimOp::Produce(5)]);
        assert_eq!(SimOp::decode_all(&[9, 1, 2, 3, 10, 0]), [SimOp::Faults(1, 2, 3), SimOp::Heal]);
        assert_eq!(SimOp::decode_all(&[11, 1, 6]), [SimOp::TogglePause(1, 6)]);
        assert_eq!(SimOp::decode_all(&[12, 1, 6, 4]), [SimOp::Seek(1, 6, 4)]);
        run_ops(1, &SimOp::decode_all(&[0, 20, 1, 50, 4, 0, 1, 50, 5, 0, 0, 10])).unwrap();
    }
}
