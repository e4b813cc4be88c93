//! Randomized runs: a topology, consume mode (a third orderly, a quarter of those popping in
//! order; a sixth of the others' group switched to POP on the brokers), listener behaviour (failures,
//! slow and very slow batches, poison messages) and fault schedule from each seed; the simulator
//! checks the invariants after every step, and every run must end with every produced message
//! consumed or dead-lettered once the faults heal. Consumers run inside a `Driver` as adapters
//! run them: refused connects, on a quarter of the seeds frames read in pieces, and on half of
//! them batches queued and started by the "adapter", which reports each start.
//!
//! - `SIM_SEED=n` replays one seed (printing its plan);
//! - `SIM_SEEDS=n` sets how many seeds to run (default 10 000);
//! - `SIM_BUDGET_SECS=s` bounds the wall time (default 170 s): the run stops early, says how far
//!   it got, and fails only if fewer than `SIM_MIN_SEEDS` (default 1 000) ran.
#![allow(clippy::disallowed_methods)] // the time box reads the real clock

use std::time::{Duration, Instant};

use rocketmq_push_core::protocol::body::MessageRequestMode;
use rocketmq_push_core::sim::{Fault, Faults, Sim, SimBrokerConfig, SimRng, Verdict};
use rocketmq_push_core::{AllocateStrategy, ConsumeFromWhere, ConsumeMode, ConsumeResult};

#[derive(Debug)]
struct Plan {
    slots: usize,
    /// Batches queued in the "adapter" (which reports starts) rather than in the core.
    adapter_queue: bool,
    /// The broker works through pulls this late (offset updates at once).
    pull_lag: Duration,
    orderly: bool,
    /// The group is switched to POP on every broker before the consumers start.
    pop: bool,
    /// Orderly consumers pop in order (`orderly_pop`; the group is switched to POP).
    orderly_pop: bool,
    /// Consume results due at one instant are fed together (acks batch); POP seeds only.
    results_together: bool,
    /// The brokers serve BATCH_ACK_MESSAGE (else the consumer falls back to single acks).
    batch_ack: bool,
    long_batches: bool,
    poison: bool,
    brokers: usize,
    queues: i32,
    consumers: usize,
    batch: usize,
    fail_rate: u64,
    slow_rate: u64,
    split_reads: bool,
    strategy: AllocateStrategy,
    bursts: Vec<(Duration, usize)>,
    faults: Vec<(Duration, Fault)>,
}

const FAULT_WINDOW: Duration = Duration::from_secs(30);

