//! Throughput of the consumer core: messages per second from pull responses to commits, with a
//! zero-latency responder and an instant listener. The responder answers typed requests with
//! pre-encoded pull bodies, so what is measured is the core (request building, response and
//! header parsing, record decoding, ProcessQueue, batches, results, watermarks), not a broker.
//! A second group runs the same through the simulator (fake broker included).

#![allow(clippy::disallowed_methods)] // a bench takes one real instant as the start of virtual time

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rocketmq_push_core::message::{MessageExt, Properties, encode_stored};
use rocketmq_push_core::process_queue::{EntryState, ProcessQueue};
use rocketmq_push_core::protocol::body::{
    BrokerData, GetConsumerListByGroupResponseBody, JsonBody, QueueData, TopicRouteData,
};
use rocketmq_push_core::protocol::header::{OffsetResponseHeader, PullMessageResponseHeader};
use rocketmq_push_core::sim::{Sim, SimBrokerConfig};
use rocketmq_push_core::{
    ClientId, ConsumeFromWhere, ConsumeResult, Consumer, ConsumerConfig, Input, Output, Request,
    ResponseCode, Transmit,
};
use rocketmq_push_core::{RemotingCommand, protocol::FLAG_RESPONSE};

const QUEUES: i32 = 8;
const PER_PULL: usize = 32;

/// Pre-encoded pull bodies: `bodies[q][k]` holds offsets `k*32 .. k*32+32` of queue `q`.
fn bodies(total: usize, body_size: usize) -> Vec<Vec<Bytes>> {
    let per_queue = total / QUEUES as usize;
    (0..QUEUES)
        .map(|q| {
            (0..per_queue / PER_PULL)
                .map(|k| {
                    let mut out = BytesMut::new();
                    for i in 0..PER_PULL {
                        let offset = (k * PER_PULL + i) as i64;
                        let mut m = MessageExt::new("BenchTopic", vec![b'x'; body_size]);
                        m.queue_id = q;
                        m.queue_offset = offset;
                        m.commit_log_offset = offset * 200;
                        m.properties = Properties::from_pairs([
                            ("UNIQ_KEY", "7F000001A1B2C3D4E5F600000000000A"),
                            ("WAIT", "true"),
                        ]);
                        encode_stored(&m, &mut out);
                    }
                    out.freeze()
                })
                .collect()
        })
        .collect()
}

fn answer(t: &Transmit, bodies: &[Vec<Bytes>], cid: &str) -> Option<RemotingCommand> {
    let mut r = RemotingCommand::raw_request(0);
    r.flag = FLAG_RESPONSE;
    r.opaque = t.opaque;
    match &t.request {
        Request::GetRouteInfo(h) if h.topic == "BenchTopic" => {
            let route = TopicRouteData {
                order_topic_conf: None,
                queue_datas: vec![QueueData {
                    broker_name: "broker-a".into(),
                    read_queue_nums: QUEUES,
                    write_queue_nums: QUEUES,
                    perm: 6,
                    topic_sys_flag: 0,
                }],
                broker_datas: vec![BrokerData {
                    cluster: "c".into(),
                    broker_name: "broker-a".into(),
                    broker_addrs: [(0, "127.0.0.1:10911".to_owned())].into(),
                    enable_acting_master: false,
                    zone_name: None,
                }],
            };
            r.body = route.encode();
        }
        Request::GetRouteInfo(_) => r.code = ResponseCode::TopicNotExist as i32,
        Request::GetConsumerList(_) => {
            r.body = GetConsumerListByGroupResponseBody { consumer_id_list: vec![cid.to_owned()] }.encode();
        }
        Request::QueryConsumerOffset(_) => {
            r = r.with_header(&OffsetResponseHeader { offset: 0 });
        }
        Request::PullMessage(h) => {
            let chunks = bodies.get(h.queue_id as usize)?;
            let k = (h.queue_offset as usize) / PER_PULL;
            // Past the end: no answer (a held long poll), so the queue goes quiet.
            let body = chunks.get(k)?.clone();
            r = r
                .with_header(&PullMessageResponseHeader {
                    suggest_which_broker_id: 0,
                    next_begin_offset: h.queue_offset + PER_PULL as i64,
                    min_offset: 0,
                    max_offset: 1 << 40,
                    ..Default::default()
                })
                .with_body(body);
            r.remark = Some("FOUND".into());
        }
        _ => {}
    }
    Some(r)
}

