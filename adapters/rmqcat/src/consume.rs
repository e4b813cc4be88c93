//! `rmqcat consume`: a push consumer on the tokio adapter printing one line per message.
//!
//! Only printed messages are acknowledged. Once COUNT is reached (or on Ctrl-C, or when stdout
//! closes), batches still arriving are held unanswered, so the graceful shutdown commits exactly
//! up to what was printed and the rest is delivered again next time — not sent to the retry topic.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use rocketmq_push_core::{
    ConsumeFromWhere, ConsumeStatus, ConsumerConfigBuilder, Event, MessageExt, MessageModel,
};
use rocketmq_push_io::{LOG_WINDOW, Repeats};
use rocketmq_push_tokio::PushConsumer;
use tokio::sync::Notify;

use crate::format::{self, Format};
use crate::progress::{Progress, thousands};
use crate::{Failure, Outcome, admin, name_server};

/// Consume a topic and print one line per message (stdout); progress and errors go to stderr.
#[derive(Args)]
#[command(after_help = "Examples:
  rmqcat consume -n 127.0.0.1:9876 -t TopicA -e          read every queue to its end, as kcat -C -e
  rmqcat consume -t TopicA -o -10 -e -f '%p:%o %T %g %s\\n'    the last 10 of each queue
  rmqcat consume -t TopicA -p 0 -o @2026-12-02T10:00:00Z -e    queue 0 from a time
  rmqcat consume -n 127.0.0.1:9876 -g my_group -t TopicA        as a member of a group
  rmqcat consume -g G -t TopicA -c 10 --from first
  rmqcat consume -g G -t TopicA -T 'TagA || TagB' --json
  rmqcat consume -g G -t TopicA --sql 'a > 5' --orderly
  rmqcat consume -g G -t TopicA --orderly-pop          orderly, popping where the group pops
  rmqcat consume -g G -t TopicA --broadcast
  rmqcat consume -g G -t TopicA -X pullBatchSize=16 -X consumeTimeout=5     Java's knobs by name
  rmqcat consume -g G -t TopicA --prometheus 127.0.0.1:0      metrics at the printed address
  rmqcat consume -g G -t TopicA --trace -c 1                   trace to RMQ_SYS_TRACE_TOPIC

