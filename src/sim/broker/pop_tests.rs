//! Unit tests of the simulated broker's POP service, driven with frames as a client sends them.

use std::time::{Duration, Instant};

use super::*;
use crate::message::decode_messages;
use crate::producer::retry_topic;
use crate::protocol::body::{
    BatchAck, BatchAckMessageRequestBody, ConsumeFromWhere, ConsumeType, HeartbeatData, MessageRequestMode,
    QueryAssignmentRequestBody, QueryAssignmentResponseBody, SetMessageRequestModeRequestBody,
};
use crate::protocol::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader, PopMessageResponseHeader,
};
use crate::protocol::receipt::{PopReceipt, RetryFlag, attach_receipts};
use crate::protocol::{ExpressionType, JsonBody};

const G: &str = "G";
const C1: ConnId = ConnId(1);

#[allow(clippy::disallowed_methods)] // tests pick an arbitrary origin
fn t0() -> Instant {
    Instant::now()
}

fn ms(t: Instant, ms: u64) -> Instant {
    t + Duration::from_millis(ms)
}

fn broker(t: Instant) -> SimBroker {
    let mut b = SimBroker::new("broker-a", "127.0.0.1:10911", SimBrokerConfig::default(), t);
    b.create_topic("T", 2);
    b
}

fn drain(b: &mut SimBroker) -> Vec<RemotingCommand> {
    std::iter::from_fn(|| b.poll_output()).map(|o| o.command).collect()
}

fn call(b: &mut SimBroker, cmd: RemotingCommand, now: Instant) -> RemotingCommand {
    b.handle(C1, cmd, now);
    let mut out = drain(b);
    assert_eq!(out.len(), 1, "{out:#?}");
    out.pop().unwrap()
}

/// Register `client` in `G` on its own connection.
fn join(b: &mut SimBroker, conn: ConnId, client: &str, now: Instant) {
    let subs = vec![
        SubscriptionData::build("T", "*", ExpressionType::Tag, 1),
        SubscriptionData::build(&retry_topic(G), "*", ExpressionType::Tag, 1),
    ];
    let hb = HeartbeatData {
        client_id: client.into(),
        producer_data_set: Vec::new(),
        consumer_data_set: vec![ConsumerData {
            group_name: G.into(),
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            subscription_data_set: subs,
            unit_mode: false,
        }],
        heartbeat_fingerprint: 0,
        without_sub: false,
    };
    b.handle(conn, RemotingCommand::request(RequestCode::HeartBeat).with_body(hb.encode()), now);
    drain(b);
}

fn query(
    b: &mut SimBroker,
    group: &str,
    client: &str,
    strategy: &str,
    now: Instant,
) -> Option<Vec<(i32, MessageRequestMode)>> {
    let body = QueryAssignmentRequestBody {
        topic: "T".into(),
        consumer_group: group.into(),
        client_id: client.into(),
        strategy_name: strategy.into(),
        message_model: MessageModel::Clustering,
    };
    let a = call(b, RemotingCommand::request(RequestCode::QueryAssignment).with_body(body.encode()), now);
    assert_eq!(a.response_code(), Some(ResponseCode::Success));
    let list = QueryAssignmentResponseBody::decode(&a.body).unwrap().message_queue_assignments?;
    Some(list.iter().map(|a| (a.message_queue.queue_id, a.mode)).collect())
}

fn set_mode(topic: &str, mode: MessageRequestMode, share: i32) -> RemotingCommand {
    let body = SetMessageRequestModeRequestBody {
        topic: topic.into(),
        consumer_group: G.into(),
        mode,
        pop_share_queue_num: share,
    };
    RemotingCommand::request(RequestCode::SetMessageRequestMode).with_body(body.encode())
}

fn pop_with(f: impl FnOnce(&mut PopMessageRequestHeader)) -> RemotingCommand {
    let mut h = PopMessageRequestHeader {
        consumer_group: G.into(),
        topic: "T".into(),
        queue_id: -1,
        max_msg_nums: 32,
        invisible_time: 60_000,
        poll_time: 0,
        born_time: 0,
        init_mode: 0,
        exp_type: None,
        exp: Some("*".into()),
        order: Some(false),
        attempt_id: None,
        bname: Some("broker-a".into()),
    };
    f(&mut h);
    RemotingCommand::request(RequestCode::PopMessage).with_header(&h).with_opaque(9)
}

fn pop(invisible_ms: i64) -> RemotingCommand {
    pop_with(|h| h.invisible_time = invisible_ms)
}

/// A FOUND answer's messages with the receipts a Java client gives them.
fn popped(a: &RemotingCommand) -> Vec<(MessageExt, PopReceipt)> {
    assert_eq!((a.response_code(), a.remark_str()), (Some(ResponseCode::Success), "FOUND"));
    let h: PopMessageResponseHeader = a.header().unwrap();
    let mut msgs = decode_messages(&a.body, &DecodeOptions::default()).unwrap();
    let receipts = attach_receipts(&mut msgs, &h, "broker-a", "T").unwrap();
    msgs.into_iter().zip(receipts).collect()
}

