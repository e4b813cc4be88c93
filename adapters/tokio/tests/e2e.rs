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