Without -g it reads like kcat -C: plain pulls from -o (default beginning) on every queue or the
one -p names, no group membership and nothing committed; -e exits once every queue is caught
up with its end (checked when a pull finds nothing). With -g it consumes as a member of the
group, as Java's DefaultMQPushConsumer does: --from applies to a group with no committed offset
and the offsets of what was printed are committed on exit. kcat's -e is -e here too; the tag
expression is -T (as produce's -T sets the tag).

Format placeholders, as kcat's: %s body, %S body size, %R body size as a 4-byte big-endian
integer, %k keys, %K keys' size (-1 without keys), %T born timestamp (ms; kcat's message
timestamp), %h user properties (k=v,…; kcat's headers), %t topic, %p queue id (kcat's partition),
%o offset. RocketMQ's own: %g tag, %i msg id, %r reconsume times, %q queue id (as %p). %% percent;
\\n \\r \\t \\\\ \\xXX escapes.
--json prints one object per message; a body that is not UTF-8 is base64 with \"bodyBase64\":true.
-X sets a knob of Java's DefaultMQPushConsumer by its Java name, in Java's units (ms; minutes
for consumeTimeout; MiB for the size thresholds; -1 for off), after the flags (it wins over them);
rmqcat keeps consumeMessageBatchMaxSize, consumeThreadMin/Max (one message at a time) and the
namespace (--namespace) to itself.
-o takes beginning, end, an offset N, -N (the last N of each queue) or @TIMESTAMP; --from
(with -g) first, last or TIMESTAMP. A timestamp is milliseconds since the epoch, RFC 3339 (2026-12-02T10:00:00Z, or with an offset such
as +08:00), or Java's yyyyMMddHHmmss (20261202100000, read as UTC).
Exits after COUNT messages or on Ctrl-C (with -g: with the offsets of what was printed committed).")]
pub(crate) struct Opts {
    /// Name server(s), `host:port[;host:port]` (default: $NAMESRV_ADDR).
    #[arg(short = 'n', long = "name-server", value_name = "ADDR")]
    name_server: Option<String>,
    /// Consume as a member of this group (committing offsets); without it, read with plain pulls.
    #[arg(short, long)]
    group: Option<String>,
    /// Topic.
    #[arg(short, long)]
    topic: String,
    /// Without -g: where each queue starts: beginning, end, N, -N or @TIMESTAMP (beginning).
    #[arg(short = 'o', long = "offset", value_name = "OFFSET", allow_hyphen_values = true)]
    offset: Option<String>,
    /// Without -g: exit once every queue is caught up with its end.
    #[arg(short = 'e', long = "exit")]
    exit_at_end: bool,
    /// Without -g: read only this queue id (kcat's partition).
    #[arg(short = 'p', long = "queue", value_name = "QUEUE_ID")]
    queue: Option<i32>,
    /// Tag expression, e.g. `TagA || TagB`.
    #[arg(
        short = 'T',
        long = "tags",
        visible_alias = "expression",
        default_value = "*",
        conflicts_with = "sql"
    )]
    expression: String,
    /// SQL92 filter expression (the broker needs enablePropertyFilter=true).
    #[arg(long, value_name = "EXPR")]
    sql: Option<String>,
    /// Where a group with no committed offset starts: first, last (default), or a timestamp.
    #[arg(long, value_name = "first|last|TIMESTAMP")]
    from: Option<String>,
    /// Exit after this many messages.
    #[arg(short, long, value_name = "COUNT")]
    count: Option<u64>,
    /// Broadcasting: every member gets every message (offsets kept in a local file).
    #[arg(long)]
    broadcast: bool,
    /// Orderly: one batch per queue at a time, in offset order, under a broker lock.
    #[arg(long)]
    orderly: bool,
    /// Orderly, and where the group pops (`rmqcat group mode ... pop`) pop in order: the broker
    /// locks each queue until what it handed out is acked (implies --orderly; no Java
    /// counterpart: Java's orderly consumer always pulls).
    #[arg(long)]
    orderly_pop: bool,
    /// Output format (see below).
    #[arg(short, long, conflicts_with = "json", value_name = "FORMAT")]
    format: Option<String>,
    /// One JSON object per message.
    #[arg(long)]
    json: bool,
    /// With -g: serve the consumer's metrics for Prometheus at http://ADDR/metrics
    /// (rocketmq_process_time, rocketmq_consume_messages_total, rocketmq_consumer_cached_messages
    /// and _bytes, rocketmq_consumer_lag_messages).
    #[arg(long, value_name = "ADDR")]
    prometheus: Option<String>,
    /// With -g: message trace as Java's enableMsgTrace writes it, to RMQ_SYS_TRACE_TOPIC or the
    /// topic given (customizedTraceTopic); `mqadmin queryMsgTraceById` shows it.
    #[arg(long, value_name = "TOPIC", num_args = 0..=1, default_missing_value = "")]
    trace: Option<String>,
    /// With -g: a knob of Java's DefaultMQPushConsumer by its Java name, in Java's units
    /// (`-X pullBatchSize=64 -X consumeTimeout=5`); repeatable, applied after rmqcat's own.
    #[arg(short = 'X', value_name = "KNOB=VALUE")]
    knobs: Vec<String>,
}

/// One message per call and one call at a time: lines come in queue order, and a count stops
/// exactly where the commit lands. Held batches end the drain after 1 s.
fn own_settings(c: ConsumerConfigBuilder) -> ConsumerConfigBuilder {
    c.consume_message_batch_max_size(1)
        .consume_thread_min(1)
        .consume_thread_max(1)
        .await_termination_when_shutdown(Duration::from_secs(1))
}

