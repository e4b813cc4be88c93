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

/// The 4.9.x broker (4.9.7: the 4.9.8 server jars are not on Maven Central).
fn is_v4() -> bool {
    std::env::var("RMQ_SERVER_VERSION").is_ok_and(|v| v.starts_with("4."))
}

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

/// POP over remoting, as the Java 5.x client speaks it: a group switched to POP is assigned
/// "every queue" (-1) by QUERY_ASSIGNMENT; a pop long-polls and returns receipts; an ack keeps a
/// message from coming back; a change of invisible time and a message nobody acked both come back
/// from the pop retry topic, with the broker's own receipt. 4.9 has none of it and says so.
#[test]
fn pop_mode_assignment_pop_ack_change_invisible_and_revive() {
    use rocketmq_push_core::message::DecodeOptions;
    use rocketmq_push_core::protocol::body::{
        MessageModel, MessageRequestMode, QueryAssignmentRequestBody, QueryAssignmentResponseBody,
        SetMessageRequestModeRequestBody,
    };
    use rocketmq_push_core::protocol::header::{
        AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
        PopMessageRequestHeader, PopMessageResponseHeader,
    };
    use rocketmq_push_core::protocol::receipt::{PopReceipt, RetryFlag, attach_receipts};
    let Some(env) = broker_env() else { return };
    let (topic, group) = (unique("wire_pop"), unique("g_pop"));
    let mut b = Conn::connect(&env.broker);
    create_topic(&mut b, &topic, 2);
    heartbeat(&mut b, "pop-client@1", &group, &[&topic]);
    let assignment = |b: &mut Conn| {
        let body = QueryAssignmentRequestBody {
            topic: topic.clone(),
            consumer_group: group.clone(),
            client_id: "pop-client@1".into(),
            strategy_name: "AVG".into(),
            message_model: MessageModel::Clustering,
        };
        let r = b.call(RemotingCommand::request(RequestCode::QueryAssignment).with_body(body.encode()), T);
        (r.code, QueryAssignmentResponseBody::decode(&r.body).ok())
    };
    let set_mode = |b: &mut Conn, mode| {
        let body = SetMessageRequestModeRequestBody {
            topic: topic.clone(),
            consumer_group: group.clone(),
            mode,
            pop_share_queue_num: 0,
        };
        b.call(RemotingCommand::request(RequestCode::SetMessageRequestMode).with_body(body.encode()), T)
    };
    if is_v4() {
        let (code, _) = assignment(&mut b);
        assert_eq!(code, ResponseCode::RequestCodeNotSupported as i32, "4.9 has no QUERY_ASSIGNMENT");
        let pop = RemotingCommand::request(RequestCode::PopMessage);
        assert_eq!(b.call(pop, T).code, ResponseCode::RequestCodeNotSupported as i32);
        return;
    }

    // Never switched: PULL, real queue ids, the client's share (all of them: it is alone).
    let (code, body) = assignment(&mut b);
    assert_eq!(code, 0);
    capture("query_assignment_pull", "QUERY_ASSIGNMENT answer for a group never switched", &b.last_raw());
    let mut pull = body.unwrap().message_queue_assignments.expect("a known group gets an answer");
    pull.sort_by_key(|a| a.message_queue.queue_id);
    assert_eq!(
        pull.iter().map(|a| (a.message_queue.queue_id, a.mode)).collect::<Vec<_>>(),
        [(0, MessageRequestMode::Pull), (1, MessageRequestMode::Pull)]
    );
    let r = set_mode(&mut b, MessageRequestMode::Pop);
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let (_, body) = assignment(&mut b);
    capture("query_assignment_pop", "QUERY_ASSIGNMENT answer after setConsumeMode POP", &b.last_raw());
    let pop_assignment = body.unwrap().message_queue_assignments.unwrap();
    assert_eq!(pop_assignment.len(), 1, "{pop_assignment:?}");
    assert_eq!(
        (pop_assignment[0].message_queue.queue_id, pop_assignment[0].mode),
        (-1, MessageRequestMode::Pop)
    );
    let broker_name = pop_assignment[0].message_queue.broker_name.to_string();

    for i in 0..3 {
        let q = MessageQueue::new(topic.as_str(), broker_name.as_str(), i % 2);
        send(&mut b, &Message::new(topic.as_str(), format!("pop-{i}").into_bytes()), &q, false);
    }
    let pop = |b: &mut Conn, invisible_ms: i64| {
        let h = PopMessageRequestHeader {
            consumer_group: group.clone(),
            topic: topic.clone(),
            queue_id: -1,
            max_msg_nums: 32,
            invisible_time: invisible_ms,
            poll_time: 2_000,
            born_time: now_ms(),
            init_mode: 0,
            exp_type: None,
            exp: Some("*".into()),
            order: Some(false),
            attempt_id: None,
            bname: Some(broker_name.clone()),
        };
        let r = b.call(RemotingCommand::request(RequestCode::PopMessage).with_header(&h), T);
        let header: PopMessageResponseHeader = r.header().expect("every pop answer has the header");
        let mut msgs = if r.code == 0 {
            rocketmq_push_core::message::decode_messages(&r.body, &DecodeOptions::default()).unwrap()
        } else {
            Vec::new()
        };
        let receipts = attach_receipts(&mut msgs, &header, &broker_name, &topic).unwrap();
        (r.code, msgs, receipts)
    };
    // The first pop may find the queues still initialising; a few tries get all three.
    let mut first = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while first.len() < 3 && Instant::now() < deadline {
        let (code, msgs, receipts) = pop(&mut b, 5_000);
        if code == 0 {
            capture("pop_found", "POP_MESSAGE FOUND with receipts for both queues", &b.last_raw());
        } else {
            assert!(
                [ResponseCode::PollingTimeout as i32, ResponseCode::PullNotFound as i32].contains(&code),
                "pop answered {code}"
            );
            capture("pop_polling_timeout", "POP_MESSAGE after its hold found nothing", &b.last_raw());
        }
        first.extend(msgs.into_iter().zip(receipts));
    }
    let mut bodies: Vec<String> =
        first.iter().map(|(m, _)| String::from_utf8_lossy(&m.body).into_owned()).collect();
    bodies.sort();
    assert_eq!(bodies, ["pop-0", "pop-1", "pop-2"]);
    for (m, r) in &first {
        assert_eq!((r.retry, r.queue_id, r.queue_offset), (RetryFlag::Normal, m.queue_id, m.queue_offset));
        assert_eq!(PopReceipt::parse(m.properties.get(keys::POP_CK).unwrap()).unwrap(), *r);
    }
    let by_body = |name: &str| first.iter().find(|(m, _)| m.body == name.as_bytes()).unwrap().1.clone();
    let ack = |b: &mut Conn, r: &PopReceipt| {
        let h = AckMessageRequestHeader {
            consumer_group: group.clone(),
            topic: r.retry.real_topic(&topic, &group),
            queue_id: r.queue_id,
            extra_info: r.to_string(),
            offset: r.queue_offset,
            bname: Some(r.broker_name.clone()),
        };
        b.call(RemotingCommand::request(RequestCode::AckMessage).with_header(&h), T).code
    };
    assert_eq!(ack(&mut b, &by_body("pop-0")), 0);
    capture("ack_message_ok", "ACK_MESSAGE answer", &b.last_raw());
    // pop-1 comes back sooner than its pop said; pop-2 is left to expire.
    let later = by_body("pop-1");
    let h = ChangeInvisibleTimeRequestHeader {
        consumer_group: group.clone(),
        topic: later.retry.real_topic(&topic, &group),
        queue_id: later.queue_id,
        extra_info: later.to_string(),
        offset: later.queue_offset,
        invisible_time: 1_000,
        bname: Some(later.broker_name),
    };
    let r = b.call(RemotingCommand::request(RequestCode::ChangeMessageInvisibleTime).with_header(&h), T);
    assert_eq!(r.code, 0, "{}", r.remark_str());
    capture("change_invisible_time_ok", "CHANGE_MESSAGE_INVISIBLETIME answer", &b.last_raw());
    let changed: ChangeInvisibleTimeResponseHeader = r.header().unwrap();
    assert_eq!(changed.invisible_time, 1_000);

    // Both come back, from the retry topic, with the broker's receipt; pop-0 never does.
    let mut again = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while again.len() < 2 && Instant::now() < deadline {
        let (_, msgs, receipts) = pop(&mut b, 60_000);
        if !msgs.is_empty() {
            capture(
                "pop_found_revived",
                "POP_MESSAGE FOUND: revived messages with the broker's POP_CK",
                &b.last_raw(),
            );
        }
        again.extend(msgs.into_iter().zip(receipts));
    }
    let mut back: Vec<(String, i32)> = again
        .iter()
        .map(|(m, _)| (String::from_utf8_lossy(&m.body).into_owned(), m.reconsume_times))
        .collect();
    back.sort();
    assert_eq!(back, [("pop-1".to_owned(), 1), ("pop-2".to_owned(), 1)], "revived once each, pop-0 acked");
    for (m, r) in &again {
        assert_eq!(&*m.topic, topic.as_str(), "the subscribed topic, as Java shows it");
        assert_eq!(r.retry, RetryFlag::RetryV1, "read from the pop retry topic");
        assert_eq!(ack(&mut b, r), 0, "ack of a revived message names the retry topic");
    }
    // An ack with a receipt whose checkpoint has been revived: the broker takes it quietly.
    let stale = ack(&mut b, &by_body("pop-2"));
    assert!([0, ResponseCode::NoMessage as i32].contains(&stale), "stale ack answered {stale}");
    let (code, msgs, _) = pop(&mut b, 60_000);
    assert!(msgs.is_empty(), "nothing left: {code} {msgs:?}");
    // bornTime 0: the broker holds the pop by its own clock (a client whose clock is behind
    // the broker's by more than the hold would otherwise be answered at once, every time).
    let h = PopMessageRequestHeader {
        consumer_group: group.clone(),
        topic: topic.clone(),
        queue_id: -1,
        max_msg_nums: 32,
        invisible_time: 60_000,
        poll_time: 2_000,
        born_time: 0,
        init_mode: 0,
        exp_type: None,
        exp: Some("*".into()),
        order: Some(false),
        attempt_id: None,
        bname: Some(broker_name.clone()),
    };
    let sent = Instant::now();
    let r = b.call(RemotingCommand::request(RequestCode::PopMessage).with_header(&h), T);
    assert_eq!(r.code, ResponseCode::PollingTimeout as i32, "{}", r.remark_str());
    assert!(
        sent.elapsed() >= Duration::from_millis(1_500),
        "held, not answered at once: {:?}",
        sent.elapsed()
    );
    // A bornTime far behind the broker's clock is answered at once ("timeout too much").
    let late = PopMessageRequestHeader { born_time: now_ms() - 60_000, ..h };
    let sent = Instant::now();
    let r = b.call(RemotingCommand::request(RequestCode::PopMessage).with_header(&late), T);
    assert_eq!(r.code, ResponseCode::PollingTimeout as i32, "{}", r.remark_str());
    assert!(sent.elapsed() < Duration::from_millis(1_000), "answered at once: {:?}", sent.elapsed());
}

