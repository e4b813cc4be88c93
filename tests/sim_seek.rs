//! Seeking a running consumer (`Command::Seek`): to a time, the first, the last or an offset,
//! per topic or per queue; refusals move nothing; a queue still starting starts at the target.
//! The simulator's invariants (no commit past unfinished work unless a seek skipped it on
//! purpose) run throughout.

use std::time::Duration;

use rocketmq_push_core::message::MessageQueue;
use rocketmq_push_core::sim::Sim;
use rocketmq_push_core::{Command, ConsumeFromWhere, ConsumeMode, Event, QueueSelector, SeekTo, UsageError};

fn seek(sim: &mut Sim, c: usize, queues: QueueSelector, to: SeekTo) -> Result<(), UsageError> {
    let r = sim.try_command(c, Command::Seek { queues, to });
    // Long enough for the broker's answer to a lookup.
    sim.run_for(Duration::from_millis(200));
    r
}

fn consumer(sim: &mut Sim, mode: ConsumeMode) -> usize {
    sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_mode(mode)
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    )
}

/// Offsets consumed of queue `q` from the `from`-th consumption on.
fn offsets_of(sim: &Sim, from: usize, q: i32) -> Vec<i64> {
    sim.consumed()[from..].iter().filter(|m| m.queue.queue_id == q).map(|m| m.offset).collect()
}

fn seeked(sim: &Sim, c: usize) -> Vec<(i32, i64, i64)> {
    sim.events(c)
        .iter()
        .filter_map(|e| match e {
            Event::Seeked { queue, from, to } => Some((queue.queue_id, *from, *to)),
            _ => None,
        })
        .collect()
}

fn q(id: i32) -> MessageQueue {
    MessageQueue::new("T", "broker-a", id)
}

#[test]
fn a_seek_to_a_time_replays_what_was_stored_from_then_on_in_every_queue() {
    let mut sim = Sim::builder(71).broker("broker-a", &[("T", 4)]).build();
    let c = consumer(&mut sim, ConsumeMode::Concurrently);
    sim.produce("T", 20);
    sim.run_for(Duration::from_secs(10));
    let between = sim.broker(0).wall_ms(sim.now());
    sim.run_for(Duration::from_secs(10));
    sim.produce("T", 20);
    sim.run_for(Duration::from_secs(10));
    assert_eq!(sim.consumed().len(), 40);
    let before = sim.consumed().len();
    seek(&mut sim, c, QueueSelector::Topic("T".into()), SeekTo::Timestamp(between)).unwrap();
    sim.run_for(Duration::from_secs(10));
    for id in 0..4 {
        assert_eq!(offsets_of(&sim, before, id), (5..10).collect::<Vec<_>>(), "queue {id}");
    }
    let mut moves = seeked(&sim, c);
    moves.sort();
    assert_eq!(moves, (0..4).map(|id| (id, 10, 5)).collect::<Vec<_>>());
    sim.run_for(Duration::from_secs(6));
    for id in 0..4 {
        assert_eq!(sim.broker(0).committed_offset("G", "T", id), Some(10), "queue {id}");
    }
}

#[test]
fn one_queue_to_its_first_another_to_an_offset_and_the_rest_flow_untouched() {
    let mut sim = Sim::builder(72).broker("broker-a", &[("T", 4)]).build();
    let c = consumer(&mut sim, ConsumeMode::Concurrently);
    sim.produce("T", 40);
    sim.run_for(Duration::from_secs(10));
    let before = sim.consumed().len();
    assert_eq!(before, 40);
    seek(&mut sim, c, QueueSelector::Queue(q(1)), SeekTo::First).unwrap();
    seek(&mut sim, c, QueueSelector::Queue(q(2)), SeekTo::Offset(7)).unwrap();
    sim.produce("T", 4);
    sim.run_for(Duration::from_secs(10));
    assert_eq!(offsets_of(&sim, before, 0), vec![10]);
    assert_eq!(offsets_of(&sim, before, 1), (0..11).collect::<Vec<_>>());
    assert_eq!(offsets_of(&sim, before, 2), (7..11).collect::<Vec<_>>());
    assert_eq!(offsets_of(&sim, before, 3), vec![10]);
}