/// Knobs rmqcat holds itself: the three that make a count commit exactly what was printed, and
/// the namespace (`--namespace`), which the start-up checks must see too. A `--config` file's
/// values for them are for the team's applications and left alone here.
const OWN_KNOBS: [&str; 4] =
    ["consumeMessageBatchMaxSize", "consumeThreadMin", "consumeThreadMax", "namespace"];

/// The `--config` file's knobs, then the `-X` pairs, each checked by the core exactly as
/// `.configure(…)` would take it.
fn knobs(pairs: &[String]) -> Result<Vec<(String, String)>, Failure> {
    let mut out = Vec::with_capacity(pairs.len());
    let probe =
        rocketmq_push_core::ConsumerConfig::builder("probe").name_server("127.0.0.1:1").subscribe("T", "*");
    let mut probe = own_settings(probe);
    for (k, v) in crate::config_file().knobs.iter().filter(|(k, _)| !OWN_KNOBS.contains(&k.as_str())) {
        probe = probe.set(k, v).map_err(|e| Failure::Usage(format!("--config: {e}")))?;
        out.push((k.clone(), v.clone()));
    }
    for p in pairs {
        let Some((k, v)) = p.split_once('=') else {
            return Err(Failure::Usage(format!("-X {p:?}: expected KNOB=VALUE, e.g. -X pullBatchSize=64")));
        };
        if OWN_KNOBS.contains(&k.trim()) {
            return Err(Failure::Usage(format!(
                "-X {p}: rmqcat sets {} itself (one message at a time, so a count commits exactly \
                 what was printed; the namespace with --namespace)",
                k.trim()
            )));
        }
        probe = probe.set(k.trim(), v).map_err(|e| {
            let known = rocketmq_push_core::config::JAVA_KNOBS;
            match known.contains(&k.trim()) {
                true => Failure::Usage(format!("-X {p}: {e}")),
                false => Failure::Usage(format!(
                    "-X {p}: unknown knob {:?}; known: {}",
                    k.trim(),
                    known.join(", ")
                )),
            }
        })?;
        out.push((k.trim().to_owned(), v.to_owned()));
    }
    probe.build().map_err(|e| Failure::Usage(format!("{e} (set by --config or -X)")))?;
    Ok(out)
}

/// `--from`.
fn parse_from(s: &str) -> Result<(ConsumeFromWhere, Option<i64>), Failure> {
    match s {
        "first" => Ok((ConsumeFromWhere::ConsumeFromFirstOffset, None)),
        "last" => Ok((ConsumeFromWhere::ConsumeFromLastOffset, None)),
        _ => crate::time::parse(s).map(|ms| (ConsumeFromWhere::ConsumeFromTimestamp, Some(ms))).ok_or_else(
            || Failure::Usage(format!("--from {s:?}: expected first, last, or {}", crate::time::FORMS)),
        ),
    }
}

/// Events worth a line on stderr while consuming.
fn describe(e: &Event) -> Option<String> {
    Some(match e {
        Event::ConnectionLost { peer, reason } => format!("connection to {peer} lost ({reason}); retrying"),
        Event::BrokerError { peer, request, code, remark } => {
            format!("{peer} answered {request} with {code}: {remark}")
        }
        Event::Malformed { peer, request, error } => {
            format!("unreadable {request} frame from {peer}: {error}")
        }
        Event::RequestTimeout { peer, request } => format!("{request} to {peer} timed out; retrying"),
        Event::TopicNotFound { topic } => format!("topic {topic} not found; retrying"),
        Event::TopicRefused { topic, peer, remark, .. } => {
            format!("{peer} refused topic {topic} (no permission: {remark}); retrying every 30 s")
        }
        Event::CorruptPull { queue, error } => format!("unreadable pull from {queue:?}: {error}"),
        Event::RecordsOutOfRange { queue, count, .. } => {
            format!("{count} record(s) from {queue:?} outside the offsets asked for: dropped")
        }
        Event::LockFailed { queue } => format!("could not lock {queue:?}; retrying"),
        Event::MessageRequestModeChanged { topic, mode } => {
            format!("the brokers now hand out {topic} by {mode} (the group's mode was switched)")
        }
        _ => return None,
    })
}

