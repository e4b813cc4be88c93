//! Flow control: the per-queue cache stays within its count and size thresholds plus one pull
//! batch, and the span (highest pulled minus lowest unfinished) stops a queue behind one stuck
//! message even when the rest is consumed at once.

use std::time::Duration;

use rocketmq_push_core::sim::{Sim, Verdict};
use rocketmq_push_core::{ConsumeFromWhere, QueueSnapshot};

fn snapshot_of_t(sim: &Sim, c: usize) -> Option<QueueSnapshot> {
    sim.consumer(c)?.queue_snapshots().into_iter().find(|s| &*s.queue.topic == "T")
}

#[test]
fn a_slow_listener_keeps_the_cache_bounded() {
    let mut sim = Sim::builder(20)
        .broker("broker-a", &[("T", 1)])
        .listener(|_, _, _| Verdict { took: Duration::from_millis(20), ..Verdict::OK })
        .build();
    sim.produce("T", 2000);
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .pull_threshold_for_queue(100),
    );
    let mut peak = 0;
    for _ in 0..2000 {
        sim.step();
        if let Some(s) = snapshot_of_t(&sim, c) {
            peak = peak.max(s.cached_count);
        }
    }
    // A pull is decoded only into the free cache: at most one record over.
    assert!(peak > 90 && peak <= 100 + 1, "cache peaked at {peak}");
    assert!(sim.consumer(c).unwrap().stats().flow_control_delays > 0);
}

#[test]
fn one_stuck_message_stops_the_queue_at_the_span_limit() {
    let mut sim = Sim::builder(21)
        .broker("broker-a", &[("T", 1)])
        // Offset 5 takes an hour; everything else is instant.
        .listener(|_, b, _| {
            if b.messages[0].queue_offset == 5 {
                Verdict { took: Duration::from_secs(3600), ..Verdict::OK }
            } else {
                Verdict::OK
            }
        })
        .build();
    sim.produce("T", 1000);
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .consume_concurrently_max_span(200)
            .consume_timeout(Duration::from_secs(7200)),
    );
    sim.run_for(Duration::from_secs(30));
    let s = snapshot_of_t(&sim, c).unwrap();
    // Java samples the cache (here: one message, span 0) and would keep pulling to the end.
    assert!(s.max_pulled <= 5 + 200 + 32, "pulled up to {}", s.max_pulled);
    assert!(s.max_pulled >= 200, "pulled up to {}", s.max_pulled);
    assert_eq!(s.cached_count, 1, "everything but the stuck one is done");
    assert_eq!(s.watermark, 5);
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(5), "the commit waits at the stuck message");
}

#[test]
fn a_pull_answer_is_decoded_only_up_to_the_free_cache() {
    // Answers of 32 messages of 64 KiB (2 MiB) against a 1 MiB cache: each decode stops when
    // the cache is full, and the next pull picks up exactly there — nothing skipped, nothing
    // twice.
    let mut sim = Sim::builder(22)
        .broker("broker-a", &[("T", 1)])
        .listener(|_, _, _| Verdict { took: Duration::from_millis(5), ..Verdict::OK })
        .build();
    sim.produce_with("T", 300, |_, m| rocketmq_push_core::Message { body: vec![7u8; 64 << 10].into(), ..m });
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .pull_threshold_size_for_queue_mib(1),
    );
    let (mut peak_bytes, mut steps) = (0, 0);
    while !sim.all_done() && steps < 200_000 {
        sim.step();
        steps += 1;
        if let Some(s) = snapshot_of_t(&sim, c) {
            peak_bytes = peak_bytes.max(s.cached_bytes);
        }
    }
    assert!(sim.all_done(), "everything consumed");
    assert!(peak_bytes <= (1 << 20) + (64 << 10), "cache peaked at {peak_bytes} bytes");
    assert!(sim.produced().iter().all(|p| sim.times_consumed(&p.key) == 1), "each once");
}

#[test]
fn a_record_claiming_an_absurd_offset_is_dropped_and_the_queue_goes_on() {
    let mut sim = Sim::builder(23).broker("broker-a", &[("T", 1)]).build();
    sim.skip_broker_commit_check(); // the forged record is skipped on purpose
    sim.produce("T", 10);
    // Record 3 claims queue offset 2^62 (the field at bytes 20..28 of a stored record).
    sim.broker_mut(0).rewrite_record("T", 0, 3, |r| r[20..28].copy_from_slice(&(1i64 << 62).to_be_bytes()));
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_for(Duration::from_secs(5));
    sim.produce("T", 5);
    sim.run_for(Duration::from_secs(12));
    let offsets: Vec<i64> = sim.consumed().iter().map(|m| m.offset).collect();
    assert_eq!(offsets, [0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], "the queue went on past it");
    assert!(sim.events(c).iter().any(|e| matches!(
        e,
        rocketmq_push_core::Event::RecordsOutOfRange { count: 1, requested: 0, max: 10, .. }
    )));
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(15));
}
