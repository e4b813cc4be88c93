//! The shared end-to-end suite (`rocketmq-push-e2e`) on this adapter: against the simulator over
//! loopback TCP, and against the real broker when one is running.

use rocketmq_push_blocking::{
    ConsumeStatus, MessageQueue, PushConsumer, QueueSelector, QueueSnapshot, SeekTo, Stats, TopicStats,
    UsageError,
};
use rocketmq_push_e2e::{Adapter, Env, Running, Spec, builder_for, run_all, run_bad_input};

struct Blocking;

struct Handle(PushConsumer);

impl Running for Handle {
    fn shutdown(self: Box<Self>) {
        self.0.shutdown();
    }
    fn pause_queue(&self, queue: MessageQueue) {
        self.0.pause_queue(queue);
    }
    fn resume_queue(&self, queue: MessageQueue) {
        self.0.resume_queue(queue);
    }
    fn seek(&self, queues: QueueSelector, to: SeekTo) -> Result<(), UsageError> {
        self.0.seek(queues, to)
    }
    fn stats(&self) -> Stats {
        self.0.stats()
    }
    fn queues(&self) -> Vec<QueueSnapshot> {
        self.0.queues()
    }
    fn topics(&self) -> Vec<TopicStats> {
        self.0.topics()
    }
}

impl Adapter for Blocking {
    fn name(&self) -> &'static str {
        "blocking"
    }

    fn start(&self, name_server: &str, spec: &Spec) -> Box<dyn Running> {
        let s = spec.clone();
        let b = builder_for!(PushConsumer, name_server, spec)
            .listener(move |msgs, ctx| s.verdict(&msgs, &ctx.queue));
        Box::new(Handle(b.start().expect("consumer starts")))
    }
}

#[test]
fn e2e_against_the_simulator() {
    run_all(&Blocking, &Env::sim());
}

#[test]
fn e2e_against_the_real_broker() {
    if let Some(env) = Env::real() {
        run_all(&Blocking, &env);
    }
}

#[test]
fn bad_input_is_reported_and_shutdown_is_bounded() {
    run_bad_input(&Blocking, &Env::sim());
}

#[test]
fn invalid_settings_are_refused_with_the_knob_named() {
    let err = PushConsumer::builder("g")
        .name_server("127.0.0.1:9876")
        .subscribe("T", "*")
        .configure(|c| c.pull_batch_size(5000))
        .listener(|_, _| ConsumeStatus::Success)
        .start()
        .unwrap_err();
    assert_eq!(err.to_string(), "invalid pullBatchSize = 5000: allowed 1..=1024");
    let err = PushConsumer::builder("g")
        .name_server("nowhere")
        .subscribe("T", "*")
        .listener(|_, _| ConsumeStatus::Success)
        .start()
        .unwrap_err();
    assert!(err.to_string().contains("namesrvAddr"), "{err}");
    let err =
        PushConsumer::builder("g").name_server("127.0.0.1:9876").subscribe("T", "*").start().unwrap_err();
    assert!(err.to_string().contains("no listener"), "{err}");
}

#[test]
fn the_consume_timeout_counts_from_the_listener_start() {
    // One listener thread, 400 ms per message, a 1 s consume timeout, 8 messages in one queue:
    // batches wait for the thread, but none may time out while waiting (Java times a batch from
    // the start of its listener call). Timed from dispatch, the later ones would be sent back
    // while queued, and consumed twice.
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use rocketmq_push_blocking::{ConsumeFromWhere, Event};

    let env = Env::sim();
    let topic = "consume_timeout_from_start";
    env.one_queue_of(topic, 8);
    let (seen, events) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let (s, e) = (seen.clone(), events.clone());
    let consumer = PushConsumer::builder("g_consume_timeout")
        .name_server(env.name_server())
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .configure(|c| c.consume_thread_min(1).consume_thread_max(1).consume_timeout(Duration::from_secs(1)))
        .on_event(move |ev| e.lock().unwrap().push(ev.clone()))
        .listener(move |msgs, _| {
            std::thread::sleep(Duration::from_millis(400));
            s.lock().unwrap().extend(msgs.iter().map(|m| m.queue_offset));
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    rocketmq_push_e2e::wait(Duration::from_secs(20), "all eight consumed", || {
        seen.lock().unwrap().len() >= 8
    });
    std::thread::sleep(Duration::from_millis(500));
    consumer.shutdown();
    let timeouts =
        events.lock().unwrap().iter().filter(|e| matches!(e, Event::ConsumeTimeout { .. })).count();
    assert_eq!(timeouts, 0, "a batch waiting for the listener thread timed out");
    assert_eq!(*seen.lock().unwrap(), (0..8).collect::<Vec<i64>>(), "each once, in order");
}
