//! The shared end-to-end suite (`rocketmq-push-e2e`) on this adapter: the async listener against
//! the simulator over loopback TCP and the real broker; the blocking listener and the delivery
//! stream against the simulator.

use std::sync::LazyLock;

use rocketmq_push_tokio::PushConsumer;

static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
});

rocketmq_push_e2e::async_adapter_tests! {
    name: "tokio",
    consumer: PushConsumer,
    block_on: |f| RT.block_on(f),
    spawn: |f| drop(RT.spawn(f)),
    enter: RT.enter(),
}

#[test]
fn start_outside_a_tokio_runtime_is_refused() {
    let err = PushConsumer::builder("g")
        .name_server("127.0.0.1:9876")
        .subscribe("T", "*")
        .listener(|_, _| async { rocketmq_push_tokio::ConsumeStatus::Success })
        .start()
        .unwrap_err();
    assert!(matches!(err, rocketmq_push_tokio::StartError::Runtime(_)), "{err}");
}

/// Async calls past `consumeThreadMin` wait in the adapter, and the consume timeout counts from
/// each call's start: one slot, 8 messages of one queue, a 1 s timeout. At 300 ms a message none
/// may time out while it waits for the slot; the one message that takes 1.5 s times out once
/// (it is sent back and comes again), the others are consumed once each, in order.
#[test]
fn async_calls_queue_for_the_slot_and_time_out_from_their_start() {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use rocketmq_push_e2e::Env;
    use rocketmq_push_tokio::{ConsumeFromWhere, ConsumeStatus, Event};

    let env = Env::sim();
    let topic = "async_consume_timeout_from_start";
    env.one_queue_of(topic, 8);
    let (seen, events) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let (s, e) = (seen.clone(), events.clone());
    let _in = RT.enter();
    let consumer = PushConsumer::builder("g_async_consume_timeout")
        .name_server(env.name_server())
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .configure(|c| c.consume_thread_min(1).consume_thread_max(1).consume_timeout(Duration::from_secs(1)))
        .on_event(move |ev| e.lock().unwrap().push(ev.clone()))
        .listener(move |msgs, _| {
            let s = s.clone();
            let m = &msgs[0];
            let (offset, slow) = (m.queue_offset, m.queue_offset == 3 && m.reconsume_times == 0);
            async move {
                tokio::time::sleep(Duration::from_millis(if slow { 1500 } else { 300 })).await;
                s.lock().unwrap().push((offset, slow));
                ConsumeStatus::Success
            }
        })
        .start()
        .unwrap();
    rocketmq_push_e2e::wait(Duration::from_secs(30), "all eight consumed", || {
        seen.lock().unwrap().iter().filter(|(_, slow)| !slow).count() >= 8
    });
    RT.block_on(consumer.shutdown());
    let timeouts =
        events.lock().unwrap().iter().filter(|e| matches!(e, Event::ConsumeTimeout { .. })).count();
    assert_eq!(timeouts, 1, "only the slow call timed out: {:?}", events.lock().unwrap());
    let fast: Vec<i64> = seen.lock().unwrap().iter().filter(|(_, slow)| !slow).map(|(o, _)| *o).collect();
    // The slow one's retry comes from the retry topic, with its own queue offset.
    assert_eq!(fast[..7], [0, 1, 2, 4, 5, 6, 7], "each other message once, in order: {fast:?}");
}