fn ack(r: &PopReceipt) -> RemotingCommand {
    let h = AckMessageRequestHeader {
        consumer_group: G.into(),
        topic: r.retry.real_topic("T", G),
        queue_id: r.queue_id,
        extra_info: r.to_string(),
        offset: r.queue_offset,
        bname: Some(r.broker_name.clone()),
    };
    RemotingCommand::request(RequestCode::AckMessage).with_header(&h)
}

fn change(r: &PopReceipt, invisible_ms: i64) -> RemotingCommand {
    let h = ChangeInvisibleTimeRequestHeader {
        consumer_group: G.into(),
        topic: r.retry.real_topic("T", G),
        queue_id: r.queue_id,
        extra_info: r.to_string(),
        offset: r.queue_offset,
        invisible_time: invisible_ms,
        bname: Some(r.broker_name.clone()),
    };
    RemotingCommand::request(RequestCode::ChangeMessageInvisibleTime).with_header(&h)
}

fn produce(b: &mut SimBroker, q: i32, body: &str, now: Instant) {
    let m = Message::new("T", body.to_owned()).with_property(keys::UNIQ_KEY, &format!("U-{body}"));
    b.produce("T", q, &m, now);
}

/// Run the broker's timeouts due up to `until`, in order.
fn advance(b: &mut SimBroker, until: Instant) {
    while let Some(t) = b.poll_timeout().filter(|t| *t <= until) {
        b.handle_timeout(t);
    }
}

#[test]
fn mode_switch_changes_the_assignment() {
    let t = t0();
    let mut b = broker(t);
    join(&mut b, C1, "c1", t);
    use MessageRequestMode::{Pop, Pull};
    assert_eq!(query(&mut b, G, "c1", "AVG", t), Some(vec![(0, Pull), (1, Pull)]), "never switched: PULL");
    assert_eq!(query(&mut b, "Nobody", "c1", "AVG", t), None, "unknown group: key absent");
    assert_eq!(query(&mut b, G, "c1", "CONSISTENT_HASH", t), None, "unknown strategy: key absent");

    let a = call(&mut b, set_mode("T", Pop, 0), t);
    assert_eq!(a.response_code(), Some(ResponseCode::Success));
    assert_eq!(query(&mut b, G, "c1", "AVG", t), Some(vec![(-1, Pop)]));
    assert_eq!(b.message_request_mode("T", G), Some((Pop, 0)));
    let a = call(&mut b, set_mode(&retry_topic(G), Pop, 0), t);
    assert_eq!(a.response_code(), Some(ResponseCode::NoPermission));
    let a = call(&mut b, set_mode("Nope", Pop, 0), t);
    assert_eq!(a.response_code(), Some(ResponseCode::TopicNotExist));

    // popShareQueueNum 1 with four clients: my own share plus my successor's.
    b.create_topic("T", 4);
    for (i, c) in ["c2", "c3", "c4"].iter().enumerate() {
        join(&mut b, ConnId(10 + i as u64), c, t);
    }
    b.set_message_request_mode("T", G, Pop, 1);
    assert_eq!(query(&mut b, G, "c1", "AVG", t), Some(vec![(0, Pop), (1, Pop)]));
    assert_eq!(query(&mut b, G, "c4", "AVG", t), Some(vec![(0, Pop), (3, Pop)]), "wraps around");
    b.set_message_request_mode("T", G, Pull, 0);
    assert_eq!(query(&mut b, G, "c2", "AVG_BY_CIRCLE", t), Some(vec![(1, Pull)]));
}

