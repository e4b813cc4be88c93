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
use rocketmq_push_core::json::JsonWriter;
use rocketmq_push_core::{ConsumeFromWhere, ConsumeStatus, Event, MessageExt, MessageModel};
use rocketmq_push_io::{LOG_WINDOW, Repeats};
use rocketmq_push_tokio::PushConsumer;
use tokio::sync::Notify;

use crate::format::{self, Format};
use crate::progress::{Progress, thousands};
use crate::{Failure, Outcome, admin, name_server};

/// Consume a topic and print one line per message (stdout); progress and errors go to stderr.
#[derive(Args)]
#[command(after_help = "Examples:
  rmqcat consume -n 127.0.0.1:9876 -g my_group -t TopicA
  rmqcat consume -g G -t TopicA -c 10 --from first -f '%q:%o %k %s\\n'
  rmqcat consume -g G -t TopicA -e 'TagA || TagB' --json
  rmqcat consume -g G -t TopicA --sql 'a > 5' --orderly
  rmqcat consume -g G -t TopicA --broadcast

Format placeholders: %t topic, %q queue id, %o offset, %i msg id, %k keys, %T tags, %s body,
%S body size, %r reconsume times, %h user properties (k=v,…), %% percent; \\n \\t escapes.
--json prints one object per message; a body that is not UTF-8 is base64 with \"bodyBase64\":true.
--from applies to a group with no committed offset (as consumeFromWhere does): first, last,
milliseconds since the epoch, or a UTC time such as 2026-12-02T10:00:00Z.
Exits after COUNT messages or on Ctrl-C, with the offsets of what was printed committed.")]
pub(crate) struct Opts {
    /// Name server(s), `host:port[;host:port]` (default: $NAMESRV_ADDR).
    #[arg(short = 'n', long = "name-server", value_name = "ADDR")]
    name_server: Option<String>,
    /// Consumer group.
    #[arg(short, long)]
    group: String,
    /// Topic.
    #[arg(short, long)]
    topic: String,
    /// Tag expression, e.g. `TagA || TagB`.
    #[arg(short, long, default_value = "*", conflicts_with = "sql")]
    expression: String,
    /// SQL92 filter expression (the broker needs enablePropertyFilter=true).
    #[arg(long, value_name = "EXPR")]
    sql: Option<String>,
    /// Where a group with no committed offset starts: first, last, or a timestamp.
    #[arg(long, default_value = "last", value_name = "first|last|TIMESTAMP")]
    from: String,
    /// Exit after this many messages.
    #[arg(short, long, value_name = "COUNT")]
    count: Option<u64>,
    /// Broadcasting: every member gets every message (offsets kept in a local file).
    #[arg(long)]
    broadcast: bool,
    /// Orderly: one batch per queue at a time, in offset order, under a broker lock.
    #[arg(long)]
    orderly: bool,
    /// Output format (see below).
    #[arg(short, long, conflicts_with = "json", value_name = "FORMAT")]
    format: Option<String>,
    /// One JSON object per message.
    #[arg(long)]
    json: bool,
}

/// `--from`.
fn parse_from(s: &str) -> Result<(ConsumeFromWhere, Option<i64>), Failure> {
    match s {
        "first" => return Ok((ConsumeFromWhere::ConsumeFromFirstOffset, None)),
        "last" => return Ok((ConsumeFromWhere::ConsumeFromLastOffset, None)),
        _ => {}
    }
    let ms = if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
        s.parse::<i64>().ok()
    } else {
        parse_utc(s)
    };
    ms.map(|ms| (ConsumeFromWhere::ConsumeFromTimestamp, Some(ms))).ok_or_else(|| {
        Failure::Usage(format!(
            "--from {s:?}: expected first, last, milliseconds since the epoch, or a UTC time like 2026-12-02T10:00:00Z"
        ))
    })
}

