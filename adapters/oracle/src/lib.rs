//! Java as the oracle. The same consumer setup runs as Java's `DefaultMQPushConsumer`
//! (`scripts/java-oracle.sh`, a process fed `key=value` arguments and stopped by a line on stdin)
//! and as ours (the blocking adapter, in this process); both record every message their listener
//! sees with the same fields, and the tests compare the two.
#![allow(clippy::disallowed_methods, missing_docs)] // test code: real clocks, sockets, processes

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketmq_push_blocking::{ConsumeFromWhere, ConsumeStatus, MessageModel, PushConsumer};
use rocketmq_push_core::json::Value;
use rocketmq_push_core::message::{Message, keys};
use rocketmq_push_io::{Client, Producer};

/// One message as a listener saw it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rec {
    pub broker: String,
    pub queue: i32,
    pub offset: i64,
    pub key: String,
    pub body: String,
    pub reconsume: i32,
    /// The topic as the listener saw it (a retry carries its original topic).
    pub topic: String,
    pub tags: Option<String>,
    /// When the listener saw it (ms since the epoch).
    pub ms: i64,
}

/// Where a new group starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum From {
    First,
    Last,
    /// Milliseconds since the epoch.
    Timestamp(i64),
}

/// One consumer setup, run the same way by both.
#[derive(Clone, Debug)]
pub struct Setup {
    pub group: String,
    pub topic: String,
    pub expr: String,
    pub sql: Option<String>,
    pub from: From,
    pub broadcasting: bool,
    pub orderly: bool,
    /// RECONSUME_LATER while a message's reconsumeTimes is below this (−1: always).
    pub fail: i32,
    /// Orderly: SUSPEND_CURRENT_QUEUE_A_MOMENT on a message's first delivery.
    pub suspend: bool,
    pub max_reconsume: Option<i32>,
    pub threads: usize,
    /// Java's instanceName (broadcasting's offsets.json lives under its client id).
    pub instance: Option<String>,
    /// Java's `rocketmq.client.localOffsetStoreDir`.
    pub offset_dir: Option<PathBuf>,
    /// Ours: the offsets.json file.
    pub offset_file: Option<PathBuf>,
    /// `setNamespace`: topic, group and retry names travel as `NS%name`.
    pub namespace: Option<String>,
    /// Java: `setClientRebalance(false)`, so a group switched to POP pops (ours follows the
    /// broker's mode by default).
    pub broker_rebalance: bool,
}

impl Setup {
    pub fn new(group: &str, topic: &str) -> Self {
        Self {
            group: group.into(),
            topic: topic.into(),
            expr: "*".into(),
            sql: None,
            from: From::Last,
            broadcasting: false,
            orderly: false,
            fail: 0,
            suspend: false,
            max_reconsume: None,
            threads: 4,
            instance: None,
            offset_dir: None,
            offset_file: None,
            namespace: None,
            broker_rebalance: false,
        }
    }
}

/// A consumer of either kind, running.
pub trait Running {
    /// Everything its listener saw so far.
    fn seen(&self) -> Vec<Rec>;
    /// Graceful shutdown; returns everything seen.
    fn stop(self: Box<Self>) -> Vec<Rec>;
}

/// Java's, as a process.
pub struct Java {
    child: Child,
    stdin: Option<ChildStdin>,
    seen: Arc<Mutex<Vec<Rec>>>,
    reader: Option<JoinHandle<()>>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn java_timestamp(ms: i64) -> String {
    // yyyyMMddHHmmss in UTC; the JVM runs with -Duser.timezone=UTC for it.
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil from days (Howard Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}{:02}{:02}{:02}", sod / 3600, sod / 60 % 60, sod % 60)
}

impl Java {
    pub fn start(ns: &str, s: &Setup) -> Self {
        let mut args = vec![
            format!("namesrv={ns}"),
            format!("group={}", s.group),
            format!("topic={}", s.topic),
            format!("fail={}", s.fail),
            format!("threads={}", s.threads),
        ];
        match &s.sql {
            Some(sql) => args.push(format!("sql={sql}")),
            None => args.push(format!("expr={}", s.expr)),
        }
        match s.from {
            From::First => args.push("from=first".into()),
            From::Last => args.push("from=last".into()),
            From::Timestamp(ms) => {
                args.push("from=timestamp".into());
                args.push(format!("timestamp={}", java_timestamp(ms)));
            }
        }
        if s.broadcasting {
            args.push("model=broadcasting".into());
        }
        if s.orderly {
            args.push("orderly=true".into());
        }
        if s.suspend {
            args.push("suspend=true".into());
        }
        if let Some(n) = s.max_reconsume {
            args.push(format!("maxReconsume={n}"));
        }
        if let Some(i) = &s.instance {
            args.push(format!("instance={i}"));
        }
        if let Some(n) = &s.namespace {
            args.push(format!("namespace={n}"));
        }
        if s.broker_rebalance {
            args.push("clientRebalance=false".into());
        }
        let mut jvm = "-Duser.timezone=UTC".to_owned();
        if let Some(d) = &s.offset_dir {
            jvm.push_str(&format!(" -Drocketmq.client.localOffsetStoreDir={}", d.display()));
        }
        let mut child = Command::new(repo().join("scripts/java-oracle.sh"))
            .args(&args)
            .env("RMQ_ORACLE_JVM_OPTS", jvm)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("scripts/java-oracle.sh runs");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        // Wait for "started" (the first run builds the helpers with Maven).
        let mut err = BufReader::new(stderr);
        let mut line = String::new();
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            line.clear();
            let n = err.read_line(&mut line).unwrap_or(0);
            assert!(n > 0 && Instant::now() < deadline, "the Java oracle did not start: {line}");
            if line.trim() == "started" {
                break;
            }
        }
        std::thread::spawn(move || for _ in err.lines() {});
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(r) = parse(&line) {
                    sink.lock().unwrap().push(r);
                }
            }
        });
        Self { child, stdin, seen, reader: Some(reader) }
    }
}

