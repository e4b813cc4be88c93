//! The shared end-to-end suite (`rocketmq-push-e2e`) on this adapter: the async listener against
//! the simulator over loopback TCP (whole) and the real broker; the blocking listener and the
//! delivery stream against the simulator (those three a smoke unless `E2E_FULL=1`).

rocketmq_push_e2e::async_adapter_tests! {
    name: "smol",
    consumer: rocketmq_push_smol::PushConsumer,
    block_on: smol::block_on,
    spawn: |f| smol::spawn(f).detach(),
    enter: (),
    // The run loop and listener shapes are tokio's, which runs everything: here the async
    // listener runs the whole suite on the simulator, the rest a smoke (E2E_FULL=1: all).
    smoke: true,
}