#[test]
fn pop_over_two_queues_gives_receipts_matching_positions() {
    let t = t0();
    let mut b = broker(t);
    produce(&mut b, 0, "a0", t);
    produce(&mut b, 0, "a1", t);
    produce(&mut b, 1, "b0", t);
    let a = call(&mut b, pop(5_000), ms(t, 10));
    let h: PopMessageResponseHeader = a.header().unwrap();
    assert_eq!((h.pop_time, h.invisible_time, h.rest_num), (b.wall_ms(ms(t, 10)), 5_000, 0));
    assert_eq!(h.start_offset_info.as_deref(), Some("0 0 0;0 1 0"));
    assert_eq!(h.msg_offset_info.as_deref(), Some("0 0 0,1;0 1 0"));
    let got = popped(&a);
    assert_eq!(got.len(), 3);
    for (m, r) in &got {
        assert_eq!((r.queue_id, r.queue_offset, r.retry), (m.queue_id, m.queue_offset, RetryFlag::Normal));
        assert_eq!((r.ck_queue_offset, r.revive_qid), (0, h.revive_qid));
        assert_eq!(
            b.pop_state(G, "T", m.queue_id, m.queue_offset),
            Some(PopState::Invisible { visible_at: h.pop_time + 5_000 })
        );
    }
    assert_eq!((b.committed_offset(G, "T", 0), b.committed_offset(G, "T", 1)), (Some(2), Some(1)));
    assert_eq!((b.pop_stats().pops, b.pop_stats().popped, b.checkpoints()), (1, 3, 2));
    // Nothing left, no long polling: POLLING_TIMEOUT at once, with the numbers.
    let a = call(&mut b, pop(5_000), ms(t, 20));
    assert_eq!(
        (a.response_code(), a.remark_str()),
        (Some(ResponseCode::PollingTimeout), "NO_MESSAGE_IN_QUEUE")
    );
    let h: PopMessageResponseHeader = a.header().unwrap();
    assert_eq!(h.invisible_time, 5_000);
    assert_eq!(
        (a.ext_fields.get("startOffsetInfo"), a.ext_fields.get("msgOffsetInfo")),
        (Some(""), Some(""))
    );
    // A tag filter skips what it rejects but moves the offset past it.
    b.produce("T", 0, &Message::new("T", "x").with_tags("X"), t);
    b.produce("T", 0, &Message::new("T", "y").with_tags("Y"), t);
    let got = popped(&call(&mut b, pop_with(|h| h.exp = Some("Y".into())), ms(t, 30)));
    assert_eq!(got.iter().map(|(m, _)| m.queue_offset).collect::<Vec<_>>(), [3]);
    assert_eq!(b.committed_offset(G, "T", 0), Some(4));
}

#[test]
fn ack_prevents_revive_and_out_of_range_acks_are_refused() {
    let t = t0();
    let mut b = broker(t);
    produce(&mut b, 0, "a0", t);
    produce(&mut b, 1, "b0", t);
    let got = popped(&call(&mut b, pop(5_000), t));
    for (_, r) in &got {
        let a = call(&mut b, ack(r), ms(t, 100));
        assert_eq!(
            (a.response_code(), a.ext_fields.len(), a.remark.is_none()),
            (Some(ResponseCode::Success), 0, true)
        );
    }
    assert_eq!(b.checkpoints(), 0, "fully acked checkpoints go");
    advance(&mut b, ms(t, 120_000));
    assert_eq!((b.pop_stats().acked, b.pop_stats().revived), (2, 0));
    assert!(b.messages(&pop_retry_topic(G, "T"), 0).is_empty());
    assert_eq!(b.pop_state(G, "T", 0, 0), Some(PopState::Acked));
    // The same ack again: SUCCESS, counted as a double ack.
    assert_eq!(call(&mut b, ack(&got[0].1), ms(t, 121_000)).response_code(), Some(ResponseCode::Success));
    assert_eq!(b.pop_stats().double_acks, 1);
    let mut far = got[0].1.clone();
    far.queue_offset = 5;
    let a = call(&mut b, ack(&far), t);
    assert_eq!(a.response_code(), Some(ResponseCode::NoMessage));
    assert!(
        a.remark_str().starts_with("offset is illegal, key:T@0, commit:5, store:0~1"),
        "{}",
        a.remark_str()
    );
}

#[test]
fn unacked_message_revives_into_the_retry_topic() {
    let t = t0();
    let mut b = broker(t);
    produce(&mut b, 1, "m", t);
    let first = popped(&call(&mut b, pop(5_000), t));
    let (m0, r0) = first[0].clone();
    assert_eq!(b.poll_timeout(), Some(ms(t, 5_000)));
    advance(&mut b, ms(t, 4_999));
    assert_eq!(b.pop_stats().revived, 0, "not before the invisible time");
    advance(&mut b, ms(t, 5_000));
    assert_eq!(b.pop_stats().revived, 1);
    let retry = pop_retry_topic(G, "T");
    let stored = b.messages(&retry, 0);
    assert_eq!(stored.len(), 1);
    assert_eq!((stored[0].reconsume_times, stored[0].msg_id()), (1, m0.msg_id()));
    assert_eq!(stored[0].property(keys::FIRST_POP_TIME), Some(r0.pop_time.to_string().as_str()));
    assert_eq!(stored[0].property(keys::POP_CK), None, "the receipt is added when popped");
    assert_eq!(b.pop_state(G, "T", 1, 0), Some(PopState::Revived));

    let a = call(&mut b, pop(60_000), ms(t, 6_000));
    let raw = decode_messages(&a.body, &DecodeOptions::default()).unwrap();
    let sent = raw[0].property(keys::POP_CK).expect("the broker set POP_CK").to_owned();
    assert_eq!(&*raw[0].topic, "T", "under the subscribed topic");
    let again = popped(&a);
    let (m1, r1) = &again[0];
    assert_eq!(r1.to_string(), sent);
    assert_eq!((r1.retry, r1.queue_id, r1.queue_offset, m1.reconsume_times), (RetryFlag::RetryV1, 0, 0, 1));
    assert_eq!(m1.body, m0.body);
    assert_eq!(call(&mut b, ack(r1), ms(t, 7_000)).response_code(), Some(ResponseCode::Success));
    assert_eq!(b.pop_state(G, &retry, 0, 0), Some(PopState::Acked));
    // The first receipt's checkpoint is gone: the broker takes its ack quietly.
    assert_eq!(call(&mut b, ack(&r0), ms(t, 7_000)).response_code(), Some(ResponseCode::Success));
    assert_eq!((b.pop_stats().acked, b.pop_stats().stale_acks), (1, 1));
    advance(&mut b, ms(t, 200_000));
    assert_eq!(b.pop_stats().revived, 1);
}

