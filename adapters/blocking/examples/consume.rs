//! Consume a topic from the broker at `NAMESRV_ADDR` (default 127.0.0.1:9876) for 30 seconds,
//! in batches of up to 8 messages; a message whose body is not UTF-8 is handed back for a later
//! retry while the ones before it count as consumed (`ack_index`).
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
        .configure(|c| c.consume_message_batch_max_size(8))
        .listener(|msgs, mut ctx| {
            for (i, m) in msgs.iter().enumerate() {
                let Ok(text) = std::str::from_utf8(&m.body) else {
                    // Messages before `i` succeeded; this one and the rest are retried later.
                    ctx.ack_index = i.checked_sub(1);
                    return ctx.result(if i == 0 {
                        ConsumeStatus::ReconsumeLater
                    } else {
                        ConsumeStatus::Success
                    });
                };
                println!("queue {} offset {}: {text}", ctx.queue.queue_id, m.queue_offset);
            }
            ctx.result(ConsumeStatus::Success)
        })
        .start()?;
    std::thread::sleep(Duration::from_secs(30));
    consumer.shutdown();
    Ok(())
}
