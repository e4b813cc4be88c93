//! Rebalance: a member joins, leaves gracefully, or crashes; queues move and nothing is lost.

use std::collections::BTreeSet;
use std::time::Duration;

use rocketmq_push_core::sim::{Fault, Sim, Verdict};
use rocketmq_push_core::{ConsumeFromWhere, MessageQueue};

fn held(sim: &Sim, i: usize) -> BTreeSet<MessageQueue> {
    sim.consumer(i)
        .map(|c| c.assignment().filter(|q| &*q.topic == "T").cloned().collect())
        .unwrap_or_default()
}

fn slow_sim(seed: u64) -> Sim {
    Sim::builder(seed)
        .broker("broker-a", &[("T", 8)])
        .listener(|_, _, _| Verdict { took: Duration::from_millis(5), ..Verdict::OK })
        .build()
}

#[test]
fn a_second_member_takes_half_the_queues() {
    let mut sim = slow_sim(2);
    let cfg =
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset);
    let a = sim.add_consumer(cfg.clone());
    sim.run_for(Duration::from_secs(2));
    assert_eq!(held(&sim, a).len(), 8);
    let b = sim.add_consumer(cfg);
    // NOTIFY_CONSUMER_IDS_CHANGED triggers an immediate rebalance in both.
    sim.run_for(Duration::from_secs(3));
    let (ha, hb) = (held(&sim, a), held(&sim, b));
    assert_eq!((ha.len(), hb.len()), (4, 4), "AVG split");
    assert!(ha.is_disjoint(&hb));
    sim.produce("T", 400);
    sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
    let by_a = sim.consumed().iter().filter(|c| c.consumer == a).count();
    assert!(by_a > 100 && by_a < 300, "both consume: a took {by_a}");
    assert_eq!(sim.consumed().len(), 400, "no duplicates in a quiet run");
}

#[test]
fn a_leaving_member_hands_its_queues_over_without_loss() {
    let mut sim = slow_sim(3);
    let cfg =
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset);
    let a = sim.add_consumer(cfg.clone());
    let b = sim.add_consumer(cfg);
    sim.run_for(Duration::from_secs(3));
    sim.produce("T", 300);
    sim.run_for(Duration::from_millis(200));
    sim.inject(Fault::ShutdownConsumer(b));
    sim.run_until(|s| s.consumer(b).is_some_and(|c| c.is_terminated()), Duration::from_secs(30)).unwrap();
    sim.run_until(|s| held(s, a).len() == 8, Duration::from_secs(30)).unwrap();
    sim.produce("T", 100);
    sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
    let dups = sim.consumed().len() - 400;
    assert!(dups <= 8, "graceful hand-over replays at most what was in flight: {dups}");
}

#[test]
fn a_crashed_member_is_replaced_after_the_broker_expires_it() {
    let mut sim = slow_sim(4);
    let cfg =
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset);
    let a = sim.add_consumer(cfg.clone());
    let b = sim.add_consumer(cfg);
    sim.run_for(Duration::from_secs(3));
    sim.produce("T", 300);
    sim.run_for(Duration::from_millis(300));
    sim.inject(Fault::CrashConsumer(b));
    // The broker notices when the channel closes (the sim closes it), or after 120 s at worst.
    sim.run_until(|s| held(s, a).len() == 8, Duration::from_secs(150)).unwrap();
    sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
    let ok_keys: BTreeSet<_> = sim.consumed().iter().filter(|c| c.ok).map(|c| c.key.clone()).collect();
    assert_eq!(ok_keys.len(), 300, "nothing lost");
}

#[test]
fn an_assignment_change_raises_the_subscription_version_on_the_broker() {
    // As Java's messageQueueChanged: a newer subVersion, heartbeated at once. In a group mixed
    // with Java members this is what lets a Java member whose own heartbeat was skipped pull again.
    let mut sim = slow_sim(6);
    let cfg = sim.config("G").subscribe("T", "*");
    let a = sim.add_consumer(cfg.clone());
    sim.run_for(Duration::from_secs(2));
    let version = |s: &Sim| s.broker(0).subscription("G", "T").map(|d| d.sub_version).unwrap();
    let before = version(&sim);
    sim.run_for(Duration::from_secs(40));
    assert_eq!(version(&sim), before, "no change, no new version");
    let b = sim.add_consumer(cfg);
    sim.run_for(Duration::from_secs(30));
    assert_eq!(held(&sim, a).len() + held(&sim, b).len(), 8);
    assert!(version(&sim) > before, "the rebalance raised the group's version on the broker");
    sim.produce("T", 40);
    sim.run_until(|s| s.all_done(), Duration::from_secs(30)).unwrap();
}
