//! Consume a topic from the broker at `NAMESRV_ADDR` (default 127.0.0.1:9876) for 30 seconds.
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
            .listener(|msgs, ctx| async move {
                for m in msgs.iter() {
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
        async_std::task::sleep(Duration::from_secs(30)).await;
        consumer.shutdown().await;
        Ok(())
    })
}
