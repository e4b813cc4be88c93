//! Unit tests of the simulated broker, one behaviour each.

use std::time::{Duration, Instant};

use super::*;
use crate::message::decode_messages;
use crate::producer::{dlq_topic, retry_topic, send_message_request};
use crate::protocol::body::{
    ConsumeFromWhere, ConsumeStatsBody, ConsumeType, GetConsumerListByGroupResponseBody, HeartbeatData,
    LockBatchRequestBody, LockBatchResponseBody,
};
use crate::protocol::header::{
    BoundaryType, ConsumerSendMsgBackRequestHeader, CreateTopicRequestHeader, GetConsumeStatsRequestHeader,
    GetConsumerListByGroupRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader, SendMessageResponseHeader, UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use crate::protocol::{ExpressionType, JsonBody, PullSysFlag};

const G: &str = "G";
const C1: ConnId = ConnId(1);
const C2: ConnId = ConnId(2);

#[allow(clippy::disallowed_methods)] // tests pick an arbitrary origin
fn t0() -> Instant {
    Instant::now()
}

fn secs(t: Instant, s: u64) -> Instant {
    t + Duration::from_secs(s)
}

fn broker_with(t: Instant, config: SimBrokerConfig) -> SimBroker {
    let mut b = SimBroker::new("broker-a", "127.0.0.1:10911", config, t);
    b.create_topic("T", 4);
    b
}

fn broker(t: Instant) -> SimBroker {
    broker_with(t, SimBrokerConfig::default())
}

fn drain(b: &mut SimBroker) -> Vec<Outgoing> {
    std::iter::from_fn(|| b.poll_output()).collect()
}

/// The single frame the broker wrote, checked to be a response in the broker's dress.
fn answer(b: &mut SimBroker) -> RemotingCommand {
    let out = drain(b);
    assert_eq!(out.len(), 1, "{out:#?}");
    let c = out.into_iter().next().unwrap().command;
    assert!(c.is_response());
    assert_eq!((c.version, c.language, c.serialize_type), (479, LanguageCode::JAVA, SerializeType::Json));
    c
}

fn call(b: &mut SimBroker, conn: ConnId, cmd: RemotingCommand, now: Instant) -> RemotingCommand {
    let opaque = cmd.opaque;
    b.handle(conn, cmd, now);
    let a = answer(b);
    assert_eq!(a.opaque, opaque);
    a
}

fn heartbeat(client: &str, group: &str, subs: &[(&str, &str)], version: i64) -> RemotingCommand {
    let mut set: Vec<_> =
        subs.iter().map(|(t, e)| SubscriptionData::build(t, e, ExpressionType::Tag, version)).collect();
    set.push(SubscriptionData::build(&retry_topic(group), "*", ExpressionType::Tag, version));
    let hb = HeartbeatData {
        client_id: client.into(),
        producer_data_set: Vec::new(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            subscription_data_set: set,
            unit_mode: false,
        }],
        heartbeat_fingerprint: 0,
        without_sub: false,
    };
    RemotingCommand::request(RequestCode::HeartBeat).with_body(hb.encode()).with_opaque(100)
}

fn pull(topic: &str, queue_id: i32, offset: i64, sys_flag: i32) -> RemotingCommand {
    let h = PullMessageRequestHeader {
        consumer_group: G.into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag,
        commit_offset: 0,
        suspend_timeout_millis: 15_000,
        subscription: None,
        sub_version: 1,
        expression_type: Some(ExpressionType::Tag),
        max_msg_bytes: None,
        bname: None,
    };
    RemotingCommand::request(RequestCode::PullMessage).with_header(&h).with_opaque(7)
}

fn pull_with(f: impl FnOnce(&mut PullMessageRequestHeader)) -> RemotingCommand {
    let mut h: PullMessageRequestHeader = pull("T", 0, 0, 0).header().unwrap();
    f(&mut h);
    RemotingCommand::request(RequestCode::PullMessage).with_header(&h).with_opaque(7)
}

fn pulled(a: &RemotingCommand) -> (ResponseCode, i64, Vec<MessageExt>) {
    let h: PullMessageResponseHeader = a.header().unwrap();
    let msgs = decode_messages(&a.body, &DecodeOptions::default()).unwrap();
    (a.response_code().unwrap(), h.next_begin_offset, msgs)
}

fn produce_n(b: &mut SimBroker, topic: &str, q: i32, n: usize, tag: Option<&str>, now: Instant) {
    for i in 0..n {
        let mut m = Message::new(topic, format!("m{i}"));
        if let Some(tag) = tag {
            m = m.with_tags(tag);
        }
        b.produce(topic, q, &m, now);
    }
}

/// Send a heartbeat; returns its answer after the NOTIFY frames a new registration causes.
fn hb(b: &mut SimBroker, conn: ConnId, cmd: RemotingCommand, now: Instant) -> RemotingCommand {
    b.handle(conn, cmd, now);
    let mut out = drain(b);
    let answer = out.pop().expect("a heartbeat answer").command;
    assert!(out.iter().all(|o| o.command.code == 40), "{out:#?}");
    assert!(answer.is_response());
    answer
}

/// A registered member of `G` on C1, subscribed to T with `expr`.
fn member(b: &mut SimBroker, expr: &str, now: Instant) {
    hb(b, C1, heartbeat("c1", G, &[("T", expr)], 1), now);
}

#[test]
fn pull_found_with_real_records() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "*", t);
    let m = Message::new("T", "hello").with_tags("A").with_property("UNIQ_KEY", "U1");
    assert_eq!(b.produce("T", 1, &m, secs(t, 2)), (1, 0));
    produce_n(&mut b, "T", 1, 2, None, secs(t, 3));
    let a = call(&mut b, C1, pull("T", 1, 0, 0), secs(t, 4));
    assert_eq!(a.remark_str(), "FOUND");
    let h: PullMessageResponseHeader = a.header().unwrap();
    assert_eq!((h.suggest_which_broker_id, h.next_begin_offset, h.min_offset, h.max_offset), (0, 3, 0, 3));
    let (_, _, msgs) = pulled(&a);
    assert_eq!(msgs.len(), 3);
    let m0 = &msgs[0];
    assert_eq!((&*m0.topic, m0.queue_id, m0.queue_offset, m0.commit_log_offset), ("T", 1, 0, 0));
    assert_eq!(m0.store_host, b.store_host());
    assert_eq!(m0.store_timestamp, 1_700_000_002_000);
    assert_eq!(m0.body, "hello");
    assert_eq!(m0.msg_id(), "U1");
    assert_eq!(m0.property("CLUSTER"), Some("DefaultCluster"));
    assert_eq!(m0.body_crc, body_crc(b"hello"));
    assert_eq!(msgs[1].commit_log_offset, i64::from(m0.store_size));
    assert_eq!(msgs[2].store_timestamp, 1_700_000_003_000);
    assert_eq!(b.messages("T", 1).len(), 3);
    assert_eq!(b.record("T", 1, 2).unwrap().len(), msgs[2].store_size as usize);
    assert_eq!(b.topics(), [("%RETRY%G".to_owned(), 1), ("T".to_owned(), 4)]);
}

