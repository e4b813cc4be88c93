//! `rmqcat demo`: produce N messages and consume them through the tokio adapter, then say what
//! arrived. No broker needed: by default the simulator is served in-process on loopback TCP, so
//! the consumer runs exactly as against a broker (codec, long polling, rebalance, commits).

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use rocketmq_push_core::message::keys;
use rocketmq_push_core::sim::SimBrokerConfig;
use rocketmq_push_core::{ConsumeFromWhere, ConsumeStatus, Message};
use rocketmq_push_io::sim_server::SimServer;
use rocketmq_push_tokio::PushConsumer;

use crate::progress::{Progress, per_sec, thousands};
use crate::{Failure, Outcome, admin, produce};

/// Produce messages and consume them end to end, with live throughput and a summary: consumed,
/// duplicates, lost, latency. Needs no broker.
#[derive(Args)]
#[command(after_help = "Examples:
  rmqcat demo                                  100,000 messages through the embedded simulator
  rmqcat demo --count 1000000 --size 256
  rmqcat demo -n 127.0.0.1:9876                the same against a real cluster

The embedded simulator is served on loopback TCP, so the consumer is the real thing: the tokio
adapter, the remoting codec, long polling, rebalance and commits. Latency is from the
producer's born timestamp to the listener. Exit 1 if any message was lost.")]
pub(crate) struct Opts {
    /// Run against this cluster's name server instead of the embedded simulator.
    #[arg(short = 'n', long = "name-server", value_name = "ADDR")]
    name_server: Option<String>,
    /// Messages to produce.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    count: u64,
    /// Body size, bytes.
    #[arg(long, default_value_t = 128, value_name = "BYTES")]
    size: usize,
    /// Queues of the demo topic.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(i32).range(1..=256))]
    queues: i32,
    /// Producer threads.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    producers: u64,
    /// Give up when nothing new arrives for this many seconds.
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    idle_timeout: u64,
}

