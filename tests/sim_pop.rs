//! POP on the simulator: a group an operator switched to POP is popped by every member, each
//! message acked once after its listener succeeded; failures come back after Java's back-off;
//! a switch to POP and back while consumers run loses nothing; a broker without POP is pulled.
//! The simulator's POP invariants (no receipt delivered twice or after its ack, no ack before
//! its listener finished or after it failed) run after every step.

use std::collections::BTreeSet;
use std::time::Duration;

use rocketmq_push_core::protocol::body::MessageRequestMode;
use rocketmq_push_core::sim::{Sim, SimBrokerConfig, Verdict};
use rocketmq_push_core::{ConsumeFromWhere, Event};

fn pop_sim(seed: u64) -> Sim {
    Sim::builder(seed)
        .broker("broker-a", &[("T", 2)])
        .listener(|_, _, _| Verdict { took: Duration::from_millis(3), ..Verdict::OK })
        .build()
}

fn members(sim: &mut Sim, n: usize) -> Vec<usize> {
    let cfg =
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset);
    (0..n).map(|_| sim.add_consumer(cfg.clone())).collect()
}

fn popping(sim: &Sim, i: usize) -> bool {
    sim.consumer(i).is_some_and(|c| c.queue_snapshots().iter().any(|q| q.popping && &*q.queue.topic == "T"))
}

