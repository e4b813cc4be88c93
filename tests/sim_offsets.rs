//! Offsets: where a queue starts (consumeFromWhere, retry topics, failed lookups), commits
//! while consuming, OFFSET_MOVED, restart without replay, and broadcasting's local offsets.

use std::time::Duration;

use rocketmq_push_core::sim::{Fault, Faults, Sim};
use rocketmq_push_core::{Command, ConsumeFromWhere, Event, MessageModel, RequestCode};

fn sim(seed: u64) -> Sim {
    Sim::builder(seed).broker("broker-a", &[("T", 2)]).build()
}

#[test]
fn a_new_group_reads_a_young_queue_from_its_start_as_java_does() {
    // The broker answers 0 for a new group on a young queue: LAST reads that history too, as
    // Java's DefaultMQPushConsumer does (on 4.9.x and 5.x brokers alike).
    let mut s = sim(30);
    s.produce("T", 10);
    let last = s.add_consumer(s.config("L").subscribe("T", "*"));
    let first = s.add_consumer(
        s.config("F").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    s.run_for(Duration::from_secs(5));
    s.produce("T", 4);
    s.run_for(Duration::from_secs(11));
    let by = |i| s.consumed().iter().filter(|c| c.consumer == i).count();
    assert_eq!(by(last), 14, "CONSUME_FROM_LAST_OFFSET on a young queue: from its start");
    assert_eq!(by(first), 14);
}

#[test]
fn the_opt_in_skips_history_for_a_new_group() {
    let mut s = sim(33);
    s.produce("T", 10);
    let last = s.add_consumer(s.config("L").subscribe("T", "*").new_group_skips_history(true));
    s.run_for(Duration::from_secs(5));
    s.produce("T", 4);
    s.run_for(Duration::from_secs(11));
    assert_eq!(
        s.consumed().iter().filter(|c| c.consumer == last).count(),
        4,
        "only what arrived after start"
    );
    // The start point was committed at once, so a restart cannot skip what arrives meanwhile.
    assert_eq!(s.broker(0).committed_offset("L", "T", 0), Some(7));
}

#[test]
fn timestamp_starts_at_the_first_message_stored_after_it() {
    let mut s = sim(31);
    s.produce("T", 6);
    s.run_for(Duration::from_secs(60));
    let cut = 1_700_000_000_000 + 30_000;
    s.produce("T", 4);
    // The queue is young (its first message still stored): without the opt-in the broker
    // answers 0 and a new group starts there whatever consumeFromWhere says, as in Java.
    s.add_consumer(
        s.config("TS")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromTimestamp)
            .consume_timestamp_ms(cut)
            .new_group_skips_history(true),
    );
    s.run_for(Duration::from_secs(5));
    assert_eq!(s.consumed().len(), 4);
}

#[test]
fn a_failed_offset_lookup_is_retried_never_replaced_by_a_guess() {
    let mut s = sim(32);
    s.produce("T", 10);
    let c = s.add_consumer(s.config("G").subscribe("T", "*"));
    s.run_for(Duration::from_secs(5));
    s.run_for(Duration::from_secs(6));
    assert_eq!(s.broker(0).committed_offset("G", "T", 0), Some(5));
    // Restart the consumer while every offset query is lost for 20 s.
    s.inject(Fault::CrashConsumer(c));
    s.inject(Fault::SetFaults(Faults { lose_requests: &[14], ..Faults::default() }));
    s.inject(Fault::RestartConsumer(c));
    s.run_for(Duration::from_secs(20));
    assert!(s.consumer(c).unwrap().queue_snapshots().iter().all(|q| !q.pulling), "no start offset, no pulls");
    s.heal();
    s.produce("T", 2);
    s.run_for(Duration::from_secs(10));
    // It resumed at the committed offset: no history replayed, nothing skipped.
    assert_eq!(s.consumed().len(), 12);
    assert!(s.produced().iter().all(|p| s.times_consumed(&p.key) == 1), "each once");
    assert!(s.events(c).iter().any(
        |e| matches!(e, Event::RequestTimeout { request, .. } if *request == RequestCode::QueryConsumerOffset)
    ));
}

