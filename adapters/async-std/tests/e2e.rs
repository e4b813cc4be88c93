//! The shared end-to-end suite (`rocketmq-push-e2e`) on this adapter: the async listener against
//! the simulator over loopback TCP and the real broker; the blocking listener on the simulator.

use rocketmq_push_async_std::{ConsumeStatus, MessageExt, MessageQueue, PushConsumer};
use rocketmq_push_e2e::{Adapter, Env, Outcome, Running, Spec, run_all, run_bad_input};

struct AsyncStd {
    blocking: bool,
}

struct Handle(PushConsumer);

impl Running for Handle {
    fn shutdown(self: Box<Self>) {
        async_std::task::block_on(self.0.shutdown());
    }
}

fn verdict(spec: &Spec, msgs: &[MessageExt], queue: &MessageQueue) -> ConsumeStatus {
    let mut status = ConsumeStatus::Success;
    for m in msgs {
        match spec.handle(m, queue) {
            Outcome::Ok => {}
            Outcome::Later => status = ConsumeStatus::ReconsumeLater,
            Outcome::Panic => panic!("listener panics on purpose at offset {}", m.queue_offset),
        }
    }
    status
}

impl Adapter for AsyncStd {
    fn name(&self) -> &'static str {
        if self.blocking { "async-std blocking" } else { "async-std async" }
    }

    fn start(&self, name_server: &str, spec: &Spec) -> Box<dyn Running> {
        let events = spec.recorder.clone();
        let mut b = PushConsumer::builder(spec.group.as_str())
            .name_server(name_server)
            .subscribe(spec.topic.as_str(), spec.expression.as_str())
            .message_model(spec.model)
            .consume_from_where(spec.from)
            .configure(|c| {
                c.max_reconsume_times(spec.max_reconsume).consume_thread_min(4).consume_thread_max(4)
            })
            .on_event(move |e| events.event(e));
        if spec.orderly {
            b = b.orderly();
        }
        if let Some(ts) = spec.timestamp_ms {
            b = b.consume_timestamp_ms(ts);
        }
        if let Some(f) = &spec.offset_file {
            b = b.offset_file(f);
        }
        let s = spec.clone();
        let consumer = if self.blocking {
            b.blocking_listener(move |msgs, ctx| verdict(&s, msgs, &ctx.queue)).start().unwrap()
        } else {
            b.listener(move |msgs, ctx| {
                let s = s.clone();
                async move { verdict(&s, &msgs, &ctx.queue) }
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
