//! `rmqcat produce`: one message per stdin line, or generated load.

use std::io::BufRead;
use std::process::ExitCode;

use clap::Args;
use rocketmq_push_core::Message;
use rocketmq_push_core::protocol::ResponseCode;
use rocketmq_push_io::Producer;

use crate::progress::{Progress, per_sec, thousands};
use crate::{Failure, Outcome, TIMEOUT, admin, name_server};

/// Send one message per line of stdin (the line is the body), or --count generated messages.
#[derive(Args)]
#[command(after_help = "Examples:
  seq 10 | rmqcat produce -n 127.0.0.1:9876 -t TopicA
  rmqcat produce -t TopicA -T TagA -k order-1 -p color=red < lines.txt
  rmqcat produce -t TopicA --count 100000 --size 1024      generated load
  rmqcat produce -t NewTopic --create 8 --count 10         create the topic first
  rmqcat produce -t TopicA --count 30000 --rate 2000       paced: 2,000 a second

Prints a summary on stderr: sent, failed, messages per second. Exit 1 if any send failed.")]
pub(crate) struct Opts {
    /// Name server(s) (default: $NAMESRV_ADDR).
    #[arg(short = 'n', long = "name-server", value_name = "ADDR")]
    name_server: Option<String>,
    /// Topic.
    #[arg(short, long)]
    topic: String,
    /// Message keys, separated by spaces or commas.
    #[arg(short, long)]
    keys: Option<String>,
    /// Tag.
    #[arg(short = 'T', long)]
    tags: Option<String>,
    /// A user property, key=value (repeatable).
    #[arg(short = 'p', long = "property", value_name = "KEY=VALUE")]
    properties: Vec<String>,
    /// Send this many generated messages instead of reading stdin.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Body size of generated messages, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 100, requires = "count")]
    size: usize,
    /// Send at most this many messages a second, evenly paced (for latency measurements).
    #[arg(long, value_name = "PER_SEC", value_parser = clap::value_parser!(u32).range(1..))]
    rate: Option<u32>,
    /// Create the topic first, with this many queues on every broker.
    #[arg(long, value_name = "QUEUES", value_parser = clap::value_parser!(i32).range(1..=1024))]
    create: Option<i32>,
}

/// `key=value` pairs, checked.
pub(crate) fn parse_properties(raw: &[String]) -> Result<Vec<(String, String)>, Failure> {
    raw.iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => Err(Failure::Usage(format!("-p expects KEY=VALUE, got {p:?}"))),
        })
        .collect()
}

/// A producer whose route to `topic` is known; a missing topic is a one-line error.
pub(crate) fn producer_for(ns: &str, topic: &str) -> Result<Producer, Failure> {
    let (first, _) = admin::connect_name_server(ns)?;
    let first = first.as_str();
    let mut p = Producer::new(first, TIMEOUT)
        .with_credentials(crate::credentials())
        .with_transport(crate::transport());
    match p.queues(topic) {
        Ok(q) if !q.is_empty() => Ok(p),
        Ok(_) => Err(Failure::Runtime(format!("topic {topic} has no writable queue"))),
        Err(e) if e.is_code(ResponseCode::TopicNotExist) => Err(Failure::Runtime(format!(
            "topic {topic} does not exist on {first} (add --create 8 to create it)"
        ))),
        Err(e) => Err(Failure::Runtime(format!("route of {topic} from {first}: {e}"))),
    }
}

pub(crate) fn run(mut o: Opts, quiet: bool) -> Outcome {
    o.topic = crate::wire_name(&o.topic);
    let props = parse_properties(&o.properties)?;
    let ns = name_server(o.name_server)?;
    if let Some(queues) = o.create {
        admin::create_topic(&ns, &o.topic, queues)?;
    }
    let mut producer = producer_for(&ns, &o.topic)?;
    let keys: Vec<String> = o
        .keys
        .iter()
        .flat_map(|k| k.split([' ', ',']))
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect();
    let build = |body: Vec<u8>| {
        let mut m = Message::new(o.topic.as_str(), body);
        if let Some(t) = &o.tags {
            m = m.with_tags(t);
        }
        if !keys.is_empty() {
            m = m.with_keys(keys.iter().map(String::as_str));
        }
        for (k, v) in &props {
            m = m.with_property(k, v);
        }
        m
    };
    let mut progress = Progress::new("produced", o.count, quiet);
    let started = std::time::Instant::now();
    // Message i leaves no earlier than i / rate seconds after the start.
    let pace = |i: u64| {
        if let Some(r) = o.rate {
            let due = started + std::time::Duration::from_secs_f64(i as f64 / f64::from(r));
            std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
        }
    };
    let (mut sent, mut failed) = (0u64, 0u64);
    let mut send = |producer: &mut Producer, m: Message, progress: &mut Progress| {
        match producer.send(m) {
            Ok(_) => sent += 1,
            Err(e) => {
                failed += 1;
                // The first few failures are worth a line each; after that the summary says it.
                if failed <= 5 {
                    progress.finish();
                    say!("rmqcat: send failed: {e}");
                }
            }
        }
        progress.update(sent + failed);
    };
    match o.count {
        Some(n) => {
            for i in 0..n {
                let mut body = format!("rmqcat-{i}-").into_bytes();
                body.resize(o.size.max(body.len()), b'x');
                body.truncate(o.size);
                pace(i);
                send(&mut producer, build(body), &mut progress);
            }
        }
        None => {
            let stdin = std::io::stdin();
            let mut input = stdin.lock();
            let mut line = Vec::new();
            for i in 0.. {
                line.clear();
                let n = input
                    .read_until(b'\n', &mut line)
                    .map_err(|e| Failure::Runtime(format!("reading stdin: {e}")))?;
                if n == 0 {
                    break;
                }
                if line.ends_with(b"\n") {
                    line.pop();
                    if line.ends_with(b"\r") {
                        line.pop();
                    }
                }
                pace(i);
                send(&mut producer, build(line.clone()), &mut progress);
            }
        }
    }
    progress.finish();
    if !quiet {
        let took = progress.elapsed();
        say!(
            "rmqcat: sent {}, failed {}, {} msg/s ({took:.1?})",
            thousands(sent),
            thousands(failed),
            thousands(per_sec(sent, took))
        );
    }
    Ok(if failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