#[test]
fn a_seek_to_the_last_skips_what_waits_and_commits_past_it() {
    let mut sim = Sim::builder(73).broker("broker-a", &[("T", 2)]).build();
    let c = consumer(&mut sim, ConsumeMode::Concurrently);
    sim.run_for(Duration::from_secs(3));
    sim.command(c, Command::Suspend);
    sim.produce("T", 20);
    sim.run_for(Duration::from_secs(5));
    let before = sim.consumed().len();
    assert!(before <= 2, "a held poll's answer at most");
    seek(&mut sim, c, QueueSelector::Topic("T".into()), SeekTo::Last).unwrap();
    sim.command(c, Command::Resume);
    sim.produce("T", 2);
    sim.run_for(Duration::from_secs(10));
    let mut got: Vec<_> = sim.consumed()[before..].iter().map(|m| (m.queue.queue_id, m.offset)).collect();
    got.sort();
    assert_eq!(got, vec![(0, 10), (1, 10)], "only what came after the seek");
    sim.run_for(Duration::from_secs(6));
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(11));
    assert_eq!(sim.broker(0).committed_offset("G", "T", 1), Some(11));
}

#[test]
fn refusals_are_typed_and_move_nothing() {
    let mut sim = Sim::builder(74).broker("broker-a", &[("T", 2), ("U", 1)]).build();
    let c = consumer(&mut sim, ConsumeMode::Concurrently);
    sim.produce("T", 10);
    sim.run_for(Duration::from_secs(10));
    let future = sim.broker(0).wall_ms(sim.now()) + 60_000;
    let refused = [
        (QueueSelector::Topic("U".into()), SeekTo::First),
        (QueueSelector::Queue(MessageQueue::new("T", "broker-a", 5)), SeekTo::First),
        (QueueSelector::Queue(MessageQueue::new("T", "broker-b", 0)), SeekTo::Last),
        (QueueSelector::Topic("T".into()), SeekTo::Offset(-1)),
        (QueueSelector::Topic("T".into()), SeekTo::Offset(6)),
        (QueueSelector::Queue(q(0)), SeekTo::Offset(6)),
        (QueueSelector::Topic("T".into()), SeekTo::Timestamp(-5)),
        (QueueSelector::Topic("T".into()), SeekTo::Timestamp(future)),
    ];
    for (queues, to) in refused {
        let r = seek(&mut sim, c, queues.clone(), to);
        assert!(matches!(r, Err(UsageError::InvalidCommand(_))), "{queues:?} {to:?}: {r:?}");
    }
    // The range's ends are fine: 5 is the max offset (what comes next).
    seek(&mut sim, c, QueueSelector::Queue(q(0)), SeekTo::Offset(5)).unwrap();
    sim.run_for(Duration::from_secs(10));
    assert_eq!(sim.consumed().len(), 10, "nothing replayed");
    assert_eq!(seeked(&sim, c), vec![(0, 5, 5)]);
    assert!(!sim.events(c).iter().any(|e| matches!(e, Event::SeekFailed { .. })));
}

#[test]
fn a_queue_still_finding_its_start_starts_at_the_target() {
    let mut sim = Sim::builder(75).broker("broker-a", &[("T", 2)]).build();
    sim.produce("T", 20);
    let c = consumer(&mut sim, ConsumeMode::Concurrently);
    sim.run_until(
        |s| s.events(c).iter().any(|e| matches!(e, Event::QueuesAssigned { .. })),
        Duration::from_secs(10),
    )
    .unwrap();
    assert!(sim.consumer(c).unwrap().queue_snapshots().iter().all(|s| !s.pulling), "looked up still");
    seek(&mut sim, c, QueueSelector::Topic("T".into()), SeekTo::Offset(6)).unwrap();
    sim.run_for(Duration::from_secs(10));
    for id in 0..2 {
        assert_eq!(offsets_of(&sim, 0, id), (6..10).collect::<Vec<_>>(), "queue {id}");
    }
    let mut moves = seeked(&sim, c);
    moves.sort();
    assert_eq!(moves, vec![(0, -1, 6), (1, -1, 6)]);
}

#[test]
fn an_orderly_queue_replays_in_order_after_a_seek_back() {
    let mut sim = Sim::builder(76).broker("broker-a", &[("T", 2)]).build();
    let c = consumer(&mut sim, ConsumeMode::Orderly);
    sim.produce("T", 20);
    sim.run_for(Duration::from_secs(10));
    let before = sim.consumed().len();
    assert_eq!(before, 20);
    seek(&mut sim, c, QueueSelector::Queue(q(0)), SeekTo::Offset(3)).unwrap();
    sim.produce("T", 2);
    sim.run_for(Duration::from_secs(10));
    assert_eq!(offsets_of(&sim, before, 0), (3..11).collect::<Vec<_>>());
    assert_eq!(offsets_of(&sim, before, 1), vec![10]);
    let q0 = sim.consumer(c).unwrap().queue_snapshots().into_iter().find(|s| s.queue.queue_id == 0).unwrap();
    assert!(q0.locked, "the lock is kept: {q0:?}");
}