#[test]
fn pull_caps_and_errors() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "*", t);
    produce_n(&mut b, "T", 0, 40, None, t);
    let (code, next, msgs) = pulled(&call(&mut b, C1, pull("T", 0, 0, 0), t));
    assert_eq!((code, next, msgs.len()), (ResponseCode::Success, 32, 32));
    let few = call(&mut b, C1, pull_with(|h| h.max_msg_nums = 3), t);
    assert_eq!(pulled(&few).2.len(), 3);

    let a = call(&mut b, C1, pull("Nope", 0, 0, 0), t);
    assert_eq!(a.response_code(), Some(ResponseCode::TopicNotExist));
    assert!(a.remark_str().starts_with("topic[Nope] not exist, apply first please!"));
    let a = call(&mut b, C1, pull("T", 4, 0, 0), t);
    assert_eq!(a.response_code(), Some(ResponseCode::InvalidParameter));
    assert!(a.remark_str().starts_with("queueId[4] is illegal"), "{}", a.remark_str());
    let a = call(&mut b, C1, pull_with(|h| h.sub_version = 2), t);
    assert_eq!(a.response_code(), Some(ResponseCode::SubscriptionNotLatest));
    let a = call(&mut b, C1, pull_with(|h| h.consumer_group = "Other".into()), t);
    assert_eq!(a.response_code(), Some(ResponseCode::SubscriptionNotExist));
    assert!(a.remark_str().starts_with("the consumer's group info not exist"));
    b.create_topic("U", 1);
    let a = call(&mut b, C1, pull("U", 0, 0, 0), t);
    assert_eq!(a.response_code(), Some(ResponseCode::SubscriptionNotExist));
    assert!(a.remark_str().starts_with("the consumer's subscription not exist"));
    let mut bad = pull("T", 0, 0, 0);
    bad.ext_fields.remove("queueOffset");
    let a = call(&mut b, C1, bad, t);
    assert_eq!(a.response_code(), Some(ResponseCode::SystemError));
    assert!(a.remark_str().contains("<queueOffset> is null"), "{}", a.remark_str());
}

#[test]
fn pull_statuses_and_offset_moved() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "*", t);
    let status = |b: &mut SimBroker, q: i32, off: i64| {
        let a = call(b, C1, pull("T", q, off, 0), t);
        let h: PullMessageResponseHeader = a.header().unwrap();
        (
            a.response_code().unwrap(),
            a.remark_str().to_owned(),
            h.next_begin_offset,
            h.min_offset,
            h.max_offset,
        )
    };
    use ResponseCode::*;
    assert_eq!(status(&mut b, 0, 0), (PullNotFound, "NO_MESSAGE_IN_QUEUE".into(), 0, 0, 0));
    assert_eq!(status(&mut b, 0, 5), (PullOffsetMoved, "NO_MESSAGE_IN_QUEUE".into(), 0, 0, 0));
    produce_n(&mut b, "T", 0, 10, None, t);
    assert_eq!(status(&mut b, 0, 10), (PullNotFound, "OFFSET_OVERFLOW_ONE".into(), 10, 0, 10));
    assert_eq!(status(&mut b, 0, 12), (PullOffsetMoved, "OFFSET_OVERFLOW_BADLY".into(), 10, 0, 10));
    b.truncate("T", 0, 6);
    assert_eq!((b.min_offset("T", 0), b.max_offset("T", 0)), (6, 10));
    assert_eq!(status(&mut b, 0, 2), (PullOffsetMoved, "OFFSET_TOO_SMALL".into(), 6, 6, 10));
    let (code, next, msgs) = pulled(&call(&mut b, C1, pull("T", 0, 6, 0), t));
    assert_eq!((code, next, msgs[0].queue_offset), (Success, 10, 6));
}

#[test]
fn long_poll_released_by_produce() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "*", t);
    b.handle(C1, pull("T", 2, 0, PullSysFlag::SUSPEND), secs(t, 1));
    assert!(b.poll_output().is_none());
    assert_eq!(b.held_pulls(), 1);
    produce_n(&mut b, "T", 1, 1, None, secs(t, 2)); // another queue: still held
    assert_eq!(b.held_pulls(), 1);
    b.produce("T", 2, &Message::new("T", "x"), secs(t, 3));
    let out = drain(&mut b);
    assert_eq!((out.len(), out[0].conn, out[0].command.opaque), (1, C1, 7));
    let (code, next, msgs) = pulled(&out[0].command);
    assert_eq!((code, next, msgs.len()), (ResponseCode::Success, 1, 1));
    assert_eq!(b.held_pulls(), 0);
    assert_eq!(b.poll_timeout(), Some(secs(t, 120)), "only the registration expiry is left");
}

#[test]
fn long_poll_released_at_timeout_on_check_tick() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "*", t);
    b.handle(C1, pull("T", 0, 0, PullSysFlag::SUSPEND | PullSysFlag::COMMIT_OFFSET), secs(t, 1));
    // deadline 16 s, released at the 20 s check.
    assert_eq!(b.poll_timeout(), Some(secs(t, 20)));
    b.handle_timeout(secs(t, 16));
    assert!(b.poll_output().is_none());
    b.handle_timeout(secs(t, 20));
    let a = answer(&mut b);
    assert_eq!(
        (a.response_code(), a.remark_str()),
        (Some(ResponseCode::PullNotFound), "NO_MESSAGE_IN_QUEUE")
    );
    assert_eq!(b.committed_offset(G, "T", 0), Some(0), "committed once, on the first execution");

    let mut exact =
        broker_with(t, SimBrokerConfig { hold_check_interval: Duration::ZERO, ..Default::default() });
    member(&mut exact, "*", t);
    exact.handle(C1, pull_with(|h| h.sys_flag = PullSysFlag::SUSPEND), secs(t, 1));
    assert_eq!(exact.poll_timeout(), Some(secs(t, 16)));
    exact.handle_timeout(secs(t, 16));
    assert_eq!(answer(&mut exact).response_code(), Some(ResponseCode::PullNotFound));
}

