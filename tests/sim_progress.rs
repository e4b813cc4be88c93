//! What a consumer reports of its own progress: each queue's broker max offset, learnt from the
//! pull answers (no request of its own), and the lag behind it.

use std::time::Duration;

use rocketmq_push_core::sim::{Sim, Verdict};
use rocketmq_push_core::{ConsumeFromWhere, QueueSnapshot};

fn snapshots(sim: &Sim, c: usize) -> Vec<QueueSnapshot> {
    // The topic's queues, not the group's retry queue.
    let mut q: Vec<_> =
        sim.consumer(c).unwrap().queue_snapshots().into_iter().filter(|s| &*s.queue.topic == "T").collect();
    q.sort_by_key(|s| s.queue.queue_id);
    q
}

#[test]
fn lag_is_the_broker_max_offset_minus_what_would_be_committed_and_reaches_zero() {
    // One listener slot, 1 s a message: the queues fall behind.
    let mut sim = Sim::builder(71)
        .broker("broker-a", &[("T", 2)])
        .listener(|_, _, _| Verdict { took: Duration::from_secs(1), ..Verdict::OK })
        .build();
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_thread_min(1)
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    let before = snapshots(&sim, c);
    assert!(before.iter().all(|s| s.broker_max_offset == -1 && s.lag().is_none()), "{before:?}");
    sim.produce("T", 30);
    sim.run_for(Duration::from_secs(8));
    let mid = snapshots(&sim, c);
    assert_eq!(mid.iter().map(|s| s.broker_max_offset).collect::<Vec<_>>(), [15, 15], "{mid:?}");
    let consumed = sim.consumed().len() as i64;
    assert!((4..=10).contains(&consumed), "{consumed} consumed in 8 s at 1 s each");
    let lag: i64 = mid.iter().map(|s| s.lag().unwrap()).sum();
    // A message counts as consumed before its result moves the commit point: at most one apart.
    assert!((30 - consumed..=30 - consumed + 1).contains(&lag), "lag {lag}, consumed {consumed}: {mid:?}");
    sim.run_for(Duration::from_secs(40));
    let end = snapshots(&sim, c);
    assert_eq!(end.iter().map(|s| s.lag()).collect::<Vec<_>>(), [Some(0), Some(0)], "{end:?}");
}
