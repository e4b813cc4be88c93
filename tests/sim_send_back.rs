//! Failed messages: send-back with delay levels, redelivery from `%RETRY%group`, the
//! dead-letter queue past maxReconsumeTimes, and what happens when send-back itself fails.

use std::time::Duration;

use rocketmq_push_core::sim::{Fault, Faults, Sim, SimBrokerConfig, Verdict};
use rocketmq_push_core::{ConsumeFromWhere, ConsumeResult, ConsumeStatus, Event, RequestCode};

fn fast_delays() -> SimBrokerConfig {
    SimBrokerConfig {
        delay_levels_ms: vec![1000; 18],
        hold_check_interval: Duration::ZERO,
        ..SimBrokerConfig::default()
    }
}

#[test]
fn reconsume_later_comes_back_through_the_retry_topic_with_the_original_topic() {
    let mut sim = Sim::builder(10)
        .broker_config(fast_delays())
        .broker("broker-a", &[("T", 2)])
        // Fail every message the first time only.
        .listener(|_, b, _| if b.messages[0].reconsume_times == 0 { Verdict::LATER } else { Verdict::OK })
        .build();
    sim.produce("T", 20);
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
    let retried: Vec<_> = sim.consumed().iter().filter(|m| m.ok).collect();
    assert_eq!(retried.len(), 20);
    for m in retried {
        assert_eq!(m.reconsume_times, 1);
        assert_eq!(m.topic, "T", "RETRY_TOPIC restored");
        assert_eq!(&*m.queue.topic, "%RETRY%G");
    }
    assert_eq!(sim.consumer(c).unwrap().stats().sent_back, 20);
}

#[test]
fn past_max_reconsume_times_the_broker_dead_letters() {
    let mut sim = Sim::builder(11)
        .broker_config(fast_delays())
        .broker("broker-a", &[("T", 1)])
        .listener(|_, _, _| Verdict::LATER)
        .build();
    sim.produce("T", 3);
    sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .max_reconsume_times(2),
    );
    sim.run_until(|s| s.all_done(), Duration::from_secs(120)).unwrap();
    let dlq = sim.dead_lettered("G");
    assert_eq!(dlq.len(), 3);
    // Consumed at reconsume 0, 1, 2; the third failure goes to %DLQ%G.
    assert_eq!(sim.consumed().len(), 9);
}

#[test]
fn ack_index_fails_only_the_tail_of_a_batch() {
    let mut sim = Sim::builder(12)
        .broker_config(fast_delays())
        .broker("broker-a", &[("T", 1)])
        .listener(|_, b, _| {
            if b.messages[0].reconsume_times > 0 || b.messages.len() < 2 {
                Verdict::OK
            } else {
                // First message done, the rest to retry.
                Verdict { result: ConsumeResult::SUCCESS.with_ack_index(0), took: Duration::ZERO }
            }
        })
        .build();
    sim.produce("T", 4);
    sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .consume_message_batch_max_size(4),
    );
    sim.run_until(|s| s.all_done(), Duration::from_secs(60)).unwrap();
    let retried = sim.consumed().iter().filter(|m| m.reconsume_times == 1).count();
    assert_eq!(retried, 3, "messages after ackIndex went back");
}

#[test]
fn when_send_back_fails_the_copy_goes_to_the_retry_topic() {
    let mut sim = Sim::builder(13)
        .broker_config(fast_delays())
        .broker("broker-a", &[("T", 1)])
        .listener(|_, b, _| if b.messages[0].reconsume_times == 0 { Verdict::LATER } else { Verdict::OK })
        .build();
    sim.inject(Fault::SetFaults(Faults { lose_requests: &[36], ..Faults::default() }));
    sim.produce("T", 5);
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_until(|s| s.all_done(), Duration::from_secs(120)).unwrap();
    let stats = sim.consumer(c).unwrap().stats().clone();
    assert_eq!((stats.sent_back, stats.sent_back_fallback, stats.local_retries), (5, 5, 0), "{stats:?}");
    assert!(sim.events(c).iter().any(
        |e| matches!(e, Event::RequestTimeout { request, .. } if *request == RequestCode::ConsumerSendMsgBack)
    ));
    // The copies carry the retry properties and were consumed from %RETRY%G as retries.
    let retried: Vec<_> = sim.consumed().iter().filter(|m| m.ok).collect();
    assert_eq!(retried.len(), 5);
    assert!(
        retried.iter().all(|m| m.reconsume_times == 1 && m.topic == "T" && &*m.queue.topic == "%RETRY%G")
    );
}

#[test]
fn when_both_ways_back_fail_the_message_is_consumed_again_locally() {
    let mut sim = Sim::builder(15)
        .broker_config(fast_delays())
        .broker("broker-a", &[("T", 1)])
        .listener(|_, b, _| if b.messages[0].reconsume_times == 0 { Verdict::LATER } else { Verdict::OK })
        .build();
    sim.inject(Fault::SetFaults(Faults { lose_requests: &[36, 310], ..Faults::default() }));
    sim.produce("T", 3);
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_until(|s| s.all_done(), Duration::from_secs(120)).unwrap();
    let stats = sim.consumer(c).unwrap().stats().clone();
    assert_eq!(stats.local_retries, 3, "{stats:?}");
    assert_eq!(sim.events(c).iter().filter(|e| matches!(e, Event::LocalRetry { .. })).count(), 3);
    // Retried in place: same queue, same offset, one more reconsume.
    let again: Vec<_> = sim.consumed().iter().filter(|m| m.ok).collect();
    assert!(again.iter().all(|m| &*m.queue.topic == "T" && m.reconsume_times == 1), "{again:?}");
    sim.run_for(Duration::from_secs(6)); // one persist period
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(3), "committed once finished");
}

#[test]
fn a_consume_timeout_sends_the_batch_back_and_ignores_the_late_result() {
    let mut sim = Sim::builder(14)
        .broker_config(fast_delays())
        .broker("broker-a", &[("T", 1)])
        .listener(|_, b, _| {
            if b.messages[0].reconsume_times == 0 && b.messages[0].queue_offset == 0 {
                Verdict { took: Duration::from_secs(100), ..Verdict::OK }
            } else {
                Verdict::OK
            }
        })
        .build();
    sim.produce("T", 3);
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .consume_timeout(Duration::from_secs(10)),
    );
    sim.run_for(Duration::from_secs(30));
    assert!(sim.events(c).iter().any(|e| matches!(e, Event::ConsumeTimeout { .. })));
    // The slow message's retry copy was consumed while the original call still ran; the
    // committed offset moved past it.
    assert!(sim.consumed().iter().any(|m| m.offset == 0 && m.reconsume_times == 0));
    assert!(sim.consumed().iter().any(|m| m.reconsume_times == 1));
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(3));
    let _ = ConsumeStatus::Success;
}