#[test]
fn short_polling_holds_one_second_and_ignores_arrivals() {
    let t = t0();
    let mut b = broker_with(t, SimBrokerConfig { long_polling: false, ..Default::default() });
    member(&mut b, "*", t);
    b.handle(C1, pull("T", 0, 0, PullSysFlag::SUSPEND), t + Duration::from_millis(300));
    b.produce("T", 0, &Message::new("T", "x"), t + Duration::from_millis(400));
    assert!(b.poll_output().is_none(), "no arrival notification without long polling");
    assert_eq!(b.poll_timeout(), Some(secs(t, 1)), "queue grew: next 1 s check");
    b.handle_timeout(secs(t, 1));
    assert_eq!(pulled(&answer(&mut b)).2.len(), 1);
}

#[test]
fn tag_filter_and_retry_immediately() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "A || B", t);
    produce_n(&mut b, "T", 0, 3, Some("C"), t);
    produce_n(&mut b, "T", 0, 2, Some("A"), t);
    produce_n(&mut b, "T", 0, 1, None, t);
    produce_n(&mut b, "T", 0, 1, Some("B"), t);
    let (code, next, msgs) = pulled(&call(&mut b, C1, pull("T", 0, 0, 0), t));
    assert_eq!((code, next), (ResponseCode::Success, 7));
    let offsets: Vec<i64> = msgs.iter().map(|m| m.queue_offset).collect();
    assert_eq!(offsets, [3, 4, 6]);
    let a = call(&mut b, C1, pull("T", 0, 0, 0).with_opaque(7), t);
    assert_eq!(pulled(&a).2.len(), 3);

    // Nothing matches: PULL_RETRY_IMMEDIATELY with the offset moved past the scan (801 entries).
    produce_n(&mut b, "T", 1, 1000, Some("C"), t);
    let a = call(&mut b, C1, pull("T", 1, 0, 0), t);
    let h: PullMessageResponseHeader = a.header().unwrap();
    assert_eq!(a.response_code(), Some(ResponseCode::PullRetryImmediately));
    assert_eq!((a.remark_str(), h.next_begin_offset), ("NO_MATCHED_MESSAGE", 801));
    assert!(a.body.is_empty());

    // The request's own subscription wins with the SUBSCRIPTION flag.
    let sub = pull_with(|h| {
        h.queue_id = 0;
        h.sys_flag = PullSysFlag::SUBSCRIPTION;
        h.subscription = Some("C".into());
    });
    assert_eq!(pulled(&call(&mut b, C1, sub, t)).2.len(), 3);
    let sql = pull_with(|h| {
        h.sys_flag = PullSysFlag::SUBSCRIPTION;
        h.subscription = Some("a > 1".into());
        h.expression_type = Some(ExpressionType::Sql92);
    });
    assert_eq!(pulled(&call(&mut b, C1, sql, t)).2.len(), 7, "SQL92 is not evaluated: all match");
    let empty_sql = pull_with(|h| {
        h.sys_flag = PullSysFlag::SUBSCRIPTION;
        h.expression_type = Some(ExpressionType::Sql92);
    });
    assert_eq!(call(&mut b, C1, empty_sql, t).response_code(), Some(ResponseCode::SubscriptionParseFailed));
}

#[test]
fn held_pull_ignores_unmatched_arrival_until_the_check() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "A", t);
    b.handle(C1, pull("T", 0, 0, PullSysFlag::SUSPEND), secs(t, 1));
    produce_n(&mut b, "T", 0, 2, Some("Z"), secs(t, 2));
    assert!(b.poll_output().is_none(), "a non-matching arrival does not wake");
    assert_eq!(b.poll_timeout(), Some(secs(t, 5)), "the next check wakes pulls whose queue grew");
    b.handle_timeout(secs(t, 5));
    let a = answer(&mut b);
    let h: PullMessageResponseHeader = a.header().unwrap();
    assert_eq!((a.response_code(), h.next_begin_offset), (Some(ResponseCode::PullRetryImmediately), 2));
    // A matching arrival wakes at once.
    b.handle(C1, pull("T", 0, 2, PullSysFlag::SUSPEND), secs(t, 6));
    produce_n(&mut b, "T", 0, 1, Some("A"), secs(t, 7));
    assert_eq!(pulled(&answer(&mut b)).1, 3);
}

#[test]
fn consumer_offsets() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "*", t);
    let query = |q: i32, zero: Option<bool>| {
        let h = QueryConsumerOffsetRequestHeader {
            consumer_group: G.into(),
            topic: "T".into(),
            queue_id: q,
            set_zero_if_not_found: zero,
            bname: None,
        };
        RemotingCommand::request(RequestCode::QueryConsumerOffset).with_header(&h).with_opaque(3)
    };
    let a = call(&mut b, C1, query(0, None), t);
    assert_eq!(a.response_code(), Some(ResponseCode::QueryNotFound), "empty queue: not found");
    assert!(a.remark_str().starts_with("Not found, V3_0_6_SNAPSHOT"));
    produce_n(&mut b, "T", 0, 2, None, t);
    let a = call(&mut b, C1, query(0, None), t);
    assert_eq!(a.header::<OffsetResponseHeader>().unwrap().offset, 0, "message 0 present: 0");
    let a = call(&mut b, C1, query(0, Some(false)), t);
    assert_eq!(a.response_code(), Some(ResponseCode::QueryNotFound));
    b.truncate("T", 0, 1);
    assert_eq!(call(&mut b, C1, query(0, None), t).response_code(), Some(ResponseCode::QueryNotFound));

    let update = |q: i32, off: i64, topic: &str| {
        let h = UpdateConsumerOffsetRequestHeader {
            consumer_group: G.into(),
            topic: topic.into(),
            queue_id: q,
            commit_offset: off,
            bname: None,
        };
        RemotingCommand::request(RequestCode::UpdateConsumerOffset).with_header(&h).with_opaque(4)
    };
    b.handle(C1, update(0, 2, "T").oneway(), t);
    assert!(b.poll_output().is_none(), "oneway: no answer");
    assert_eq!(b.committed_offset(G, "T", 0), Some(2));
    assert_eq!(call(&mut b, C1, update(1, 5, "T"), t).response_code(), Some(ResponseCode::Success));
    assert_eq!(
        call(&mut b, C1, query(1, Some(false)), t).header::<OffsetResponseHeader>().unwrap().offset,
        5
    );
    let a = call(&mut b, C1, update(0, 1, "Nope"), t);
    assert_eq!(
        (a.response_code(), a.remark_str()),
        (Some(ResponseCode::TopicNotExist), "Topic Nope not exist!")
    );

    // Pull-piggybacked commit.
    let p = pull_with(|h| {
        h.sys_flag = PullSysFlag::COMMIT_OFFSET;
        h.commit_offset = 1;
        h.queue_offset = 1;
    });
    call(&mut b, C1, p, t);
    assert_eq!(b.committed_offset(G, "T", 0), Some(1));
}

