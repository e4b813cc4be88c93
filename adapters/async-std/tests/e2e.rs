//! The shared end-to-end suite (`rocketmq-push-e2e`) on this adapter: the async listener against
//! the simulator over loopback TCP (whole) and the real broker; the blocking listener and the
//! delivery stream against the simulator (those three a smoke unless `E2E_FULL=1`).

rocketmq_push_e2e::async_adapter_tests! {
    name: "async-std",
    consumer: rocketmq_push_async_std::PushConsumer,
    block_on: async_std::task::block_on,
    spawn: |f| drop(async_std::task::spawn(f)),
    enter: (),
    // The run loop and listener shapes are tokio's, which runs everything: here the async
    // listener runs the whole suite on the simulator, the rest a smoke (E2E_FULL=1: all).
    smoke: true,
}