fn parse(line: &str) -> Option<Rec> {
    let v = Value::parse(line.as_bytes()).ok()?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let n = |k: &str| v.get(k).and_then(Value::as_i64);
    Some(Rec {
        broker: s("broker")?,
        queue: n("queue")? as i32,
        offset: n("offset")?,
        key: s("key")?,
        body: s("body")?,
        reconsume: n("reconsume")? as i32,
        topic: s("topic")?,
        tags: s("tags"),
        ms: n("ms")?,
    })
}

impl Running for Java {
    fn seen(&self) -> Vec<Rec> {
        self.seen.lock().unwrap().clone()
    }

    fn stop(mut self: Box<Self>) -> Vec<Rec> {
        if let Some(mut i) = self.stdin.take() {
            let _ = writeln!(i, "stop");
        }
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.seen()
    }
}

impl Drop for Java {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Ours: the blocking adapter, in this process.
pub struct Ours {
    consumer: Option<PushConsumer>,
    seen: Arc<Mutex<Vec<Rec>>>,
}

impl Ours {
    pub fn start(ns: &str, s: &Setup) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let from = match s.from {
            From::First => ConsumeFromWhere::ConsumeFromFirstOffset,
            From::Last => ConsumeFromWhere::ConsumeFromLastOffset,
            From::Timestamp(_) => ConsumeFromWhere::ConsumeFromTimestamp,
        };
        let group = s.group.clone();
        let mut b = PushConsumer::builder(s.group.as_str())
            .name_server(ns)
            .consume_from_where(from)
            .message_model(if s.broadcasting { MessageModel::Broadcasting } else { MessageModel::Clustering })
            // Printed where the test harness captures it: shown when a test fails, to tell a
            // difference in behaviour from a broker that was slow.
            .on_event(move |e| eprintln!("{} [ours {group}] {e:?}", now_ms()));
        b = match &s.sql {
            Some(sql) => b.subscribe_sql(s.topic.as_str(), sql.as_str()),
            None => b.subscribe(s.topic.as_str(), s.expr.as_str()),
        };
        if let From::Timestamp(ms) = s.from {
            b = b.consume_timestamp_ms(ms);
        }
        if s.orderly {
            b = b.orderly();
        }
        if let Some(f) = &s.offset_file {
            b = b.offset_file(f);
        }
        let (threads, max) = (s.threads, s.max_reconsume.unwrap_or(-1));
        let namespace = s.namespace.clone();
        b = b.configure(|c| {
            let c = c.consume_thread_min(threads).consume_thread_max(threads).max_reconsume_times(max);
            match namespace {
                Some(n) => c.namespace(n),
                None => c,
            }
        });
        let (fail, suspend) = (s.fail, s.suspend);
        let first_seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let consumer = b
            .listener(move |msgs, mut ctx| {
                let mut later = false;
                let mut first = false;
                for m in &msgs {
                    let rec = Rec {
                        broker: ctx.queue.broker_name.to_string(),
                        queue: ctx.queue.queue_id,
                        offset: m.queue_offset,
                        key: m.msg_id().into_owned(),
                        body: String::from_utf8_lossy(&m.body).into_owned(),
                        reconsume: m.reconsume_times,
                        topic: m.topic.to_string(),
                        tags: m.tags().map(str::to_owned),
                        ms: now_ms(),
                    };
                    first |= first_seen.lock().unwrap().insert(rec.key.clone());
                    later |= fail < 0 || m.reconsume_times < fail;
                    sink.lock().unwrap().push(rec);
                }
                if suspend && first {
                    ctx.suspend_millis = Some(100);
                    return ctx.result(ConsumeStatus::SuspendCurrentQueueAMoment);
                }
                ctx.result(if later { ConsumeStatus::ReconsumeLater } else { ConsumeStatus::Success })
            })
            .start()
            .expect("our consumer starts");
        Self { consumer: Some(consumer), seen }
    }
}