#[test]
fn max_min_and_search_offsets() {
    let t = t0();
    let mut b = broker(t);
    for s in 0..5 {
        b.produce("T", 3, &Message::new("T", "x"), secs(t, s * 10));
    }
    b.truncate("T", 3, 1);
    let max =
        GetMaxOffsetRequestHeader { topic: "T".into(), queue_id: 3, committed: Some(true), bname: None };
    let a = call(&mut b, C1, RemotingCommand::request(RequestCode::GetMaxOffset).with_header(&max), t);
    assert_eq!(a.header::<OffsetResponseHeader>().unwrap().offset, 5);
    let min = GetMinOffsetRequestHeader { topic: "T".into(), queue_id: 3, bname: None };
    let a = call(&mut b, C1, RemotingCommand::request(RequestCode::GetMinOffset).with_header(&min), t);
    assert_eq!(a.header::<OffsetResponseHeader>().unwrap().offset, 1);
    let search = |b: &mut SimBroker, ts: i64, bt: Option<BoundaryType>| {
        let h = SearchOffsetRequestHeader {
            topic: "T".into(),
            queue_id: 3,
            timestamp: ts,
            boundary_type: bt,
            bname: None,
        };
        let a =
            call(b, C1, RemotingCommand::request(RequestCode::SearchOffsetByTimestamp).with_header(&h), t);
        a.header::<OffsetResponseHeader>().unwrap().offset
    };
    let wall = b.wall_ms(t);
    assert_eq!(search(&mut b, wall + 15_000, None), 2);
    assert_eq!(search(&mut b, wall + 20_000, None), 2);
    assert_eq!(search(&mut b, wall + 99_000, None), 5, "after the last: max");
    assert_eq!(search(&mut b, wall + 25_000, Some(BoundaryType::Upper)), 2);
    assert_eq!(b.max_offset("Nope", 0), 0);
}

#[test]
fn consume_stats_list_every_queue_of_the_topics_a_group_has_offsets_for() {
    let t = t0();
    let mut b = broker(t);
    b.create_topic("Other", 2);
    produce_n(&mut b, "T", 0, 3, None, secs(t, 1));
    let commit = UpdateConsumerOffsetRequestHeader {
        consumer_group: G.into(),
        topic: "T".into(),
        queue_id: 0,
        commit_offset: 2,
        bname: None,
    };
    call(&mut b, C1, RemotingCommand::request(RequestCode::UpdateConsumerOffset).with_header(&commit), t);
    let stats = |b: &mut SimBroker, topic: Option<&str>| {
        let h = GetConsumeStatsRequestHeader { consumer_group: G.into(), topic: topic.map(Into::into) };
        let a = call(b, C1, RemotingCommand::request(RequestCode::GetConsumeStats).with_header(&h), t);
        assert_eq!(a.code, ResponseCode::Success as i32);
        ConsumeStatsBody::decode(&a.body).unwrap().offset_table
    };
    let all = stats(&mut b, None);
    assert_eq!(all.len(), 4, "every queue of T, none of Other: {all:?}");
    let (mq, q0) = &all[0];
    assert_eq!((mq.topic.as_ref(), mq.queue_id, q0.broker_offset, q0.consumer_offset), ("T", 0, 3, 2));
    assert_eq!(q0.last_timestamp, b.messages("T", 0)[1].store_timestamp, "store time of offset 1");
    assert!(all[1..].iter().all(|(_, w)| w.consumer_offset == 0 && w.last_timestamp == 0));
    assert_eq!(stats(&mut b, Some("Other")).len(), 2, "a named topic: its queues, never committed");
    assert!(stats(&mut b, Some("Nope")).is_empty(), "a topic the broker lacks");
}

#[test]
fn the_wall_clock_follows_forward_steps_only() {
    let t = t0();
    let mut b = broker(t);
    let start = b.wall_ms(t);
    b.produce("T", 0, &Message::new("T", "before"), secs(t, 1));
    // The host's wall clock stepped 10 s ahead of the monotonic clock.
    b.follow_wall_clock(secs(t, 2), start + 12_000);
    assert_eq!(b.wall_ms(secs(t, 2)), start + 12_000);
    b.produce("T", 0, &Message::new("T", "after"), secs(t, 3));
    // A step back is not followed: store timestamps stay ordered.
    b.follow_wall_clock(secs(t, 4), start);
    assert_eq!(b.wall_ms(secs(t, 4)), start + 14_000);
    let stored: Vec<i64> = b.messages("T", 0).iter().map(|m| m.store_timestamp).collect();
    assert_eq!(stored, [start + 1000, start + 13_000]);
}

fn send_back(offset: i64, delay_level: i32, max: Option<i32>) -> RemotingCommand {
    let h = ConsumerSendMsgBackRequestHeader {
        offset,
        group: G.into(),
        delay_level,
        origin_msg_id: None,
        origin_topic: Some("T".into()),
        unit_mode: Some(false),
        max_reconsume_times: max,
        bname: None,
    };
    RemotingCommand::request(RequestCode::ConsumerSendMsgBack).with_header(&h).with_opaque(11)
}