fn plan(seed: u64) -> Plan {
    // A stream of its own, so that adding these left the earlier plans as they were.
    let mut extra = SimRng::new(seed ^ 0x0dde_4c7e);
    let orderly = extra.below(3) == 0;
    // Batches longer than a client lock lives (30–70 s), for 1 batch in 100.
    let long_batches = extra.below(4) == 0;
    // 1 message in 40 always fails: dead-lettered after maxReconsumeTimes.
    let poison = extra.below(4) == 0;
    // Listener slots: batches wait for one in the core, their consume timeout not yet running.
    let slots = [2, 4, 20][extra.below(3) as usize];
    // Half the seeds run as the adapters do: every batch out at once, queued
    // and started by the adapter (a stream of its own: earlier plans stay as they were).
    let adapter_queue = SimRng::new(seed ^ 0x5747_a475).below(2) == 0;
    // A quarter of the seeds with a backed-up pull pool: pulls (and their piggy-backed commits)
    // processed up to 40 ms late, offset updates at once.
    let mut lag = SimRng::new(seed ^ 0x9a11_1a60);
    let pull_lag = if lag.below(4) == 0 { Duration::from_millis(1 + lag.below(40)) } else { Duration::ZERO };
    // A sixth of the concurrent seeds pop (a stream of its own). No poison messages there:
    // POP has no dead-letter queue (Java acks them after 4 hours).
    let pop = !orderly && SimRng::new(seed ^ 0x0909_b0b0).below(4) == 0;
    let poison = poison && !pop;
    // A quarter of the orderly seeds pop in order (their poison messages are dead-lettered).
    let orderly_pop = orderly && SimRng::new(seed ^ 0x04de_4e70).below(4) == 0;
    let pop = pop || orderly_pop;
    // POP seeds: three quarters feed results together (acks share BATCH_ACKs), and a third of
    // those brokers do not know BATCH_ACK (a stream of its own).
    let mut acks = SimRng::new(seed ^ 0xbac4_ac45);
    let results_together = pop && acks.below(4) != 0;
    let batch_ack = acks.below(3) != 0;
    let mut r = SimRng::new(seed);
    let brokers = 1 + r.below(2) as usize;
    let consumers = 1 + r.below(3) as usize;
    let strategy = match r.below(4) {
        0 => AllocateStrategy::AveragelyByCircle,
        1 => AllocateStrategy::ConsistentHash(10),
        _ => AllocateStrategy::Averagely,
    };
    let bursts = (0..1 + r.below(4))
        .map(|_| (Duration::from_millis(r.below(25_000)), 5 + r.below(40) as usize))
        .collect();
    let mut faults = Vec::new();
    for _ in 0..r.below(6) {
        let at = Duration::from_millis(r.below(FAULT_WINDOW.as_millis() as u64));
        let f = match r.below(8) {
            0 => Fault::ResetBroker(r.below(brokers as u64) as usize),
            1 => {
                let (b, down) = (r.below(brokers as u64) as usize, Duration::from_millis(r.below(6000)));
                // Half of them a kill -9 that loses the broker's consumer offsets (own stream).
                if extra.below(2) == 0 { Fault::KillBroker(b, down) } else { Fault::RestartBroker(b, down) }
            }
            2 => Fault::CrashConsumer(r.below(consumers as u64) as usize),
            3 => Fault::ShutdownConsumer(r.below(consumers as u64) as usize),
            4 => Fault::RestartConsumer(r.below(consumers as u64) as usize),
            // Orderly: lost locks too (renewals fail, client locks expire).
            5 if orderly => Fault::SetFaults(Faults { lose_requests: &[36, 41], ..Faults::default() }),
            5 => Fault::SetFaults(Faults { lose_requests: &[36], ..Faults::default() }),
            _ => Fault::SetFaults(Faults {
                drop: r.below(20) as f64 / 100.0,
                duplicate: r.below(20) as f64 / 100.0,
                delay: r.below(30) as f64 / 100.0,
                delay_by: Duration::from_millis(r.below(3000)),
                // Refused connects make the driver back off (from its own stream: earlier plans
                // stay as they were).
                refuse_connects: extra.below(4) as f64 / 10.0,
                ..Faults::default()
            }),
        };
        faults.push((at, f));
    }
    Plan {
        slots,
        adapter_queue,
        pull_lag,
        orderly,
        pop,
        orderly_pop,
        results_together,
        batch_ack,
        long_batches,
        poison,
        brokers,
        queues: 1 + r.below(8) as i32,
        consumers,
        batch: 1 + r.below(4) as usize,
        fail_rate: [0, 0, 10, 30][r.below(4) as usize],
        slow_rate: [0, 5, 20][r.below(3) as usize],
        split_reads: r.below(4) == 0,
        strategy,
        bursts,
        faults,
    }
}