impl Running for Ours {
    fn seen(&self) -> Vec<Rec> {
        self.seen.lock().unwrap().clone()
    }

    fn stop(mut self: Box<Self>) -> Vec<Rec> {
        if let Some(c) = self.consumer.take() {
            c.shutdown();
        }
        self.seen()
    }
}

/// The real broker of the test run, or `None` (skip) unless `RMQ_REQUIRE_BROKER=1`.
pub fn broker() -> Option<(String, String)> {
    match (std::env::var("NAMESRV_ADDR"), std::env::var("BROKER_ADDR")) {
        (Ok(ns), Ok(b)) if std::net::TcpStream::connect(&b).is_ok() => Some((ns, b)),
        _ => {
            assert!(
                std::env::var("RMQ_REQUIRE_BROKER").as_deref() != Ok("1"),
                "RMQ_REQUIRE_BROKER=1 but no broker: run scripts/rocketmq.sh start"
            );
            eprintln!("note: no real broker; skipping");
            None
        }
    }
}

/// Tests of this crate take this first: each runs Java and ours against the one broker, and
/// side by side on two cores their timings would bleed into each other.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A name no earlier run used.
pub fn unique(prefix: &str) -> String {
    let n = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() % 10_000_000_000;
    format!("{prefix}_{n}")
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// The offsets `group` committed on queues `0..queues` of `topic` at broker-a (0 where none).
pub fn committed(broker: &str, group: &str, topic: &str, queues: i32) -> Vec<i64> {
    let mut c = Client::connect(broker, Duration::from_secs(10)).unwrap();
    (0..queues)
        .map(|q| {
            let mq = rocketmq_push_core::MessageQueue::new(topic, "broker-a", q);
            c.query_offset(group, &mq).unwrap().unwrap_or(0)
        })
        .collect()
}

/// Create `topic` with `queues` queues on the broker.
pub fn create_topic(broker: &str, topic: &str, queues: i32) {
    Client::connect(broker, Duration::from_secs(10)).unwrap().create_topic(topic, queues).unwrap();
}

/// Produce `n` messages (keys `prefix-i`, round-robin over the queues); `f` may set tags and
/// properties. Returns the keys.
pub fn produce(
    ns: &str,
    topic: &str,
    prefix: &str,
    n: usize,
    f: impl Fn(usize, Message) -> Message,
) -> Vec<String> {
    let mut p = Producer::new(ns, Duration::from_secs(10));
    (0..n)
        .map(|i| {
            let key = format!("{prefix}-{i}");
            let m =
                f(i, Message::new(topic, format!("body {prefix} {i}")).with_property(keys::UNIQ_KEY, &key));
            p.send(m).unwrap_or_else(|e| panic!("send {key}: {e}"));
            key
        })
        .collect()
}

/// Wait until `done` or `limit`; then wait `quiet` more with nothing new (stragglers).
pub fn settle(c: &dyn Running, limit: Duration, quiet: Duration, mut done: impl FnMut(&[Rec]) -> bool) {
    let deadline = Instant::now() + limit;
    while !done(&c.seen()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut n = c.seen().len();
    let mut still = Instant::now();
    while still.elapsed() < quiet {
        std::thread::sleep(Duration::from_millis(100));
        let m = c.seen().len();
        if m != n {
            (n, still) = (m, Instant::now());
        }
    }
}

/// `(queue, offset)` of every first delivery, as a set.
pub fn positions(recs: &[Rec]) -> BTreeSet<(i32, i64)> {
    recs.iter().filter(|r| r.reconsume == 0).map(|r| (r.queue, r.offset)).collect()
}

/// Deliveries per key: the reconsume counts and topics seen, in order.
pub fn histories(recs: &[Rec]) -> BTreeMap<String, Vec<(i32, String)>> {
    let mut h: BTreeMap<String, Vec<(i32, String)>> = BTreeMap::new();
    for r in recs {
        h.entry(r.key.clone()).or_default().push((r.reconsume, r.topic.clone()));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_timestamps_are_utc_civil_time() {
        assert_eq!(java_timestamp(0), "19700101000000");
        assert_eq!(java_timestamp(1_796_205_600_000), "20261202100000");
        assert_eq!(java_timestamp(951_868_799_500), "20000229235959");
    }
}
