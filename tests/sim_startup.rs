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
