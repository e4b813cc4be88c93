//! Consume a topic from the broker at `NAMESRV_ADDR` (default 127.0.0.1:9876) until Ctrl-C…
//! or, to keep the example short, for 30 seconds.
//!
//! `cargo run -p rocketmq-push-blocking --example consume_blocking -- TopicA`

use std::time::Duration;

use rocketmq_push_blocking::{ConsumeStatus, PushConsumer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let topic = std::env::args().nth(1).unwrap_or_else(|| "TopicA".into());
    let name_server = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".into());
    let consumer = PushConsumer::builder("example_blocking")
        .name_server(name_server)
        .subscribe(topic, "*")
        .listener(|msgs, ctx| {
            for m in msgs {
                println!(
                    "{:?} offset {} id {} body {} bytes",
                    ctx.queue,
                    m.queue_offset,
                    m.msg_id(),
                    m.body.len()
                );
            }
            ConsumeStatus::Success
        })
        .start()?;
    std::thread::sleep(Duration::from_secs(30));
    consumer.shutdown();
    Ok(())
}