fn run(seed: u64) -> Result<u64, String> {
    let p = plan(seed);
    let (fail, slow, long, poison) = (p.fail_rate, p.slow_rate, p.long_batches, p.poison);
    let mut b = Sim::builder(seed)
        .jitter(Duration::from_millis(3))
        .split_reads(p.split_reads)
        .adapter_queue(p.adapter_queue)
        .results_together(p.results_together)
        .broker_config(SimBrokerConfig {
            batch_ack_supported: p.batch_ack,
            delay_levels_ms: vec![1000; 18],
            hold_check_interval: Duration::ZERO,
            pull_lag: p.pull_lag,
            ..Default::default()
        })
        .listener(move |_, batch, rng| {
            let took = if long && rng.below(100) == 0 {
                Duration::from_millis(30_000 + rng.below(40_000))
            } else if rng.below(100) < slow {
                Duration::from_millis(rng.below(3000))
            } else {
                Duration::ZERO
            };
            let poisoned =
                |m: &rocketmq_push_core::MessageExt| m.msg_id().bytes().map(u64::from).sum::<u64>() % 40 == 0;
            let failing = (poison && batch.messages.iter().any(poisoned))
                || (batch.messages[0].reconsume_times < 2 && rng.below(100) < fail);
            let result = if failing { ConsumeResult::LATER } else { ConsumeResult::SUCCESS };
            Verdict { result, took }
        });
    for i in 0..p.brokers {
        b = b.broker(&format!("broker-{}", (b'a' + i as u8) as char), &[("T", p.queues)]);
    }
    let mut sim = b.build();
    if p.pop {
        for i in 0..p.brokers {
            sim.broker_mut(i).set_message_request_mode("T", "G", MessageRequestMode::Pop, 0);
        }
    }
    let cfg = sim
        .config("G")
        .subscribe("T", "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_message_batch_max_size(p.batch)
        .allocate_strategy(p.strategy.clone())
        .max_reconsume_times(3)
        .consume_thread_min(p.slots)
        .consume_thread_max(p.slots)
        .consume_mode(if p.orderly { ConsumeMode::Orderly } else { ConsumeMode::Concurrently })
        .orderly_pop(p.orderly_pop)
        .pop_invisible_time(Duration::from_secs(5));
    for _ in 0..p.consumers {
        sim.add_consumer(cfg.clone());
    }
    for (at, n) in &p.bursts {
        sim.run_for(at.saturating_sub(sim.elapsed()));
        sim.produce("T", *n);
    }
    for (at, f) in &p.faults {
        sim.inject_at(*at, f.clone());
    }
    sim.run_for(FAULT_WINDOW.saturating_sub(sim.elapsed()));
    // Heal: no network faults; let shutdowns finish; every consumer running again.
    sim.heal();
    let shutting = |s: &Sim| (0..p.consumers).any(|i| s.consumer(i).is_some_and(|c| c.is_shutting_down()));
    sim.run_until(|s| !shutting(s), Duration::from_secs(120)).map_err(|e| format!("{e}\nplan: {p:?}"))?;
    for i in 0..p.consumers {
        if sim.consumer(i).is_none_or(|c| c.is_terminated()) {
            sim.inject(Fault::CrashConsumer(i));
            sim.inject(Fault::RestartConsumer(i));
        }
    }
    sim.run_until(|s| s.all_done(), Duration::from_secs(400)).map_err(|e| format!("{e}\nplan: {p:?}"))?;
    Ok(sim.steps())
}

#[test]
fn randomized_fault_schedules_lose_nothing() {
    if let Ok(seed) = std::env::var("SIM_SEED") {
        let seed: u64 = seed.parse().expect("SIM_SEED is a number");
        println!("plan for seed {seed}: {:#?}", plan(seed));
        let steps = run(seed).unwrap_or_else(|e| panic!("{e}"));
        println!("seed {seed}: ok in {steps} steps");
        return;
    }
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (seeds, budget, min) =
        (env("SIM_SEEDS", 10_000), env("SIM_BUDGET_SECS", 170), env("SIM_MIN_SEEDS", 1_000));
    let started = Instant::now();
    let mut ran = 0;
    let mut steps = 0;
    for seed in 0..seeds {
        if started.elapsed() > Duration::from_secs(budget) {
            break;
        }
        match std::panic::catch_unwind(|| run(seed)) {
            Ok(Ok(s)) => steps += s,
            Ok(Err(e)) => {
                panic!("seed {seed} failed: {e}\nreplay: SIM_SEED={seed} cargo test --test sim_random")
            }
            Err(_) => panic!(
                "seed {seed} panicked (see above)\nreplay: SIM_SEED={seed} cargo test --test sim_random"
            ),
        }
        ran += 1;
    }
    println!("{ran} seeds, {steps} steps, {:?}", started.elapsed());
    assert!(ran >= min.min(seeds), "only {ran} seeds in {budget} s");
}
