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
    assert!(peak > 90 && peak <= 100 + 32, "cache peaked at {peak}");
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
