//! Read a topic from the broker at `NAMESRV_ADDR` (default 127.0.0.1:9876) as a stream of
//! deliveries, acknowledging each, until 100 messages were read or 30 seconds passed.
//!
//! `cargo run -p rocketmq-push-smol --example consume_smol -- TopicA`

use std::time::Duration;

use rocketmq_push_smol::PushConsumer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    smol::block_on(async {
        let topic = std::env::args().nth(1).unwrap_or_else(|| "TopicA".into());
        let name_server = std::env::var("NAMESRV_ADDR").unwrap_or_else(|_| "127.0.0.1:9876".into());
        let (consumer, mut deliveries) = PushConsumer::builder("example_smol")
            .name_server(name_server)
            .subscribe(topic, "*")
            .start_stream()?;
        let mut read = 0;
        let deadline = smol::Timer::after(Duration::from_secs(30));
        let reading = async {
            while let Some(d) = deliveries.next().await {
                for m in d.messages.iter() {
                    println!(
                        "{} {} {}",
                        d.queue().queue_id,
                        m.queue_offset,
                        String::from_utf8_lossy(&m.body)
                    );
                }
                read += d.messages.len();
                d.ack();
                if read >= 100 {
                    break;
                }
            }
        };
        smol::future::or(reading, async {
            deadline.await;
        })
        .await;
        consumer.shutdown().await;
        Ok(())
    })
}
