//! Wire tests against a real Apache RocketMQ name server and broker (`scripts/rocketmq.sh start`).
//! Each test uses its own topic and group. With `RMQ_CAPTURE=1` they also write the golden frames
//! in `tests/data/` that `golden_frames.rs` checks without a broker.
#![allow(clippy::disallowed_methods)] // real sockets and clocks: this is the I/O side of the tests

mod common;

use std::time::{Duration, Instant};

use common::ops::*;
use common::*;
use rocketmq_push_core::MessageQueue;
use rocketmq_push_core::message::{Message, keys};
use rocketmq_push_core::producer::retry_topic;
use rocketmq_push_core::protocol::body::{
    ConsumerRunningInfo, GetConsumerListByGroupResponseBody, JsonBody, ResetOffsetBody, TopicRouteData,
};
use rocketmq_push_core::protocol::header::{
    ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader, GetMaxOffsetRequestHeader,
    GetRouteInfoRequestHeader, OffsetResponseHeader, QueryConsumerOffsetRequestHeader,
    ResetOffsetRequestHeader, SearchOffsetRequestHeader, UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use rocketmq_push_core::protocol::{RemotingCommand, RequestCode, ResponseCode, SerializeType};

#[test]
fn route_lookup_after_creating_a_topic_with_8_queues() {
    let Some(env) = broker_env() else { return };
    let topic = unique("wire_route");
    let mut b = Conn::connect(&env.broker);
    create_topic(&mut b, &topic, 8);
    let mut ns = Conn::connect(&env.namesrv);
    let (resp, route) = route(&mut ns, &topic);
    capture(
        "route_standard_json",
        "GET_ROUTEINFO_BY_TOPIC answer to version 475: standard JSON",
        &ns.last_raw(),
    );
    let queues = route.subscribe_queues(&topic);
    assert_eq!(queues.len(), 8);
    assert_eq!(route.broker(&queues[0].broker_name).unwrap().master_or_any(), Some(env.broker.as_str()));
    assert!(
        std::str::from_utf8(&resp.body).unwrap().contains(r#"{"0":""#),
        "version >= 401 gets quoted keys"
    );

    // The same lookup as Go sends it (version 317): fastjson's bare integer keys, still decoded.
    let mut old = RemotingCommand::request(RequestCode::GetRouteInfoByTopic)
        .with_header(&GetRouteInfoRequestHeader { topic: topic.clone(), accept_standard_json_only: None });
    old.version = 317;
    let resp = ns.call(old, T);
    capture(
        "route_fastjson",
        "GET_ROUTEINFO_BY_TOPIC answer to version 317: fastjson bare integer keys",
        &ns.last_raw(),
    );
    assert!(std::str::from_utf8(&resp.body).unwrap().contains("{0:\""), "old clients get bare keys");
    assert_eq!(TopicRouteData::decode(&resp.body).unwrap().subscribe_queues(&topic), queues);

    // Unknown topic: TOPIC_NOT_EXIST with a remark, no panic anywhere.
    let r = ns.call(
        RemotingCommand::request(RequestCode::GetRouteInfoByTopic).with_header(&GetRouteInfoRequestHeader {
            topic: unique("wire_missing"),
            accept_standard_json_only: None,
        }),
        T,
    );
    assert_eq!(r.code, ResponseCode::TopicNotExist as i32);
}

#[test]
fn both_header_encodings_are_accepted() {
    let Some(env) = broker_env() else { return };
    let topic = unique("wire_enc");
    let mut b = Conn::connect(&env.broker);
    b.serialize = SerializeType::RocketMq;
    create_topic(&mut b, &topic, 2);
    let q = MessageQueue::new(topic.as_str(), "broker-a", 0);
    let r = send(&mut b, &Message::new(&topic, "binary-header"), &q, false);
    assert_eq!(r.queue_offset, 0);
    let msgs = pull_n(&mut b, "g_enc", &q, 0, 1, T);
    let answered_in =
        rocketmq_push_core::codec::decode_frame_body(bytes::Bytes::from(b.last_raw()).slice(4..))
            .unwrap()
            .serialize_type;
    eprintln!("fact: a binary-header PULL_MESSAGE was answered in {answered_in:?}");
    capture(
        "pull_found_binary_request",
        "PULL_MESSAGE FOUND answering a ROCKETMQ-encoded request",
        &b.last_raw(),
    );
    assert_eq!(msgs.len(), 1);
    assert_eq!(&msgs[0].body[..], b"binary-header");
}

#[test]
fn send_v2_with_big_body_and_unicode_properties_then_pull_decodes_exactly() {
    let Some(env) = broker_env() else { return };
    let topic = unique("wire_send");
    let mut b = Conn::connect(&env.broker);
    create_topic(&mut b, &topic, 8);
    let q = MessageQueue::new(topic.as_str(), "broker-a", 5);
    let big: Vec<u8> = (0..6000u32).map(|i| b"RocketMQ-\xe4\xb8\xad"[i as usize % 12]).collect();
    let random: Vec<u8> = (0..5000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let sent = [
        Message::new(&topic, "hello")
            .with_tags("TagA")
            .with_keys(["k1", "k2"])
            .with_property("unicode", "中文😀")
            .with_property("color", "red"),
        Message::new(&topic, big.clone()).with_tags("Big"),
        Message::new(&topic, random.clone()),
    ];
    for (i, m) in sent.iter().enumerate() {
        let m = m.clone().with_property(keys::UNIQ_KEY, &format!("7F00000100002A9F00000000000000{i:02X}"));
        // The big body goes compressed (zlib, as Java's default producer would), the rest plain.
        let r = send(&mut b, &m, &q, i == 1);
        assert_eq!(r.queue_offset, i as i64);
    }
    let got = pull_n(&mut b, "g_send", &q, 0, 3, T);
    capture(
        "pull_found_three",
        "PULL_MESSAGE FOUND: small+unicode, 6000-byte zlib-compressed, 5000 random bytes",
        &b.last_raw(),
    );
    assert_eq!(got.len(), 3);
    assert_eq!(&got[0].body[..], b"hello");
    assert_eq!(got[0].tags(), Some("TagA"));
    assert_eq!(got[0].keys().collect::<Vec<_>>(), ["k1", "k2"]);
    assert_eq!(got[0].property("unicode"), Some("中文😀"));
    assert_eq!(got[0].msg_id(), "7F00000100002A9F0000000000000000");
    assert_eq!(got[0].store_host.to_string(), env.broker);
    assert_eq!(got[1].body, big, "compressed body inflated");
    assert!(!got[1].is_compressed());
    assert_eq!(got[2].body, random);
    for (i, m) in got.iter().enumerate() {
        assert_eq!((m.queue_id, m.queue_offset, &*m.topic), (5, i as i64, topic.as_str()));
        assert_eq!(m.reconsume_times, 0);
        assert!(m.store_timestamp >= m.born_timestamp);
    }
}

#[test]
fn pull_statuses_found_no_new_msg_and_offset_moved() {
    let Some(env) = broker_env() else { return };
    let topic = unique("wire_pull");
    let mut b = Conn::connect(&env.broker);
    create_topic(&mut b, &topic, 2);
    let q = MessageQueue::new(topic.as_str(), "broker-a", 1);

    // Empty queue, no suspend flag: PULL_NOT_FOUND at once.
    let (r, h, _) = pull(&mut b, "g_pull", &q, 0);
    assert_eq!(r.code, ResponseCode::PullNotFound as i32, "{:?}", r.remark);
    capture("pull_not_found", "PULL_MESSAGE NO_NEW_MSG on an empty queue", &b.last_raw());
    assert_eq!(h.next_begin_offset, 0);

    // With the suspend flag and a short hold: the broker keeps it, then answers PULL_NOT_FOUND.
    let started = Instant::now();
    let held = pull_header("g_pull", &q, 0, 0x4 | 0x2, 1000);
    let r = b
        .call(RemotingCommand::request(RequestCode::PullMessage).with_header(&held), Duration::from_secs(20));
    let waited = started.elapsed();
    assert_eq!(r.code, ResponseCode::PullNotFound as i32);
    assert!(waited >= Duration::from_millis(900), "held for {waited:?}");
    eprintln!("fact: a 1000 ms suspended pull came back after {waited:?}");

    send(&mut b, &Message::new(&topic, "one"), &q, false);
    let msgs = pull_n(&mut b, "g_pull", &q, 0, 1, T);
    assert_eq!(msgs.len(), 1);
    let (r, h, _) = pull(&mut b, "g_pull", &q, 0);
    assert_eq!((r.code, h.next_begin_offset, h.max_offset), (0, 1, 1));

    // Far beyond the max: PULL_OFFSET_MOVED with a corrected next offset.
    let (r, h, _) = pull(&mut b, "g_pull", &q, 1000);
    capture("pull_offset_moved", "PULL_MESSAGE OFFSET_MOVED (offset 1000, max 1)", &b.last_raw());
    assert_eq!(r.code, ResponseCode::PullOffsetMoved as i32, "{:?}", r.remark);
    assert!(h.next_begin_offset <= 1, "next {}", h.next_begin_offset);
}

#[test]
fn query_and_update_consumer_offset() {
    let Some(env) = broker_env() else { return };
    let topic = unique("wire_off");
    let group = unique("g_off");
    let mut b = Conn::connect(&env.broker);
    create_topic(&mut b, &topic, 2);
    let q = MessageQueue::new(topic.as_str(), "broker-a", 0);
    for i in 0..3 {
        send(&mut b, &Message::new(&topic, format!("m{i}")), &q, false);
    }
    let query = |b: &mut Conn, zero: Option<bool>| {
        b.call(
            RemotingCommand::request(RequestCode::QueryConsumerOffset).with_header(
                &QueryConsumerOffsetRequestHeader {
                    consumer_group: group.clone(),
                    topic: topic.clone(),
                    queue_id: 0,
                    set_zero_if_not_found: zero,
                    bname: None,
                },
            ),
            T,
        )
    };
    // "No offset" is an answer of its own, never confused with an error. 5.x honours
    // setZeroIfNotFound=false; 4.9.x ignores it and answers 0 for a young queue.
    let r = query(&mut b, Some(false));
    if is_v4() {
        assert_eq!((r.code, r.header::<OffsetResponseHeader>().unwrap().offset), (0, 0), "{:?}", r.remark);
    } else {
        assert_eq!(r.code, ResponseCode::QueryNotFound as i32, "{:?}", r.remark);
    }
    capture(
        "query_offset_not_found",
        "QUERY_CONSUMER_OFFSET with setZeroIfNotFound=false on a new group",
        &b.last_raw(),
    );
    let r = query(&mut b, None);
    eprintln!(
        "fact: without setZeroIfNotFound a new group's offset query answers code {} ({:?})",
        r.code, r.remark
    );

    // The broker refuses offsets of a group it has never seen (5.3.3: SUBSCRIPTION_GROUP_NOT_EXIST);
    // a consumer always heartbeats first.
    let early = b.call(
        RemotingCommand::request(RequestCode::UpdateConsumerOffset).with_header(
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: group.clone(),
                topic: topic.clone(),
                queue_id: 0,
                commit_offset: 1,
                bname: None,
            },
        ),
        T,
    );
    eprintln!("fact: UPDATE_CONSUMER_OFFSET before any heartbeat answered {} {:?}", early.code, early.remark);
    heartbeat(&mut b, "127.0.0.1@wire-off", &group, &[&topic]);
    let update = |offset| {
        RemotingCommand::request(RequestCode::UpdateConsumerOffset).with_header(
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: group.clone(),
                topic: topic.clone(),
                queue_id: 0,
                commit_offset: offset,
                bname: None,
            },
        )
    };
    let r = b.call(update(2), T);
    assert_eq!(r.code, 0);
    let r = query(&mut b, Some(false));
    assert_eq!(r.code, 0);
    capture("query_offset_found", "QUERY_CONSUMER_OFFSET after committing 2", &b.last_raw());
    assert_eq!(r.header::<OffsetResponseHeader>().unwrap().offset, 2);
    // Oneway, as Java persists offsets.
    b.oneway(update(3));
    let deadline = Instant::now() + T;
    loop {
        let r = query(&mut b, Some(false));
        if r.header::<OffsetResponseHeader>().map(|h| h.offset) == Ok(3) {
            break;
        }
        assert!(Instant::now() < deadline, "oneway update never applied");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Max offset and search by timestamp.
    let r = b.call(
        RemotingCommand::request(RequestCode::GetMaxOffset).with_header(&GetMaxOffsetRequestHeader {
            topic: topic.clone(),
            queue_id: 0,
            committed: Some(true),
            bname: None,
        }),
        T,
    );
    assert_eq!(r.header::<OffsetResponseHeader>().unwrap().offset, 3);
    let r = b.call(
        RemotingCommand::request(RequestCode::SearchOffsetByTimestamp).with_header(
            &SearchOffsetRequestHeader {
                topic: topic.clone(),
                queue_id: 0,
                timestamp: 0,
                boundary_type: None,
                bname: None,
            },
        ),
        T,
    );
    assert_eq!(r.header::<OffsetResponseHeader>().unwrap().offset, 0);
}

#[test]
fn heartbeat_then_consumer_list_then_notify_and_unregister() {
    let Some(env) = broker_env() else { return };
    let topic = unique("wire_hb");
    let group = unique("g_hb");
    let mut b = Conn::connect(&env.broker);
    create_topic(&mut b, &topic, 2);
    let r = heartbeat(&mut b, "127.0.0.1@wire-a", &group, &[&topic, &retry_topic(&group)]);
    capture("heartbeat_response", "HEART_BEAT answer", &b.last_raw());
    eprintln!("fact: heartbeat answer version {} ext {:?}", r.version, r.ext_fields);
    let list = |b: &mut Conn| {
        b.call(
            RemotingCommand::request(RequestCode::GetConsumerListByGroup)
                .with_header(&GetConsumerListByGroupRequestHeader { consumer_group: group.clone() }),
            T,
        )
    };
    let r = list(&mut b);
    assert_eq!(r.code, 0, "{:?}", r.remark);
    capture("consumer_list", "GET_CONSUMER_LIST_BY_GROUP with one member", &b.last_raw());
    let ids = GetConsumerListByGroupResponseBody::decode(&r.body).unwrap().consumer_id_list;
    assert_eq!(ids, ["127.0.0.1@wire-a"]);

    // A second member joins on its own connection: the first is told at once (oneway request 40).
    let mut b2 = Conn::connect(&env.broker);
    heartbeat(&mut b2, "127.0.0.1@wire-b", &group, &[&topic]);
    let notify =
        b.wait_request(RequestCode::NotifyConsumerIdsChanged as i32, T).expect("NOTIFY_CONSUMER_IDS_CHANGED");
    capture(
        "notify_consumer_ids_changed",
        "broker → client NOTIFY_CONSUMER_IDS_CHANGED",
        &b.last_request_raw,
    );
    assert!(notify.is_oneway());
    assert_eq!(notify.ext_fields.get("consumerGroup"), Some(group.as_str()));
    let mut ids = GetConsumerListByGroupResponseBody::decode(&list(&mut b).body).unwrap().consumer_id_list;
    ids.sort();
    assert_eq!(ids, ["127.0.0.1@wire-a", "127.0.0.1@wire-b"]);

    // Unregister the second: the list shrinks.
    let r = b2.call(
        RemotingCommand::request(RequestCode::UnregisterClient).with_header(&UnregisterClientRequestHeader {
            client_id: "127.0.0.1@wire-b".into(),
            producer_group: None,
            consumer_group: Some(group.clone()),
        }),
        T,
    );
    assert_eq!(r.code, 0);
    let ids = GetConsumerListByGroupResponseBody::decode(&list(&mut b).body).unwrap().consumer_id_list;
    assert_eq!(ids, ["127.0.0.1@wire-a"]);
}

#[test]
fn send_back_lands_in_the_retry_topic() {
    let Some(env) = broker_env() else { return };
    let topic = unique("wire_back");
    let group = unique("g_back");
    let mut b = Conn::connect(&env.broker);
    create_topic(&mut b, &topic, 2);
    heartbeat(&mut b, "127.0.0.1@wire-back", &group, &[&topic, &retry_topic(&group)]);
    let q = MessageQueue::new(topic.as_str(), "broker-a", 0);
    let m = Message::new(&topic, "retry me")
        .with_tags("T1")
        .with_property(keys::UNIQ_KEY, "AABBCCDD000000000000000000000001");
    send(&mut b, &m, &q, false);
    let got = pull_n(&mut b, &group, &q, 0, 1, T);
    let original = &got[0];
    let r = b.call(
        RemotingCommand::request(RequestCode::ConsumerSendMsgBack).with_header(
            &ConsumerSendMsgBackRequestHeader {
                offset: original.commit_log_offset,
                group: group.clone(),
                delay_level: 1,
                origin_msg_id: Some(original.msg_id().into_owned()),
                origin_topic: Some(topic.clone()),
                unit_mode: Some(false),
                max_reconsume_times: Some(16),
                bname: Some("broker-a".into()),
            },
        ),
        T,
    );
    assert_eq!(r.code, 0, "send back: {:?}", r.remark);
    capture("send_back_response", "CONSUMER_SEND_MSG_BACK answer", &b.last_raw());

    let rq = MessageQueue::new(retry_topic(&group).as_str(), "broker-a", 0);
    let retried = pull_n(&mut b, &group, &rq, 0, 1, Duration::from_secs(30));
    capture("pull_retry_topic", "PULL_MESSAGE FOUND from %RETRY%group after a send-back", &b.last_raw());
    assert_eq!(retried.len(), 1, "message reached %RETRY%{group}");
    let r = &retried[0];
    assert_eq!(&r.body[..], b"retry me");
    assert_eq!(r.reconsume_times, 1);
    assert_eq!(r.property(keys::RETRY_TOPIC), Some(topic.as_str()));
    assert_eq!(r.tags(), Some("T1"));
    assert_eq!(r.msg_id(), "AABBCCDD000000000000000000000001", "UNIQ_KEY survives the retry");
    assert!(r.property(keys::ORIGIN_MESSAGE_ID).is_some());
}

#[test]
fn broker_initiated_reset_offset_and_running_info() {
    let Some(env) = broker_env() else { return };
    let topic = unique("wire_reset");
    let group = unique("g_reset");
    let client_id = "127.0.0.1@wire-reset";
    let mut b = Conn::connect(&env.broker);
    create_topic(&mut b, &topic, 2);
    let q = MessageQueue::new(topic.as_str(), "broker-a", 0);
    for i in 0..2 {
        send(&mut b, &Message::new(&topic, format!("r{i}")), &q, false);
    }
    heartbeat(&mut b, client_id, &group, &[&topic]);
    // Commit on every queue: the 4.9 reset path refuses a group with any queue lacking an offset.
    for queue_id in 0..2 {
        let r = b.call(
            RemotingCommand::request(RequestCode::UpdateConsumerOffset).with_header(
                &UpdateConsumerOffsetRequestHeader {
                    consumer_group: group.clone(),
                    topic: topic.clone(),
                    queue_id,
                    commit_offset: if queue_id == 0 { 2 } else { 0 },
                    bname: None,
                },
            ),
            T,
        );
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }

    // What `mqadmin resetOffsetByTime` does: INVOKE_BROKER_TO_RESET_OFFSET (222) to the broker,
    // which pushes RESET_CONSUMER_CLIENT_OFFSET (220) to every client of the group.
    let mut admin = Conn::connect(&env.broker);
    let invoke = RemotingCommand::raw_request(222).with_header(&ResetOffsetRequestHeader {
        topic: topic.clone(),
        group: group.clone(),
        timestamp: 0,
        is_force: true,
        queue_id: None,
        offset: None,
    });
    let r = admin.call(invoke, T);
    eprintln!("fact: INVOKE_BROKER_TO_RESET_OFFSET answered {} {:?}", r.code, r.remark);
    assert_eq!(r.code, 0, "{:?}", r.remark);
    match b.wait_request(RequestCode::ResetConsumerClientOffset as i32, Duration::from_secs(3)) {
        // 4.9.x (and 5.x with useServerSideResetOffset=false): the broker pushes the new offsets.
        Some(reset) => {
            eprintln!("fact: the broker pushed RESET_CONSUMER_CLIENT_OFFSET");
            capture(
                "reset_offset_request",
                "broker → client RESET_CONSUMER_CLIENT_OFFSET with a ResetOffsetBody (fastjson object keys)",
                &b.last_request_raw,
            );
            let h: ResetOffsetRequestHeader = reset.header().unwrap();
            assert_eq!((h.topic.as_str(), h.group.as_str()), (topic.as_str(), group.as_str()));
            let body = ResetOffsetBody::decode(&reset.body).expect("fastjson object-keyed map decodes");
            assert!(body.offset_table.contains(&(q.clone(), 0)), "{:?}", body.offset_table);
        }
        // 5.x default (useServerSideResetOffset=true): nothing is pushed; the next pull of the
        // queue answers PULL_OFFSET_MOVED with the reset offset.
        None => {
            eprintln!("fact: no RESET_CONSUMER_CLIENT_OFFSET push; server-side reset");
            let (r, h, _) = pull(&mut b, &group, &q, 2);
            capture("pull_offset_reset", "PULL_MESSAGE after a server-side offset reset", &b.last_raw());
            assert_eq!(r.code, ResponseCode::PullOffsetMoved as i32, "{:?}", r.remark);
            assert_eq!(h.next_begin_offset, 0);
        }
    }

    // GET_CONSUMER_RUNNING_INFO relayed by the broker: we answer as the client.
    let ask = RemotingCommand::request(RequestCode::GetConsumerRunningInfo).with_header(
        &rocketmq_push_core::protocol::header::GetConsumerRunningInfoRequestHeader {
            consumer_group: group.clone(),
            client_id: client_id.into(),
            jstack_enable: Some(false),
        },
    );
    let mut admin2 = Conn::connect(&env.broker);
    let opaque_admin = std::thread::spawn(move || admin2.call(ask, Duration::from_secs(15)));
    let req =
        b.wait_request(RequestCode::GetConsumerRunningInfo as i32, T).expect("relayed running-info request");
    capture("running_info_request", "broker → client GET_CONSUMER_RUNNING_INFO", &b.last_request_raw);
    let mut info = ConsumerRunningInfo::default();
    info.properties.insert("PROP_CONSUME_TYPE".into(), "CONSUME_PASSIVELY".into());
    info.mq_table.push((q.clone(), Default::default()));
    b.reply(RemotingCommand::response_to(&req, ResponseCode::Success).with_body(info.encode()));
    let answer = opaque_admin.join().unwrap();
    assert_eq!(answer.code, 0, "{:?}", answer.remark);
    let back = ConsumerRunningInfo::decode(&answer.body).expect("relayed body decodes");
    assert_eq!(back.mq_table[0].0, q, "the broker relayed our fastjson-keyed map");
}

#[test]
fn messages_from_the_real_java_producer_decode_exactly() {
    let Some(env) = broker_env() else { return };
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/java-producer.sh");
    for kind in ["ZLIB", "LZ4", "ZSTD"] {
        let topic = unique(&format!("wire_java_{}", kind.to_lowercase()));
        let mut b = Conn::connect(&env.broker);
        create_topic(&mut b, &topic, 8);
        let manifest = std::env::temp_dir().join(format!("{topic}.jsonl"));
        let out = std::process::Command::new(&script)
            .args([env.namesrv.as_str(), topic.as_str(), manifest.to_str().unwrap(), kind])
            .output()
            .expect("run scripts/java-producer.sh");
        assert!(out.status.success(), "java producer: {}", String::from_utf8_lossy(&out.stderr));
        let manifest_text = std::fs::read_to_string(&manifest).unwrap();
        let want = manifest_text.lines().filter(|l| !l.trim().is_empty()).count();
        let q = MessageQueue::new(topic.as_str(), "broker-a", 0);
        assert_eq!(pull_n(&mut b, "g_java", &q, 0, want, T).len(), want);
        // One pull from 0 now carries every message in a single frame: that frame is the golden.
        let (_, _, got) = pull(&mut b, "g_java", &q, 0);
        let name = format!("java_producer_{}", kind.to_lowercase());
        capture(
            &name,
            &format!("PULL_MESSAGE FOUND: messages from the Java producer, {kind} compression"),
            &b.last_raw(),
        );
        if std::env::var("RMQ_CAPTURE").as_deref() == Ok("1") {
            std::fs::write(data_path(&format!("{name}.jsonl")), &manifest_text).unwrap();
        }
        assert_matches_java_manifest(&manifest_text, &got);
        let compressed = got.iter().filter(|m| m.body.len() >= 4096).count();
        assert_eq!(compressed, 2, "{kind}: both ≥ 4 KiB bodies came compressed and were inflated");
        let _ = std::fs::remove_file(manifest);
    }
}

#[test]
fn lock_batch_mq_grants_one_owner_until_it_unlocks() {
    use rocketmq_push_core::protocol::body::{LockBatchRequestBody, LockBatchResponseBody};
    let Some(env) = broker_env() else { return };
    let (topic, group) = (unique("wire_lock"), unique("g_lock"));
    let mut b = Conn::connect(&env.broker);
    create_topic(&mut b, &topic, 2);
    let mqs: Vec<MessageQueue> = (0..2).map(|q| MessageQueue::new(topic.as_str(), "broker-a", q)).collect();
    let body = |client: &str, mqs: &[MessageQueue]| LockBatchRequestBody {
        consumer_group: group.clone(),
        client_id: client.to_owned(),
        only_this_broker: false,
        mq_set: mqs.to_vec(),
    };
    let lock = |b: &mut Conn, client: &str, mqs: &[MessageQueue]| {
        let r = b.call(
            RemotingCommand::request(RequestCode::LockBatchMq).with_body(body(client, mqs).encode()),
            T,
        );
        assert_eq!(r.code, ResponseCode::Success as i32, "{}", r.remark_str());
        let mut got = LockBatchResponseBody::decode(&r.body).unwrap().lock_ok_mq_set;
        got.sort();
        got
    };
    // No registration needed; the first client gets both, a second gets none, the first renews.
    assert_eq!(lock(&mut b, "client-a", &mqs), mqs);
    capture("lock_batch_mq_answer", "LOCK_BATCH_MQ answer granting two queues", &b.last_raw());
    assert_eq!(lock(&mut b, "client-b", &mqs), Vec::<MessageQueue>::new());
    assert_eq!(lock(&mut b, "client-a", &mqs), mqs, "renewal by the owner");
    // Unlocking one queue lets the other client take exactly that one.
    let r = b.call(
        RemotingCommand::request(RequestCode::UnlockBatchMq).with_body(body("client-a", &mqs[..1]).encode()),
        T,
    );
    assert_eq!(r.code, ResponseCode::Success as i32, "{}", r.remark_str());
    assert_eq!(lock(&mut b, "client-b", &mqs), mqs[..1].to_vec());
    // An unlock by a non-owner changes nothing.
    b.call(
        RemotingCommand::request(RequestCode::UnlockBatchMq).with_body(body("client-b", &mqs[1..]).encode()),
        T,
    );
    assert_eq!(lock(&mut b, "client-b", &mqs[1..]), Vec::<MessageQueue>::new());
}