/// `YYYY-MM-DDTHH:MM:SS[.fff][Z]`, UTC → milliseconds since the epoch.
fn parse_utc(s: &str) -> Option<i64> {
    let s = s.strip_suffix('Z').unwrap_or(s);
    let (date, time) = s.split_once(['T', ' '])?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, mo, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (h, mi, sec) = (t.next()??, t.next()??, t.next().unwrap_or(Some(0))?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&day) || h > 23 || mi > 59 || sec > 60 || frac.len() > 3
    {
        return None;
    }
    let ms_frac: i64 = format!("{frac:0<3}").parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + sec * 1000 + ms_frac)
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
        Event::CorruptPull { queue, error } => format!("unreadable pull from {queue:?}: {error}"),
        Event::RecordsOutOfRange { queue, count, .. } => {
            format!("{count} record(s) from {queue:?} outside the offsets asked for: dropped")
        }
        Event::LockFailed { queue } => format!("could not lock {queue:?}; retrying"),
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

    fn render(&self, m: &MessageExt, out: &mut Vec<u8>) {
        match &self.format {
            Some(f) => f.write(out, m),
            None => {
                let mut w = JsonWriter::new();
                format::message_json(&mut w, m);
                out.extend_from_slice(w.finish().as_bytes());
                out.push(b'\n');
            }
        }
    }

    /// Print `m` if it may still be printed; false when it must stay unanswered.
    fn print(&self, m: &MessageExt) -> bool {
        if !self.claim() {
            self.stop();
            return false;
        }
        let mut out = Vec::with_capacity(m.body.len() + 64);
        self.render(m, &mut out);
        let mut stdout = std::io::stdout().lock();
        if stdout.write_all(&out).and_then(|()| stdout.flush()).is_err() {
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
}

pub(crate) fn run(o: Opts, quiet: bool) -> Outcome {
    let format = if o.json {
        None
    } else {
        Some(Format::parse(o.format.as_deref().unwrap_or(format::DEFAULT)).map_err(Failure::Usage)?)
    };
    let (from, timestamp) = parse_from(&o.from)?;
    let ns = name_server(o.name_server.clone())?;
    // Fail fast, with one line, on what would otherwise be retried forever.
    admin::fetch_route(&ns, &o.topic)?;
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
    rt.block_on(consume(o, ns, from, timestamp, shared, quiet))
}

async fn consume(
    o: Opts,
    ns: String,
    from: ConsumeFromWhere,
    timestamp: Option<i64>,
    shared: Arc<Shared>,
    quiet: bool,
) -> Outcome {
    let repeats = Arc::new(std::sync::Mutex::new(Repeats::new(LOG_WINDOW)));
    let hook_repeats = repeats.clone();
    let mut b = PushConsumer::builder(o.group.as_str())
        .name_server(ns)
        .message_model(if o.broadcast { MessageModel::Broadcasting } else { MessageModel::Clustering })
        .consume_from_where(from)
        // One message per call and one call at a time: lines come in queue order, and a count
        // stops exactly where the commit lands. Held batches end the drain after 1 s.
        .configure(|c| {
            c.consume_message_batch_max_size(1)
                .consume_thread_min(1)
                .consume_thread_max(1)
                .await_termination_when_shutdown(Duration::from_secs(1))
        })
        .on_event(move |e| {
            let Some(line) = describe(e).filter(|_| !quiet) else { return };
            // One line per cause per interval: a broker that stays down is not a line a second.
            let mut r = hook_repeats.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match r.note(e, Instant::now()) {
                Some(0) => eprintln!("rmqcat: {line}"),
                Some(n) => eprintln!("rmqcat: {line} (and {n} more like it since)"),
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
    if o.orderly {
        b = b.orderly();
    }
    let s = shared.clone();
    let consumer = b
        .listener(move |msgs, _ctx| {
            let s = s.clone();
            async move {
                for m in msgs.iter() {
                    if !s.print(m) {
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
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            () = terminate() => break,
            () = shared.done.notified() => break,
            _ = tick.tick() => {
                progress.update(shared.printed.load(Ordering::SeqCst));
                let due = repeats.lock().unwrap_or_else(std::sync::PoisonError::into_inner).due(Instant::now());
                for (cause, n) in due.into_iter().filter(|_| !quiet) {
                    eprintln!("rmqcat: {n} more in the last {}s: {cause}", LOG_WINDOW.as_secs());
                }
            }
        }
    }
    shared.stopping.store(true, Ordering::SeqCst);
    progress.finish();
    consumer.shutdown().await;
    if !quiet {
        let n = shared.printed.load(Ordering::SeqCst);
        eprintln!("rmqcat: consumed {} message(s); offsets committed", thousands(n));
    }
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM (Unix): stop like Ctrl-C.
async fn terminate() {
    #[cfg(unix)]
    {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
            return;
        }
    }
    std::future::pending::<()>().await;
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
        assert_eq!(parse_from("1970-01-01T00:00:00Z").unwrap().1, Some(0));
        assert_eq!(parse_from("2026-12-02T10:00:00Z").unwrap().1, Some(1_796_205_600_000));
        assert_eq!(parse_from("2000-02-29T23:59:59.5").unwrap().1, Some(951_868_799_500));
        for bad in ["", "yesterday", "2026-13-01T00:00:00Z", "2026-12-02", "12:00"] {
            assert!(matches!(parse_from(bad), Err(Failure::Usage(_))), "{bad}");
        }
    }
}