#[test]
fn send_back_retry_after_delay_then_dlq() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "*", t);
    b.produce("T", 0, &Message::new("T", "payload").with_tags("A"), t);
    let original = b.messages("T", 0).remove(0);

    // Level 0 → 3 + reconsumeTimes = level 3 = 10 s.
    let a = call(&mut b, C1, send_back(original.commit_log_offset, 0, Some(2)), secs(t, 1));
    assert_eq!((a.response_code(), a.remark), (Some(ResponseCode::Success), None));
    assert_eq!(b.scheduled(), 1);
    assert_eq!(b.max_offset("%RETRY%G", 0), 0);
    // A pull held on the retry queue is woken by the delivery.
    b.handle(C1, pull("%RETRY%G", 0, 0, PullSysFlag::SUSPEND), secs(t, 2));
    assert_eq!(b.poll_timeout(), Some(secs(t, 11)));
    b.handle_timeout(secs(t, 11));
    let (_, _, msgs) = pulled(&answer(&mut b));
    let r = &msgs[0];
    assert_eq!((&*r.topic, r.reconsume_times, &r.body[..]), ("%RETRY%G", 1, &b"payload"[..]));
    assert_eq!(r.property("RETRY_TOPIC"), Some("T"));
    assert_eq!(r.property("ORIGIN_MESSAGE_ID"), Some(original.offset_msg_id().as_str()));
    assert_eq!(
        (r.property("DELAY"), r.property("REAL_TOPIC"), r.property("REAL_QID")),
        (Some("3"), Some("%RETRY%G"), Some("0"))
    );
    assert_eq!(r.tags(), Some("A"));
    assert_eq!(r.born_timestamp, original.born_timestamp);
    assert_eq!(r.store_timestamp, b.wall_ms(secs(t, 11)));

    // Second failure: level 4 (30 s); the origin id is kept.
    call(&mut b, C1, send_back(r.commit_log_offset, 0, Some(2)), secs(t, 12));
    b.handle_timeout(secs(t, 42));
    let r2 = b.messages("%RETRY%G", 0).remove(1);
    assert_eq!((r2.reconsume_times, r2.property("DELAY")), (2, Some("4")));
    assert_eq!(r2.property("ORIGIN_MESSAGE_ID"), Some(original.offset_msg_id().as_str()));

    // reconsumeTimes (2) >= max (2): dead letter, at once.
    call(&mut b, C1, send_back(r2.commit_log_offset, 0, Some(2)), secs(t, 43));
    assert_eq!(b.scheduled(), 0);
    let d = b.messages(&dlq_topic(G), 0).remove(0);
    assert_eq!(
        (d.reconsume_times, d.property("RETRY_TOPIC"), d.property("DELAY")),
        (3, Some("T"), Some("0"))
    );
    assert_eq!(b.topic_route("%DLQ%G").unwrap().perm, 6);

    // delayLevel < 0: straight to the DLQ; no header max: the group default (16).
    call(&mut b, C1, send_back(original.commit_log_offset, -1, None), secs(t, 44));
    assert_eq!(b.max_offset("%DLQ%G", 0), 2);
    // Levels above the max are clamped (level 18 = 2 h).
    call(&mut b, C1, send_back(original.commit_log_offset, 99, None), secs(t, 45));
    b.handle_timeout(secs(t, 45 + 7199));
    assert_eq!((b.scheduled(), b.max_offset("%RETRY%G", 0)), (1, 2));
    b.handle_timeout(secs(t, 45 + 7200));
    assert_eq!((b.scheduled(), b.max_offset("%RETRY%G", 0)), (0, 3));

    let a = call(&mut b, C1, send_back(123_456_789, 0, None), t);
    assert_eq!(a.response_code(), Some(ResponseCode::SystemError));
    assert_eq!(a.remark_str(), "look message by offset failed, 123456789");
}

fn lock_body(client: &str, queues: &[i32]) -> Bytes {
    LockBatchRequestBody {
        consumer_group: G.into(),
        client_id: client.into(),
        only_this_broker: false,
        mq_set: queues.iter().map(|q| MessageQueue::new("T", "broker-a", *q)).collect(),
    }
    .encode()
}

fn lock(b: &mut SimBroker, client: &str, queues: &[i32], now: Instant) -> Vec<i32> {
    let req = RemotingCommand::request(RequestCode::LockBatchMq).with_body(lock_body(client, queues));
    let a = call(b, C1, req, now);
    LockBatchResponseBody::decode(&a.body).unwrap().lock_ok_mq_set.iter().map(|q| q.queue_id).collect()
}

#[test]
fn locks_renew_expire_and_unlock() {
    let t = t0();
    let mut b = broker(t);
    let q0 = MessageQueue::new("T", "broker-a", 0);
    assert_eq!(lock(&mut b, "c1", &[0, 1], t), [0, 1]);
    assert_eq!(lock(&mut b, "c2", &[1, 2], secs(t, 1)), [2]);
    assert_eq!(b.lock_owner(G, &q0, secs(t, 1)).as_deref(), Some("c1"));
    assert_eq!(lock(&mut b, "c1", &[0], secs(t, 50)), [0], "renewed by the owner");
    assert_eq!(lock(&mut b, "c2", &[0, 1], secs(t, 70)), [1], "q1 expired (60 s), q0 renewed at 50 s");
    assert_eq!(b.lock_owner(G, &q0, secs(t, 111)), None);

    let unlock = |client: &str, queues: &[i32]| {
        RemotingCommand::request(RequestCode::UnlockBatchMq).with_body(lock_body(client, queues))
    };
    assert_eq!(
        call(&mut b, C1, unlock("c1", &[1]), secs(t, 71)).response_code(),
        Some(ResponseCode::Success)
    );
    assert_eq!(b.lock_owner(G, &MessageQueue::new("T", "broker-a", 1), secs(t, 71)).as_deref(), Some("c2"));
    b.handle(C1, unlock("c2", &[1]).oneway(), secs(t, 72));
    assert!(b.poll_output().is_none());
    assert_eq!(lock(&mut b, "c1", &[1], secs(t, 72)), [1]);
    let a = call(&mut b, C1, RemotingCommand::request(RequestCode::LockBatchMq).with_body("nope"), t);
    assert_eq!(a.response_code(), Some(ResponseCode::SystemError));
}