#[test]
fn offset_moved_continues_from_the_brokers_offset() {
    let mut s = sim(33);
    s.produce("T", 20);
    let c = s.add_consumer(
        s.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    s.run_for(Duration::from_secs(6));
    assert_eq!(s.consumed().len(), 20);
    // While the consumer is suspended at offset 10, 60 more arrive and retention removes queue 0
    // below offset 30.
    s.command(c, Command::Suspend);
    s.run_for(Duration::from_secs(20)); // the held pulls come back
    s.produce("T", 60);
    s.broker_mut(0).truncate("T", 0, 30);
    s.command(c, Command::Resume);
    s.run_for(Duration::from_secs(6));
    let moved = s.events(c).iter().find_map(|e| match e {
        Event::OffsetMoved { queue, from, to } if queue.queue_id == 0 => Some((*from, *to)),
        _ => None,
    });
    assert_eq!(moved, Some((10, 30)));
    assert_eq!(s.consumed().len(), 20 + 30 + 10, "queue 0 resumes at 30; nothing from the removed range");
    assert_eq!(s.broker(0).committed_offset("G", "T", 0), Some(40));
}

#[test]
fn a_clean_restart_replays_nothing() {
    let mut s = sim(34);
    let c = s.add_consumer(s.config("G").subscribe("T", "*"));
    s.run_for(Duration::from_secs(2));
    s.produce("T", 50);
    s.run_for(Duration::from_secs(2));
    s.inject(Fault::ShutdownConsumer(c));
    s.run_until(|s| s.consumer(c).is_some_and(|c| c.is_terminated()), Duration::from_secs(30)).unwrap();
    s.produce("T", 50);
    s.inject(Fault::CrashConsumer(c));
    s.inject(Fault::RestartConsumer(c));
    s.run_until(|s| s.all_done(), Duration::from_secs(30)).unwrap();
    assert_eq!(s.consumed().len(), 100, "each message exactly once across the restart");
}

#[test]
fn broadcasting_consumes_everything_in_every_member_and_keeps_offsets_locally() {
    let mut s = sim(35);
    s.produce("T", 10);
    let cfg = s
        .config("B")
        .subscribe("T", "*")
        .message_model(MessageModel::Broadcasting)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset);
    let a = s.add_consumer(cfg.clone());
    let b = s.add_consumer(cfg);
    s.run_for(Duration::from_secs(8));
    for i in [a, b] {
        assert_eq!(s.consumed().iter().filter(|c| c.consumer == i).count(), 10);
    }
    assert_eq!(s.broker(0).committed_offset("B", "T", 0), None, "broadcasting never commits to the broker");
    // Restart one member: it resumes from its local offsets.
    s.inject(Fault::CrashConsumer(a));
    s.produce("T", 4);
    s.inject(Fault::RestartConsumer(a));
    s.run_for(Duration::from_secs(8));
    assert_eq!(s.consumed().iter().filter(|c| c.consumer == a).count(), 14);
    assert_eq!(s.consumed().iter().filter(|c| c.consumer == b).count(), 14);
}

#[test]
fn two_members_creating_a_group_s_offsets_together_lose_none() {
    // Two new members start together and commit their first offsets at the same instant: the
    // broker keeps one member's map and drops the other's (its first-commit race). Each member
    // sends its queues once more at the persist after it created the map — here the shutdown's,
    // before any pull could carry them again — so none stays lost.
    for seed in 0..5u64 {
        let mut s = Sim::builder(80 + seed).broker("broker-a", &[("T", 4)]).build();
        s.produce("T", 40);
        let cfg =
            || s.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset);
        let (a, b) = (cfg(), cfg());
        let (a, b) = (s.add_consumer(a), s.add_consumer(b));
        s.run_for(Duration::from_millis(5500)); // the first periodic persist creates the maps
        assert_eq!(s.consumed().len(), 40, "seed {seed}");
        s.command(a, Command::Shutdown);
        s.command(b, Command::Shutdown);
        s.run_until(
            |s| s.consumer(a).unwrap().is_terminated() && s.consumer(b).unwrap().is_terminated(),
            Duration::from_secs(30),
        )
        .unwrap();
        let committed: Vec<_> = (0..4).map(|q| s.broker(0).committed_offset("G", "T", q)).collect();
        assert_eq!(committed, [Some(10); 4], "seed {seed}");
    }
}