struct Shared {
    format: Option<Format>,
    /// Messages still to print (`None`: unlimited).
    remaining: Option<AtomicU64>,
    stopping: AtomicBool,
    printed: AtomicU64,
    done: Notify,
}

impl Shared {
    /// Claim one message for printing.
    fn claim(&self) -> bool {
        if self.stopping.load(Ordering::SeqCst) {
            return false;
        }
        match &self.remaining {
            None => true,
            Some(r) => r.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok(),
        }
    }

    fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.done.notify_one();
    }

    /// The line for `m`, if it may still be printed (`None`: it must stay unanswered).
    fn render(&self, m: &MessageExt) -> Option<Vec<u8>> {
        if !self.claim() {
            self.stop();
            return None;
        }
        let mut out = Vec::with_capacity(m.body.len() + 64);
        format::render(self.format.as_ref(), m, &mut out);
        Some(out)
    }

    /// Write a rendered line; false when stdout is closed (it then stays unanswered).
    fn write(&self, out: &[u8]) -> bool {
        let mut stdout = std::io::stdout().lock();
        if stdout.write_all(out).and_then(|()| stdout.flush()).is_err() {
            // stdout closed (`| head`): nothing more can be printed.
            self.stop();
            return false;
        }
        self.printed.fetch_add(1, Ordering::SeqCst);
        if self.remaining.as_ref().is_some_and(|r| r.load(Ordering::SeqCst) == 0) {
            self.stop();
        }
        true
    }

    /// Print `m` from the listener, which runs on the consumer's own task. A write that would
    /// block (a reader falling behind) goes to a blocking thread instead, so a stalled reader
    /// never stops the consumer heartbeating and answering the broker; the usual write, with
    /// room in the pipe, stays inline and costs no thread hand-off.
    async fn print(self: &Arc<Self>, m: &MessageExt) -> bool {
        let Some(out) = self.render(m) else { return false };
        if stdout_has_room_for(out.len()) {
            return self.write(&out);
        }
        let s = self.clone();
        tokio::task::spawn_blocking(move || s.write(&out)).await.unwrap_or(false)
    }
}

/// Whether `len` bytes can be written to stdout now without blocking: it polls writable, and a
/// pipe that does has room for PIPE_BUF (4,096) bytes at least. Files and terminals always poll
/// writable.
fn stdout_has_room_for(len: usize) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use std::os::fd::AsFd;
    const PIPE_BUF: usize = 4096;
    let stdout = std::io::stdout();
    let fd = stdout.as_fd();
    let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
    let now = Timespec { tv_sec: 0, tv_nsec: 0 };
    len <= PIPE_BUF
        && poll(&mut fds, Some(&now)).is_ok_and(|n| n == 1)
        && fds[0].revents().contains(PollFlags::OUT)
}

