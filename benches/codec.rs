//! Codec benches: the pull hot path (decode a response with 32 × 1 KiB messages), encoding a pull
//! request, and parsing a route body.

use bytes::{Bytes, BytesMut};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rocketmq_push_core::codec::{RemotingCodec, encode_to_bytes};
use rocketmq_push_core::message::{DecodeOptions, MessageExt, Properties, decode_messages, encode_stored};
use rocketmq_push_core::protocol::body::TopicRouteData;
use rocketmq_push_core::protocol::header::{PullMessageRequestHeader, PullMessageResponseHeader};
use rocketmq_push_core::protocol::{ExpressionType, JsonBody, RemotingCommand, RequestCode, ResponseCode};

fn pull_body(n: usize, size: usize) -> Bytes {
    let mut out = BytesMut::new();
    for i in 0..n {
        let mut m = MessageExt::new("BenchTopic", vec![b'x'; size]);
        m.queue_offset = i as i64;
        m.commit_log_offset = (i * (size + 200)) as i64;
        m.born_host = "10.0.0.1:50000".parse().unwrap();
        m.store_host = "127.0.0.1:10911".parse().unwrap();
        // What a 5.3.3 broker stores for a message from Java's producer (scripts/rocketmq.sh
        // fact 13): keys, the producer's UNIQ_KEY, and the broker's own additions.
        m.properties = Properties::from_pairs([
            ("KEYS", "order-42"),
            ("TRACE_ON", "true"),
            ("MSG_REGION", "DefaultRegion"),
            ("UNIQ_KEY", "7F000001A1B2C3D4E5F600000000000A"),
            ("CLUSTER", "DefaultCluster"),
            ("WAIT", "true"),
            ("TAGS", "TagA"),
        ]);
        encode_stored(&m, &mut out);
    }
    out.freeze()
}

fn pull_request() -> RemotingCommand {
    RemotingCommand::request(RequestCode::PullMessage).with_opaque(42).with_header(
        &PullMessageRequestHeader {
            consumer_group: "bench_group".into(),
            topic: "BenchTopic".into(),
            queue_id: 3,
            queue_offset: 123_456,
            max_msg_nums: 32,
            sys_flag: 3,
            commit_offset: 123_400,
            suspend_timeout_millis: 15_000,
            subscription: None,
            sub_version: 1_700_000_000_000,
            expression_type: Some(ExpressionType::Tag),
            max_msg_bytes: Some(262_144),
            bname: Some("broker-a".into()),
        },
    )
}

fn codec(c: &mut Criterion) {
    let body = pull_body(32, 1024);
    let mut g = c.benchmark_group("pull_body_32x1KiB");
    g.throughput(Throughput::Elements(32));
    g.bench_function("decode_messages/elements", |b| {
        b.iter(|| decode_messages(&body, &DecodeOptions::default()).unwrap())
    });
    g.bench_function("decode+read_UNIQ_KEY_and_TAGS/elements", |b| {
        b.iter(|| {
            let msgs = decode_messages(&body, &DecodeOptions::default()).unwrap();
            let mut n = 0;
            for m in &msgs {
                n += m.msg_id().len() + m.tags().map_or(0, str::len);
            }
            n
        })
    });
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("decode_messages/bytes", |b| {
        b.iter(|| decode_messages(&body, &DecodeOptions::default()).unwrap())
    });
    g.finish();
    // The same bytes, for the Java side of scripts/bench-core-vs-java.sh.
    if let Ok(dir) = std::env::var("RMQ_BENCH_BODY_OUT") {
        #[allow(clippy::disallowed_methods)] // a bench writing its input for the Java side
        let _ = std::fs::write(std::path::Path::new(&dir).join("pull_body_32x1KiB.bin"), &body);
    }

    let response = RemotingCommand::response_to(&pull_request(), ResponseCode::Success)
        .with_header(&PullMessageResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset: 123_488,
            min_offset: 0,
            max_offset: 200_000,
            ..Default::default()
        })
        .with_remark("FOUND")
        .with_body(body.clone());
    let frame = encode_to_bytes(&response);
    let mut g = c.benchmark_group("pull_response_frame");
    g.throughput(Throughput::Bytes(frame.len() as u64));
    g.bench_function("frame+header+records", |b| {
        b.iter_batched_ref(
            || BytesMut::from(&frame[..]),
            |buf| {
                let cmd = RemotingCodec::new().decode(buf).unwrap().unwrap();
                let _h: PullMessageResponseHeader = cmd.header().unwrap();
                decode_messages(&cmd.body, &DecodeOptions::default()).unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("pull_request");
    g.throughput(Throughput::Elements(1));
    g.bench_function("build+encode_json", |b| {
        let mut out = BytesMut::with_capacity(1024);
        b.iter(|| {
            out.clear();
            RemotingCodec::new().encode(&pull_request(), &mut out);
        })
    });
    let req = pull_request().with_serialize_type(rocketmq_push_core::protocol::SerializeType::RocketMq);
    g.bench_function("encode_binary", |b| {
        let mut out = BytesMut::with_capacity(1024);
        b.iter(|| {
            out.clear();
            RemotingCodec::new().encode(&req, &mut out);
        })
    });
    g.finish();

    let route = br#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false},{"brokerAddrs":{0:"127.0.0.3:10911"},"brokerName":"broker-b","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8},{"brokerName":"broker-b","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#;
    let mut g = c.benchmark_group("route_body");
    g.throughput(Throughput::Bytes(route.len() as u64));
    g.bench_function("decode_fastjson", |b| b.iter(|| TopicRouteData::decode(route).unwrap()));
    g.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
