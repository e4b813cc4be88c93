//! The adapters' path, driven by the simulator: consumers run inside a `Driver`, so connects can
//! be refused (and are retried with back-off, not in a loop), and frames arrive in pieces that
//! the driver must put back together.

use std::time::Duration;

use rocketmq_push_core::sim::{Fault, Faults, Sim, Verdict};
use rocketmq_push_core::{ConsumeFromWhere, DisconnectReason, Event};

fn sim(seed: u64, split: bool) -> Sim {
    Sim::builder(seed)
        .split_reads(split)
        .broker("broker-a", &[("T", 4)])
        .listener(|_, _, _| Verdict { took: Duration::from_millis(1), ..Verdict::OK })
        .build()
}

fn from_first(sim: &Sim) -> rocketmq_push_core::ConsumerConfigBuilder {
    sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
}

#[test]
fn frames_read_in_pieces_are_reassembled() {
    let mut sim = sim(60, true);
    sim.produce("T", 300);
    let c = sim.add_consumer(from_first(&sim));
    sim.run_until(|s| s.all_done(), Duration::from_secs(30)).unwrap();
    let unreadable = sim.events(c).iter().any(|e| {
        matches!(
            e,
            Event::ConnectionLost { reason: DisconnectReason::Decode(_), .. } | Event::CorruptPull { .. }
        )
    });
    assert!(!unreadable, "{:?}", sim.events(c));
    assert_eq!(sim.consumed().len(), 300, "each once");
}

#[test]
fn a_refused_connect_backs_off_instead_of_looping() {
    let mut sim = sim(61, false);
    sim.produce("T", 40);
    let c = sim.add_consumer(from_first(&sim));
    sim.run_for(Duration::from_secs(2));
    // Down for 10 s: every connect is refused meanwhile.
    sim.inject(Fault::RestartBroker(0, Duration::from_secs(10)));
    let before = sim.transcript(c).len();
    sim.run_for(Duration::from_secs(9));
    let attempts = sim.transcript(c)[before..].iter().filter(|t| *t == "Connect").count();
    println!("{attempts} connect attempts while the broker was down");
    // 200 ms doubling to 5 s: about 6 attempts in 9 s; a retry loop would make thousands.
    assert!((2..=12).contains(&attempts), "{attempts} connects while the broker was down");
    let refused = sim
        .events(c)
        .iter()
        .filter(|e| matches!(e, Event::ConnectionLost { reason: DisconnectReason::ConnectFailed(_), .. }));
    assert!(refused.count() >= 2, "refusals reported");
    sim.produce("T", 40);
    sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
}

#[test]
fn connects_refused_at_random_lose_nothing() {
    let mut sim = sim(62, true);
    sim.inject(Fault::SetFaults(Faults { refuse_connects: 0.5, ..Faults::default() }));
    sim.produce("T", 100);
    let c = sim.add_consumer(from_first(&sim));
    sim.run_for(Duration::from_secs(5));
    sim.inject(Fault::ResetBroker(0));
    sim.run_for(Duration::from_secs(5));
    sim.heal();
    sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
    let connects = sim.transcript(c).iter().filter(|t| *t == "Connect").count();
    assert!(connects >= 3, "reconnected after refusals: {connects}");
}

#[test]
fn a_silent_link_is_closed_and_opened_afresh() {
    let mut sim = sim(63, false);
    sim.produce("T", 40);
    let c = sim.add_consumer(from_first(&sim));
    sim.run_until(|s| s.all_done(), Duration::from_secs(10)).unwrap();
    // Every link to the broker goes silent (a half-open connection after a partition): connects
    // still succeed, nothing is answered, nothing closes. New links work again after the heal;
    // the silent ones never do.
    sim.inject(Fault::BlackholeBroker(0));
    sim.produce("T", 40);
    sim.run_for(Duration::from_secs(20));
    sim.inject(Fault::HealBroker(0));
    sim.run_until(|s| s.all_done(), Duration::from_secs(90)).unwrap();
    let unresponsive = sim
        .events(c)
        .iter()
        .filter(|e| matches!(e, Event::ConnectionLost { reason: DisconnectReason::Unresponsive { .. }, .. }))
        .count();
    assert!(unresponsive >= 1, "the dead link was named: {:?}", sim.events(c));
}

#[test]
fn a_client_the_broker_still_lists_on_a_dead_channel_keeps_all_its_queues() {
    let mut sim = sim(64, false);
    let c = sim.add_consumer(from_first(&sim));
    let held = |s: &Sim| {
        s.consumer(c).map_or(0, |c| c.queue_snapshots().iter().filter(|q| &*q.queue.topic == "T").count())
    };
    sim.run_until(|s| held(s) == 4, Duration::from_secs(10)).unwrap();
    // A half-open link: the consumer gives up on it and reconnects; the broker never sees the
    // close and lists the client once per channel until the dead one expires (2 min).
    sim.inject(Fault::BlackholeBroker(0));
    sim.run_for(Duration::from_secs(20));
    sim.inject(Fault::HealBroker(0));
    sim.run_for(Duration::from_secs(45));
    let members = sim.broker(0).members("G");
    assert_eq!(members.len(), 2, "listed on both channels: {members:?}");
    assert_eq!(members[0], members[1]);
    assert_eq!(held(&sim), 4, "a rebalance with the client listed twice keeps every queue");
    sim.produce("T", 40);
    sim.run_until(|s| s.all_done(), Duration::from_secs(20)).unwrap();
}
