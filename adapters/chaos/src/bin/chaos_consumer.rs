//! The consumer under test in the chaos suite: the tokio adapter, a listener that appends one line
//! per message to a file (`broker queue offset key`, written before the message counts as
//! consumed, so it survives a kill -9), events on stderr, a graceful shutdown on SIGTERM.
//!
//! `chaos_consumer NAMESRV GROUP TOPIC OUT [knob=value …]` with knobs `from=first|last`,
//! `queue_mib=N` (pullThresholdSizeForQueue), `await_ms=N` (awaitTerminationMillisWhenShutdown),
//! `threads=N` (consumeThreadMin), `delay_ms=N` (the listener takes that long per batch),
//! `queue_msgs=N` (pullThresholdForQueue).

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_push_tokio::{ConsumeFromWhere, ConsumeStatus, PushConsumer};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [ns, group, topic, out, knobs @ ..] = &args[..] else {
        eprintln!(
            "usage: chaos_consumer NAMESRV GROUP TOPIC OUT [from=first|last] [queue_mib=N] [await_ms=N] [threads=N] [delay_ms=N] [queue_msgs=N]"
        );
        std::process::exit(2);
    };
    let knob = |k: &str| knobs.iter().find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='));
    let from = match knob("from") {
        Some("last") => ConsumeFromWhere::ConsumeFromLastOffset,
        _ => ConsumeFromWhere::ConsumeFromFirstOffset,
    };
    let queue_mib: usize = knob("queue_mib").map_or(Ok(100), str::parse)?;
    let await_ms: u64 = knob("await_ms").map_or(Ok(5000), str::parse)?;
    let threads: usize = knob("threads").map_or(Ok(20), str::parse)?;
    let queue_msgs: usize = knob("queue_msgs").map_or(Ok(1000), str::parse)?;
    let delay = Duration::from_millis(knob("delay_ms").map_or(Ok(0), str::parse)?);
    let file = Arc::new(Mutex::new(OpenOptions::new().create(true).append(true).open(out)?));
    let consumer = PushConsumer::builder(group.as_str())
        .name_server(ns.as_str())
        .subscribe(topic.as_str(), "*")
        .consume_from_where(from)
        .configure(|c| {
            c.pull_threshold_size_for_queue_mib(queue_mib)
                .pull_threshold_for_queue(queue_msgs)
                .await_termination_when_shutdown(Duration::from_millis(await_ms))
                .consume_thread_min(threads)
                .consume_thread_max(threads)
        })
        .on_event(|e| eprintln!("chaos_consumer event: {e:?}"))
        .listener(move |msgs, ctx| {
            let file = file.clone();
            async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let mut lines = String::new();
                for m in msgs.iter() {
                    let q = &ctx.queue;
                    lines.push_str(&format!(
                        "{} {} {} {}\n",
                        q.broker_name,
                        q.queue_id,
                        m.queue_offset,
                        m.msg_id()
                    ));
                }
                // One write per batch, before it counts as consumed: a kill -9 after it loses
                // nothing of what the listener saw.
                match file
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .write_all(lines.as_bytes())
                {
                    Ok(()) => ConsumeStatus::Success,
                    Err(_) => ConsumeStatus::ReconsumeLater,
                }
            }
        })
        .start()?;
    eprintln!("chaos_consumer started");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    term.recv().await;
    eprintln!("chaos_consumer: SIGTERM, shutting down");
    consumer.shutdown().await;
    eprintln!("chaos_consumer: terminated");
    Ok(())
}
