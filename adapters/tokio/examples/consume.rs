//! Consume a topic from the broker at `NAMESRV_ADDR` (default 127.0.0.1:9876) until Ctrl-C.
//!
//! `cargo run -p rocketmq-push-tokio --example consume_tokio -- TopicA`

use rocketmq_push_tokio::{ConsumeStatus, PushConsumer};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let topic = std::env::args().nth(1).unwrap_or_else(|| "TopicA".into());
    let name_server = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".into());
    let consumer = PushConsumer::builder("example_tokio")
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
    tokio::signal::ctrl_c().await?;
    consumer.shutdown().await;
    Ok(())
}
