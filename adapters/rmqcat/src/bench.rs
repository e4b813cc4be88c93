//! `rmqcat bench`: consume N messages as fast as possible through one adapter — or through the
//! raw-pull ceiling, the least a consumer can do — and report what users quote: msg/s, MB/s, CPU
//! per message, peak memory, context switches, born-to-listener latency.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use clap::{Args, ValueEnum};
use rocketmq_push_core::codec::{Outbound, RemotingCodec};
use rocketmq_push_core::message::{DecodeOptions, MessageExt, MessageQueue, decode_messages};
use rocketmq_push_core::protocol::header::{PullMessageRequestHeader, PullMessageResponseHeader};
use rocketmq_push_core::protocol::{ExpressionType, PullSysFlag, RemotingCommand, RequestCode, ResponseCode};
use rocketmq_push_core::{ConsumeFromWhere, ConsumeStatus};
use rocketmq_push_io::Client;

use crate::{Failure, Outcome, TIMEOUT, name_server};

/// What consumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Adapter {
    Tokio,
    Blocking,
    AsyncStd,
    Smol,
    /// One connection, one pull of 32 in flight per queue, the codec, nothing else: the ceiling.
    Raw,
}

/// Consume N messages as fast as possible and report throughput, CPU, memory and latency.
#[derive(Args)]
#[command(after_help = "Examples:
  rmqcat produce -t Bench --create 8 --count 300000 --size 100
  rmqcat bench -t Bench -c 300000                       the tokio adapter, a new group from the start
  rmqcat bench -t Bench -c 300000 --adapter raw         the raw-pull ceiling on the same messages
  rmqcat bench -t Bench -c 300000 --adapter blocking --json

Each run is a new consumer group reading from the first offset with Java's defaults (listener
batch 1, 20 listener slots, pull batch 32); the listener only counts. With --latency it also
records each message's latency from the producer's born timestamp to the listener: meaningful
when messages are produced while the bench runs (scripts/bench-clients.sh does both, latency in
a pass of its own). CPU and memory are this process's.")]
pub(crate) struct Opts {
    /// Name server (default $NAMESRV_ADDR).
    #[arg(short = 'n', long = "name-server", value_name = "ADDR")]
    name_server: Option<String>,
    /// Topic.
    #[arg(short, long)]
    topic: String,
    /// Messages to consume.
    #[arg(short, long, value_name = "N")]
    count: u64,
    /// Consumer group (default: a new one).
    #[arg(short, long)]
    group: Option<String>,
    /// What consumes.
    #[arg(long, value_enum, default_value_t = Adapter::Tokio)]
    adapter: Adapter,
    /// One JSON line instead of a table.
    #[arg(long)]
    json: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    limit: u64,
    /// Record each message's born-to-listener latency (a clock read per listener call). Without
    /// it the listener only counts, and no latency is reported: a clock read per call is the
    /// bench's own cost, paid per message by the adapters (listener batch 1) and per pull of 32
    /// by the raw loop.
    #[arg(long)]
    latency: bool,
    /// Worker threads of the tokio runtime (`--adapter tokio`).
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    tokio_workers: u16,
}

/// What the listener counts.
struct Tally {
    count: AtomicU64,
    bytes: AtomicU64,
    /// One slot per message (up to a cap), filled in arrival order: no lock shared by the
    /// listener threads, which would measure the bench instead of the consumer. Empty without
    /// `--latency`.
    latencies_ms: Vec<AtomicU32>,
    want: u64,
    /// When the first message reached the listener: start-up (routes, group membership,
    /// assignment, offsets, the first pull) is the time until then.
    first: OnceLock<Instant>,
    done: (Mutex<Option<Instant>>, Condvar),
}

impl Tally {
    fn see(&self, msgs: &[MessageExt]) {
        // One counter gives both this call's latency slots and the total.
        let first = self.count.fetch_add(msgs.len() as u64, Ordering::Relaxed) as usize;
        if first == 0 && !msgs.is_empty() {
            let _ = self.first.set(Instant::now());
        }
        if first < self.latencies_ms.len() {
            let now = now_ms();
            for (slot, m) in self.latencies_ms.iter().skip(first).zip(msgs) {
                let ms = u32::try_from((now - m.born_timestamp).max(0)).unwrap_or(u32::MAX);
                // Stored +1 so an empty slot (0) is told apart.
                slot.store(ms.saturating_add(1), Ordering::Relaxed);
            }
        }
        let bytes: u64 = msgs.iter().map(|m| m.body.len() as u64).sum();
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if (first + msgs.len()) as u64 >= self.want {
            let (last, cv) = &self.done;
            let mut last = last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if last.is_none() {
                *last = Some(Instant::now());
                cv.notify_all();
            }
        }
    }