#[test]
fn change_invisible_revives_after_its_new_time() {
    let t = t0();
    let mut b = broker(t);
    produce(&mut b, 0, "m", t);
    let got = popped(&call(&mut b, pop(60_000), t));
    let a = call(&mut b, change(&got[0].1, 1_000), ms(t, 10));
    assert_eq!(
        (a.response_code(), a.remark_str()),
        (Some(ResponseCode::Success), "not set any response code")
    );
    let h: ChangeInvisibleTimeResponseHeader = a.header().unwrap();
    assert_eq!(
        (h.pop_time, h.invisible_time, h.revive_qid),
        (b.wall_ms(ms(t, 10)), 1_000, got[0].1.revive_qid)
    );
    advance(&mut b, ms(t, 1_009));
    assert_eq!(b.pop_stats().revived, 0);
    advance(&mut b, ms(t, 1_010));
    assert_eq!((b.pop_stats().revived, b.pop_stats().changed), (1, 1));
    advance(&mut b, ms(t, 120_000));
    assert_eq!(b.pop_stats().revived, 1, "the original checkpoint was acked by the change");
    assert_eq!(b.messages(&pop_retry_topic(G, "T"), 0)[0].reconsume_times, 1);
}

#[test]
fn long_poll_is_woken_by_a_send_and_times_out_with_210() {
    let t = t0();
    let mut b = broker(t);
    b.handle(C1, pop_with(|h| h.poll_time = 15_000), t);
    assert!(drain(&mut b).is_empty(), "held");
    assert_eq!(b.held_pops(), 1);
    produce(&mut b, 1, "late", ms(t, 3_000));
    let out = drain(&mut b);
    assert_eq!(out.len(), 1);
    assert_eq!(popped(&out[0])[0].0.body, "late");
    assert_eq!(b.held_pops(), 0);

    b.handle(C1, pop_with(|h| h.poll_time = 15_000), ms(t, 4_000));
    assert_eq!(b.poll_timeout(), Some(ms(t, 19_000)));
    advance(&mut b, ms(t, 18_999));
    assert!(drain(&mut b).is_empty());
    advance(&mut b, ms(t, 19_000));
    let out = drain(&mut b);
    assert_eq!(out[0].response_code(), Some(ResponseCode::PollingTimeout));
    assert!(out[0].header::<PopMessageResponseHeader>().is_ok());
    // Born long ago: refused at once.
    let a = call(&mut b, pop_with(|h| (h.poll_time, h.born_time) = (1_000, 5)), ms(t, 20_000));
    assert_eq!(a.response_code(), Some(ResponseCode::PollingTimeout));
    assert_eq!(b.pop_stats().polling_timeouts, 2);
}

#[test]
fn refusals_carry_zero_numbers() {
    let t = t0();
    let mut b = broker(t);
    let a = call(&mut b, pop_with(|h| h.max_msg_nums = 33), t);
    assert_eq!(a.response_code(), Some(ResponseCode::InvalidParameter));
    let h: PopMessageResponseHeader = a.header().unwrap();
    assert_eq!((h.pop_time, h.rest_num, h.start_offset_info), (0, 0, None));
    let a = call(&mut b, pop_with(|h| h.queue_id = 2), t);
    assert_eq!(a.response_code(), Some(ResponseCode::InvalidParameter));
    let a = call(&mut b, pop_with(|h| h.topic = "Nope".into()), t);
    assert_eq!(a.response_code(), Some(ResponseCode::TopicNotExist));
    let batch = RemotingCommand::request(RequestCode::BatchAckMessage);
    assert_eq!(call(&mut b, batch, t).response_code(), Some(ResponseCode::NoMessage), "no body");
    let config = SimBrokerConfig { batch_ack_supported: false, ..SimBrokerConfig::default() };
    let mut old = SimBroker::new("broker-a", "127.0.0.1:10911", config, t);
    let batch = RemotingCommand::request(RequestCode::BatchAckMessage);
    assert_eq!(call(&mut old, batch, t).response_code(), Some(ResponseCode::RequestCodeNotSupported));
}

fn batch_ack(entries: impl IntoIterator<Item = BatchAck>) -> RemotingCommand {
    let body =
        BatchAckMessageRequestBody { broker_name: "broker-a".into(), acks: entries.into_iter().collect() };
    RemotingCommand::request(RequestCode::BatchAckMessage).with_body(body.encode())
}