/// BATCH_ACK_MESSAGE as the consumer builds it: one entry per checkpoint, a bitset of the acked
/// messages. On 5.3.3 exactly the acked ones stay gone; the rest revive, and a batch ack of
/// revived messages (retry flag 1, the subscribed topic named) keeps them gone too.
#[test]
fn pop_batch_ack_acks_its_bits_for_normal_and_revived_messages() {
    use rocketmq_push_core::message::DecodeOptions;
    use rocketmq_push_core::protocol::body::{
        BatchAck, BatchAckMessageRequestBody, MessageRequestMode, SetMessageRequestModeRequestBody,
    };
    use rocketmq_push_core::protocol::header::{PopMessageRequestHeader, PopMessageResponseHeader};
    use rocketmq_push_core::protocol::receipt::{PopReceipt, RetryFlag, attach_receipts};
    let Some(env) = broker_env() else { return };
    if is_v4() {
        return; // no POP at all: the test above checks the refusal
    }
    let (topic, group) = (unique("wire_batch_ack"), unique("g_batch_ack"));
    let mut b = Conn::connect(&env.broker);
    create_topic(&mut b, &topic, 1);
    heartbeat(&mut b, "batch-ack-client@1", &group, &[&topic]);
    let body = SetMessageRequestModeRequestBody {
        topic: topic.clone(),
        consumer_group: group.clone(),
        mode: MessageRequestMode::Pop,
        pop_share_queue_num: 0,
    };
    let r = b.call(RemotingCommand::request(RequestCode::SetMessageRequestMode).with_body(body.encode()), T);
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let mut ns = Conn::connect(&env.namesrv);
    let broker_name = route(&mut ns, &topic).1.subscribe_queues(&topic)[0].broker_name.to_string();
    for i in 0..8 {
        let q = MessageQueue::new(topic.as_str(), broker_name.as_str(), 0);
        send(&mut b, &Message::new(topic.as_str(), format!("b-{i}").into_bytes()), &q, false);
    }
    let pop = |b: &mut Conn| {
        let h = PopMessageRequestHeader {
            consumer_group: group.clone(),
            topic: topic.clone(),
            queue_id: -1,
            max_msg_nums: 32,
            invisible_time: 5_000,
            poll_time: 1_000,
            born_time: 0,
            init_mode: 0,
            exp_type: None,
            exp: Some("*".into()),
            order: Some(false),
            attempt_id: None,
            bname: Some(broker_name.clone()),
        };
        let r = b.call(RemotingCommand::request(RequestCode::PopMessage).with_header(&h), T);
        let header: PopMessageResponseHeader = r.header().expect("every pop answer has the header");
        let mut msgs = if r.code == 0 {
            rocketmq_push_core::message::decode_messages(&r.body, &DecodeOptions::default()).unwrap()
        } else {
            Vec::new()
        };
        let receipts = attach_receipts(&mut msgs, &header, &broker_name, &topic).unwrap();
        msgs.into_iter()
            .zip(receipts)
            .map(|(m, r)| (String::from_utf8_lossy(&m.body).into_owned(), m.reconsume_times, r))
            .collect::<Vec<_>>()
    };
    let pop_until = |b: &mut Conn, n: usize, within: Duration| {
        let mut got = Vec::new();
        let deadline = Instant::now() + within;
        while got.len() < n && Instant::now() < deadline {
            got.extend(pop(b));
        }
        got.sort_by(|a: &(String, i32, PopReceipt), b| a.0.cmp(&b.0));
        got
    };
    let batch_ack = |b: &mut Conn, receipts: &[&PopReceipt]| {
        let mut acks: Vec<BatchAck> = Vec::new();
        for r in receipts {
            match acks.iter_mut().find(|a| a.same_checkpoint(&topic, r)) {
                Some(a) => assert!(a.set(r.queue_offset)),
                None => {
                    let mut a = BatchAck::for_checkpoint(&group, &topic, r);
                    assert!(a.set(r.queue_offset));
                    acks.push(a);
                }
            }
        }
        let body = BatchAckMessageRequestBody { broker_name: broker_name.clone(), acks };
        let r = b.call(RemotingCommand::request(RequestCode::BatchAckMessage).with_body(body.encode()), T);
        (r.code, r.remark_str().to_owned())
    };

    let first = pop_until(&mut b, 8, Duration::from_secs(20));
    assert_eq!(
        first.iter().map(|m| m.0.as_str()).collect::<Vec<_>>(),
        (0..8).map(|i| format!("b-{i}")).collect::<Vec<_>>()
    );
    let even: Vec<&PopReceipt> = first.iter().step_by(2).map(|m| &m.2).collect();
    assert_eq!(batch_ack(&mut b, &even), (0, String::new()));

    let revived = pop_until(&mut b, 4, Duration::from_secs(60));
    let names: Vec<(&str, i32, RetryFlag)> = revived.iter().map(|m| (m.0.as_str(), m.1, m.2.retry)).collect();
    assert_eq!(
        names,
        [
            ("b-1", 1, RetryFlag::RetryV1),
            ("b-3", 1, RetryFlag::RetryV1),
            ("b-5", 1, RetryFlag::RetryV1),
            ("b-7", 1, RetryFlag::RetryV1)
        ],
        "exactly the odd ones (not acked) revive"
    );
    let again: Vec<&PopReceipt> = revived.iter().map(|m| &m.2).collect();
    assert_eq!(batch_ack(&mut b, &again).0, 0);
    // Their invisible time (5 s) and the revive scan pass: nothing comes back.
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        let back = pop(&mut b);
        assert!(back.is_empty(), "acked by BATCH_ACK, yet revived: {back:?}");
    }
    // An empty body is NO_MESSAGE.
    let empty = BatchAckMessageRequestBody { broker_name: broker_name.clone(), acks: Vec::new() };
    let r = b.call(RemotingCommand::request(RequestCode::BatchAckMessage).with_body(empty.encode()), T);
    assert_eq!(r.code, ResponseCode::NoMessage as i32, "{}", r.remark_str());
}

