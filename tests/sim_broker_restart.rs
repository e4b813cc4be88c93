//! A broker restarts (and refuses connections for a while), or resets connections in the middle
//! of long polls: the consumer reconnects, re-registers and continues; nothing is lost.

use std::time::Duration;

use rocketmq_push_core::sim::{Fault, Sim, Verdict};
use rocketmq_push_core::{ConsumeFromWhere, Event};

fn setup(seed: u64) -> (Sim, usize) {
    let mut sim = Sim::builder(seed)
        .broker("broker-a", &[("T", 4)])
        .listener(|_, _, _| Verdict { took: Duration::from_millis(2), ..Verdict::OK })
        .build();
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_for(Duration::from_secs(2));
    (sim, c)
}

#[test]
fn a_restarted_broker_is_re_registered_and_consumption_continues() {
    let (mut sim, c) = setup(40);
    sim.produce("T", 200);
    sim.run_for(Duration::from_millis(50));
    sim.inject(Fault::RestartBroker(0, Duration::from_secs(5)));
    sim.produce("T", 0);
    sim.run_for(Duration::from_secs(10));
    sim.produce("T", 100);
    sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
    let heartbeats = sim.transcript(c).iter().filter(|t| *t == "Transmit:HeartBeat").count();
    assert!(heartbeats >= 2, "registered again after the restart");
    let lost: Vec<_> =
        sim.produced().iter().filter(|p| sim.times_consumed(&p.key) == 0).map(|p| p.key.clone()).collect();
    assert!(lost.is_empty(), "{lost:?}");
}

#[test]
fn connections_reset_during_long_polls_lose_nothing() {
    let (mut sim, c) = setup(41);
    for round in 0..5 {
        sim.produce("T", 40);
        sim.run_for(Duration::from_millis(300 + 200 * round));
        sim.inject(Fault::ResetBroker(0));
    }
    sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
    assert!(sim.consumer(c).unwrap().stats().pull_errors >= 5, "{:?}", sim.consumer(c).unwrap().stats());
    assert!(!sim.events(c).iter().any(|e| matches!(e, Event::CorruptPull { .. })));
}

#[test]
fn a_broker_killed_and_back_replays_nothing_it_lost() {
    // Two brokers; broker-b is killed (its consumer offsets are lost, as with a kill -9 before
    // the offset flush) and stays away for 40 s: its queues leave the route and are released.
    // When it is back, they start where this consumer had committed, not from the first offset.
    let mut sim = Sim::builder(42)
        .broker("broker-a", &[("T", 4)])
        .broker("broker-b", &[("T", 4)])
        .listener(|_, _, _| Verdict { took: Duration::from_millis(2), ..Verdict::OK })
        .build();
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.produce("T", 800);
    sim.run_until(|s| s.all_done(), Duration::from_secs(30)).unwrap();
    sim.run_for(Duration::from_secs(6)); // the commits land
    sim.inject(Fault::KillBroker(1, Duration::from_secs(40)));
    sim.run_for(Duration::from_secs(70));
    assert!(
        sim.events(c).iter().any(|e| matches!(e, Event::QueuesRevoked { queues, .. }
            if queues.iter().any(|q| &*q.broker_name == "broker-b"))),
        "broker-b's queues were released while it was gone"
    );
    sim.produce("T", 200);
    sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
    let twice = sim.produced().iter().filter(|p| sim.times_consumed(&p.key) > 1).count();
    assert_eq!(twice, 0, "messages consumed again after the broker came back");
}

#[test]
fn after_a_broker_crash_the_offsets_it_lost_are_committed_again_on_every_queue() {
    // A crash loses the group's offsets. Java sends every offset every 5 s and so restores
    // them; this consumer sends only changed ones, so a dropped link marks that broker's
    // offsets unconfirmed, and the next persist sends them again — the first alone, since the
    // broker's map is gone (first commits processed together lose all but one; see
    // sim_shutdown). No new message arrives: without that, the offsets would stay lost.
    for seed in 0..5u64 {
        let (mut sim, c) = setup(60 + seed);
        sim.produce("T", 40);
        sim.run_until(|s| s.all_done(), Duration::from_secs(30)).unwrap();
        sim.run_for(Duration::from_secs(6)); // the commits land
        assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(10));
        sim.inject(Fault::KillBroker(0, Duration::from_secs(3)));
        sim.run_for(Duration::from_secs(12));
        sim.command(c, rocketmq_push_core::Command::Shutdown);
        sim.run_until(|s| s.consumer(c).unwrap().is_terminated(), Duration::from_secs(30)).unwrap();
        let committed: Vec<_> = (0..4).map(|q| sim.broker(0).committed_offset("G", "T", q)).collect();
        assert_eq!(committed, [Some(10); 4], "seed {seed}");
    }
}