#[test]
fn batch_ack_acks_the_bits_set_and_the_rest_revive() {
    // As checked on the 5.3.3 broker (docs/pop.md): bits 0, 2, 4, 6 of eight acked, the odd
    // ones revived.
    let t = t0();
    let mut b = broker(t);
    for i in 0..8 {
        produce(&mut b, 0, &format!("m{i}"), t);
    }
    let got = popped(&call(&mut b, pop(5_000), t));
    assert_eq!(got.len(), 8);
    let mut entry = BatchAck::for_checkpoint(G, "T", &got[0].1);
    for (_, r) in got.iter().step_by(2) {
        assert!(entry.same_checkpoint("T", r));
        assert!(entry.set(r.queue_offset));
    }
    // An entry for a queue the topic does not have is skipped; the answer is SUCCESS and the
    // good entry is served.
    let mut bad = entry.clone();
    bad.queue_id = 7;
    let a = call(&mut b, batch_ack([bad, entry.clone()]), ms(t, 100));
    assert_eq!(a.response_code(), Some(ResponseCode::Success));
    assert_eq!((b.pop_stats().acked, b.pop_stats().batch_acks), (4, 1));
    // Again: every bit acked already, and an offset past the queue is skipped.
    let mut again = entry;
    again.set(100);
    assert_eq!(call(&mut b, batch_ack([again]), ms(t, 200)).response_code(), Some(ResponseCode::Success));
    assert_eq!((b.pop_stats().acked, b.pop_stats().double_acks), (4, 4));
    advance(&mut b, ms(t, 5_000));
    assert_eq!(b.pop_stats().revived, 4);
    let revived: Vec<String> = b
        .messages(&pop_retry_topic(G, "T"), 0)
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect();
    assert_eq!(revived, ["m1", "m3", "m5", "m7"]);
}

#[test]
fn a_4_9_broker_does_not_know_pop() {
    let t = t0();
    let config = SimBrokerConfig { pop_supported: false, ..SimBrokerConfig::default() };
    let mut b = SimBroker::new("broker-a", "127.0.0.1:10911", config, t);
    b.create_topic("T", 2);
    let qa = RemotingCommand::request(RequestCode::QueryAssignment);
    for (cmd, code) in [(pop(5_000), 200_050), (qa, 400), (set_mode("T", MessageRequestMode::Pop, 0), 401)] {
        let a = call(&mut b, cmd, t);
        assert_eq!(a.response_code(), Some(ResponseCode::RequestCodeNotSupported));
        assert_eq!(a.remark_str(), format!(" request type {code} not supported"));
    }
}

#[test]
fn every_fifth_pop_reads_the_retry_topic_first() {
    let t = t0();
    let mut b = broker(t);
    produce(&mut b, 0, "old", t);
    popped(&call(&mut b, pop(1_000), t)); // pop 1
    advance(&mut b, ms(t, 1_000));
    for i in 0..8 {
        produce(&mut b, 0, &format!("new{i}"), ms(t, 2_000));
    }
    // Pops 2..4 take one message each from the topic, the retry copy after them.
    for _ in 2..5 {
        let got = popped(&call(&mut b, pop_with(|h| h.max_msg_nums = 1), ms(t, 2_000)));
        assert_eq!(got[0].1.retry, RetryFlag::Normal);
    }
    let got = popped(&call(&mut b, pop_with(|h| h.max_msg_nums = 1), ms(t, 2_000)));
    assert_eq!((got[0].1.retry, &got[0].0.body[..]), (RetryFlag::RetryV1, &b"old"[..]), "pop 5: retry first");
}

