//! Frames captured from real Apache RocketMQ brokers (5.3.3, and 4.9.7 for the `_v4` files) by
//! `broker_wire.rs` with `RMQ_CAPTURE=1`, checked here without a broker: `cargo test` alone still
//! covers real bytes.

mod common;

use bytes::BytesMut;
use common::{assert_matches_java_manifest, data_path, load_golden};
use rocketmq_push_core::codec::RemotingCodec;
use rocketmq_push_core::message::{DecodeOptions, MessageExt, decode_messages, keys};
use rocketmq_push_core::protocol::body::{
    GetConsumerListByGroupResponseBody, JsonBody, ResetOffsetBody, TopicRouteData,
};
use rocketmq_push_core::protocol::header::{
    GetConsumerRunningInfoRequestHeader, NotifyConsumerIdsChangedRequestHeader, OffsetResponseHeader,
    PullMessageResponseHeader, ResetOffsetRequestHeader,
};
use rocketmq_push_core::protocol::{LanguageCode, RemotingCommand, RequestCode, ResponseCode, SerializeType};

fn frame(name: &str) -> RemotingCommand {
    let bytes = load_golden(name);
    let mut buf = BytesMut::from(&bytes[..]);
    let cmd =
        RemotingCodec::new().decode(&mut buf).unwrap_or_else(|e| panic!("{name}: {e}")).expect("whole frame");
    assert!(buf.is_empty(), "{name}: exactly one frame");
    cmd
}

fn messages(cmd: &RemotingCommand) -> Vec<MessageExt> {
    decode_messages(&cmd.body, &DecodeOptions::default()).expect("pull body decodes")
}

#[test]
fn route_answers_in_both_json_forms() {
    let std = frame("route_standard_json");
    assert_eq!((std.code, std.language, std.version), (0, LanguageCode::JAVA, 479));
    assert!(std.is_response());
    let route = TopicRouteData::decode(&std.body).unwrap();
    let topic = route.queue_datas[0].broker_name.clone();
    assert_eq!(route.queue_datas[0].read_queue_nums, 8);
    assert_eq!(route.broker(&topic).unwrap().master_or_any(), Some("127.0.0.1:10911"));
    for name in ["route_fastjson", "route_fastjson_v4"] {
        let f = frame(name);
        assert!(std::str::from_utf8(&f.body).unwrap().contains("{0:\""), "{name}: bare integer keys");
        let r = TopicRouteData::decode(&f.body).unwrap();
        assert_eq!(r.queue_datas[0].read_queue_nums, 8, "{name}");
        assert_eq!(r.broker_datas[0].broker_addrs.get(&0).map(String::as_str), Some("127.0.0.1:10911"));
    }
    assert_eq!(frame("route_fastjson_v4").version, 407, "4.9.7's MQVersion ordinal");
}