#[test]
fn membership_notify_unregister_and_list() {
    let t = t0();
    let mut b = broker(t);
    hb(&mut b, C1, heartbeat("c1", G, &[("T", "*")], 1), t);
    assert_eq!(b.topics()[0], ("%RETRY%G".to_owned(), 1));

    // A second member: NOTIFY to both channels, before the heartbeat answer.
    b.handle(C2, heartbeat("c2", G, &[("T", "*")], 1), secs(t, 1));
    let out = drain(&mut b);
    let kinds: Vec<(ConnId, i32, bool)> =
        out.iter().map(|o| (o.conn, o.command.code, o.command.is_oneway())).collect();
    assert_eq!(kinds, [(C1, 40, true), (C2, 40, true), (C2, 0, false)]);
    assert_eq!(out[0].command.ext_fields.get("consumerGroup"), Some(G));
    assert_eq!((out[0].command.opaque, out[1].command.opaque), (1, 2), "the broker's own opaque counter");
    assert_eq!(out[0].command.version, 479);
    let hb = &out[2].command;
    assert_eq!(hb.ext_fields.get("IS_SUPPORT_HEART_BEAT_V2"), Some("true"));
    assert_eq!(hb.ext_fields.get("IS_SUB_CHANGE"), Some("true"));

    // Same heartbeat again: nothing changed, no notify.
    call(&mut b, C2, heartbeat("c2", G, &[("T", "*")], 1), secs(t, 2));
    // A new topic in the subscription set: notify.
    b.create_topic("U", 1);
    b.handle(C2, heartbeat("c2", G, &[("T", "*"), ("U", "*")], 2), secs(t, 3));
    assert_eq!(drain(&mut b).len(), 3);
    assert_eq!(b.subscription(G, "U").unwrap().sub_version, 2);

    let list = |b: &mut SimBroker| {
        let h = GetConsumerListByGroupRequestHeader { consumer_group: G.into() };
        let a = call(b, C1, RemotingCommand::request(RequestCode::GetConsumerListByGroup).with_header(&h), t);
        (a.response_code(), GetConsumerListByGroupResponseBody::decode(&a.body).map(|l| l.consumer_id_list))
    };
    assert_eq!(list(&mut b), (Some(ResponseCode::Success), Ok(vec!["c1".to_owned(), "c2".to_owned()])));
    assert_eq!(b.members(G), ["c1", "c2"]);

    let h = UnregisterClientRequestHeader {
        client_id: "c1".into(),
        producer_group: None,
        consumer_group: Some(G.into()),
    };
    b.handle(C1, RemotingCommand::request(RequestCode::UnregisterClient).with_header(&h), secs(t, 4));
    let out = drain(&mut b);
    assert_eq!(out.iter().map(|o| (o.conn, o.command.code)).collect::<Vec<_>>(), [(C2, 40), (C1, 0)]);
    assert_eq!(b.members(G), ["c2"]);

    b.disconnect(C2, secs(t, 5));
    assert!(b.poll_output().is_none(), "nobody left to notify");
    assert_eq!(list(&mut b).0, Some(ResponseCode::SystemError));
    assert_eq!(
        call(&mut b, C1, pull("T", 0, 0, 0), t).response_code(),
        Some(ResponseCode::SubscriptionNotExist)
    );
}

#[test]
fn registrations_expire_and_close_the_channel() {
    let t = t0();
    let mut b = broker(t);
    hb(&mut b, C1, heartbeat("c1", G, &[("T", "*")], 1), t);
    b.handle(C2, heartbeat("c2", G, &[("T", "*")], 1), secs(t, 60));
    drain(&mut b);
    call(&mut b, C2, heartbeat("c2", G, &[("T", "*")], 1), secs(t, 110)); // keeps c2 alive
    b.handle_timeout(secs(t, 110));
    b.handle(C2, pull("T", 0, 0, PullSysFlag::SUSPEND), secs(t, 111));
    b.handle(C1, pull("T", 1, 0, PullSysFlag::SUSPEND), secs(t, 111));
    assert_eq!(b.poll_timeout(), Some(secs(t, 120)));
    b.handle_timeout(secs(t, 120));
    assert_eq!(b.members(G), ["c2"]);
    assert_eq!(b.poll_closed(), Some(C1));
    assert_eq!(b.held_pulls(), 1, "the closed channel's held pull is gone");
    let out = drain(&mut b);
    assert!(out.iter().all(|o| o.command.code != 40), "the real broker does not notify on expiry");

    let mut n = broker_with(t, SimBrokerConfig { notify_on_expiry: true, ..Default::default() });
    hb(&mut n, C1, heartbeat("c1", G, &[("T", "*")], 1), t);
    n.handle(C2, heartbeat("c2", G, &[("T", "*")], 1), secs(t, 60));
    drain(&mut n);
    n.handle_timeout(secs(t, 120));
    let out = drain(&mut n);
    assert_eq!(out.iter().map(|o| (o.conn, o.command.code)).collect::<Vec<_>>(), [(C2, 40)]);
}

#[test]
fn disconnect_notifies_and_drops_held_pulls() {
    let t = t0();
    let mut b = broker(t);
    hb(&mut b, C1, heartbeat("c1", G, &[("T", "*")], 1), t);
    b.handle(C2, heartbeat("c2", G, &[("T", "*")], 1), t);
    drain(&mut b);
    b.handle(C1, pull("T", 0, 0, PullSysFlag::SUSPEND), t);
    b.disconnect(C1, secs(t, 1));
    let out = drain(&mut b);
    assert_eq!(out.iter().map(|o| (o.conn, o.command.code)).collect::<Vec<_>>(), [(C2, 40)]);
    assert_eq!(b.held_pulls(), 0);
    b.produce("T", 0, &Message::new("T", "x"), secs(t, 2));
    assert!(b.poll_output().is_none());
}

#[test]
fn restart_keeps_data_and_forgets_connections() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "*", t);
    produce_n(&mut b, "T", 0, 3, None, t);
    b.commit_offset(G, "T", 0, 2, t);
    call(&mut b, C1, send_back(0, 1, None), t); // level 1: due at 1 s
    assert_eq!(lock(&mut b, "c1", &[0], t), [0]);
    b.handle(C1, pull("T", 1, 0, PullSysFlag::SUSPEND), t);
    b.handle(C1, pull("T", 0, 3, 0), t); // answered but not yet polled
    b.restart(secs(t, 1) - Duration::from_millis(1));
    assert!(b.poll_output().is_none());
    assert_eq!((b.held_pulls(), b.members(G).len()), (0, 0));
    assert_eq!(b.lock_owner(G, &MessageQueue::new("T", "broker-a", 0), t), None);
    assert_eq!((b.max_offset("T", 0), b.committed_offset(G, "T", 0), b.scheduled()), (3, Some(2), 1));
    b.handle_timeout(secs(t, 1));
    assert_eq!(b.max_offset("%RETRY%G", 0), 1, "delayed messages survive");
    assert_eq!(
        call(&mut b, C1, pull("T", 0, 0, 0), t).response_code(),
        Some(ResponseCode::SubscriptionNotExist)
    );
}

fn send(msg: &Message, queue: i32) -> RemotingCommand {
    send_message_request("P", msg, &MessageQueue::new(msg.topic.as_str(), "broker-a", queue), 42, None)
        .with_opaque(21)
}