#[test]
fn pop_invariants_catch_double_delivery_and_early_or_failed_acks() {
    use crate::sim::invariants::Checker;
    use crate::sim::world::Consumed;
    let sim = crate::sim::Sim::builder(1).broker("broker-a", &[("T", 2)]).build();
    let receipt = PopReceipt::parse("0 1700000000000 60000 0 0 broker-a 1 0").unwrap();
    let secs = Duration::from_secs;
    let consumed = |ok: bool, done: u64| Consumed {
        consumer: 0,
        key: "K".into(),
        queue: MessageQueue::new("T", "broker-a", 1),
        offset: 0,
        topic: "T".into(),
        reconsume_times: 0,
        ok,
        at: secs(done),
        receipt: Some(receipt.to_string()),
        commit_log_offset: 0,
    };
    let ack_at = |c: &mut Checker, at: u64| c.on_request(0, C1, Some("broker-a"), &ack(&receipt), secs(at));
    let verdict = |mut c: Checker| c.check(&sim);

    // Delivered, listener done at 1 s, acked at 2 s: fine.
    let mut c = Checker::default();
    c.on_consumed(&consumed(true, 1));
    ack_at(&mut c, 2);
    assert_eq!(verdict(c), Ok(()));
    // Acked before the listener finished.
    let mut c = Checker::default();
    c.on_consumed(&consumed(true, 3));
    ack_at(&mut c, 2);
    assert!(verdict(c).unwrap_err().contains("before its listener finished"));
    // Acked although the listener failed.
    let mut c = Checker::default();
    c.on_consumed(&consumed(false, 1));
    ack_at(&mut c, 2);
    assert!(verdict(c).unwrap_err().contains("listener failed"));
    // One receipt delivered twice.
    let mut c = Checker::default();
    c.on_consumed(&consumed(true, 1));
    c.on_consumed(&consumed(true, 2));
    assert!(verdict(c).unwrap_err().contains("delivered twice"));
    // Acked twice.
    let mut c = Checker::default();
    c.on_consumed(&consumed(true, 1));
    ack_at(&mut c, 2);
    ack_at(&mut c, 3);
    assert!(verdict(c).unwrap_err().contains("after acking it"));
    // Acked before delivery (a consumer that acks on receipt), then delivered.
    let mut c = Checker::default();
    ack_at(&mut c, 0);
    c.on_consumed(&consumed(true, 1));
    assert!(verdict(c).unwrap_err().contains("after its ack"));

    // The same in a BATCH_ACK: checked as sent, acked when the broker serves it.
    let mut entry = BatchAck::for_checkpoint(G, "T", &receipt);
    entry.set(receipt.queue_offset);
    let mut batch = batch_ack([entry]);
    batch.opaque = 77;
    let batch_at = |c: &mut Checker, at: u64| c.on_request(0, C1, Some("broker-a"), &batch, secs(at));
    let answer = |code| RemotingCommand::response_to(&batch, code);
    let mut c = Checker::default();
    c.on_consumed(&consumed(false, 1));
    batch_at(&mut c, 2);
    assert!(verdict(c).unwrap_err().contains("listener failed"), "flagged even if never answered");
    // Refused (a broker without it), then the same receipt acked alone: fine.
    let mut c = Checker::default();
    c.on_consumed(&consumed(true, 1));
    batch_at(&mut c, 2);
    c.on_broker_output(C1, &answer(ResponseCode::RequestCodeNotSupported));
    ack_at(&mut c, 3);
    assert_eq!(verdict(c), Ok(()));
    // Served, then acked alone again.
    let mut c = Checker::default();
    c.on_consumed(&consumed(true, 1));
    batch_at(&mut c, 2);
    c.on_broker_output(C1, &answer(ResponseCode::Success));
    ack_at(&mut c, 3);
    assert!(verdict(c).unwrap_err().contains("after acking it"));
}

/// An orderly pop of `queue_id` (-1: every queue) for at most `max` messages.
fn order_pop(queue_id: i32, max: i32, invisible_ms: i64) -> RemotingCommand {
    pop_with(|h| {
        (h.order, h.queue_id, h.max_msg_nums, h.invisible_time) = (Some(true), queue_id, max, invisible_ms)
    })
}

fn bodies(got: &[(MessageExt, PopReceipt)]) -> Vec<String> {
    got.iter().map(|(m, _)| String::from_utf8_lossy(&m.body).into_owned()).collect()
}

fn order_counts(a: &RemotingCommand) -> Option<String> {
    a.header::<PopMessageResponseHeader>().unwrap().order_count_info
}

#[test]
fn orderly_pop_locks_its_queue_until_every_message_is_acked() {
    let t = t0();
    let mut b = broker(t);
    for i in 0..4 {
        produce(&mut b, 0, &format!("a{i}"), t);
    }
    produce(&mut b, 1, "b0", t);
    let a = call(&mut b, order_pop(0, 2, 20_000), t);
    let h: PopMessageResponseHeader = a.header().unwrap();
    assert_eq!(
        (h.revive_qid, h.start_offset_info.as_deref(), h.msg_offset_info.as_deref()),
        (999, Some("0 0 0"), Some("0 0 0,1"))
    );
    assert_eq!(h.order_count_info.as_deref(), Some("0 0 0"), "a first pop: no counts");
    let first = popped(&a);
    assert_eq!(bodies(&first), ["a0", "a1"]);
    assert!(first.iter().all(|(_, r)| r.is_order() && r.retry == RetryFlag::Normal));
    assert_eq!(b.committed_offset(G, "T", 0), Some(0), "the offset stays at the first message out");
    assert_eq!(b.checkpoints(), 0, "no checkpoint");

    // Queue 0 is locked: a pop of every queue gets queue 1 only; then nothing, queue 0's
    // backlog not counted.
    let a = call(&mut b, order_pop(-1, 32, 20_000), ms(t, 10));
    assert_eq!((bodies(&popped(&a)), order_counts(&a).as_deref()), (vec!["b0".to_owned()], Some("0 1 0")));
    let a = call(&mut b, order_pop(-1, 32, 20_000), ms(t, 20));
    assert_eq!(a.response_code(), Some(ResponseCode::PollingTimeout));
    let h: PopMessageResponseHeader = a.header().unwrap();
    assert_eq!((h.revive_qid, h.rest_num, a.ext_fields.get("orderCountInfo")), (999, 0, Some("")));

    // Acked out of order: the offset waits for a0, and the lock for both.
    assert_eq!(call(&mut b, ack(&first[1].1), ms(t, 30)).response_code(), Some(ResponseCode::Success));
    assert_eq!(b.committed_offset(G, "T", 0), Some(0));
    assert_eq!(
        call(&mut b, order_pop(0, 2, 20_000), ms(t, 40)).response_code(),
        Some(ResponseCode::PollingTimeout)
    );
    assert_eq!(call(&mut b, ack(&first[0].1), ms(t, 50)).response_code(), Some(ResponseCode::Success));
    assert_eq!(b.committed_offset(G, "T", 0), Some(2));
    assert_eq!(b.pop_state(G, "T", 0, 0), Some(PopState::Acked));
    // Again: behind the group's offset, no effect.
    assert_eq!(call(&mut b, ack(&first[0].1), ms(t, 60)).response_code(), Some(ResponseCode::Success));
    let a = call(&mut b, order_pop(0, 32, 20_000), ms(t, 70));
    assert_eq!(
        (bodies(&popped(&a)), order_counts(&a).as_deref()),
        (vec!["a2".to_owned(), "a3".to_owned()], Some("0 0 0"))
    );
    let s = b.pop_stats();
    assert_eq!((s.acked, s.double_acks, s.repops, s.order_redelivered), (2, 1, 0, 0));
    advance(&mut b, ms(t, 200_000));
    assert_eq!(b.pop_stats().revived, 0, "nothing of an orderly pop is revived");
    assert!(b.messages(&pop_retry_topic(G, "T"), 0).is_empty());
}