#[test]
fn pull_found_small_compressed_and_random_bodies() {
    for name in ["pull_found_three", "pull_found_three_v4"] {
        let f = frame(name);
        assert_eq!((f.code, f.remark.as_deref()), (0, Some("FOUND")), "{name}");
        let h: PullMessageResponseHeader = f.header().unwrap();
        assert_eq!(h.next_begin_offset, 3);
        let m = messages(&f);
        assert_eq!(m.len(), 3, "{name}");
        assert_eq!(&m[0].body[..], b"hello");
        assert_eq!(m[0].tags(), Some("TagA"));
        assert_eq!(m[0].keys().collect::<Vec<_>>(), ["k1", "k2"]);
        assert_eq!(m[0].property("unicode"), Some("中文😀"));
        let big: Vec<u8> = (0..6000u32).map(|i| b"RocketMQ-\xe4\xb8\xad"[i as usize % 12]).collect();
        assert_eq!(m[1].body, big, "{name}: zlib body inflated");
        assert_eq!(m[1].sys_flag & 0x701, 0x300, "{name}: stored as ZLIB, COMPRESSED cleared");
        let random: Vec<u8> = (0..5000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        assert_eq!(m[2].body, random);
        assert!(m.iter().enumerate().all(|(i, x)| x.queue_offset == i as i64 && x.queue_id == 5));
    }
}

#[test]
fn binary_request_answers() {
    let f = frame("pull_found_binary_request");
    assert_eq!(f.serialize_type, SerializeType::Json, "5.3.3 answers JSON whatever the request used");
    assert_eq!(&messages(&f)[0].body[..], b"binary-header");
}

#[test]
fn pull_statuses() {
    let nf = frame("pull_not_found");
    assert_eq!(nf.code, ResponseCode::PullNotFound as i32);
    assert_eq!(nf.header::<PullMessageResponseHeader>().unwrap().next_begin_offset, 0);
    assert!(nf.body.is_empty());
    let moved = frame("pull_offset_moved");
    assert_eq!(moved.code, ResponseCode::PullOffsetMoved as i32);
    let h: PullMessageResponseHeader = moved.header().unwrap();
    assert_eq!((h.min_offset, h.max_offset), (0, 1));
    let reset = frame("pull_offset_reset");
    assert_eq!(
        reset.code,
        ResponseCode::PullOffsetMoved as i32,
        "5.x server-side reset arrives as OFFSET_MOVED"
    );
    assert_eq!(reset.header::<PullMessageResponseHeader>().unwrap().next_begin_offset, 0);
}

#[test]
fn offsets_heartbeat_and_consumer_list() {
    let nf = frame("query_offset_not_found");
    assert_eq!(nf.code, ResponseCode::QueryNotFound as i32);
    let found = frame("query_offset_found");
    assert_eq!(found.header::<OffsetResponseHeader>().unwrap().offset, 2);
    let hb = frame("heartbeat_response");
    assert_eq!((hb.code, hb.version), (0, 479));
    assert_eq!(hb.ext_fields.get("IS_SUPPORT_HEART_BEAT_V2"), Some("true"));
    let list = GetConsumerListByGroupResponseBody::decode(&frame("consumer_list").body).unwrap();
    assert_eq!(list.consumer_id_list, ["127.0.0.1@wire-a"]);
    assert_eq!(frame("send_back_response").code, 0);
}

#[test]
fn lock_answer() {
    use rocketmq_push_core::MessageQueue;
    use rocketmq_push_core::protocol::body::LockBatchResponseBody;
    let lock = frame("lock_batch_mq_answer");
    assert_eq!(lock.code, 0);
    let mut got = LockBatchResponseBody::decode(&lock.body).unwrap().lock_ok_mq_set;
    got.sort();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].queue_id, 0);
    assert_eq!(&*got[1].broker_name, "broker-a");
    assert!(got.iter().all(|q: &MessageQueue| q.topic.starts_with("wire_lock")));
}

#[test]
fn broker_initiated_requests() {
    let n = frame("notify_consumer_ids_changed");
    assert_eq!(n.request_code(), Some(RequestCode::NotifyConsumerIdsChanged));
    assert!(n.is_oneway() && !n.is_response());
    assert!(n.header::<NotifyConsumerIdsChangedRequestHeader>().unwrap().consumer_group.starts_with("g_hb_"));

    let r = frame("reset_offset_request_v4");
    assert_eq!(r.request_code(), Some(RequestCode::ResetConsumerClientOffset));
    let h: ResetOffsetRequestHeader = r.header().unwrap();
    assert!(h.group.starts_with("g_reset_"));
    assert!(std::str::from_utf8(&r.body).unwrap().contains("{{"), "fastjson object keys on the wire");
    let body = ResetOffsetBody::decode(&r.body).unwrap();
    assert_eq!(body.offset_table.len(), 2);
    assert!(body.offset_table.iter().all(|(q, o)| *o == 0 && q.topic.as_ref() == h.topic));

    let ri = frame("running_info_request");
    assert_eq!(ri.request_code(), Some(RequestCode::GetConsumerRunningInfo));
    let h: GetConsumerRunningInfoRequestHeader = ri.header().unwrap();
    assert_eq!(h.client_id, "127.0.0.1@wire-reset");
}

