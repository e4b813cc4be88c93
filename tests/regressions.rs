//! Replays every fuzz seed (`fuzz/seeds/<target>/*`) and every minimised crash
//! (`fuzz/regressions/<target>/*`) through the library's fuzz entry points on stable Rust, so a
//! fixed crash stays fixed without nightly or cargo-fuzz.
//!
//! `cargo test --test regressions -- --ignored write_seeds` regenerates the hand-made seeds.

#![allow(clippy::disallowed_methods)] // reads seed files: test I/O, not the core

use std::fs;
use std::path::{Path, PathBuf};

use rocketmq_push_core::fuzzing;

type Target = fn(&[u8]);

const TARGETS: &[(&str, Target)] = &[
    ("decode_frame", fuzzing::decode_frame),
    ("decode_header", fuzzing::decode_header),
    ("decode_messages", fuzzing::decode_messages),
    ("decode_json_body", fuzzing::decode_json_body),
    ("consumer_frames", fuzzing::consumer_frames),
    ("consumer_ops", fuzzing::consumer_ops),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn every_seed_and_regression_replays_cleanly() {
    let mut total = 0;
    for (name, f) in TARGETS {
        let seeds = files(&root().join("seeds").join(name));
        assert!(!seeds.is_empty(), "no seeds for {name}");
        for kind in ["seeds", "regressions"] {
            for p in files(&root().join(kind).join(name)) {
                let data = fs::read(&p).unwrap();
                let r = std::panic::catch_unwind(|| f(&data));
                assert!(r.is_ok(), "{name} panicked on {}", p.display());
                total += 1;
            }
        }
    }
    assert!(total >= TARGETS.len());
}

mod seeds {
    use super::*;
    use bytes::BytesMut;
    use rocketmq_push_core::codec::encode_to_bytes;
    use rocketmq_push_core::message::{
        CompressionType, MessageExt, Properties, compress, encode_batch_entry, encode_stored, sys_flag,
    };
    use rocketmq_push_core::protocol::body::*;
    use rocketmq_push_core::protocol::header::*;
    use rocketmq_push_core::protocol::{
        ExpressionType, JsonBody, RemotingCommand, RequestCode, SerializeType,
    };
    use rocketmq_push_core::{MessageQueue, ResponseCode};

    fn write(target: &str, name: &str, data: &[u8]) {
        let dir = root().join("seeds").join(target);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(name), data).unwrap();
    }

    fn message(offset: i64, body: &[u8]) -> MessageExt {
        let mut m = MessageExt::new("TopicA", body.to_vec());
        m.queue_offset = offset;
        m.commit_log_offset = 4096 * offset;
        m.born_host = "10.0.0.9:40000".parse().unwrap();
        m.store_host = "127.0.0.1:10911".parse().unwrap();
        m.properties = Properties::from_pairs([
            ("TAGS", "TagA"),
            ("KEYS", "k1 k2"),
            ("UNIQ_KEY", "7F0000010001"),
            ("color", "红"),
        ]);
        m
    }

    #[test]
    #[ignore = "writes fuzz/seeds; run on purpose"]
    fn write_seeds() {
        // Frames: a pull request in both encodings, a FOUND response carrying records.
        let pull = PullMessageRequestHeader {
            consumer_group: "g".into(),
            topic: "TopicA".into(),
            queue_id: 1,
            queue_offset: 10,
            max_msg_nums: 32,
            sys_flag: 3,
            commit_offset: 9,
            suspend_timeout_millis: 15000,
            sub_version: 1,
            expression_type: Some(ExpressionType::Tag),
            ..Default::default()
        };
        for ty in [SerializeType::Json, SerializeType::RocketMq] {
            let req =
                RemotingCommand::request(RequestCode::PullMessage).with_header(&pull).with_serialize_type(ty);
            let name = format!("pull_request_{}", ty.name().to_lowercase());
            write("decode_frame", &name, &encode_to_bytes(&req));
            write("decode_header", &name, &[[ty.code()].as_slice(), &encode_to_bytes(&req)[8..]].concat());
        }
        let mut body = BytesMut::new();
        encode_stored(&message(10, b"hello"), &mut body);
        let resp = RemotingCommand::response_to(
            &RemotingCommand::raw_request(11).with_opaque(5),
            ResponseCode::Success,
        )
        .with_header(&PullMessageResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset: 11,
            min_offset: 0,
            max_offset: 11,
            ..Default::default()
        })
        .with_remark("FOUND")
        .with_body(body.freeze());
        write("decode_frame", "pull_found_response", &encode_to_bytes(&resp));

        // Records: plain, each compression, inner batch, IPv6, V2 topic.
        let mut plain = BytesMut::new();
        encode_stored(&message(1, b"one"), &mut plain);
        encode_stored(&message(2, b"two"), &mut plain);
        write("decode_messages", "two_plain", &plain);
        for kind in [CompressionType::Zlib, CompressionType::Lz4, CompressionType::Zstd] {
            let mut m = message(3, &compress(kind, &b"abcdefgh".repeat(700)));
            m.sys_flag = kind.sys_flag_bits();
            let mut out = BytesMut::new();
            encode_stored(&m, &mut out);
            write("decode_messages", &format!("compressed_{kind:?}").to_lowercase(), &out);
        }
        let mut inner = BytesMut::new();
        encode_batch_entry(0, b"a", b"TAGS\x01x\x02", &mut inner);
        encode_batch_entry(0, b"b", b"", &mut inner);
        let mut m = message(5, &inner);
        m.sys_flag = sys_flag::INNER_BATCH_FLAG | sys_flag::NEED_UNWRAP_FLAG;
        let mut out = BytesMut::new();
        encode_stored(&m, &mut out);
        write("decode_messages", "inner_batch", &out);
        let mut m = message(6, b"v6");
        m.store_host = "[::1]:10911".parse().unwrap();
        m.topic = "T".repeat(140).into();
        let mut out = BytesMut::new();
        encode_stored(&m, &mut out);
        write("decode_messages", "ipv6_v2_topic", &out);

        // JSON bodies, fastjson forms included.
        let route = br#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#;
        write("decode_json_body", "route", &[&[0u8][..], route].concat());
        let hb = HeartbeatData {
            client_id: "c".into(),
            producer_data_set: vec![],
            consumer_data_set: vec![ConsumerData {
                group_name: "g".into(),
                consume_type: ConsumeType::ConsumePassively,
                message_model: MessageModel::Clustering,
                consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
                subscription_data_set: vec![SubscriptionData::build("T", "a||b", ExpressionType::Tag, 1)],
                unit_mode: false,
            }],
            heartbeat_fingerprint: 0,
            without_sub: false,
        };
        write("decode_json_body", "heartbeat", &[&[1u8][..], &hb.encode()].concat());
        let lock = LockBatchRequestBody {
            consumer_group: "g".into(),
            client_id: "c".into(),
            only_this_broker: true,
            mq_set: vec![MessageQueue::new("T", "b", 0)],
        };
        write("decode_json_body", "lock_request", &[&[2u8][..], &lock.encode()].concat());
        write(
            "decode_json_body",
            "lock_response",
            &[&[3u8][..], br#"{"lockOKMQSet":[{"brokerName":"b","queueId":0,"topic":"T"}]}"#].concat(),
        );
        write(
            "decode_json_body",
            "reset_offset",
            &[&[4u8][..], br#"{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:200}}"#].concat(),
        );
        write(
            "decode_json_body",
            "consumer_list",
            &[&[6u8][..], br#"{"consumerIdList":["a@1","b@2"]}"#].concat(),
        );
        let mut info = ConsumerRunningInfo::default();
        info.mq_table.push((MessageQueue::new("T", "b", 0), ProcessQueueInfo::default()));
        info.properties.insert("k".into(), "v".into());
        write("decode_json_body", "running_info", &[&[7u8][..], &info.encode()].concat());
        let query = QueryAssignmentRequestBody {
            topic: "T".into(),
            consumer_group: "g".into(),
            client_id: "c".into(),
            strategy_name: "AVG".into(),
            message_model: MessageModel::Clustering,
        };
        write("decode_json_body", "query_assignment_request", &[&[12u8][..], &query.encode()].concat());
        let mode = SetMessageRequestModeRequestBody {
            topic: "T".into(),
            consumer_group: "g".into(),
            mode: MessageRequestMode::Pop,
            pop_share_queue_num: 1,
        };
        write("decode_json_body", "set_mode_request", &[&[13u8][..], &mode.encode()].concat());
        // The body checked against 5.3.3 (docs/pop.md): bits 0, 2, 4, 6 of a checkpoint at 0.
        let batch_ack = br#"{"acks":[{"b":"VQ==","c":"g","it":5000,"pt":1700000000000,"q":0,"r":"0","rq":3,"so":0,"t":"T"},{"bitSet":"AQ==","consumerGroup":"g","retry":"1","startOffset":9,"topic":"T"}],"brokerName":"broker-a"}"#;
        write("decode_json_body", "batch_ack_request", &[&[14u8][..], &batch_ack[..]].concat());

        // Real frames captured from brokers (tests/data/*.hex): whole frames, and their bodies.
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        for p in files(&data).into_iter().filter(|p| p.extension().is_some_and(|e| e == "hex")) {
            let text = fs::read_to_string(&p).unwrap();
            let hex: String = text.lines().filter(|l| !l.starts_with('#')).collect();
            let bytes: Vec<u8> =
                (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            let name = format!("golden_{}", p.file_stem().unwrap().to_string_lossy());
            write("decode_frame", &name, &bytes);
            let cmd =
                rocketmq_push_core::codec::decode_frame_body(bytes::Bytes::from(bytes).slice(4..)).unwrap();
            if cmd.remark.as_deref() == Some("FOUND") {
                write("decode_messages", &name, &cmd.body);
            } else if name.contains("route") {
                write("decode_json_body", &name, &[&[0u8][..], &cmd.body].concat());
            } else if name.contains("reset_offset") {
                write("decode_json_body", &name, &[&[4u8][..], &cmd.body].concat());
            } else if name.contains("query_assignment") {
                write("decode_json_body", &name, &[&[11u8][..], &cmd.body].concat());
            }
        }
    }
}