#[test]
fn orderly_change_invisible_brings_the_rest_back_in_place_counted() {
    let t = t0();
    let mut b = broker(t);
    for i in 0..4 {
        produce(&mut b, 0, &format!("o{i}"), t);
    }
    let first = popped(&call(&mut b, order_pop(0, 2, 20_000), t));
    assert_eq!(call(&mut b, ack(&first[0].1), ms(t, 100)).response_code(), Some(ResponseCode::Success));
    let r1 = &first[1].1;
    let a = call(&mut b, change(r1, 1_000), ms(t, 200));
    assert_eq!(
        (a.response_code(), a.remark_str()),
        (Some(ResponseCode::Success), "not set any response code")
    );
    let h: ChangeInvisibleTimeResponseHeader = a.header().unwrap();
    // The receipt's popTime kept; invisibleTime counted from it.
    assert_eq!((h.pop_time, h.invisible_time, h.revive_qid), (r1.pop_time, 1_200, 999));
    assert_eq!(b.pop_state(G, "T", 0, 1), Some(PopState::Invisible { visible_at: r1.pop_time + 1_200 }));
    assert_eq!(
        call(&mut b, order_pop(0, 2, 20_000), ms(t, 1_199)).response_code(),
        Some(ResponseCode::PollingTimeout)
    );

    // Visible again: o1 and o2 from the topic itself, o1's attempt counted (as 5.3.3 answered).
    let a = call(&mut b, order_pop(0, 2, 20_000), ms(t, 1_200));
    assert_eq!(order_counts(&a).as_deref(), Some("0 qo0%1 1;0 0 0"));
    let again = popped(&a);
    assert_eq!(bodies(&again), ["o1", "o2"]);
    assert_eq!(
        (again[0].1.retry, again[0].1.queue_offset, again[0].1.ck_queue_offset),
        (RetryFlag::Normal, 1, 1)
    );
    let s = b.pop_stats();
    assert_eq!((s.order_redelivered, s.repops, s.revived, s.changed), (1, 0, 0, 1));
    // The old receipt of o1 is of an earlier pop: SUCCESS, no effect.
    assert_eq!(call(&mut b, ack(r1), ms(t, 1_300)).response_code(), Some(ResponseCode::Success));
    assert_eq!((b.pop_stats().stale_acks, b.committed_offset(G, "T", 0)), (1, Some(1)));
    assert_eq!(call(&mut b, change(r1, 1_000), ms(t, 1_300)).response_code(), Some(ResponseCode::Success));
    assert_eq!(b.pop_stats().stale_acks, 2, "a change of an earlier pop's receipt does nothing");

    // Nothing acked: a pop held meanwhile is woken when the lock frees, both counted again.
    b.handle(
        C1,
        pop_with(|h| (h.order, h.queue_id, h.max_msg_nums, h.poll_time) = (Some(true), 0, 2, 30_000)),
        ms(t, 2_000),
    );
    assert!(drain(&mut b).is_empty(), "held");
    advance(&mut b, ms(t, 21_199));
    assert!(drain(&mut b).is_empty());
    advance(&mut b, ms(t, 21_200));
    let out = drain(&mut b);
    assert_eq!(out.len(), 1);
    assert_eq!(order_counts(&out[0]).as_deref(), Some("0 qo0%1 2;0 qo0%2 1;0 0 1"));
    assert_eq!(bodies(&popped(&out[0])), ["o1", "o2"]);
    assert_eq!((b.pop_stats().order_redelivered, b.pop_stats().repops), (3, 0));
}

