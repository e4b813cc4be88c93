//! Pausing queues (`Command::PauseQueues`): a paused queue is not pulled and nothing pulled after
//! the pause reaches a listener — not even the answer to a long poll that was out — while the
//! others flow; resuming delivers what waited, once.

use std::collections::BTreeMap;
use std::time::Duration;

use rocketmq_push_core::message::MessageQueue;
use rocketmq_push_core::sim::Sim;
use rocketmq_push_core::{Command, ConsumeFromWhere, ConsumeMode, QueueSelector};

/// Messages consumed per (topic, queue id), and whether any offset came twice.
fn per_queue(sim: &Sim) -> (BTreeMap<(String, i32), usize>, bool) {
    let mut n = BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut twice = false;
    for m in sim.consumed() {
        *n.entry((m.queue.topic.to_string(), m.queue.queue_id)).or_insert(0) += 1;
        twice |= !seen.insert((m.queue.topic.to_string(), m.queue.queue_id, m.offset));
    }
    (n, twice)
}

fn count(n: &BTreeMap<(String, i32), usize>, topic: &str, q: i32) -> usize {
    n.get(&(topic.to_owned(), q)).copied().unwrap_or(0)
}

#[test]
fn a_paused_queue_gets_nothing_while_the_others_flow_then_everything_once_after_resume() {
    let mut sim = Sim::builder(61).broker("broker-a", &[("T", 4)]).build();
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    // Every queue's long poll is out when the pause comes.
    sim.run_for(Duration::from_secs(2));
    let q1 = QueueSelector::Queue(MessageQueue::new("T", "broker-a", 1));
    sim.command(c, Command::PauseQueues(q1.clone()));
    sim.produce("T", 40);
    sim.run_for(Duration::from_secs(30));
    let (n, twice) = per_queue(&sim);
    assert_eq!([0, 2, 3].map(|q| count(&n, "T", q)), [10, 10, 10], "{n:?}");
    assert_eq!(count(&n, "T", 1), 0, "the held poll's answer was set aside: {n:?}");
    assert_eq!(sim.broker(0).committed_offset("G", "T", 1).unwrap_or(0), 0);
    // Resuming another selector changes nothing.
    sim.command(c, Command::ResumeQueues(QueueSelector::Topic("Other".into())));
    sim.run_for(Duration::from_secs(5));
    assert_eq!(count(&per_queue(&sim).0, "T", 1), 0);
    sim.command(c, Command::ResumeQueues(q1));
    sim.run_for(Duration::from_secs(10));
    let (n, twice_after) = per_queue(&sim);
    assert_eq!([0, 1, 2, 3].map(|q| count(&n, "T", q)), [10; 4], "{n:?}");
    assert!(!twice && !twice_after, "no offset consumed twice");
    sim.run_for(Duration::from_secs(6));
    assert_eq!(sim.broker(0).committed_offset("G", "T", 1), Some(10));
}

#[test]
fn a_paused_topic_covers_queues_assigned_later_and_other_topics_flow() {
    let mut sim = Sim::builder(62).broker("broker-a", &[("A", 2), ("B", 2)]).build();
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("A", "*")
            .subscribe("B", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    // Before any queue is assigned.
    sim.command(c, Command::PauseQueues(QueueSelector::Topic("A".into())));
    sim.produce("A", 20);
    sim.produce("B", 20);
    sim.run_for(Duration::from_secs(30));
    let (n, _) = per_queue(&sim);
    assert_eq!(
        (count(&n, "A", 0) + count(&n, "A", 1), count(&n, "B", 0) + count(&n, "B", 1)),
        (0, 20),
        "{n:?}"
    );
    let held = sim.consumer(c).unwrap().queue_snapshots();
    assert_eq!(held.iter().filter(|s| &*s.queue.topic == "A").count(), 2, "A's queues are held, not pulled");
    sim.command(c, Command::ResumeQueues(QueueSelector::Topic("A".into())));
    sim.run_for(Duration::from_secs(10));
    let (n, twice) = per_queue(&sim);
    assert_eq!(count(&n, "A", 0) + count(&n, "A", 1), 20, "{n:?}");
    assert!(!twice);
}

#[test]
fn a_paused_orderly_queue_keeps_its_lock() {
    let mut sim = Sim::builder(63).broker("broker-a", &[("T", 2)]).build();
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_mode(ConsumeMode::Orderly)
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_for(Duration::from_secs(3));
    sim.command(c, Command::PauseQueues(QueueSelector::Queue(MessageQueue::new("T", "broker-a", 0))));
    sim.produce("T", 20);
    // Past several lock renewals (every 20 s) and the broker's lock expiry (60 s).
    sim.run_for(Duration::from_secs(150));
    let (n, _) = per_queue(&sim);
    assert_eq!((count(&n, "T", 0), count(&n, "T", 1)), (0, 10), "{n:?}");
    let q0 = sim.consumer(c).unwrap().queue_snapshots().into_iter().find(|s| s.queue.queue_id == 0).unwrap();
    assert!(q0.locked, "the paused queue's lock is kept: {q0:?}");
    sim.command(c, Command::ResumeQueues(QueueSelector::Queue(MessageQueue::new("T", "broker-a", 0))));
    sim.run_for(Duration::from_secs(10));
    let offsets: Vec<i64> =
        sim.consumed().iter().filter(|m| m.queue.queue_id == 0).map(|m| m.offset).collect();
    assert_eq!(offsets, (0..10).collect::<Vec<_>>(), "in order, once");
}

#[test]
fn pausing_a_topic_not_subscribed_is_refused_and_changes_nothing() {
    let mut sim = Sim::builder(64).broker("broker-a", &[("T", 2), ("U", 1)]).build();
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_for(Duration::from_secs(2));
    for selector in
        [QueueSelector::Topic("U".into()), QueueSelector::Queue(MessageQueue::new("U", "broker-a", 0))]
    {
        let r = sim.try_command(c, Command::PauseQueues(selector.clone()));
        assert!(matches!(r, Err(rocketmq_push_core::UsageError::InvalidCommand(_))), "{selector:?}: {r:?}");
    }
    assert!(!sim.events(c).iter().any(|e| matches!(e, rocketmq_push_core::Event::QueuesPaused { .. })));
    sim.produce("T", 10);
    sim.run_for(Duration::from_secs(10));
    assert_eq!(per_queue(&sim).0.values().sum::<usize>(), 10, "the subscribed topic flows");
}
