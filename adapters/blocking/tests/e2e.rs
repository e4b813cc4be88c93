//! The shared end-to-end suite (`rocketmq-push-e2e`) on this adapter: against the simulator over
//! loopback TCP, and against the real broker when one is running.

use rocketmq_push_blocking::{ConsumeStatus, PushConsumer};
use rocketmq_push_e2e::{Adapter, Env, Running, Spec, builder_for, run_all, run_bad_input};

struct Blocking;

struct Handle(PushConsumer);

impl Running for Handle {
    fn shutdown(self: Box<Self>) {
        self.0.shutdown();
    }
}

impl Adapter for Blocking {
    fn name(&self) -> &'static str {
        "blocking"
    }

    fn start(&self, name_server: &str, spec: &Spec) -> Box<dyn Running> {
        let s = spec.clone();
        let b = builder_for!(PushConsumer, name_server, spec)
            .listener(move |msgs, ctx| s.verdict(msgs, &ctx.queue));
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
