//! Batches queued by the adapter (blocking listeners): the core hands out every batch at once
//! and the adapter reports when each starts. The failure semantics stay those of batches held
//! by the core: the consume timeout counts from the start, batches that have not started when
//! their queue goes away or the shutdown deadline passes are withdrawn, never run, and a
//! shutdown runs what was handed out until that deadline.

use std::time::Duration;

use rocketmq_push_core::sim::{Fault, Sim, Verdict};
use rocketmq_push_core::{ConsumeFromWhere, Event};

fn withdrawn(sim: &Sim, c: usize) -> usize {
    sim.transcript(c).iter().filter(|t| *t == "Withdraw").count()
}

#[test]
fn a_queued_batch_times_out_only_after_it_started() {
    // One slot; the first message takes 25 s, past the 10 s consume timeout; the others wait
    // for the slot that long but run at once when they start.
    let mut sim = Sim::builder(21)
        .adapter_queue(true)
        .broker("broker-a", &[("T", 1)])
        .listener(|_, b, _| {
            let first = b.messages[0].queue_offset == 0 && b.messages[0].reconsume_times == 0;
            Verdict { took: if first { Duration::from_secs(25) } else { Duration::ZERO }, ..Verdict::OK }
        })
        .build();
    sim.produce("T", 4);
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .consume_thread_min(1)
            .consume_thread_max(1)
            .consume_timeout(Duration::from_secs(10)),
    );
    sim.run_for(Duration::from_secs(60));
    let timeouts = sim.events(c).iter().filter(|e| matches!(e, Event::ConsumeTimeout { .. })).count();
    assert_eq!(timeouts, 1, "only the slow batch timed out: {:?}", sim.events(c));
    assert!(sim.all_done());
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(4));
}

#[test]
fn shutdown_runs_what_was_handed_out_and_commits_it() {
    let mut sim = Sim::builder(22)
        .adapter_queue(true)
        .broker("broker-a", &[("T", 1)])
        .listener(|_, _, _| Verdict { took: Duration::from_secs(2), ..Verdict::OK })
        .build();
    sim.produce("T", 6);
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .consume_thread_min(1)
            .consume_thread_max(1),
    );
    sim.run_until(|s| !s.consumed().is_empty(), Duration::from_secs(10)).unwrap();
    sim.inject(Fault::ShutdownConsumer(c));
    sim.run_until(|s| s.consumer(c).is_some_and(|x| x.is_terminated()), Duration::from_secs(60)).unwrap();
    // The five queued behind the running one ran too (well within the 30 s deadline), and all
    // six were committed: a restart has nothing to replay.
    assert_eq!(sim.consumed().len(), 6);
    assert_eq!(withdrawn(&sim, c), 0);
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(6));
    sim.inject(Fault::CrashConsumer(c));
    sim.inject(Fault::RestartConsumer(c));
    sim.run_for(Duration::from_secs(30));
    assert_eq!(sim.consumed().len(), 6, "nothing consumed twice");
}

#[test]
fn at_the_shutdown_deadline_what_has_not_started_is_withdrawn_and_a_restart_consumes_it() {
    let mut sim = Sim::builder(23)
        .adapter_queue(true)
        .broker("broker-a", &[("T", 1)])
        .listener(|_, _, _| Verdict { took: Duration::from_secs(2), ..Verdict::OK })
        .build();
    sim.produce("T", 6);
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .consume_thread_min(1)
            .consume_thread_max(1)
            .await_termination_when_shutdown(Duration::from_secs(3)),
    );
    sim.run_until(|s| !s.consumed().is_empty(), Duration::from_secs(10)).unwrap();
    sim.inject(Fault::ShutdownConsumer(c));
    sim.run_until(|s| s.consumer(c).is_some_and(|x| x.is_terminated()), Duration::from_secs(60)).unwrap();
    // Stopped as the first call began: it finished at 2 s, the second was running at the 3 s
    // deadline (its result comes too late), the other four never started.
    assert_eq!(withdrawn(&sim, c), 4);
    let committed = sim.broker(0).committed_offset("G", "T", 0);
    assert_eq!(committed, Some(1), "what finished before the deadline");
    sim.inject(Fault::CrashConsumer(c));
    sim.inject(Fault::RestartConsumer(c));
    sim.run_until(Sim::all_done, Duration::from_secs(60)).unwrap();
    let mut offsets: Vec<i64> = sim.consumed().iter().map(|m| m.offset).collect();
    offsets.sort_unstable();
    offsets.dedup();
    assert_eq!(offsets, (0..6).collect::<Vec<_>>(), "every message consumed");
    let twice = sim.consumed().len() - 6;
    assert!(twice <= 1, "only the batch running at the deadline comes again ({twice})");
}

#[test]
fn a_released_queue_withdraws_its_queued_batches() {
    // A slow listener with one slot holds a backlog of both queues; a second consumer takes one
    // queue over. Its queued batches are withdrawn in the first consumer and consumed by the
    // second; only a batch running at the release may be consumed twice.
    let mut sim = Sim::builder(23)
        .adapter_queue(true)
        .broker("broker-a", &[("T", 2)])
        .listener(|_, _, _| Verdict { took: Duration::from_millis(500), ..Verdict::OK })
        .build();
    sim.produce("T", 40);
    let cfg = sim
        .config("G")
        .subscribe("T", "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_thread_min(1)
        .consume_thread_max(1);
    let a = sim.add_consumer(cfg.clone());
    sim.run_until(|s| s.consumed().len() >= 2, Duration::from_secs(10)).unwrap();
    let b = sim.add_consumer(cfg);
    sim.run_until(Sim::all_done, Duration::from_secs(120)).unwrap();
    assert!(withdrawn(&sim, a) > 0, "{:?}", sim.transcript(a));
    assert!(sim.consumed().iter().any(|m| m.consumer == b));
    let mut keys: Vec<&str> = sim.consumed().iter().map(|m| m.key.as_str()).collect();
    keys.sort_unstable();
    let total = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), 40);
    assert!(total - 40 <= 1, "{} consumed twice", total - 40);
}