#[test]
fn retried_message_from_the_retry_topic() {
    let m = messages(&frame("pull_retry_topic"));
    assert_eq!(m.len(), 1);
    assert_eq!(&m[0].body[..], b"retry me");
    assert_eq!(m[0].reconsume_times, 1);
    assert!(m[0].topic.starts_with("%RETRY%g_back_"));
    assert!(m[0].property(keys::RETRY_TOPIC).is_some_and(|t| t.starts_with("wire_back_")));
    assert_eq!(m[0].msg_id(), "AABBCCDD000000000000000000000001");
}

#[test]
fn java_producer_messages_match_the_java_clients_view() {
    for kind in ["zlib", "lz4", "zstd"] {
        let name = format!("java_producer_{kind}");
        let manifest = std::fs::read_to_string(data_path(&format!("{name}.jsonl"))).unwrap();
        assert_matches_java_manifest(&manifest, &messages(&frame(&name)));
    }
}

#[test]
fn pop_answers_give_every_message_a_receipt() {
    use rocketmq_push_core::protocol::header::{ChangeInvisibleTimeResponseHeader, PopMessageResponseHeader};
    use rocketmq_push_core::protocol::receipt::{PopReceipt, RetryFlag, attach_receipts};
    let f = frame("pop_found");
    let h: PopMessageResponseHeader = f.header().unwrap();
    assert_eq!((h.invisible_time, h.msg_offset_info.as_deref()), (5_000, Some("0 1 0;0 0 0,1")));
    let mut m = messages(&f);
    let topic = m[0].topic.to_string();
    let receipts = attach_receipts(&mut m, &h, "broker-a", &topic).unwrap();
    let got: Vec<(i32, i64, i64)> =
        receipts.iter().map(|r| (r.queue_id, r.queue_offset, r.ck_queue_offset)).collect();
    assert_eq!(got, [(1, 0, 0), (0, 0, 0), (0, 1, 0)], "queue 0's two messages share its checkpoint");
    assert!(receipts.iter().all(|r| r.pop_time == h.pop_time && r.retry == RetryFlag::Normal));

    // A revived message: the broker's receipt names the pop retry topic; the message the topic.
    let f = frame("pop_found_revived");
    let h: PopMessageResponseHeader = f.header().unwrap();
    let mut m = messages(&f);
    let sent = m[0].property(keys::POP_CK).expect("the broker set POP_CK").to_owned();
    let subscribed = m[0].topic.to_string();
    let receipts = attach_receipts(&mut m, &h, "broker-a", &subscribed).unwrap();
    assert_eq!(receipts[0], PopReceipt::parse(&sent).unwrap());
    assert_eq!(receipts[0].retry, RetryFlag::RetryV1);
    assert_eq!(m[0].reconsume_times, 1);
    assert!(receipts[0].retry.real_topic(&subscribed, "g").starts_with("%RETRY%g_"));

    let f = frame("change_invisible_time_ok");
    let h: ChangeInvisibleTimeResponseHeader = f.header().unwrap();
    assert_eq!(h.invisible_time, 1_000);
    assert_eq!((frame("ack_message_ok").code, frame("ack_message_ok").body.len()), (0, 0));
}

#[test]
fn assignment_answers_before_and_after_the_switch_to_pop() {
    use rocketmq_push_core::protocol::body::{MessageRequestMode, QueryAssignmentResponseBody};
    let pull = QueryAssignmentResponseBody::decode(&frame("query_assignment_pull").body).unwrap();
    let mut pull = pull.message_queue_assignments.unwrap();
    pull.sort_by_key(|a| a.message_queue.queue_id);
    assert_eq!(
        pull.iter().map(|a| (a.message_queue.queue_id, a.mode)).collect::<Vec<_>>(),
        [(0, MessageRequestMode::Pull), (1, MessageRequestMode::Pull)]
    );
    let pop = QueryAssignmentResponseBody::decode(&frame("query_assignment_pop").body).unwrap();
    let pop = pop.message_queue_assignments.unwrap();
    assert_eq!((pop.len(), pop[0].message_queue.queue_id, pop[0].mode), (1, -1, MessageRequestMode::Pop));
}
