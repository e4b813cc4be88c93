//! The Rust side of `scripts/bench-vs-java.sh`: the tokio adapter with Java's defaults
//! (concurrent, `consumeThreadMin` 20, batch 1, pull batch 32) consumes COUNT messages of TOPIC
//! as a new GROUP from the first offset, with a listener that only counts. Prints one JSON line:
//! the count and the milliseconds from start to the last message.
//!
//! `cargo run --release -p rocketmq-push-tokio --example bench_consume -- NAMESRV TOPIC GROUP COUNT`
#![allow(clippy::disallowed_methods)] // a benchmark reads the clock

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rocketmq_push_tokio::{ConsumeFromWhere, ConsumeStatus, PushConsumer};
use tokio::sync::Notify;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [namesrv, topic, group, count] = &args[..] else {
        eprintln!("usage: bench_consume NAMESRV TOPIC GROUP COUNT");
        std::process::exit(2);
    };
    let count: u64 = count.parse()?;
    let seen = Arc::new(AtomicU64::new(0));
    let done = Arc::new(Notify::new());
    let (s, d) = (seen.clone(), done.clone());
    let started = Instant::now();
    let consumer = PushConsumer::builder(group.as_str())
        .name_server(namesrv.as_str())
        .subscribe(topic.as_str(), "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .listener(move |msgs, _ctx| {
            if s.fetch_add(msgs.len() as u64, Ordering::Relaxed) + msgs.len() as u64 >= count {
                d.notify_one();
            }
            async { ConsumeStatus::Success }
        })
        .start()?;
    let finished = tokio::time::timeout(Duration::from_secs(300), done.notified()).await.is_ok();
    let ms = started.elapsed().as_millis();
    consumer.shutdown().await;
    if !finished {
        eprintln!("bench_consume: only {} of {count} in 300 s", seen.load(Ordering::Relaxed));
        std::process::exit(1);
    }
    println!("{{\"client\":\"rust\",\"count\":{},\"ms\":{ms}}}", seen.load(Ordering::Relaxed));
    Ok(())
}