/// Run one consumer until `total` messages were consumed; returns how many were.
fn drive(bodies: &[Vec<Bytes>], total: usize, batch: usize) -> usize {
    let t0 = Instant::now();
    let cid = "bench@1";
    let cfg = ConsumerConfig::builder("bench_group")
        .name_server("127.0.0.1:9876")
        .subscribe("BenchTopic", "*")
        .client_id(ClientId::from_raw(cid))
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_message_batch_max_size(batch)
        .pull_threshold_for_queue(4096)
        .build()
        .unwrap();
    let mut c = Consumer::new(cfg, t0);
    let mut frames: Vec<(rocketmq_push_core::PeerAddr, RemotingCommand)> = Vec::new();
    let mut results = Vec::new();
    let mut consumed = 0;
    let mut now = t0;
    loop {
        while let Some(a) = c.poll_output() {
            match a {
                Output::Transmit(t) => {
                    if let Some(r) = answer(&t, bodies, cid) {
                        frames.push((t.peer.clone(), r));
                    }
                }
                Output::Consume(b) => {
                    consumed += b.messages.len();
                    results.push(b.id);
                }
                _ => {}
            }
        }
        if consumed >= total {
            return consumed;
        }
        if frames.is_empty() && results.is_empty() {
            // Only timers left (the first rebalance, persists): jump to the next one.
            match c.poll_timeout() {
                Some(t) if t > now => now = t,
                _ => now += Duration::from_millis(1),
            }
            c.handle_timeout(now);
            continue;
        }
        for (peer, command) in frames.drain(..) {
            c.handle(Input::Frame { peer, command }, now).unwrap();
        }
        for batch in results.drain(..) {
            c.handle(Input::Consumed { batch, result: ConsumeResult::SUCCESS }, now).unwrap();
        }
    }
}

fn consumer(c: &mut Criterion) {
    let total = 64 * 1024;
    let small = bodies(total, 100);
    let mut g = c.benchmark_group("core_throughput");
    g.throughput(Throughput::Elements(total as u64));
    g.sample_size(20);
    g.bench_function("100B_batch1", |b| b.iter(|| assert_eq!(drive(&small, total, 1), total)));
    g.bench_function("100B_batch32", |b| b.iter(|| assert_eq!(drive(&small, total, 32), total)));
    let kib = bodies(total, 1024);
    g.bench_function("1KiB_batch1", |b| b.iter(|| assert_eq!(drive(&kib, total, 1), total)));
    g.finish();

    let mut g = c.benchmark_group("sim_end_to_end");
    let n = 16 * 1024;
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(10);
    g.bench_function("100B_batch1_with_fake_broker", |b| {
        b.iter_batched(
            || {
                let cfg =
                    SimBrokerConfig { hold_check_interval: Duration::ZERO, ..SimBrokerConfig::default() };
                let mut sim = Sim::builder(1)
                    .latency(Duration::ZERO)
                    .broker_config(cfg)
                    .broker("broker-a", &[("T", 8)])
                    .build();
                sim.lean();
                sim.produce("T", n);
                sim
            },
            |mut sim| {
                sim.add_consumer(
                    sim.config("G")
                        .subscribe("T", "*")
                        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
                );
                sim.run_until(|s| s.consumed_count() >= n, Duration::from_secs(3600)).unwrap();
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn process_queue(c: &mut Criterion) {
    let mut g = c.benchmark_group("process_queue");
    for cached in [1_000usize, 10_000] {
        // Chunks of 32, as pulls bring them.
        let mut chunks: Vec<std::sync::Arc<Vec<MessageExt>>> = (0..cached.div_ceil(32))
            .map(|k| {
                std::sync::Arc::new(
                    (k * 32..(k * 32 + 32).min(cached))
                        .map(|o| {
                            let mut m = MessageExt::new("T", vec![0u8; 100]);
                            m.queue_offset = o as i64 - cached as i64;
                            m
                        })
                        .collect(),
                )
            })
            .collect();
        // One long-lived queue, as a consumer keeps per message queue: each round puts the next
        // `cached` offsets after the last round's and finishes them all.
        let mut pq = ProcessQueue::new();
        g.throughput(Throughput::Elements(cached as u64));
        g.bench_function(format!("put_then_ack_out_of_order/{cached}"), |b| {
            b.iter_custom(|rounds| {
                let mut spent = Duration::ZERO;
                for _ in 0..rounds {
                    // Untimed: move the messages to the next offsets (the queue let go of them).
                    for chunk in &mut chunks {
                        let msgs = std::sync::Arc::get_mut(chunk).expect("the queue released every chunk");
                        for m in msgs {
                            m.queue_offset += cached as i64;
                        }
                    }
                    let base = chunks[0][0].queue_offset;
                    #[allow(clippy::disallowed_methods)] // a bench timing its own rounds
                    let started = Instant::now();
                    for chunk in &chunks {
                        pq.put_all(chunk, EntryState::InFlight, |_| {});
                    }
                    // Finish in a scrambled but deterministic order, reading the watermark each time.
                    let mut w = 0;
                    for i in 0..cached {
                        let o = base + ((i * 7919) % cached) as i64;
                        pq.remove(o);
                        w += pq.watermark(base + cached as i64);
                    }
                    spent += started.elapsed();
                    std::hint::black_box(w);
                }
                spent
            })
        });
    }
    g.finish();
}

criterion_group!(benches, consumer, process_queue);
criterion_main!(benches);
