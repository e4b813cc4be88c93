//! A broker that refuses one subscribed topic for want of permission (an ACL user without the
//! SUB right): that topic is reported once and left alone, the others go on, and it is consumed
//! once the permission is granted.

use std::time::Duration;

use rocketmq_push_core::sim::{Sim, SimBrokerConfig, Verdict};
use rocketmq_push_core::{Code, ConsumeFromWhere, Event, ResponseCode};

fn sim(seed: u64) -> Sim {
    Sim::builder(seed)
        .broker("broker-a", &[("Open", 4), ("Closed", 4)])
        .listener(|_, _, _| Verdict::OK)
        .build()
}

/// Pulls of consumer `i` that came back with an error.
fn pull_errors(sim: &Sim, i: usize) -> u64 {
    sim.consumer(i).map_or(0, |c| c.stats().pull_errors)
}

#[test]
fn a_refused_topic_is_reported_once_and_the_others_go_on() {
    let mut sim = sim(1);
    sim.broker_mut(0).deny_pull("Closed", true);
    let a = sim.add_consumer(
        sim.config("G")
            .subscribe("Open", "*")
            .subscribe("Closed", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_for(Duration::from_secs(2));
    let before = pull_errors(&sim, a);
    sim.produce("Open", 40);
    sim.produce("Closed", 40);
    sim.run_for(Duration::from_secs(120));
    let open = sim.consumed().iter().filter(|c| &*c.queue.topic == "Open").count();
    let closed = sim.consumed().iter().filter(|c| &*c.queue.topic == "Closed").count();
    assert_eq!((open, closed), (40, 0), "the open topic is consumed, the refused one not");
    let refused: Vec<_> = sim
        .events(a)
        .iter()
        .filter_map(|e| match e {
            Event::TopicRefused { topic, remark, .. } => Some((topic.clone(), remark.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 1, "reported once, not once per pull: {refused:?}");
    assert_eq!(refused[0].0, "Closed");
    assert!(refused[0].1.contains("permission"), "the broker's reason is kept: {refused:?}");
    let per_pull = sim
        .events(a)
        .iter()
        .filter(
            |e| matches!(e, Event::BrokerError { code, .. } if code.to_string().contains("NO_PERMISSION")),
        )
        .count();
    assert_eq!(per_pull, 0, "no error event per refused pull");
    // Four queues over two minutes: each pulled about every 30 s, not every 3 s (Java's pace).
    let refusals = pull_errors(&sim, a) - before;
    assert!((4..=4 * 6).contains(&refusals), "{refusals} refused pulls in 2 minutes");

    // The operator grants the right: the topic is consumed within the retry interval.
    sim.broker_mut(0).deny_pull("Closed", false);
    sim.run_until(|s| s.consumed().len() == 80, Duration::from_secs(40)).unwrap();
    // Refused again later: reported again (once).
    sim.broker_mut(0).deny_pull("Closed", true);
    sim.produce("Closed", 4);
    sim.run_for(Duration::from_secs(60));
    let reports = sim.events(a).iter().filter(|e| matches!(e, Event::TopicRefused { .. })).count();
    assert_eq!(reports, 2);
}

#[test]
fn a_heartbeat_refused_for_one_topic_goes_again_without_it_as_4_9_acl_needs() {
    let mut sim = Sim::builder(2)
        .broker_config(SimBrokerConfig {
            deny_pull: vec!["Closed".into()],
            deny_as_acl_v1: true,
            ..SimBrokerConfig::default()
        })
        .broker("broker-a", &[("Open", 4), ("Closed", 4)])
        .listener(|_, _, _| Verdict::OK)
        .build();
    let a = sim.add_consumer(
        sim.config("G")
            .subscribe("Open", "*")
            .subscribe("Closed", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.produce("Open", 40);
    sim.produce("Closed", 40);
    sim.run_for(Duration::from_secs(60));
    let open = sim.consumed().iter().filter(|c| &*c.queue.topic == "Open").count();
    let closed = sim.consumed().iter().filter(|c| &*c.queue.topic == "Closed").count();
    assert_eq!((open, closed), (40, 0), "the other topic goes on");
    let refused: Vec<_> = sim.events(a).iter().filter(|e| matches!(e, Event::TopicRefused { .. })).collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(matches!(refused[0], Event::TopicRefused { topic, .. } if topic == "Closed"));
    // Granted: the topic goes back into the heartbeat at its next interval and is consumed.
    sim.broker_mut(0).deny_pull("Closed", false);
    sim.run_until(|s| s.consumed().len() == 80, Duration::from_secs(90)).unwrap();
}

/// Credentials the broker stops accepting (a security token that expired, a revoked key): every
/// request is refused. The consumer says so once, sends little while refused (a heartbeat per
/// interval, not one per parked pull), commits and loses nothing, and carries on where it was
/// once the broker accepts it again (a renewed token).
#[test]
fn refused_credentials_are_reported_once_and_retried_slowly_and_nothing_is_lost() {
    let mut sim = Sim::builder(3).broker("broker-a", &[("T", 4)]).listener(|_, _, _| Verdict::OK).build();
    let a = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.produce("T", 40);
    sim.run_until(|s| s.consumed().len() == 40, Duration::from_secs(30)).unwrap();
    sim.run_for(Duration::from_secs(10));
    let committed: Vec<_> = (0..4).map(|q| sim.broker(0).committed_offset("G", "T", q)).collect();
    assert!(committed.iter().all(Option::is_some), "{committed:?}");
    let expired = "[AUTHENTICATION] User:rmq_user is authenticated failed: the security token expired";
    sim.broker_mut(0).refuse_all(Some(expired));
    let events_before = sim.events(a).len();
    // Pulls the broker already holds end; then messages arrive while we are refused.
    sim.run_for(Duration::from_secs(30));
    let sent_before = sim.transcript(a).len();
    sim.produce("T", 40);
    let refused_for = Duration::from_secs(300);
    sim.run_for(refused_for);
    assert_eq!(sim.consumed().len(), 40, "nothing consumed while refused");
    let now: Vec<_> = (0..4).map(|q| sim.broker(0).committed_offset("G", "T", q)).collect();
    assert_eq!(now, committed, "nothing committed while refused");
    let sent = sim.transcript(a)[sent_before..].iter().filter(|t| t.starts_with("Transmit:")).count();
    // A heartbeat every 30 s and a rebalance's member list every 20 s, nothing at a pull's
    // retry pace (that was 3 heartbeats a second).
    let budget = (refused_for.as_secs() / 20 + 1) as usize * 2;
    assert!(sent <= budget, "{sent} requests in {refused_for:?} while refused (budget {budget})");
    let errors: Vec<_> = sim.events(a)[events_before..]
        .iter()
        .filter(|e| {
            matches!(e, Event::BrokerError { code, .. } | Event::TopicRefused { code, .. }
                if *code == Code::Known(ResponseCode::NoPermission))
        })
        .collect();
    assert_eq!(errors.len(), 1, "reported once: {errors:?}");
    assert!(matches!(errors[0], Event::BrokerError { remark, .. } if remark.contains("token expired")));

    // Renewed: consumed from where it stopped, nothing twice.
    sim.broker_mut(0).refuse_all(None);
    sim.run_until(|s| s.consumed().len() == 80, Duration::from_secs(60)).unwrap();
    sim.run_for(Duration::from_secs(10));
    assert_eq!(sim.consumed().len(), 80, "nothing consumed twice");
    // Refused again: reported again, once.
    sim.broker_mut(0).refuse_all(Some(expired));
    sim.run_for(Duration::from_secs(120));
    let reports = sim
        .events(a)
        .iter()
        .filter(|e| matches!(e, Event::BrokerError { remark, .. } if remark.contains("token expired")))
        .count();
    assert_eq!(reports, 2);
}