/// Orderly POP (`order=true`), which the Java push consumer never sends: what the 5.3.3 broker
/// does with it, recorded for an orderly POP consumer still to build (docs/pop.md §0). A pop
/// of a queue locks it for the group until every message it returned is acked (a second pop
/// gets nothing); receipts carry revive queue 999 and the answer an `orderCountInfo`; a change
/// of invisible time brings the same message back from the topic itself (no retry topic), with
/// its attempt counted, and the messages after it with it.
#[test]
fn orderly_pop_locks_the_queue_until_acked_and_redelivers_in_place() {
    use rocketmq_push_core::message::DecodeOptions;
    use rocketmq_push_core::protocol::body::{MessageRequestMode, SetMessageRequestModeRequestBody};
    use rocketmq_push_core::protocol::header::{
        AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, PopMessageRequestHeader,
        PopMessageResponseHeader,
    };
    use rocketmq_push_core::protocol::receipt::{
        POP_ORDER_REVIVE_QUEUE, PopReceipt, RetryFlag, attach_receipts,
    };
    let Some(env) = broker_env() else { return };
    if is_v4() {
        return;
    }
    let (topic, group) = (unique("wire_order_pop"), unique("g_order_pop"));
    let mut b = Conn::connect(&env.broker);
    create_topic(&mut b, &topic, 1);
    heartbeat(&mut b, "order-pop-client@1", &group, &[&topic]);
    let body = SetMessageRequestModeRequestBody {
        topic: topic.clone(),
        consumer_group: group.clone(),
        mode: MessageRequestMode::Pop,
        pop_share_queue_num: 0,
    };
    let r = b.call(RemotingCommand::request(RequestCode::SetMessageRequestMode).with_body(body.encode()), T);
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let mut ns = Conn::connect(&env.namesrv);
    let broker_name = route(&mut ns, &topic).1.subscribe_queues(&topic)[0].broker_name.to_string();
    for i in 0..4 {
        let q = MessageQueue::new(topic.as_str(), broker_name.as_str(), 0);
        send(&mut b, &Message::new(topic.as_str(), format!("o-{i}").into_bytes()), &q, false);
    }
    let pop = |b: &mut Conn, max: i32| {
        let h = PopMessageRequestHeader {
            consumer_group: group.clone(),
            topic: topic.clone(),
            queue_id: -1,
            max_msg_nums: max,
            invisible_time: 20_000,
            poll_time: 1_000,
            born_time: 0,
            init_mode: 0,
            exp_type: None,
            exp: Some("*".into()),
            order: Some(true),
            attempt_id: None,
            bname: Some(broker_name.clone()),
        };
        let r = b.call(RemotingCommand::request(RequestCode::PopMessage).with_header(&h), T);
        let header: PopMessageResponseHeader = r.header().expect("every pop answer has the header");
        let mut msgs = if r.code == 0 {
            rocketmq_push_core::message::decode_messages(&r.body, &DecodeOptions::default()).unwrap()
        } else {
            Vec::new()
        };
        let receipts = attach_receipts(&mut msgs, &header, &broker_name, &topic).unwrap();
        let got: Vec<(String, PopReceipt)> =
            msgs.iter().map(|m| String::from_utf8_lossy(&m.body).into_owned()).zip(receipts).collect();
        (header, got)
    };
    let ack = |b: &mut Conn, r: &PopReceipt| {
        let h = AckMessageRequestHeader {
            consumer_group: group.clone(),
            topic: topic.clone(),
            queue_id: r.queue_id,
            extra_info: r.to_string(),
            offset: r.queue_offset,
            bname: Some(r.broker_name.clone()),
        };
        b.call(RemotingCommand::request(RequestCode::AckMessage).with_header(&h), T).code
    };
    // Two of the four: the queue is then locked for the group.
    let mut first = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut header = None;
    while first.is_empty() && Instant::now() < deadline {
        let (h, got) = pop(&mut b, 2);
        if !got.is_empty() {
            header = Some(h);
        }
        first = got;
    }
    let header = header.expect("an orderly pop finds the messages");
    assert_eq!(first.iter().map(|m| m.0.as_str()).collect::<Vec<_>>(), ["o-0", "o-1"]);
    assert_eq!(header.revive_qid, POP_ORDER_REVIVE_QUEUE);
    assert!(header.order_count_info.is_some(), "{header:?}");
    assert!(first.iter().all(|m| m.1.is_order() && m.1.retry == RetryFlag::Normal), "{first:?}");
    let (_, locked) = pop(&mut b, 2);
    assert!(locked.is_empty(), "the queue stays locked while o-0 and o-1 are out: {locked:?}");
    // o-0 done; o-1 back in a second: it returns from the topic itself, o-2 after it.
    assert_eq!(ack(&mut b, &first[0].1), 0);
    let later = &first[1].1;
    let h = ChangeInvisibleTimeRequestHeader {
        consumer_group: group.clone(),
        topic: topic.clone(),
        queue_id: later.queue_id,
        extra_info: later.to_string(),
        offset: later.queue_offset,
        invisible_time: 1_000,
        bname: Some(later.broker_name.clone()),
    };
    let r = b.call(RemotingCommand::request(RequestCode::ChangeMessageInvisibleTime).with_header(&h), T);
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let mut again = Vec::new();
    let mut counts = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while again.is_empty() && Instant::now() < deadline {
        let (h, got) = pop(&mut b, 2);
        counts = h.order_count_info;
        again = got;
    }
    // The attempt is counted per message: "0 qo{queue}%{offset} 1" (5.3.3 answered
    // "0 qo0%1 1;0 0 0"), what Java's client turns into reconsumeTimes.
    let counted = format!("0 qo{}%{} 1", later.queue_id, later.queue_offset);
    assert!(counts.as_deref().is_some_and(|c| c.split(';').any(|e| e == counted)), "{counts:?}");
    assert_eq!(again.iter().map(|m| m.0.as_str()).collect::<Vec<_>>(), ["o-1", "o-2"], "in order, in place");
    assert_eq!((again[0].1.retry, again[0].1.queue_offset), (RetryFlag::Normal, later.queue_offset));
    for m in &again {
        assert_eq!(ack(&mut b, &m.1), 0);
    }
    let (_, last) = pop(&mut b, 2);
    assert_eq!(last.iter().map(|m| m.0.as_str()).collect::<Vec<_>>(), ["o-3"]);
}