    /// Wait until everything arrived (or `limit`): when the last one did.
    fn wait(&self, limit: Duration) -> Option<Instant> {
        let (last, cv) = &self.done;
        let guard = last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (guard, _) = cv
            .wait_timeout_while(guard, limit, |l| l.is_none())
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *guard
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A builder of any adapter with the bench's settings (Java's defaults, a new group from the start).
macro_rules! bench_builder {
    ($consumer:ty, $ns:expr, $group:expr, $topic:expr) => {
        <$consumer>::builder($group.as_str())
            .name_server($ns.as_str())
            .subscribe($topic.as_str(), "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .on_event(|_| {})
    };
}

pub(crate) fn run(o: Opts) -> Outcome {
    let ns = name_server(o.name_server.clone())?;
    if o.count == 0 {
        return Err(Failure::Usage("--count must be at least 1".into()));
    }
    let group = o.group.clone().unwrap_or_else(|| format!("rmqcat_bench_{}", now_ms()));
    let tally = Arc::new(Tally {
        count: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        latencies_ms: (0..if o.latency { o.count.min(10_000_000) } else { 0 })
            .map(|_| AtomicU32::new(0))
            .collect(),
        want: o.count,
        first: OnceLock::new(),
        done: (Mutex::new(None), Condvar::new()),
    });
    let limit = Duration::from_secs(o.limit);
    let started = Instant::now();
    let last = match o.adapter {
        Adapter::Raw => {
            let t = tally.clone();
            let (ns, topic, group) = (ns, o.topic.clone(), group);
            std::thread::spawn(move || {
                if let Err(e) = raw(&ns, &topic, &group, &t) {
                    say!("rmqcat: bench: {e}");
                    std::process::exit(1);
                }
                // Outlive the measurement: a thread's context switches are counted only while
                // it exists (the process ends after the report).
                loop {
                    std::thread::park();
                }
            });
            tally.wait(limit).map(|l| (l, usage()))
        }
        Adapter::Blocking => {
            let t = tally.clone();
            let c = bench_builder!(rocketmq_push_blocking::PushConsumer, &ns, &group, &o.topic)
                .listener(move |msgs, _| {
                    t.see(&msgs);
                    ConsumeStatus::Success
                })
                .start()
                .map_err(|e| Failure::Runtime(e.to_string()))?;
            let last = tally.wait(limit).map(|l| (l, usage()));
            c.shutdown();
            last
        }
        Adapter::Tokio => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(usize::from(o.tokio_workers))
                .enable_all()
                .build()
                .map_err(|e| Failure::Runtime(e.to_string()))?;
            let _enter = rt.enter();
            let t = tally.clone();
            let c = bench_builder!(rocketmq_push_tokio::PushConsumer, &ns, &group, &o.topic)
                .listener(move |msgs, _| {
                    t.see(&msgs);
                    async { ConsumeStatus::Success }
                })
                .start()
                .map_err(|e| Failure::Runtime(e.to_string()))?;
            let last = tally.wait(limit).map(|l| (l, usage()));
            rt.block_on(c.shutdown());
            last
        }
        Adapter::AsyncStd => {
            let t = tally.clone();
            let c = bench_builder!(rocketmq_push_async_std::PushConsumer, &ns, &group, &o.topic)
                .listener(move |msgs, _| {
                    t.see(&msgs);
                    async { ConsumeStatus::Success }
                })
                .start()
                .map_err(|e| Failure::Runtime(e.to_string()))?;
            let last = tally.wait(limit).map(|l| (l, usage()));
            async_std::task::block_on(c.shutdown());
            last
        }
        Adapter::Smol => {
            let t = tally.clone();
            let c = bench_builder!(rocketmq_push_smol::PushConsumer, &ns, &group, &o.topic)
                .listener(move |msgs, _| {
                    t.see(&msgs);
                    async { ConsumeStatus::Success }
                })
                .start()
                .map_err(|e| Failure::Runtime(e.to_string()))?;
            let last = tally.wait(limit).map(|l| (l, usage()));
            smol::block_on(c.shutdown());
            last
        }
    };
    // Measured at the last message, before the shutdown: what consuming cost, with every
    // thread of the consumer still there to count its switches.
    let Some((last, used)) = last else {
        let n = tally.count.load(Ordering::Relaxed);
        return Err(Failure::Runtime(format!("only {n} of {} messages in {} s", o.count, o.limit)));
    };
    let first = tally.first.get().map_or(Duration::ZERO, |f| f.saturating_duration_since(started));
    report(&o, &tally, last - started, first, used);
    Ok(ExitCode::SUCCESS)
}

/// The process's CPU seconds (user + system, every thread's), peak RSS in KiB and context
/// switches, from /proc.
/// Switches are counted per thread, so only threads still running count: take it while the
/// consumer runs (scripts/bench-clients.sh takes the whole process's from GNU time).
fn usage() -> (f64, u64, u64) {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let cpu = t.tv_sec as f64 + t.tv_nsec as f64 / 1e9;
    let field = |status: &str, name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    // Each thread counts its own switches.
    let switches: u64 = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .map(|s| field(&s, "voluntary_ctxt_switches:") + field(&s, "nonvoluntary_ctxt_switches:"))
        .sum();
    (cpu, field(&status, "VmHWM:"), switches)
}

fn report(o: &Opts, t: &Tally, took: Duration, first: Duration, (cpu, rss_kib, switches): (f64, u64, u64)) {
    let n = t.count.load(Ordering::Relaxed);
    let bytes = t.bytes.load(Ordering::Relaxed);
    let secs = took.as_secs_f64().max(1e-9);
    let mut l: Vec<u32> =
        t.latencies_ms.iter().map(|s| s.load(Ordering::Relaxed)).filter(|v| *v > 0).map(|v| v - 1).collect();
    l.sort_unstable();
    let pct = |q: f64| l.get(((l.len().max(1) - 1) as f64 * q) as usize).copied().unwrap_or(0);
    let (p50, p99) = (pct(0.5), pct(0.99));
    let adapter = format!("{:?}", o.adapter).to_lowercase();
    if o.json {
        let latency = if o.latency { format!(",\"p50_ms\":{p50},\"p99_ms\":{p99}") } else { String::new() };
        out!(
            "{{\"client\":\"{adapter}\",\"count\":{n},\"ms\":{},\"first_ms\":{:.1},\"msg_per_s\":{:.0},\"mb_per_s\":{:.2},\"cpu_s\":{cpu:.2},\"cpu_s_per_million\":{:.2},\"peak_rss_kib\":{rss_kib},\"context_switches\":{switches}{latency}}}",
            took.as_millis(),
            first.as_secs_f64() * 1e3,
            n as f64 / secs,
            bytes as f64 / secs / 1e6,
            cpu * 1e6 / n.max(1) as f64,
        );
    } else {
        out!(
            "{n} messages through {adapter} in {took:.2?} (the first after {first:.1?}): {:.0} msg/s, {:.2} MB/s",
            n as f64 / secs,
            bytes as f64 / secs / 1e6
        );
        let latency = if o.latency {
            format!("latency p50 {p50} ms p99 {p99} ms")
        } else {
            "latency not recorded".to_owned()
        };
        out!(
            "CPU {cpu:.2} s ({:.2} s per million), peak RSS {} MiB, {switches} context switches, {latency}",
            cpu * 1e6 / n.max(1) as f64,
            rss_kib / 1024
        );
    }
}

/// The raw-pull ceiling: one connection to the topic's first broker, a pull of 32 in flight per
/// queue, decode, count, pull again. No rebalance, process queue, listener or commits.
fn raw(ns: &str, topic: &str, group: &str, tally: &Tally) -> Result<(), Box<dyn std::error::Error>> {
    let route = Client::connect(ns, TIMEOUT)?.route(topic)?;
    let queues = route.subscribe_queues(topic);
    let broker = route.broker_datas.first().and_then(|b| b.master_or_any()).ok_or("no broker")?.to_owned();
    let mut stream = TcpStream::connect(&broker)?;
    stream.set_nodelay(true)?;
    let (codec, outbound) = (RemotingCodec::new(), Outbound::new());
    let mut queue_of: HashMap<i32, MessageQueue> = HashMap::new();
    let mut opaque = 0;
    let mut out = BytesMut::new();
    let mut pull =
        |q: &MessageQueue, offset: i64, out: &mut BytesMut, queue_of: &mut HashMap<i32, MessageQueue>| {
            opaque += 1;
            queue_of.insert(opaque, q.clone());
            let header = PullMessageRequestHeader {
                consumer_group: group.to_owned(),
                topic: topic.to_owned(),
                queue_id: q.queue_id,
                queue_offset: offset,
                max_msg_nums: 32,
                sys_flag: PullSysFlag::build(false, true, true).0,
                commit_offset: 0,
                suspend_timeout_millis: 15_000,
                subscription: Some("*".into()),
                sub_version: 0,
                expression_type: Some(ExpressionType::Tag),
                max_msg_bytes: None,
                bname: Some(q.broker_name.to_string()),
            };
            let cmd =
                RemotingCommand::request(RequestCode::PullMessage).with_header(&header).with_opaque(opaque);
            outbound.finish(&cmd, out);
        };
    for q in &queues {
        pull(q, 0, &mut out, &mut queue_of);
    }
    stream.write_all(&out)?;
    out.clear();
    let mut buf = BytesMut::with_capacity(1 << 20);
    let mut chunk = vec![0u8; 256 * 1024];
    let opts = DecodeOptions::default();
    while tally.count.load(Ordering::Relaxed) < tally.want {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err("the broker closed the connection".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        while let Some(cmd) = codec.decode(&mut buf)? {
            let Some(q) = queue_of.remove(&cmd.opaque) else { continue };
            let h: PullMessageResponseHeader = cmd.header()?;
            if cmd.code == ResponseCode::Success as i32 {
                tally.see(&decode_messages(&cmd.body, &opts)?);
            }
            pull(&q, h.next_begin_offset, &mut out, &mut queue_of);
        }
        if !out.is_empty() {
            stream.write_all(&out)?;
            out.clear();
        }
    }
    Ok(())
}