/// G switched to POP on T, and one member popping it with `invisible` as its invisible time.
fn one_popping_member(sim: &mut Sim, invisible: Duration) -> usize {
    sim.broker_mut(0).set_message_request_mode("T", "G", MessageRequestMode::Pop, 0);
    let cfg = sim
        .config("G")
        .subscribe("T", "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .pop_invisible_time(invisible);
    let c = sim.add_consumer(cfg);
    sim.run_until(|s| popping(s, c), Duration::from_secs(10)).unwrap();
    c
}

fn ok_keys(sim: &Sim) -> BTreeSet<String> {
    sim.consumed().iter().filter(|c| c.ok && c.topic == "T").map(|c| c.key.clone()).collect()
}

#[test]
fn three_members_share_two_queues_and_every_message_is_acked_once() {
    let mut sim = pop_sim(11);
    sim.broker_mut(0).set_message_request_mode("T", "G", MessageRequestMode::Pop, 0);
    let ids = members(&mut sim, 3);
    sim.run_until(|s| ids.iter().all(|i| popping(s, *i)), Duration::from_secs(10)).unwrap();
    sim.produce("T", 600);
    sim.run_until(|s| ok_keys(s).len() == 600, Duration::from_secs(60)).unwrap();
    sim.run_for(Duration::from_secs(2));
    for i in &ids {
        let mine = sim.consumed().iter().filter(|c| c.consumer == *i && c.topic == "T").count();
        assert!(mine > 50, "member {i} popped {mine}");
        let pop = sim.consumer(*i).unwrap().queue_snapshots().into_iter().find(|q| q.popping).unwrap();
        assert_eq!(pop.queue.queue_id, -1, "every queue of the broker");
    }
    let popped: Vec<_> = sim.consumed().iter().filter(|c| c.topic == "T").collect();
    assert_eq!(popped.len(), 600, "a quiet run delivers each message once");
    assert!(popped.iter().all(|c| c.receipt.is_some()), "every delivery carries its receipt");
    let stats = sim.broker(0).pop_stats();
    assert_eq!((stats.acked, stats.revived, stats.changed), (600, 0, 0), "{stats:?}");
    let acks: u64 = ids.iter().map(|i| sim.consumer(*i).unwrap().stats().pop_acks).sum();
    assert_eq!(acks, 600);
    assert_eq!(sim.broker(0).checkpoints(), 0, "nothing left invisible");
}

#[test]
fn a_failed_message_comes_back_after_the_first_back_off_level_and_is_acked_then() {
    let mut sim = Sim::builder(12)
        .broker("broker-a", &[("T", 2)])
        .listener(|_, b, _| {
            let fail =
                b.messages.iter().any(|m| (m.queue_id, m.queue_offset, m.reconsume_times) == (0, 3, 0));
            if fail { Verdict::LATER } else { Verdict::OK }
        })
        .build();
    sim.broker_mut(0).set_message_request_mode("T", "G", MessageRequestMode::Pop, 0);
    let ids = members(&mut sim, 1);
    sim.run_until(|s| popping(s, ids[0]), Duration::from_secs(10)).unwrap();
    sim.produce("T", 20);
    sim.run_until(|s| ok_keys(s).len() == 20, Duration::from_secs(60)).unwrap();
    sim.run_for(Duration::from_secs(1));
    let tries: Vec<_> = sim.consumed().iter().filter(|c| !c.ok || c.reconsume_times > 0).collect();
    assert_eq!(tries.len(), 2, "failed once, then succeeded: {tries:?}");
    let back_after = tries[1].at - tries[0].at;
    assert!(
        (Duration::from_secs(10)..Duration::from_secs(12)).contains(&back_after),
        "popDelayLevel[0] is 10 s: back after {back_after:?}"
    );
    assert_eq!(tries[1].topic, "T", "shown under the subscribed topic");
    assert!(
        tries[1].receipt.as_deref().is_some_and(|r| r.split(' ').nth(4) == Some("1")),
        "from the pop retry topic"
    );
    let stats = sim.consumer(ids[0]).unwrap().stats().clone();
    assert_eq!((stats.pop_acks, stats.pop_retries), (20, 1), "{stats:?}");
}

#[test]
fn an_unanswered_message_comes_back_after_its_invisible_time() {
    // The listener hangs on one message past the invisible time (a crashed member would too).
    let mut sim = Sim::builder(13)
        .broker("broker-a", &[("T", 1)])
        .listener(|_, b, _| {
            let hang = b.messages.iter().any(|m| m.queue_offset == 3 && m.reconsume_times == 0);
            Verdict { took: if hang { Duration::from_secs(100) } else { Duration::ZERO }, ..Verdict::OK }
        })
        .build();
    let c = one_popping_member(&mut sim, Duration::from_secs(5));
    sim.produce("T", 10);
    sim.run_until(|s| s.consumed().iter().any(|m| m.reconsume_times == 1), Duration::from_secs(30)).unwrap();
    sim.run_until(|s| s.consumer(c).is_some_and(|c| c.stats().pop_expired == 1), Duration::from_secs(120))
        .unwrap();
    let stats = sim.broker(0).pop_stats();
    assert_eq!(stats.revived, 1, "{stats:?}");
    assert_eq!(ok_keys(&sim).len(), 10, "nothing lost");
}

#[test]
fn switching_to_pop_and_back_while_consuming_loses_nothing() {
    let mut sim = pop_sim(14);
    let ids = members(&mut sim, 2);
    sim.run_for(Duration::from_secs(3));
    let mut produced = 0;
    let mut step = |sim: &mut Sim, secs: u64| {
        for _ in 0..secs {
            sim.produce("T", 20);
            produced += 20;
            sim.run_for(Duration::from_secs(1));
        }
    };
    step(&mut sim, 5);
    assert!(ids.iter().all(|i| !popping(&sim, *i)), "PULL until the operator switches");
    sim.broker_mut(0).set_message_request_mode("T", "G", MessageRequestMode::Pop, 0);
    // Followed at the next rebalance (20 s at most).
    step(&mut sim, 25);
    assert!(ids.iter().all(|i| popping(&sim, *i)), "both pop after the switch");
    sim.broker_mut(0).set_message_request_mode("T", "G", MessageRequestMode::Pull, 0);
    step(&mut sim, 25);
    assert!(ids.iter().all(|i| !popping(&sim, *i)), "both pull again");
    let total = produced;
    sim.run_until(|s| ok_keys(s).len() == total, Duration::from_secs(120)).unwrap();
    for i in &ids {
        let modes: Vec<MessageRequestMode> = sim
            .events(*i)
            .iter()
            .filter_map(|e| match e {
                Event::MessageRequestModeChanged { mode, .. } => Some(*mode),
                _ => None,
            })
            .collect();
        assert_eq!(modes, [MessageRequestMode::Pop, MessageRequestMode::Pull], "member {i}");
    }
    let dups = sim.consumed().iter().filter(|c| c.topic == "T").count() - total;
    assert!(dups <= 64, "a switch may replay what was in flight, not more: {dups}");
}

#[test]
fn a_broker_without_pop_is_pulled_and_asked_no_more() {
    let mut sim = Sim::builder(15)
        .broker_config(SimBrokerConfig { pop_supported: false, ..SimBrokerConfig::default() })
        .broker("broker-a", &[("T", 2)])
        .build();
    let ids = members(&mut sim, 1);
    sim.produce("T", 50);
    sim.run_until(|s| ok_keys(s).len() == 50, Duration::from_secs(30)).unwrap();
    // Three more rebalances: QUERY_ASSIGNMENT went once.
    sim.run_for(Duration::from_secs(65));
    let asked = sim.transcript(ids[0]).iter().filter(|t| t.contains("QueryAssignment")).count();
    assert_eq!(asked, 1, "asked once, then never again");
    assert!(!popping(&sim, ids[0]));
}

#[test]
fn client_rebalance_pulls_a_pop_group_as_java_does_by_default() {
    let mut sim = pop_sim(16);
    sim.broker_mut(0).set_message_request_mode("T", "G", MessageRequestMode::Pop, 0);
    let cfg = sim
        .config("G")
        .subscribe("T", "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .client_rebalance(true);
    let c = sim.add_consumer(cfg);
    sim.produce("T", 30);
    sim.run_until(|s| ok_keys(s).len() == 30, Duration::from_secs(30)).unwrap();
    assert!(!popping(&sim, c));
    assert!(sim.transcript(c).iter().all(|t| !t.contains("QueryAssignment") && !t.contains("PopMessage")));
}

#[test]
fn a_message_revived_after_the_switch_back_to_pull_is_still_consumed() {
    // One message's listener hangs past its invisible time; meanwhile the group goes back to
    // PULL. Its revived copy sits in the pop retry topic, which only POP reads: the consumer
    // pulls that topic after the switch, so the copy is not stranded.
    let mut sim = Sim::builder(17)
        .broker("broker-a", &[("T", 1)])
        .listener(|_, b, _| {
            let hang = b.messages.iter().any(|m| (m.queue_offset, m.reconsume_times) == (2, 0));
            Verdict { took: if hang { Duration::from_secs(60) } else { Duration::ZERO }, ..Verdict::OK }
        })
        .build();
    // Revived after the switch is seen (at the next rebalance, within 20 s).
    let c = one_popping_member(&mut sim, Duration::from_secs(30));
    sim.produce("T", 5);
    sim.run_for(Duration::from_secs(1));
    sim.broker_mut(0).set_message_request_mode("T", "G", MessageRequestMode::Pull, 0);
    sim.run_until(|s| !popping(s, c), Duration::from_secs(25)).unwrap();
    // (A pop the broker held across the switch may take the first copy and drop it with its
    // queue: it is revived once more, one invisible time later.)
    let from_retry = |m: &&rocketmq_push_core::sim::Consumed| m.ok && &*m.queue.topic == "%RETRY%G_T";
    sim.run_until(|s| s.consumed().iter().any(|m| from_retry(&m)), Duration::from_secs(120)).unwrap();
    let copy = sim.consumed().iter().find(from_retry).unwrap().clone();
    assert_eq!(copy.topic, "T", "shown under the subscribed topic");
    assert!(copy.reconsume_times >= 1, "{copy:?}");
    assert!(copy.receipt.is_none(), "pulled, not popped");
    assert_eq!(ok_keys(&sim).len(), 5, "nothing lost");
}

/// Instant listeners whose results are fed together, as an adapter feeds those ready at one
/// wake-up; `batch_ack` says whether the broker knows BATCH_ACK_MESSAGE.
fn together_sim(seed: u64, batch_ack: bool) -> Sim {
    let broker = SimBrokerConfig {
        batch_ack_supported: batch_ack,
        hold_check_interval: Duration::ZERO,
        ..SimBrokerConfig::default()
    };
    Sim::builder(seed)
        .broker_config(broker)
        .broker("broker-a", &[("T", 2)])
        .results_together(true)
        .listener(|_, _, _| Verdict { took: Duration::from_millis(3), ..Verdict::OK })
        .build()
}

#[test]
fn results_fed_together_are_acked_in_one_batch_ack_per_broker() {
    let mut sim = together_sim(21, true);
    let c = one_popping_member(&mut sim, Duration::from_secs(60));
    sim.produce("T", 400);
    sim.run_until(|s| ok_keys(s).len() == 400, Duration::from_secs(60)).unwrap();
    sim.run_for(Duration::from_secs(1));
    let broker = sim.broker(0).pop_stats();
    let ours = sim.consumer(c).unwrap().stats().clone();
    assert_eq!((broker.acked, broker.revived, broker.double_acks), (400, 0, 0), "{broker:?}");
    assert_eq!(ours.pop_acks, 400);
    assert_eq!(ours.pop_batch_acks, broker.batch_acks);
    // 20 listener slots finish together: about one request per 20 acks, not one per ack.
    assert!((1..=400 / 10).contains(&broker.batch_acks), "{} batch acks for 400 messages", broker.batch_acks);
    assert_eq!(sim.broker(0).checkpoints(), 0, "nothing left invisible");
}

#[test]
fn acks_for_two_brokers_go_to_each_in_its_own_batch_ack() {
    let mut sim = Sim::builder(23)
        .broker("broker-a", &[("T", 2)])
        .broker("broker-b", &[("T", 2)])
        .results_together(true)
        .listener(|_, _, _| Verdict { took: Duration::from_millis(3), ..Verdict::OK })
        .build();
    for b in 0..2 {
        sim.broker_mut(b).set_message_request_mode("T", "G", MessageRequestMode::Pop, 0);
    }
    let ids = members(&mut sim, 1);
    let both = |s: &Sim| {
        s.consumer(ids[0]).is_some_and(|c| c.queue_snapshots().iter().filter(|q| q.popping).count() == 2)
    };
    sim.run_until(both, Duration::from_secs(10)).unwrap();
    sim.produce("T", 400);
    sim.run_until(|s| ok_keys(s).len() == 400, Duration::from_secs(60)).unwrap();
    sim.run_for(Duration::from_secs(1));
    let (a, b) = (sim.broker(0).pop_stats(), sim.broker(1).pop_stats());
    assert_eq!(a.acked + b.acked, 400, "{a:?} {b:?}");
    assert!(a.acked > 0 && b.acked > 0 && a.batch_acks > 0 && b.batch_acks > 0, "{a:?} {b:?}");
    let ours = sim.consumer(ids[0]).unwrap().stats().clone();
    assert_eq!((ours.pop_acks, ours.pop_batch_acks), (400, a.batch_acks + b.batch_acks));
}

#[test]
fn a_broker_without_batch_ack_is_acked_one_by_one_and_loses_nothing() {
    let mut sim = together_sim(22, false);
    let c = one_popping_member(&mut sim, Duration::from_secs(60));
    sim.produce("T", 200);
    sim.run_until(|s| ok_keys(s).len() == 200, Duration::from_secs(60)).unwrap();
    sim.run_for(Duration::from_secs(1));
    let broker = sim.broker(0).pop_stats();
    let ours = sim.consumer(c).unwrap().stats().clone();
    assert_eq!((broker.acked, broker.revived, broker.batch_acks), (200, 0, 0), "{broker:?}");
    assert_eq!((ours.pop_acks, ours.pop_batch_acks, ours.pop_request_failures), (200, 0, 0));
    let refused: Vec<_> = sim.events(c).iter().filter(|e| matches!(e, Event::BrokerError { .. })).collect();
    assert!(refused.is_empty(), "the fall-back is quiet: {refused:?}");
    assert_eq!(sim.broker(0).checkpoints(), 0);
}