#[test]
fn a_seek_after_shutdown_began_is_refused() {
    let mut sim = Sim::builder(77).broker("broker-a", &[("T", 1)]).build();
    let c = consumer(&mut sim, ConsumeMode::Concurrently);
    sim.run_for(Duration::from_secs(3));
    sim.command(c, Command::Shutdown);
    let r = seek(&mut sim, c, QueueSelector::Topic("T".into()), SeekTo::First);
    assert!(r.is_err(), "{r:?}");
}

#[test]
fn a_lookup_the_broker_never_answers_fails_the_seek_and_moves_nothing() {
    let mut sim = Sim::builder(78).broker("broker-a", &[("T", 2)]).build();
    let c = consumer(&mut sim, ConsumeMode::Concurrently);
    sim.produce("T", 10);
    sim.run_for(Duration::from_secs(10));
    sim.inject(rocketmq_push_core::sim::Fault::BlackholeBroker(0));
    seek(&mut sim, c, QueueSelector::Topic("T".into()), SeekTo::First).unwrap();
    sim.run_for(Duration::from_secs(10));
    let failed: Vec<_> = sim
        .events(c)
        .iter()
        .filter_map(|e| match e {
            Event::SeekFailed { queue, to: SeekTo::First, reason } => Some((queue.queue_id, reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(failed.iter().all(|(_, r)| r.contains("timed out")), "{failed:?}");
    sim.inject(rocketmq_push_core::sim::Fault::HealBroker(0));
    sim.run_for(Duration::from_secs(30));
    assert!(seeked(&sim, c).is_empty());
    assert_eq!(sim.consumed().len(), 10, "nothing replayed");
}

#[test]
fn a_broadcasting_member_seeks_its_own_local_offsets() {
    let mut sim = Sim::builder(79).broker("broker-a", &[("T", 2)]).build();
    let cfg = |g: &str| {
        sim.config(g)
            .subscribe("T", "*")
            .message_model(rocketmq_push_core::MessageModel::Broadcasting)
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
    };
    let (a, b) = (cfg("G"), cfg("G"));
    let a = sim.add_consumer(a);
    let b = sim.add_consumer(b);
    sim.produce("T", 20);
    sim.run_for(Duration::from_secs(10));
    assert_eq!(sim.consumed().len(), 40, "each member gets everything");
    let before = sim.consumed().len();
    seek(&mut sim, a, QueueSelector::Queue(q(0)), SeekTo::Offset(6)).unwrap();
    sim.run_for(Duration::from_secs(10));
    let again: Vec<(usize, i64)> = sim.consumed()[before..].iter().map(|m| (m.consumer, m.offset)).collect();
    assert_eq!(
        again,
        (6..10).map(|o| (a, o)).collect::<Vec<_>>(),
        "only the member that sought, only its queue"
    );
    assert!(seeked(&sim, b).is_empty());
}

#[test]
fn a_seek_back_while_the_first_commit_is_on_its_way_is_not_undone_by_the_held_stale_one() {
    // A second each way: the first offset update for T (it creates the group's map of T on the
    // broker) is on its way long enough for a seek to come in between, and queue 1's update is
    // held behind it meanwhile. Were that stale 20 sent when the first answer came, the broker
    // would hold 20 before the seek's 0 (the simulator's invariants flag that commit going back).
    let mut sim = Sim::builder(78).latency(Duration::from_secs(1)).broker("broker-a", &[("T", 2)]).build();
    let c = consumer(&mut sim, ConsumeMode::Concurrently);
    sim.produce("T", 40);
    let updates =
        |sim: &Sim| sim.transcript(c).iter().filter(|t| *t == "Transmit:UpdateConsumerOffset").count();
    // The first update is the retry topic's (a map of its own), the second T's first.
    sim.run_until(|s| updates(s) >= 2, Duration::from_secs(30)).unwrap();
    assert_eq!(sim.consumed().len(), 40);
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), None, "the first update has not landed yet");
    assert_eq!(sim.broker(0).committed_offset("G", "T", 1), None);
    // Paused, the queue commits nothing of its own after the seek.
    sim.command(c, Command::PauseQueues(QueueSelector::Queue(q(1))));
    seek(&mut sim, c, QueueSelector::Queue(q(1)), SeekTo::Offset(0)).unwrap();
    let mut seen = Vec::new();
    let until = sim.now() + Duration::from_secs(20);
    while sim.now() < until && sim.step() {
        seen.push(sim.broker(0).committed_offset("G", "T", 1));
    }
    assert_eq!(seeked(&sim, c), vec![(1, 20, 0)]);
    seen.dedup();
    assert_eq!(seen.last(), Some(&Some(0)), "{seen:?}");
    assert!(
        seen.iter().all(|o| o.is_none_or(|o| o == 0)),
        "the stale offset landed after the seek: {seen:?}"
    );
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(20));
}