#[test]
fn send_message_v2_v1_batch() {
    let t = t0();
    let mut b = broker(t);
    let a = call(&mut b, C1, send(&Message::new("New", "b1").with_tags("X"), 2), t);
    let h: SendMessageResponseHeader = a.header().unwrap();
    assert_eq!((a.response_code(), h.queue_id, h.queue_offset), (Some(ResponseCode::Success), 2, 0));
    assert_eq!(
        (a.ext_fields.get("MSG_REGION"), a.ext_fields.get("TRACE_ON")),
        (Some("DefaultRegion"), Some("true"))
    );
    assert_eq!(b.topics().iter().find(|(n, _)| n == "New").map(|(_, q)| *q), Some(4), "min(4, 8) queues");
    let m = b.messages("New", 2).remove(0);
    assert_eq!(h.msg_id, m.offset_msg_id());
    assert_eq!(Some(m.msg_id().into_owned()), h.transaction_id, "UNIQ_KEY generated");
    assert_eq!((m.born_timestamp, m.property("CLUSTER"), m.tags()), (42, Some("DefaultCluster"), Some("X")));
    let a2 = call(&mut b, C1, send(&Message::new("New", "b2"), 2), t);
    assert_ne!(a2.header::<SendMessageResponseHeader>().unwrap().transaction_id, h.transaction_id);

    // V1 header names.
    let mut v1 = RemotingCommand::request(RequestCode::SendMessage).with_body("v1").with_opaque(5);
    for (k, v) in [
        ("producerGroup", "P"),
        ("topic", "T"),
        ("defaultTopic", "TBW102"),
        ("defaultTopicQueueNums", "4"),
        ("queueId", "1"),
        ("sysFlag", "0"),
        ("bornTimestamp", "7"),
        ("flag", "3"),
    ] {
        v1.ext_fields.insert(k, v);
    }
    assert_eq!(call(&mut b, C1, v1, t).response_code(), Some(ResponseCode::Success));
    assert_eq!(b.messages("T", 1)[0].flag, 3);

    // Batch: two entries, comma-separated ids.
    let mut body = BytesMut::new();
    crate::message::encode_batch_entry(1, b"e1", b"KEYS\x01k1\x02", &mut body);
    crate::message::encode_batch_entry(2, b"e2", b"", &mut body);
    let mut batch = send(&Message::new("T", ""), 3);
    batch.code = RequestCode::SendBatchMessage as i32;
    batch.body = body.freeze();
    let a = call(&mut b, C1, batch, t);
    let h: SendMessageResponseHeader = a.header().unwrap();
    assert_eq!((h.msg_id.split(',').count(), h.queue_offset), (2, 0));
    let ms = b.messages("T", 3);
    assert_eq!((ms[0].property("KEYS"), ms[1].flag, &ms[1].body[..]), (Some("k1"), 2, &b"e2"[..]));

    let a = call(&mut b, C1, send(&Message::new("T", "x"), 9), t);
    assert_eq!(a.response_code(), Some(ResponseCode::InvalidParameter));
    assert!(a.remark_str().starts_with("request queueId[9] is illegal"));
    let a = call(&mut b, C1, send(&Message::new("bad topic!", "x"), 0), t);
    assert_eq!(a.response_code(), Some(ResponseCode::InvalidParameter));
    assert!(a.remark_str().contains("contains illegal characters"));
    let mut big = send(&Message::new("T", "x"), 0);
    big.body = Bytes::from(vec![0; MAX_MESSAGE_SIZE + 1]);
    assert_eq!(call(&mut b, C1, big, t).response_code(), Some(ResponseCode::MessageIllegal));
}

#[test]
fn send_delayed_and_retry_fallback() {
    let t = t0();
    let mut b = broker(t);
    let a = call(&mut b, C1, send(&Message::new("T", "later").with_delay_level(2), 1), t);
    let h: SendMessageResponseHeader = a.header().unwrap();
    assert_eq!((h.queue_id, h.queue_offset), (1, 0), "schedule queue offset");
    assert_eq!((b.max_offset("T", 1), b.scheduled()), (0, 1));
    b.handle_timeout(secs(t, 5));
    let m = b.messages("T", 1).remove(0);
    assert_eq!((m.property("REAL_TOPIC"), m.property("DELAY")), (Some("T"), Some("2")));
    assert_ne!(m.offset_msg_id(), h.msg_id, "delivered copy is a new commit-log record");

    // The client's fallback: RECONSUME_TIME / MAX_RECONSUME_TIMES move into j / l.
    let retry = |times: &str| {
        Message::new(retry_topic(G), "again")
            .with_property("RECONSUME_TIME", times)
            .with_property("MAX_RECONSUME_TIMES", "3")
            .with_property("RETRY_TOPIC", "T")
            .with_delay_level(3)
    };
    call(&mut b, C1, send(&retry("1"), 0), t);
    assert_eq!(b.scheduled(), 1);
    call(&mut b, C1, send(&retry("4"), 0), t);
    let d = b.messages("%DLQ%G", 0).remove(0);
    assert_eq!((d.reconsume_times, d.property("DELAY")), (4, Some("-1")));
    // Unexpired order locks: straight to the DLQ.
    assert_eq!(lock(&mut b, "c1", &[0], t), [0]);
    call(&mut b, C1, send(&retry("1"), 0), t);
    assert_eq!(b.max_offset("%DLQ%G", 0), 2);
}

#[test]
fn create_topic_unknown_and_bad_frames() {
    let t = t0();
    let mut b = broker(t);
    let mut h = CreateTopicRequestHeader::new("Fresh", 3);
    h.perm = 2;
    let mut req = RemotingCommand::request(RequestCode::UpdateAndCreateTopic).with_header(&h);
    req.ext_fields.remove("order");
    assert_eq!(call(&mut b, C1, req, t).response_code(), Some(ResponseCode::Success));
    let route = b.topic_route("Fresh").unwrap();
    assert_eq!((route.read_queue_nums, route.perm), (3, 2));
    b.produce("Fresh", 0, &Message::new("Fresh", "x"), t);
    let a = call(&mut b, C1, pull_with(|h| h.topic = "Fresh".into()), t);
    assert_eq!(a.response_code(), Some(ResponseCode::NoPermission), "write-only topic");
    let sys = CreateTopicRequestHeader::new("SCHEDULE_TOPIC_XXXX", 1);
    let a =
        call(&mut b, C1, RemotingCommand::request(RequestCode::UpdateAndCreateTopic).with_header(&sys), t);
    assert_eq!(a.response_code(), Some(ResponseCode::InvalidParameter));

    let a = call(&mut b, C1, RemotingCommand::raw_request(777).with_opaque(8), t);
    assert_eq!(
        (a.response_code(), a.remark_str()),
        (Some(ResponseCode::RequestCodeNotSupported), " request type 777 not supported")
    );
    b.handle(C1, RemotingCommand::raw_request(777).oneway(), t);
    b.handle(C1, a, t); // a response: dropped
    assert!(b.poll_output().is_none());
    let a = call(&mut b, C1, RemotingCommand::request(RequestCode::HeartBeat).with_body("{garbage"), t);
    assert_eq!(a.response_code(), Some(ResponseCode::SystemError));
    let a = call(&mut b, C1, RemotingCommand::request(RequestCode::HeartBeat), t);
    assert_eq!(a.response_code(), Some(ResponseCode::SystemError));
    let a = call(&mut b, C1, RemotingCommand::request(RequestCode::ConsumerSendMsgBack), t);
    assert_eq!(a.response_code(), Some(ResponseCode::SystemError));
    let a = call(&mut b, C1, RemotingCommand::raw_request(46), t);
    assert_eq!(a.response_code(), Some(ResponseCode::Success), "CHECK_CLIENT_CONFIG");
}

