//! The listener pool: `consumeThreadMin` workers taking batches in the order the core handed them
//! out; a panic counts as RECONSUME_LATER and is reported.

use std::panic::AssertUnwindSafe;

use async_channel::Sender;
use futures_lite::FutureExt;
use rocketmq_push_core::{Batch, ConsumeContext, ConsumeResult, ConsumeStatus};

use super::Runtime;
use super::msg::Msg;
use super::stream::Delivery;
use crate::{AsyncListener, SyncListener, guarded};

/// How user code runs.
#[derive(Clone)]
pub enum Listener {
    /// An async listener, run by the workers.
    Async(AsyncListener),
    /// A blocking listener, run where it cannot stall the runtime (on plain threads: on the
    /// worker's own thread).
    Sync(SyncListener),
    /// Batches go to a [`Deliveries`](super::Deliveries) stream the application reads.
    Stream(Sender<Delivery>),
}

pub(super) struct Pool {
    /// Batches for the workers, in the order the core handed them out.
    jobs: Option<Sender<Batch>>,
    /// The stream, for a stream listener.
    stream: Option<Sender<Delivery>>,
    results: Sender<Msg>,
}

impl Pool {
    pub(super) fn start<R: Runtime>(
        rt: &R,
        listener: Listener,
        workers: usize,
        results: Sender<Msg>,
    ) -> std::io::Result<Self> {
        if let Listener::Stream(tx) = listener {
            return Ok(Self { jobs: None, stream: Some(tx), results });
        }
        let (jobs, rx) = async_channel::unbounded::<Batch>();
        for _ in 0..workers.max(1) {
            let (rx, listener, results, rt2) = (rx.clone(), listener.clone(), results.clone(), rt.clone());
            rt.spawn("rmq-consume", async move {
                while let Ok(batch) = rx.recv().await {
                    let id = batch.id;
                    let (result, panic) = run(&rt2, &listener, batch).await;
                    if results.try_send(Msg::Consumed { batch: id, result, panic }).is_err() {
                        return;
                    }
                }
            })?;
        }
        Ok(Self { jobs: Some(jobs), stream: None, results })
    }

    pub(super) fn consume(&self, batch: Batch) {
        if let Some(jobs) = &self.jobs {
            let _ = jobs.try_send(batch);
            return;
        }
        let Some(tx) = &self.stream else { return };
        let id = batch.id;
        if tx.try_send(Delivery::new(batch, self.results.clone())).is_err() {
            // Nobody reads the stream (the failed delivery answered itself when it was dropped).
            tracing::debug!(%id, "the delivery stream was dropped");
        }
    }
}

/// Run one batch; a panic is caught and counts as RECONSUME_LATER.
async fn run<R: Runtime>(rt: &R, listener: &Listener, batch: Batch) -> (ConsumeResult, Option<String>) {
    let ctx = ConsumeContext::for_batch(&batch);
    match listener {
        Listener::Async(f) => match AssertUnwindSafe(f(batch.messages, ctx)).catch_unwind().await {
            Ok(r) => (r, None),
            Err(p) => {
                (ConsumeResult::from_status(ConsumeStatus::ReconsumeLater), Some(crate::panic_message(&*p)))
            }
        },
        Listener::Sync(f) => {
            let f = f.clone();
            rt.unblock(move || {
                let mut ctx = ctx;
                guarded(|| {
                    let status = f(&batch.messages, &mut ctx);
                    ctx.result(status)
                })
            })
            .await
        }
        Listener::Stream(_) => (
            ConsumeResult::from_status(ConsumeStatus::ReconsumeLater),
            Some("a stream listener has no worker".into()),
        ),
    }
}