pub(crate) fn run(o: Opts, quiet: bool) -> Outcome {
    let format = if o.json {
        None
    } else {
        Some(Format::parse(o.format.as_deref().unwrap_or(format::DEFAULT)).map_err(Failure::Usage)?)
    };
    let (from, timestamp) = parse_from(o.from.as_deref().unwrap_or("last"))?;
    let Some(group) = o.group.clone() else { return read(o, format, quiet) };
    let knobs = knobs(&o.knobs)?;
    let reader_only = [("-o", o.offset.is_some()), ("-e", o.exit_at_end), ("-p", o.queue.is_some())];
    if let Some((flag, _)) = reader_only.iter().find(|(_, set)| *set) {
        return Err(Failure::Usage(format!(
            "{flag} reads without a group: leave out -g (a group starts where --from says and commits)"
        )));
    }
    let ns = name_server(o.name_server.clone())?;
    // Fail fast, with one line, on what would otherwise be retried forever.
    let route = admin::fetch_route(&ns, &crate::wire_name(&o.topic))?;
    if let Some(sql) = &o.sql {
        admin::check_sql(&route, &crate::wire_name(&group), &crate::wire_name(&o.topic), sql)?;
    }
    if o.count == Some(0) {
        return Ok(ExitCode::SUCCESS);
    }
    let shared = Arc::new(Shared {
        format,
        remaining: o.count.map(AtomicU64::new),
        stopping: AtomicBool::new(false),
        printed: AtomicU64::new(0),
        done: Notify::new(),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the runtime: {e}")))?;
    rt.block_on(consume(o, ns, from, timestamp, knobs, shared, quiet))
}

/// Without a group: plain pulls, nothing committed (`read.rs`).
fn read(o: Opts, format: Option<Format>, quiet: bool) -> Outcome {
    let group_only = [
        ("--sql", o.sql.is_some()),
        ("--from", o.from.is_some()),
        ("--broadcast", o.broadcast),
        ("-X", !o.knobs.is_empty()),
        ("--orderly", o.orderly),
        ("--orderly-pop", o.orderly_pop),
        ("--prometheus", o.prometheus.is_some()),
        ("--trace", o.trace.is_some()),
    ];
    if let Some((flag, _)) = group_only.iter().find(|(_, set)| *set) {
        return Err(Failure::Usage(format!(
            "{flag} needs a group (-g); without one, pick where to read with -o"
        )));
    }
    let start = crate::read::Start::parse(o.offset.as_deref().unwrap_or("beginning"))?;
    // Ctrl-C from here on ends the reader cleanly, even during its first lookups.
    crate::interrupted();
    let ns = name_server(o.name_server.clone())?;
    let route = admin::fetch_route(&ns, &crate::wire_name(&o.topic))?;
    if o.count == Some(0) {
        return Ok(ExitCode::SUCCESS);
    }
    let reader = crate::read::Reader {
        topic: o.topic,
        queue: o.queue,
        start,
        exit_at_end: o.exit_at_end,
        count: o.count,
        tags: o.expression,
        format,
    };
    crate::read::run(reader, &route, quiet)
}

async fn consume(
    o: Opts,
    ns: String,
    from: ConsumeFromWhere,
    timestamp: Option<i64>,
    knobs: Vec<(String, String)>,
    shared: Arc<Shared>,
    quiet: bool,
) -> Outcome {
    let mut stop = stop_signal();
    let repeats = Arc::new(std::sync::Mutex::new(Repeats::new(LOG_WINDOW)));
    let hook_repeats = repeats.clone();
    let group = o.group.clone().unwrap_or_default();
    let mut b = PushConsumer::builder(group.as_str())
        .name_server(ns)
        .message_model(if o.broadcast { MessageModel::Broadcasting } else { MessageModel::Clustering })
        .consume_from_where(from)
        .configure(|c| {
            let c = match crate::credentials() {
                Some(creds) => c.credentials(creds),
                None => c,
            };
            match crate::namespace() {
                Some(ns) => c.namespace(ns),
                None => c,
            }
        })
        .configure(own_settings)
        // Checked by knobs() already: a failure here cannot happen, and would keep the setting.
        .configure(move |c| knobs.iter().fold(c, |c, (k, v)| c.clone().set(k, v).unwrap_or(c)))
        .on_event(move |e| {
            let Some(line) = describe(e).filter(|_| !quiet) else { return };
            // One line per cause per interval: a broker that stays down is not a line a second.
            let mut r = hook_repeats.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match r.note(e, Instant::now()) {
                Some(0) => say!("rmqcat: {line}"),
                Some(n) => say!("rmqcat: {line} (and {n} more like it since)"),
                None => {}
            }
        });
    b = match &o.sql {
        Some(sql) => b.subscribe_sql(o.topic.as_str(), sql.as_str()),
        None => b.subscribe(o.topic.as_str(), o.expression.as_str()),
    };
    if let Some(ts) = timestamp {
        b = b.consume_timestamp_ms(ts);
    }
    if o.orderly || o.orderly_pop {
        b = b.orderly();
    }
    if o.orderly_pop {
        b = b.configure(|c| c.orderly_pop(true));
    }
    if let Some(addr) = &o.prometheus {
        let bound = crate::prometheus::serve(addr)?;
        if !quiet {
            say!("rmqcat: metrics for Prometheus at http://{bound}/metrics");
        }
        b = b.metrics();
    }
    if let Some(topic) = &o.trace {
        if !quiet {
            crate::trace_log::install();
        }
        // As given: Java does not put the trace topic in the namespace either.
        b = b.enable_msg_trace(Some(topic.clone()).filter(|t| !t.is_empty()));
    }
    if let Some(tls) = crate::tls() {
        b = b.tls(tls);
    }
    let s = shared.clone();
    let consumer = b
        .listener(move |msgs, _ctx| {
            let s = s.clone();
            async move {
                for m in msgs.iter() {
                    if !s.print(m).await {
                        // Not printed: never answered, so never committed.
                        return std::future::pending::<ConsumeStatus>().await;
                    }
                }
                ConsumeStatus::Success
            }
        })
        .start()
        .map_err(|e| match e {
            rocketmq_push_io::StartError::Config(e) => Failure::Usage(e.to_string()),
            e => Failure::Runtime(e.to_string()),
        })?;
    let mut progress = Progress::new("consumed", o.count, quiet);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut ticks = 0u32;
    loop {
        tokio::select! {
            () = &mut stop => break,
            () = shared.done.notified() => break,
            _ = tick.tick() => {
                ticks += 1;
                if ticks % 5 == 0 && progress.is_live() {
                    // The lag from the pull answers, once a second.
                    let queues = consumer.queues().await;
                    let lags: Vec<i64> = queues.iter().filter_map(|q| q.lag()).collect();
                    progress.set_lag((!lags.is_empty()).then(|| lags.iter().sum::<i64>()));
                }
                progress.update(shared.printed.load(Ordering::SeqCst));
                let due = repeats.lock().unwrap_or_else(std::sync::PoisonError::into_inner).due(Instant::now());
                for (cause, n) in due.into_iter().filter(|_| !quiet) {
                    say!("rmqcat: {n} more in the last {}s: {cause}", LOG_WINDOW.as_secs());
                }
            }
        }
    }
    shared.stopping.store(true, Ordering::SeqCst);
    progress.finish();
    let popped = consumer.queues().await.iter().any(|q| q.popping);
    consumer.shutdown().await;
    if !quiet {
        let n = shared.printed.load(Ordering::SeqCst);
        let how = if popped { "acked" } else { "offsets committed" };
        say!("rmqcat: consumed {} message(s); {how}", thousands(n));
    }
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C, or SIGTERM on Unix. Both are registered when this is called, not when the future is
/// first polled, and the one future lives across the loop: a signal that arrives while the
/// consumer starts, or between two turns of the loop, still stops it.
fn stop_signal() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut int), Ok(mut term)) =
            (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
        {
            return Box::pin(async move {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            });
        }
    }
    Box::pin(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_values() {
        assert_eq!(parse_from("first").unwrap(), (ConsumeFromWhere::ConsumeFromFirstOffset, None));
        assert_eq!(parse_from("last").unwrap().0, ConsumeFromWhere::ConsumeFromLastOffset);
        assert_eq!(
            parse_from("1700000000000").unwrap(),
            (ConsumeFromWhere::ConsumeFromTimestamp, Some(1_700_000_000_000))
        );
        assert_eq!(parse_from("20261202100000").unwrap().1, Some(1_796_205_600_000));
        for bad in ["", "yesterday", "2026-13-01T00:00:00Z", "2026-12-02", "12:00"] {
            match parse_from(bad) {
                Err(Failure::Usage(m)) => assert!(m.contains("yyyyMMddHHmmss"), "{m}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
