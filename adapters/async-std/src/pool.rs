//! `consumeThreadMin` worker tasks running the listener (async, or blocking on the blocking
//! pool); a panic counts as RECONSUME_LATER and is reported.

use std::panic::AssertUnwindSafe;

use futures_lite::FutureExt;
use rocketmq_push_core::{Batch, ConsumeContext, ConsumeResult, ConsumeStatus};

use crate::Listener;
use crate::driver::Msg;
use crate::runtime::{self, Sender};

pub(crate) struct Pool {
    jobs: Sender<Batch>,
}

impl Pool {
    pub(crate) fn start(listener: Listener, workers: usize, results: Sender<Msg>) -> Self {
        let (jobs, rx) = runtime::unbounded::<Batch>();
        for _ in 0..workers.max(1) {
            let (rx, listener, results) = (rx.clone(), listener.clone(), results.clone());
            runtime::spawn(async move {
                while let Ok(batch) = rx.recv().await {
                    let id = batch.id;
                    let (result, panic) = run(&listener, batch).await;
                    if results.send(Msg::Done { batch: id, result, panic }).await.is_err() {
                        return;
                    }
                }
            });
        }
        Self { jobs }
    }

    pub(crate) fn submit(&self, batch: Batch) {
        let _ = self.jobs.try_send(batch);
    }
}

async fn run(listener: &Listener, batch: Batch) -> (ConsumeResult, Option<String>) {
    let ctx = ConsumeContext::for_batch(&batch);
    match listener {
        Listener::Async(f) => match AssertUnwindSafe(f(batch.messages, ctx)).catch_unwind().await {
            Ok(r) => (r, None),
            Err(_) => {
                (ConsumeResult::from_status(ConsumeStatus::ReconsumeLater), Some("listener panicked".into()))
            }
        },
        Listener::Blocking(f) => {
            let f = f.clone();
            runtime::spawn_blocking(move || {
                let mut ctx = ctx;
                rocketmq_push_io::guarded(|| {
                    let status = f(&batch.messages, &mut ctx);
                    ctx.result(status)
                })
            })
            .await
        }
    }
}
