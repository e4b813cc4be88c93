//! The shared end-to-end suite (`rocketmq-push-e2e`) on this adapter: the async listener against
//! the simulator over loopback TCP and the real broker; the blocking listener on the simulator.

use rocketmq_push_async_std::PushConsumer;
use rocketmq_push_e2e::{Adapter, Env, Running, Spec, builder_for, run_all, run_bad_input};

struct AsyncStd {
    blocking: bool,
}

struct Handle(PushConsumer);

impl Running for Handle {
    fn shutdown(self: Box<Self>) {
        async_std::task::block_on(self.0.shutdown());
    }
}

impl Adapter for AsyncStd {
    fn name(&self) -> &'static str {
        if self.blocking { "async-std blocking" } else { "async-std async" }
    }

    fn start(&self, name_server: &str, spec: &Spec) -> Box<dyn Running> {
        let b = builder_for!(PushConsumer, name_server, spec);
        let s = spec.clone();
        let consumer = if self.blocking {
            b.blocking_listener(move |msgs, ctx| s.verdict(msgs, &ctx.queue)).start().unwrap()
        } else {
            b.listener(move |msgs, ctx| {
                let s = s.clone();
                async move { s.verdict(&msgs, &ctx.queue) }
            })
            .start()
            .unwrap()
        };
        Box::new(Handle(consumer))
    }
}

#[test]
fn e2e_async_listener_against_the_simulator() {
    run_all(&AsyncStd { blocking: false }, &Env::sim());
}

#[test]
fn e2e_blocking_listener_against_the_simulator() {
    run_all(&AsyncStd { blocking: true }, &Env::sim());
}

#[test]
fn e2e_async_listener_against_the_real_broker() {
    if let Some(env) = Env::real() {
        run_all(&AsyncStd { blocking: false }, &env);
    }
}

#[test]
fn bad_input_is_reported_and_shutdown_is_bounded() {
    run_bad_input(&AsyncStd { blocking: false }, &Env::sim());
}
