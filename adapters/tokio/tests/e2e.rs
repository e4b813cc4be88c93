//! The shared end-to-end suite (`rocketmq-push-e2e`) on this adapter: the async listener against
//! the simulator over loopback TCP and the real broker; the blocking listener and the delivery
//! stream against the simulator.

use rocketmq_push_e2e::{Adapter, Env, Running, Spec, builder_for, run_all, run_bad_input};
use rocketmq_push_tokio::{ConsumeStatus, PushConsumer};

#[derive(Clone, Copy)]
enum Mode {
    Async,
    Blocking,
    Stream,
}

struct Tokio {
    rt: tokio::runtime::Runtime,
    mode: Mode,
}

struct Handle {
    consumer: PushConsumer,
    rt: tokio::runtime::Handle,
}

impl Running for Handle {
    fn shutdown(self: Box<Self>) {
        let Self { consumer, rt } = *self;
        rt.block_on(consumer.shutdown());
    }
}

impl Adapter for Tokio {
    fn name(&self) -> &'static str {
        match self.mode {
            Mode::Async => "tokio async",
            Mode::Blocking => "tokio blocking",
            Mode::Stream => "tokio stream",
        }
    }

    fn start(&self, name_server: &str, spec: &Spec) -> Box<dyn Running> {
        let _guard = self.rt.enter();
        let b = builder_for!(PushConsumer, name_server, spec);
        let s = spec.clone();
        let consumer = match self.mode {
            Mode::Async => b
                .listener(move |msgs, ctx| {
                    let s = s.clone();
                    async move { s.verdict(&msgs, &ctx.queue) }
                })
                .start()
                .unwrap(),
            Mode::Blocking => {
                b.blocking_listener(move |msgs, ctx| s.verdict(msgs, &ctx.queue)).start().unwrap()
            }
            Mode::Stream => {
                let (consumer, mut deliveries) = b.start_stream().unwrap();
                tokio::spawn(async move {
                    while let Some(d) = deliveries.next().await {
                        let s = s.clone();
                        // A panic in this task drops the delivery unanswered: RECONSUME_LATER.
                        tokio::spawn(async move {
                            match s.verdict(&d.messages, d.queue()) {
                                ConsumeStatus::Success => d.ack(),
                                _ => d.reconsume_later(),
                            }
                        });
                    }
                });
                consumer
            }
        };
        Box::new(Handle { consumer, rt: self.rt.handle().clone() })
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn e2e_async_listener_against_the_simulator() {
    run_all(&Tokio { rt: runtime(), mode: Mode::Async }, &Env::sim());
}

#[test]
fn e2e_blocking_listener_against_the_simulator() {
    run_all(&Tokio { rt: runtime(), mode: Mode::Blocking }, &Env::sim());
}

#[test]
fn e2e_delivery_stream_against_the_simulator() {
    run_all(&Tokio { rt: runtime(), mode: Mode::Stream }, &Env::sim());
}

#[test]
fn e2e_async_listener_against_the_real_broker() {
    if let Some(env) = Env::real() {
        run_all(&Tokio { rt: runtime(), mode: Mode::Async }, &env);
    }
}

#[test]
fn bad_input_is_reported_and_shutdown_is_bounded() {
    run_bad_input(&Tokio { rt: runtime(), mode: Mode::Async }, &Env::sim());
}