#[test]
fn same_inputs_same_outputs() {
    let run = || {
        let t = t0();
        let mut b = broker(t);
        let mut frames = Vec::new();
        for (i, conn) in [C1, C2, ConnId(3)].into_iter().enumerate() {
            b.handle(conn, heartbeat(&format!("c{i}"), G, &[("T", "TagA || TagB")], 1), t);
            b.handle(conn, pull("T", i as i32, 0, PullSysFlag::SUSPEND), t);
        }
        for i in 0..20u64 {
            let tag = if i % 3 == 0 { "TagA" } else { "TagC" };
            b.produce("T", (i % 4) as i32, &Message::new("T", format!("{i}")).with_tags(tag), secs(t, i));
            while let Some(at) = b.poll_timeout().filter(|at| *at <= secs(t, i)) {
                b.handle_timeout(at);
            }
            frames.extend(drain(&mut b).into_iter().map(|o| (o.conn, o.command)));
        }
        frames
    };
    let (a, b) = (run(), run());
    assert!(!a.is_empty());
    assert_eq!(a, b);
}

#[test]
fn heartbeat_v2_fingerprints() {
    let t = t0();
    let mut b = broker(t);
    let v2 = |fingerprint: i32, without_sub: bool, subs: &[(&str, &str)]| {
        let mut cmd = heartbeat("c1", G, subs, 1);
        let mut data = HeartbeatData::decode(&cmd.body).unwrap();
        data.heartbeat_fingerprint = fingerprint;
        data.without_sub = without_sub;
        cmd.body = data.encode();
        cmd
    };
    let a = hb(&mut b, C1, v2(7, false, &[("T", "*")]), t);
    assert_eq!(a.ext_fields.get("IS_SUB_CHANGE"), Some("false"), "first fingerprint");
    b.create_topic("U", 1);
    let a = call(&mut b, C1, v2(7, true, &[("U", "*")]), t);
    assert_eq!(a.ext_fields.get("IS_SUB_CHANGE"), Some("false"));
    assert!(b.subscription(G, "U").is_none(), "without_sub keeps the registered subscriptions");
    b.handle(C1, v2(8, false, &[("U", "*")]), t);
    let out = drain(&mut b);
    assert_eq!(out.last().unwrap().command.ext_fields.get("IS_SUB_CHANGE"), Some("true"));
    assert!(b.subscription(G, "U").is_some() && b.subscription(G, "T").is_none());
}

#[test]
fn garbage_never_panics() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "*", t);
    produce_n(&mut b, "T", 0, 5, Some("A"), t);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    const KEYS: [&str; 24] = [
        "consumerGroup",
        "topic",
        "queueId",
        "queueOffset",
        "maxMsgNums",
        "sysFlag",
        "commitOffset",
        "suspendTimeoutMillis",
        "subVersion",
        "subscription",
        "expressionType",
        "offset",
        "group",
        "delayLevel",
        "unitMode",
        "timestamp",
        "readQueueNums",
        "writeQueueNums",
        "perm",
        "topicFilterType",
        "defaultTopic",
        "a",
        "b",
        "e",
    ];
    const VALUES: [&str; 12] = [
        "T",
        "G",
        "%RETRY%G",
        "0",
        "-1",
        "3",
        "2147483647",
        "-2147483648",
        "9223372036854775807",
        "x",
        "",
        "SQL92",
    ];
    const CODES: [i32; 20] =
        [10, 11, 14, 15, 17, 29, 30, 31, 34, 35, 36, 38, 40, 41, 42, 46, 310, 320, 361, 9999];
    const BODIES: [&[u8]; 5] =
        [b"", b"{", b"{\"mqSet\":[{}]}", b"\x00\x00\x00\x16garbage", b"{\"clientID\":1}"];
    for i in 0..5000 {
        let mut cmd = RemotingCommand::raw_request(CODES[(next() % 20) as usize]).with_opaque(i);
        for _ in 0..next() % 14 {
            cmd.ext_fields.insert(KEYS[(next() % 24) as usize], VALUES[(next() % 12) as usize]);
        }
        cmd.body = Bytes::from_static(BODIES[(next() % 5) as usize]);
        if next() % 7 == 0 {
            cmd = cmd.oneway();
        }
        let now = t + Duration::from_millis(i as u64 * 37);
        b.handle(ConnId(next() % 4), cmd, now);
        if let Some(at) = b.poll_timeout().filter(|at| *at <= now) {
            b.handle_timeout(at);
        }
        drain(&mut b);
    }
    let mut h = CreateTopicRequestHeader::new("Huge", i32::MAX);
    h.write_queue_nums = 1;
    let a = call(&mut b, C1, RemotingCommand::request(RequestCode::UpdateAndCreateTopic).with_header(&h), t);
    assert_eq!(a.response_code(), Some(ResponseCode::InvalidParameter));
}

/// The 5.3.3 broker's first-commit race, as modelled: two first commits of one topic for a
/// group processed together keep only the last; one after the other, every queue keeps its own.
#[test]
fn first_commits_of_a_topic_processed_together_keep_only_the_last() {
    let t = t0();
    let mut b = broker(t);
    member(&mut b, "*", t);
    b.commit_offset(G, "T", 0, 2, t);
    b.commit_offset(G, "T", 1, 3, t);
    assert_eq!((b.committed_offset(G, "T", 0), b.committed_offset(G, "T", 1)), (None, Some(3)));
    let later = t + Duration::from_micros(1);
    b.commit_offset(G, "T", 0, 2, later);
    b.commit_offset(G, "T", 2, 4, later);
    let all: Vec<_> = (0..3).map(|q| b.committed_offset(G, "T", q)).collect();
    assert_eq!(all, [Some(2), Some(3), Some(4)]);
}
