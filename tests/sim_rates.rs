//! Per-topic rates, windowed as Java's ConsumerStatsManager windows them: what
//! `Consumer::topic_stats` reports and what running info tells `mqadmin consumerStatus`.

use std::time::Duration;

use rocketmq_push_core::protocol::body::{ConsumerRunningInfo, JsonBody};
use rocketmq_push_core::protocol::header::GetConsumerRunningInfoRequestHeader;
use rocketmq_push_core::sim::{Sim, Verdict};
use rocketmq_push_core::{ConsumeFromWhere, ConsumeResult, RemotingCommand, RequestCode, TopicStats};

fn topic(sim: &Sim, c: usize, name: &str) -> TopicStats {
    sim.consumer(c).unwrap().topic_stats().into_iter().find(|t| t.topic == name).unwrap()
}

fn near(actual: f64, expected: f64, tolerance: f64) -> bool {
    (actual - expected).abs() <= tolerance
}

/// Two listener slots, 100 ms a message: 20 messages a second, steadily, for far longer than the
/// window; every tenth message fails once.
fn steady() -> (Sim, usize) {
    let mut sim = Sim::builder(81)
        .broker("broker-a", &[("T", 1)])
        .listener(|_, batch, _| {
            let m = &batch.messages[0];
            let fail = m.queue_offset % 10 == 9 && m.reconsume_times == 0 && &*m.topic == "T";
            let result = if fail { ConsumeResult::LATER } else { ConsumeResult::SUCCESS };
            Verdict { result, took: Duration::from_millis(100) }
        })
        .build();
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_thread_min(2)
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.produce("T", 5000);
    (sim, c)
}

#[test]
fn nothing_is_reported_before_the_first_sample() {
    let (mut sim, c) = steady();
    sim.run_for(Duration::from_secs(9));
    assert!(sim.consumer(c).unwrap().stats().consumed_ok > 100, "consuming already");
    let t = topic(&sim, c, "T");
    assert_eq!((t.pull_tps, t.consume_ok_tps, t.consume_rt_ms), (0.0, 0.0, 0.0), "{t:?}");
}

#[test]
fn rates_over_the_last_minute_match_the_pace_of_the_listener() {
    let (mut sim, c) = steady();
    // Past the first minute, whose window also holds the initial burst of pulls.
    sim.run_for(Duration::from_secs(95));
    let t = topic(&sim, c, "T");
    // 20 a second, one in ten failing the first time (and coming back under the retry topic).
    assert!(near(t.consume_ok_tps, 18.0, 1.5), "{t:?}");
    assert!(near(t.consume_failed_tps, 2.0, 0.5), "{t:?}");
    assert!(near(t.consume_rt_ms, 100.0, 1.0), "{t:?}");
    // The cache stays full, so pulls keep pace with consumption.
    assert!(near(t.pull_tps, 20.0, 4.0), "{t:?}");
    assert!(t.pull_rt_ms >= 0.0 && t.pull_rt_ms < 1000.0, "{t:?}");
    // The hour window is sampled every 10 minutes, as in Java: so far only the first sample
    // (at 10 s) counts.
    let failed = sim.consumer(c).unwrap().stats().consumed_failed;
    assert!((1..failed / 4).contains(&t.consume_failed_last_hour), "{t:?}, {failed} failed");
    // The retry topic has its own figures: the failed messages come back there.
    let retry = topic(&sim, c, "%RETRY%G");
    assert!(retry.consume_ok_tps > 0.0, "{retry:?}");
    assert_eq!(retry.consume_failed_tps, 0.0);
    // Past the 10-minute sample, with everything consumed: every failure is in the hour.
    sim.run_for(Duration::from_secs(540));
    let failed = sim.consumer(c).unwrap().stats().consumed_failed;
    assert_eq!(topic(&sim, c, "T").consume_failed_last_hour, failed);
    assert_eq!(failed, 500, "one in ten of 5,000, once each");
}

#[test]
fn running_info_carries_the_same_rates() {
    let (mut sim, c) = steady();
    sim.run_for(Duration::from_secs(75));
    let ask = RemotingCommand::request(RequestCode::GetConsumerRunningInfo).with_opaque(9).with_header(
        &GetConsumerRunningInfoRequestHeader {
            consumer_group: "G".into(),
            client_id: "sim".into(),
            jstack_enable: None,
        },
    );
    sim.deliver_from_broker(c, 0, ask);
    let reply = sim.replies(c).last().unwrap().clone();
    let info = ConsumerRunningInfo::decode(&reply.body).unwrap();
    let status = &info.status_table["T"];
    let t = topic(&sim, c, "T");
    assert!(status.consume_ok_tps > 10.0, "{status:?}");
    assert_eq!(
        (
            status.pull_tps,
            status.pull_rt,
            status.consume_ok_tps,
            status.consume_failed_tps,
            status.consume_rt
        ),
        (t.pull_tps, t.pull_rt_ms, t.consume_ok_tps, t.consume_failed_tps, t.consume_rt_ms)
    );
    assert_eq!(status.consume_failed_msgs, t.consume_failed_last_hour as i64);
    assert!(info.status_table.contains_key("%RETRY%G"), "one row per subscription, as in Java");
}

#[test]
fn an_idle_minute_brings_the_rates_back_to_zero_and_keeps_the_hour() {
    let mut sim = Sim::builder(82)
        .broker("broker-a", &[("T", 2)])
        .listener(|_, _, _| Verdict { took: Duration::from_millis(40), ..Verdict::LATER })
        .build();
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .max_reconsume_times(0)
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.produce("T", 40);
    sim.run_for(Duration::from_secs(20));
    assert!(topic(&sim, c, "T").consume_failed_tps > 0.0);
    sim.run_for(Duration::from_secs(80));
    let t = topic(&sim, c, "T");
    assert_eq!((t.pull_tps, t.consume_ok_tps, t.consume_failed_tps), (0.0, 0.0, 0.0), "{t:?}");
    assert_eq!(t.consume_failed_last_hour, 40, "{t:?}");
    assert!(near(t.consume_rt_ms, 40.0, 1.0), "the hour's average once the minute is quiet: {t:?}");
}