/// INVOKE_BROKER_TO_RESET_OFFSET as `mqadmin resetOffsetByTime` and `rmqcat group reset` send it.
fn reset(
    sim: &mut Sim,
    queue_id: Option<i32>,
    timestamp: i64,
    offset: Option<i64>,
) -> rocketmq_push_core::RemotingCommand {
    use rocketmq_push_core::protocol::header::ResetOffsetRequestHeader;
    let h = ResetOffsetRequestHeader {
        topic: "T".into(),
        group: "G".into(),
        timestamp,
        is_force: true,
        queue_id,
        offset,
    };
    sim.admin(
        0,
        rocketmq_push_core::RemotingCommand::request(RequestCode::InvokeBrokerToResetOffset).with_header(&h),
    )
    .expect("the broker answers")
}

#[test]
fn a_broker_side_reset_moves_a_running_consumer_at_its_next_pull() {
    let mut sim = sim(81);
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.produce("T", 40);
    sim.run_for(Duration::from_secs(10));
    assert_eq!(sim.consumed().len(), 40);
    // Queue 1 back to 3 while every queue's pull is held by the broker.
    let r = reset(&mut sim, Some(1), -1, Some(3));
    assert_eq!(r.code, 0, "{:?}", r.remark_str());
    assert_eq!(sim.broker(0).committed_offset("G", "T", 1), Some(3), "committed at once");
    sim.produce("T", 4);
    sim.run_for(Duration::from_secs(10));
    let again: Vec<i64> =
        sim.consumed()[40..].iter().filter(|m| m.queue.queue_id == 1).map(|m| m.offset).collect();
    assert_eq!(again, (3..22).collect::<Vec<_>>());
    assert!(
        sim.events(c)
            .iter()
            .any(|e| matches!(e, Event::OffsetMoved { queue, to: 3, .. } if queue.queue_id == 1))
    );
    // Every queue to the max (what comes next), by time −1.
    let r = reset(&mut sim, None, -1, None);
    assert_eq!(r.code, 0, "{:?}", r.remark_str());
    sim.produce("T", 4);
    sim.run_for(Duration::from_secs(10));
    assert_eq!(sim.consumed().len(), 40 + 2 + 19 + 4, "nothing more replayed");
    sim.run_for(Duration::from_secs(6));
    assert!((0..2).all(|q| sim.broker(0).committed_offset("G", "T", q) == Some(24)));
}

#[test]
fn a_reset_outside_the_queue_is_refused_and_moves_nothing() {
    let mut sim = sim(82);
    sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.produce("T", 8);
    sim.run_for(Duration::from_secs(10));
    let r = reset(&mut sim, Some(0), -1, Some(50));
    assert_eq!(r.code, rocketmq_push_core::ResponseCode::SystemError as i32);
    assert_eq!(r.remark_str(), "Target offset 50 not in consume queue range [0-4]");
    sim.run_for(Duration::from_secs(10));
    assert_eq!(sim.consumed().len(), 8);
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(4));
}

#[test]
fn a_commit_does_not_undo_a_pending_reset() {
    let mut sim = sim(83);
    sim.produce("T", 8);
    // Nobody consumes: the reset waits for a pull, and a stale tool's commit is ignored.
    let r = reset(&mut sim, Some(1), -1, Some(1));
    assert_eq!(r.code, 0, "{:?}", r.remark_str());
    use rocketmq_push_core::protocol::header::UpdateConsumerOffsetRequestHeader;
    let h = UpdateConsumerOffsetRequestHeader {
        consumer_group: "G".into(),
        topic: "T".into(),
        queue_id: 1,
        commit_offset: 2,
        bname: None,
    };
    let r = sim.admin(
        0,
        rocketmq_push_core::RemotingCommand::request(RequestCode::UpdateConsumerOffset).with_header(&h),
    );
    assert_eq!(r.map(|r| r.code), Some(0));
    assert_eq!(sim.broker(0).committed_offset("G", "T", 1), Some(1));
    sim.add_consumer(sim.config("G").subscribe("T", "*"));
    sim.run_for(Duration::from_secs(10));
    let q1: Vec<i64> = sim.consumed().iter().filter(|m| m.queue.queue_id == 1).map(|m| m.offset).collect();
    assert_eq!(q1, vec![1, 2, 3]);
}
