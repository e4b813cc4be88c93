//! Requests a broker sends to its clients: membership changed, reset offsets, consumer status,
//! running info, consume directly, and codes a client does not know.

use std::time::Duration;

use bytes::BytesMut;
use rocketmq_push_core::message::{MessageExt, encode_stored};
use rocketmq_push_core::protocol::body::{
    CMResult, ConsumeMessageDirectlyResult, ConsumerRunningInfo, GetConsumerStatusBody, JsonBody,
    ResetOffsetBody,
};
use rocketmq_push_core::protocol::header::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader, ResetOffsetRequestHeader,
};
use rocketmq_push_core::sim::{Sim, Verdict};
use rocketmq_push_core::{ConsumeFromWhere, Event, MessageQueue, RemotingCommand, RequestCode, ResponseCode};

fn running() -> (Sim, usize) {
    let mut sim = Sim::builder(60).broker("broker-a", &[("T", 2)]).build();
    sim.produce("T", 10);
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_for(Duration::from_secs(6));
    (sim, c)
}

#[test]
fn running_info_reports_queues_subscriptions_and_settings() {
    let (mut sim, c) = running();
    let ask = RemotingCommand::request(RequestCode::GetConsumerRunningInfo).with_opaque(77).with_header(
        &GetConsumerRunningInfoRequestHeader {
            consumer_group: "G".into(),
            client_id: "sim-0-1".into(),
            jstack_enable: None,
        },
    );
    sim.deliver_from_broker(c, 0, ask);
    let reply = sim.replies(c).last().unwrap().clone();
    assert!(reply.is_response());
    assert_eq!((reply.opaque, reply.code), (77, 0));
    let info = ConsumerRunningInfo::decode(&reply.body).unwrap();
    assert_eq!(info.properties.get("PROP_CONSUME_TYPE").map(String::as_str), Some("CONSUME_PASSIVELY"));
    assert_eq!(info.properties.get("pullBatchSize").map(String::as_str), Some("32"));
    let t0 = info.mq_table.iter().find(|(q, _)| *q == MessageQueue::new("T", "broker-a", 0)).unwrap();
    assert_eq!(t0.1.commit_offset, 5);
    assert!(info.subscription_set.iter().any(|s| s.topic == "%RETRY%G"));
    // Another group: an error answer, not silence.
    let other = RemotingCommand::request(RequestCode::GetConsumerRunningInfo).with_opaque(78).with_header(
        &GetConsumerRunningInfoRequestHeader {
            consumer_group: "X".into(),
            client_id: "sim-0-1".into(),
            jstack_enable: None,
        },
    );
    sim.deliver_from_broker(c, 0, other);
    assert_eq!(sim.replies(c).last().unwrap().code, ResponseCode::SystemError as i32);
}

#[test]
fn consumer_status_lists_offsets_of_the_topic() {
    let (mut sim, c) = running();
    let ask = RemotingCommand::request(RequestCode::GetConsumerStatusFromClient).with_opaque(5).with_header(
        &GetConsumerStatusRequestHeader { topic: "T".into(), group: "G".into(), client_addr: None },
    );
    sim.deliver_from_broker(c, 0, ask);
    let body = GetConsumerStatusBody::decode(&sim.replies(c).last().unwrap().body).unwrap();
    assert_eq!(body.message_queue_table.len(), 2);
    assert!(body.message_queue_table.iter().all(|(_, o)| *o == 5));
}

#[test]
fn consume_directly_runs_the_listener_and_reports() {
    let mut sim = Sim::builder(61).broker("broker-a", &[("T", 1)]).listener(|_, _, _| Verdict::LATER).build();
    let c = sim.add_consumer(sim.config("G").subscribe("T", "*"));
    sim.run_for(Duration::from_secs(2));
    let mut body = BytesMut::new();
    encode_stored(&MessageExt::new("T", "direct"), &mut body);
    let ask = RemotingCommand::request(RequestCode::ConsumeMessageDirectly)
        .with_opaque(9)
        .with_body(body.freeze())
        .with_header(&ConsumeMessageDirectlyResultRequestHeader {
            consumer_group: "G".into(),
            broker_name: Some("broker-a".into()),
            ..Default::default()
        });
    sim.deliver_from_broker(c, 0, ask);
    sim.run_for(Duration::from_millis(10));
    let reply = sim.replies(c).last().unwrap();
    assert_eq!((reply.opaque, reply.code), (9, 0));
    let r = ConsumeMessageDirectlyResult::decode(&reply.body).unwrap();
    assert_eq!(r.consume_result, CMResult::Later);
    assert!(sim.consumed().is_empty(), "a direct consume is not queue consumption");
    // A garbage body is answered with an error.
    let bad = RemotingCommand::request(RequestCode::ConsumeMessageDirectly)
        .with_opaque(10)
        .with_body(&b"junk"[..])
        .with_header(&ConsumeMessageDirectlyResultRequestHeader {
            consumer_group: "G".into(),
            ..Default::default()
        });
    sim.deliver_from_broker(c, 0, bad);
    assert_eq!(sim.replies(c).last().unwrap().code, ResponseCode::SystemError as i32);
}

#[test]
fn reset_offset_rewinds_the_held_queues_and_commits_the_new_offsets() {
    let (mut sim, c) = running();
    assert_eq!(sim.consumed().len(), 10);
    let body = ResetOffsetBody { offset_table: vec![(MessageQueue::new("T", "broker-a", 0), 2)] };
    let reset = RemotingCommand::request(RequestCode::ResetConsumerClientOffset)
        .oneway()
        .with_body(body.encode())
        .with_header(&ResetOffsetRequestHeader {
            topic: "T".into(),
            group: "G".into(),
            timestamp: 0,
            is_force: true,
            queue_id: None,
            offset: None,
        });
    sim.deliver_from_broker(c, 0, reset);
    sim.run_for(Duration::from_secs(6));
    assert!(sim.replies(c).is_empty(), "oneway: no answer");
    assert!(sim.events(c).iter().any(|e| matches!(e, Event::OffsetMoved { from: 5, to: 2, .. })));
    assert_eq!(sim.consumed().len(), 13, "offsets 2..5 of queue 0 again");
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(5));
}

#[test]
fn notify_triggers_a_rebalance_and_unknown_codes_are_refused() {
    let (mut sim, c) = running();
    let before = sim.transcript(c).iter().filter(|t| *t == "Transmit:GetConsumerListByGroup").count();
    let notify = RemotingCommand::request(RequestCode::NotifyConsumerIdsChanged).oneway();
    sim.deliver_from_broker(c, 0, notify);
    sim.run_for(Duration::from_millis(1100));
    let after = sim.transcript(c).iter().filter(|t| *t == "Transmit:GetConsumerListByGroup").count();
    assert!(after > before);
    let unknown = RemotingCommand::raw_request(12345).with_opaque(3);
    sim.deliver_from_broker(c, 0, unknown);
    let reply = sim.replies(c).last().unwrap();
    assert_eq!((reply.opaque, reply.code), (3, ResponseCode::RequestCodeNotSupported as i32));
}