/// What the listener saw: per message index, how often; and the latencies of first arrivals.
struct Seen {
    times: Vec<u8>,
    latencies_ms: Vec<u32>,
    unique: u64,
    duplicates: u64,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

const KEY_PREFIX: &str = "rmqcat-demo-";

pub(crate) fn run(o: Opts, quiet: bool) -> Outcome {
    let stamp = now_ms();
    let (topic, group) = (format!("rmqcat_demo_{stamp}"), format!("rmqcat_demo_{stamp}"));
    let (server, ns, place) = match &o.name_server {
        Some(ns) => {
            admin::create_topic(ns, &topic, o.queues)?;
            (None, ns.clone(), format!("the cluster at {ns}"))
        }
        None => {
            let s = SimServer::start(&[("broker-a", &[])], SimBrokerConfig::default())
                .map_err(|e| Failure::Runtime(format!("cannot start the embedded simulator: {e}")))?;
            s.create_topic(&topic, o.queues);
            let ns = s.name_server().to_owned();
            (Some(s), ns, "the embedded simulator".to_owned())
        }
    };
    if !quiet {
        say!(
            "rmqcat demo: {} messages of {} B over {} queues, through {place}",
            thousands(o.count),
            o.size,
            o.queues
        );
    }
    // The name server may learn of a new topic a moment after the broker created it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = produce::producer_for(&ns, &topic) {
        if Instant::now() > deadline {
            return Err(e);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the runtime: {e}")))?;
    let seen = Arc::new(Mutex::new(Seen {
        times: vec![0; o.count as usize],
        latencies_ms: Vec::with_capacity(o.count as usize),
        unique: 0,
        duplicates: 0,
    }));
    let s = seen.clone();
    let consumer = {
        let _guard = rt.enter();
        PushConsumer::builder(group.as_str())
            .name_server(ns.as_str())
            .subscribe(topic.as_str(), "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .listener(move |msgs, _ctx| {
                let now = now_ms();
                let mut seen = s.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                for m in msgs.iter() {
                    let index = m
                        .property(keys::UNIQ_KEY)
                        .and_then(|k| k.strip_prefix(KEY_PREFIX))
                        .and_then(|i| i.parse::<usize>().ok());
                    let Some(slot) = index.and_then(|i| seen.times.get_mut(i)) else { continue };
                    *slot = slot.saturating_add(1);
                    if *slot == 1 {
                        seen.unique += 1;
                        seen.latencies_ms.push((now - m.born_timestamp).clamp(0, u32::MAX.into()) as u32);
                    } else {
                        seen.duplicates += 1;
                    }
                }
                async { ConsumeStatus::Success }
            })
            .start()
            .map_err(|e| Failure::Runtime(format!("cannot start the consumer: {e}")))?
    };

    // Producers on their own threads; the consumer runs meanwhile.
    let started = Instant::now();
    let (sent, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let body = vec![b'x'; o.size];
    let mut threads = Vec::new();
    for p in 0..o.producers {
        let (ns, topic, body) = (ns.clone(), topic.clone(), body.clone());
        let (sent, failed) = (sent.clone(), failed.clone());
        let (count, producers) = (o.count, o.producers);
        threads.push(std::thread::spawn(move || {
            let Ok(mut producer) = produce::producer_for(&ns, &topic) else {
                failed.fetch_add(count.div_ceil(producers), Ordering::SeqCst);
                return;
            };
            let mut i = p;
            while i < count {
                let key = format!("{KEY_PREFIX}{i}");
                let m = Message::new(topic.as_str(), body.clone()).with_property(keys::UNIQ_KEY, &key);
                match producer.send(m) {
                    Ok(_) => sent.fetch_add(1, Ordering::SeqCst),
                    Err(_) => failed.fetch_add(1, Ordering::SeqCst),
                };
                i += producers;
            }
        }));
    }
    let mut progress = Progress::new("consumed", Some(o.count), quiet);
    let mut produced_in = None;
    let mut last_change = (Instant::now(), 0);
    let idle = Duration::from_secs(o.idle_timeout);
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let unique = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).unique;
        progress.update(unique);
        if produced_in.is_none() && threads.iter().all(std::thread::JoinHandle::is_finished) {
            produced_in = Some(started.elapsed());
        }
        let done_producing = produced_in.is_some();
        let expected = sent.load(Ordering::SeqCst);
        if done_producing && unique >= expected {
            break;
        }
        if unique != last_change.1 {
            last_change = (Instant::now(), unique);
        } else if last_change.0.elapsed() > idle {
            break;
        }
    }
    let consumed_in = started.elapsed();
    progress.finish();
    for t in threads {
        let _ = t.join();
    }
    rt.block_on(consumer.shutdown());
    if let Some(s) = server {
        s.stop();
    }
    let mut seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (sent, failed) = (sent.load(Ordering::SeqCst), failed.load(Ordering::SeqCst));
    let lost = sent.saturating_sub(seen.unique);
    seen.latencies_ms.sort_unstable();
    let pct = |p: f64| -> u32 {
        let l = &seen.latencies_ms;
        if l.is_empty() { 0 } else { l[((l.len() - 1) as f64 * p).round() as usize] }
    };
    if !quiet {
        let produced_in = produced_in.unwrap_or(consumed_in);
        say!(
            "  produced   {:>9} in {produced_in:>8.2?}  ({} msg/s)",
            thousands(sent),
            thousands(per_sec(sent, produced_in))
        );
        if failed > 0 {
            say!("  not sent   {:>9}", thousands(failed));
        }
        say!(
            "  consumed   {:>9} in {consumed_in:>8.2?}  ({} msg/s)",
            thousands(seen.unique),
            thousands(per_sec(seen.unique, consumed_in))
        );
        say!("  duplicates {:>9}", thousands(seen.duplicates));
        say!("  lost       {:>9}", thousands(lost));
        say!("  latency    p50 {} ms, p99 {} ms, max {} ms (born → listener)", pct(0.5), pct(0.99), pct(1.0));
    }
    Ok(if lost > 0 || failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