#[test]
fn an_older_orderly_pops_offsets_the_next_one_left_out_come_again_uncounted_as_repops() {
    // 5.3.3 replaces the order info with each pop: offsets of an earlier pop that the next one
    // did not return (maxMsgNums) are forgotten, and popped again in place once visible.
    let t = t0();
    let mut b = broker(t);
    for i in 0..4 {
        produce(&mut b, 0, &format!("o{i}"), t);
    }
    let first = popped(&call(&mut b, order_pop(0, 4, 20_000), t));
    for (_, r) in &first {
        call(&mut b, change(r, 1_000), ms(t, 100));
    }
    let a = call(&mut b, order_pop(0, 2, 20_000), ms(t, 1_100));
    assert_eq!(bodies(&popped(&a)), ["o0", "o1"]);
    assert_eq!(
        b.pop_state(G, "T", 0, 3),
        Some(PopState::Invisible { visible_at: first[3].1.pop_time + 1_100 })
    );
    for (_, r) in popped(&a) {
        call(&mut b, change(&r, 1_000), ms(t, 1_200));
    }
    let a = call(&mut b, order_pop(0, 4, 20_000), ms(t, 2_200));
    assert_eq!(bodies(&popped(&a)), ["o0", "o1", "o2", "o3"]);
    assert_eq!((b.pop_stats().order_redelivered, b.pop_stats().repops), (6, 0));
}

#[test]
fn orderly_batch_ack_acks_each_bit_in_order() {
    // 5.3.3's batch branch sends each bit of a revive queue 999 entry through `ackOrderly`.
    let t = t0();
    let mut b = broker(t);
    for i in 0..4 {
        produce(&mut b, 0, &format!("o{i}"), t);
    }
    let got = popped(&call(&mut b, order_pop(0, 3, 20_000), t));
    let mut entry = BatchAck::for_checkpoint(G, "T", &got[0].1);
    assert_eq!(entry.revive_queue_id, 999);
    for (_, r) in &got {
        assert!(entry.same_checkpoint("T", r) && entry.set(r.queue_offset));
    }
    // A pop held on the locked queue meanwhile.
    b.handle(C1, pop_with(|h| (h.order, h.queue_id, h.poll_time) = (Some(true), 0, 15_000)), ms(t, 50));
    assert!(drain(&mut b).is_empty(), "held");
    // Offset 3 is in the queue but not in the pop: MESSAGE_ILLEGAL, the others acked.
    entry.set(3);
    let a = call(&mut b, batch_ack([entry]), ms(t, 100));
    assert_eq!(a.response_code(), Some(ResponseCode::MessageIllegal));
    assert_eq!(a.remark_str(), "offset is illegal, key:T@G@0, old:3, commit:3, next:-1, /127.0.0.1:1025");
    assert_eq!((b.pop_stats().acked, b.committed_offset(G, "T", 0)), (3, Some(3)));
    // The lock is free: the held pop is woken at once.
    assert_eq!(b.poll_timeout(), Some(ms(t, 100)));
    advance(&mut b, ms(t, 100));
    let out = drain(&mut b);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (bodies(&popped(&out[0])), order_counts(&out[0]).as_deref()),
        (vec!["o3".to_owned()], Some("0 0 0"))
    );
}

#[test]
fn a_normal_pop_beside_an_orderly_one_keeps_its_checkpoints() {
    let t = t0();
    let mut b = broker(t);
    produce(&mut b, 0, "a0", t);
    produce(&mut b, 1, "b0", t);
    popped(&call(&mut b, order_pop(0, 32, 5_000), t));
    // Another group pops normally: both queues, checkpoints, no counts, revived when unacked.
    let a =
        call(&mut b, pop_with(|h| (h.consumer_group, h.invisible_time) = ("G2".into(), 5_000)), ms(t, 10));
    let h: PopMessageResponseHeader = a.header().unwrap();
    assert!((0..8).contains(&h.revive_qid));
    assert_eq!((h.order_count_info, a.ext_fields.get("orderCountInfo")), (None, None));
    let mut starts: Vec<&str> = h.start_offset_info.as_deref().unwrap_or("").split(';').collect();
    starts.sort_unstable();
    assert_eq!((starts, b.checkpoints()), (vec!["0 0 0", "0 1 0"], 2));
    assert_eq!((b.committed_offset("G2", "T", 0), b.committed_offset("G2", "T", 1)), (Some(1), Some(1)));
    advance(&mut b, ms(t, 5_010));
    assert_eq!(b.pop_stats().revived, 2);
    assert_eq!(b.messages(&pop_retry_topic("G2", "T"), 0).len(), 2);
    assert!(b.messages(&pop_retry_topic(G, "T"), 0).is_empty());
    assert_eq!(b.committed_offset(G, "T", 0), Some(0), "the orderly group's queue is untouched");
}
