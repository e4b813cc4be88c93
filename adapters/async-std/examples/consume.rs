//! Consume a topic orderly from the broker at `NAMESRV_ADDR` (default 127.0.0.1:9876) for 30
//! seconds: one batch per queue at a time, in offset order, under a broker lock. A message with
//! an empty body suspends its queue for a second and is retried in place.
//!
//! `cargo run -p rocketmq-push-async-std --example consume_async_std -- TopicA`

use std::time::Duration;

use rocketmq_push_async_std::{ConsumeStatus, PushConsumer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    async_std::task::block_on(async {
        let topic = std::env::args().nth(1).unwrap_or_else(|| "TopicA".into());
        let name_server = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".into());
        let consumer = PushConsumer::builder("example_async_std")
            .name_server(name_server)
            .subscribe(topic, "*")
            .orderly_listener(|msgs, mut ctx| async move {
                if msgs.iter().any(|m| m.body.is_empty()) {
                    ctx.suspend_millis = Some(1000);
                    return ctx.result(ConsumeStatus::SuspendCurrentQueueAMoment);
                }
                let last = msgs.last().map_or(-1, |m| m.queue_offset);
                println!("queue {} up to offset {last}: {} messages", ctx.queue.queue_id, msgs.len());
                ctx.result(ConsumeStatus::Success)
            })
            .start()?;
        async_std::task::sleep(Duration::from_secs(30)).await;
        consumer.shutdown().await;
        Ok(())
    })
}
