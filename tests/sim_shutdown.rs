//! Graceful shutdown: stop pulling, let in-flight batches finish (up to the deadline), persist,
//! unregister, then `Terminated` — and a restart replays nothing that finished.

use std::time::Duration;

use rocketmq_push_core::sim::{Sim, SimBrokerConfig, Verdict};
use rocketmq_push_core::{Command, ConsumeFromWhere, Event, Input, UsageError};

#[test]
fn shutdown_waits_for_in_flight_batches_then_persists_and_unregisters() {
    let mut sim = Sim::builder(50)
        .broker("broker-a", &[("T", 2)])
        .listener(|_, _, _| Verdict { took: Duration::from_secs(2), ..Verdict::OK })
        .build();
    sim.produce("T", 10);
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_for(Duration::from_millis(500));
    sim.command(c, Command::Shutdown);
    sim.run_until(|s| s.consumer(c).unwrap().is_terminated(), Duration::from_secs(30)).unwrap();
    // Everything dispatched before the shutdown finished and was committed.
    let consumed = sim.consumed().len() as i64;
    let committed: i64 = (0..2).map(|q| sim.broker(0).committed_offset("G", "T", q).unwrap_or(0)).sum();
    assert_eq!(committed, consumed);
    assert!(sim.broker(0).members("G").is_empty(), "unregistered");
    let t = sim.transcript(c);
    let shutdown_part: Vec<_> = t.iter().skip_while(|s| *s != "Transmit:UpdateConsumerOffset").collect();
    assert!(shutdown_part.iter().any(|s| *s == "Transmit:UnregisterClient"));
    // The consumer's last event, then the driver closes its links and reports the end.
    let after: Vec<&str> =
        t.iter().skip_while(|s| *s != "Event:Terminated").skip(1).map(String::as_str).collect();
    assert_eq!(after.last(), Some(&"Terminated"), "{after:?}");
    assert!(after[..after.len() - 1].iter().all(|s| *s == "Close") && after.len() > 1, "{after:?}");
    assert!(sim.events(c).contains(&Event::Terminated));
}

/// Under steady load a pull goes out carrying a commit just before the stop, and the broker
/// processes pulls later than offset updates (separate pools): its older commit must not land
/// after the final update, or a restart replays. Stops at many moments; every one commits
/// exactly what was consumed.
#[test]
fn a_stop_under_load_commits_what_was_consumed_whatever_the_pull_pool_lag() {
    for round in 0..30u64 {
        let mut sim = Sim::builder(700 + round)
            .broker_config(SimBrokerConfig {
                pull_lag: Duration::from_millis(20),
                ..SimBrokerConfig::default()
            })
            .broker("broker-a", &[("T", 4)])
            .listener(|_, _, _| Verdict { took: Duration::from_millis(3), ..Verdict::OK })
            .build();
        let c = sim.add_consumer(
            sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
        );
        let stop_at = Duration::from_millis(2000 + 37 * round);
        while sim.elapsed() < stop_at {
            sim.produce("T", 1);
            sim.run_for(Duration::from_millis(4));
        }
        sim.command(c, Command::Shutdown);
        sim.run_until(|s| s.consumer(c).unwrap().is_terminated(), Duration::from_secs(30)).unwrap();
        for q in 0..4 {
            let consumed_to = sim
                .consumed()
                .iter()
                .filter(|m| &*m.queue.topic == "T" && m.queue.queue_id == q)
                .map(|m| m.offset + 1)
                .max()
                .unwrap_or(0);
            let committed = sim.broker(0).committed_offset("G", "T", q).unwrap_or(0);
            assert_eq!(committed, consumed_to, "round {round}, queue {q}: committed against consumed");
        }
    }
}

#[test]
fn shutdown_gives_up_on_stuck_batches_at_the_deadline() {
    let mut sim = Sim::builder(51)
        .broker("broker-a", &[("T", 1)])
        .listener(|_, _, _| Verdict { took: Duration::from_secs(600), ..Verdict::OK })
        .build();
    sim.produce("T", 3);
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .await_termination_when_shutdown(Duration::from_secs(5)),
    );
    sim.run_for(Duration::from_millis(500));
    let started = sim.elapsed();
    sim.command(c, Command::Shutdown);
    sim.run_until(|s| s.consumer(c).unwrap().is_terminated(), Duration::from_secs(30)).unwrap();
    let took = sim.elapsed() - started;
    assert!(took >= Duration::from_secs(5) && took < Duration::from_secs(7), "{took:?}");
    // Nothing finished, so the committed offset stayed at the start: all three come back later.
    let committed = sim.broker(0).committed_offset("G", "T", 0);
    assert!(matches!(committed, None | Some(0)), "committed {committed:?}");
}

#[test]
fn input_after_termination_is_refused_and_changes_nothing() {
    let mut sim = Sim::builder(52).broker("broker-a", &[("T", 1)]).build();
    let c = sim.add_consumer(sim.config("G").subscribe("T", "*"));
    sim.run_for(Duration::from_secs(1));
    sim.command(c, Command::Shutdown);
    sim.run_until(|s| s.consumer(c).unwrap().is_terminated(), Duration::from_secs(30)).unwrap();
    let now = sim.now();
    let mut consumer = sim.consumer(c).unwrap().config().clone();
    let _ = &mut consumer;
    let mut fresh = rocketmq_push_core::Consumer::new(consumer, now);
    fresh.handle(Input::Command(Command::Shutdown), now).unwrap();
    // A just-started consumer with nothing registered terminates at once.
    while fresh.poll_output().is_some() {}
    assert!(fresh.is_terminated());
    assert_eq!(fresh.handle(Input::Command(Command::Resume), now), Err(UsageError::Terminated));
    assert_eq!(fresh.poll_timeout(), None);
}

/// The rmqcat case seen on 5.3.3: a new group consumes every queue and stops before any periodic
/// persist, so the final updates are the topic's first commits on the broker. Processed
/// together, the broker keeps only one queue's (its first-commit race, modelled by the
/// simulator); sent one first and the rest after its answer, every queue keeps its offset.
#[test]
fn a_new_group_stopped_before_any_persist_commits_every_queue() {
    for round in 0..10u64 {
        let mut sim = Sim::builder(900 + round).broker("broker-a", &[("T", 4)]).build();
        sim.produce("T", 20);
        let c = sim.add_consumer(
            sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
        );
        sim.run_until(|s| s.consumed().len() == 20, Duration::from_secs(4)).unwrap();
        assert!(sim.elapsed() < Duration::from_secs(5), "stopped before the first periodic persist");
        sim.command(c, Command::Shutdown);
        sim.run_until(|s| s.consumer(c).unwrap().is_terminated(), Duration::from_secs(30)).unwrap();
        let committed: Vec<_> = (0..4).map(|q| sim.broker(0).committed_offset("G", "T", q)).collect();
        assert_eq!(committed, [Some(5); 4], "round {round}");
    }
}
