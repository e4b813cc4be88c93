//! Startup: routes, heartbeat, rebalance, start offsets, first pulls — and everything consumed.

use std::time::Duration;

use rocketmq_push_core::sim::Sim;
use rocketmq_push_core::{ConsumeFromWhere, Event};

#[test]
fn one_consumer_consumes_everything_once() {
    let mut sim = Sim::builder(1).broker("broker-a", &[("T", 4)]).build();
    sim.produce("T", 100);
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
    assert_eq!(sim.consumed().len(), 100, "each message once");
    let assigned: usize = sim
        .events(c)
        .iter()
        .map(|e| match e {
            Event::QueuesAssigned { topic, queues } if topic == "T" => queues.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(assigned, 4);
    println!("{:?}", &sim.transcript(c)[..20.min(sim.transcript(c).len())]);
}

#[test]
fn a_dead_name_server_is_left_at_once_in_either_position() {
    // Each client starts at a name server of its own (a hash of its id, as Java picks one at
    // random): one of the two orders puts the dead one first for it. Either way the route comes
    // from the live one within moments — not after a retry back-off or a 30 s refresh.
    for list in ["127.0.0.1:1;127.0.0.1:9876", "127.0.0.1:9876;127.0.0.1:1"] {
        let mut sim = Sim::builder(2).broker("broker-a", &[("T", 4)]).build();
        sim.produce("T", 20);
        sim.add_consumer(
            sim.config("G")
                .name_server(list)
                .subscribe("T", "*")
                .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
        );
        sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
        let first = sim.consumed().iter().map(|m| m.at).min().unwrap();
        assert!(first < Duration::from_millis(300), "{list}: first message after {first:?}");
    }
}

#[test]
fn every_topic_is_taken_at_start_whichever_route_answers_first() {
    // Routes answer one by one (jitter orders them either way), and the first starts a
    // rebalance pass (Java's minimum gap of 1 s then holds the next pass back). A topic whose
    // route comes after that pass is still taken at once, not a second later: with two topics,
    // or with a group that existed before (its retry topic's route may answer first). And two
    // topics assigned in one pass both have their new subscription version registered before
    // their first pulls (a broker refuses a pull of a version newer than it knows).
    // (the broker's topics, those subscribed)
    type Case = (&'static [(&'static str, i32)], &'static [&'static str]);
    let cases: [Case; 2] = [(&[("A", 2), ("T", 4)], &["A", "T"]), (&[("T", 4), ("%RETRY%G", 1)], &["T"])];
    for ((topics, subscribed), seed) in cases.into_iter().flat_map(|c| (0..16).map(move |s| (c, s))) {
        let mut sim = Sim::builder(seed)
            .latency(Duration::from_millis(1))
            .jitter(Duration::from_millis(3))
            .broker("broker-a", topics)
            .build();
        let mut config = sim.config("G").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset);
        for t in subscribed {
            sim.produce(t, 20);
            config = config.subscribe(*t, "*");
        }
        sim.add_consumer(config);
        sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
        for t in subscribed {
            let first = sim.consumed().iter().filter(|m| m.topic == *t).map(|m| m.at).min().unwrap();
            assert!(
                first < Duration::from_millis(300),
                "seed {seed}: {t} of {subscribed:?}: first message after {first:?}"
            );
        }
    }
}
