//! The shared end-to-end suite (`rocketmq-push-e2e`) on this adapter: the async listener against
//! the simulator over loopback TCP and the real broker; the blocking listener and the delivery
//! stream against the simulator.

rocketmq_push_e2e::async_adapter_tests! {
    name: "smol",
    consumer: rocketmq_push_smol::PushConsumer,
    block_on: smol::block_on,
    spawn: |f| smol::spawn(f).detach(),
    enter: (),
}
