//! Running listeners: `consumeThreadMin` worker tasks (async listeners run as tasks, blocking
//! ones on `spawn_blocking`), or a stream; a panic counts as RECONSUME_LATER and is reported.

use std::sync::Arc;

use rocketmq_push_core::{Batch, ConsumeContext, ConsumeResult, ConsumeStatus};
use tokio::sync::{Mutex, mpsc};

use crate::Listener;
use crate::driver::Msg;
use crate::stream::Delivery;

pub(crate) struct Pool {
    /// Batches for the workers (async and blocking listeners), in dispatch order.
    jobs: Option<mpsc::UnboundedSender<Batch>>,
    /// The stream, for a stream listener.
    stream: Option<mpsc::UnboundedSender<Delivery>>,
    results: mpsc::UnboundedSender<Msg>,
}

impl Pool {
    /// `threads` workers take batches in the order the core dispatched them (one worker: strictly
    /// one after the other), like the other adapters' pools.
    pub(crate) fn new(listener: Listener, threads: usize, results: mpsc::UnboundedSender<Msg>) -> Self {
        if let Listener::Stream(tx) = listener {
            return Self { jobs: None, stream: Some(tx), results };
        }
        let (jobs, rx) = mpsc::unbounded_channel::<Batch>();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..threads.max(1) {
            let (rx, listener, results) = (rx.clone(), listener.clone(), results.clone());
            tokio::spawn(async move {
                loop {
                    // The lock is fair: workers take turns, batches leave in order.
                    let Some(batch) = rx.lock().await.recv().await else { return };
                    let id = batch.id;
                    let (result, panic) = run(&listener, batch).await;
                    if results.send(Msg::Done { batch: id, result, panic }).is_err() {
                        return;
                    }
                }
            });
        }
        Self { jobs: Some(jobs), stream: None, results }
    }

    pub(crate) fn submit(&self, batch: Batch) {
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(batch);
            return;
        }
        let Some(tx) = &self.stream else { return };
        let id = batch.id;
        if let Err(e) = tx.send(Delivery::new(batch, self.results.clone())) {
            // Nobody reads the stream: the batch must still get its one result.
            drop(e);
            let result = ConsumeResult::from_status(ConsumeStatus::ReconsumeLater);
            let _ = self.results.send(Msg::Done {
                batch: id,
                result,
                panic: Some("the delivery stream was dropped".into()),
            });
        }
    }
}

/// Run one batch; a panic is caught (the listener runs in a task of its own) and counts as
/// RECONSUME_LATER.
async fn run(listener: &Listener, batch: Batch) -> (ConsumeResult, Option<String>) {
    let later = || ConsumeResult::from_status(ConsumeStatus::ReconsumeLater);
    let ctx = ConsumeContext::for_batch(&batch);
    match listener {
        Listener::Async(f) => match tokio::spawn(f(batch.messages, ctx)).await {
            Ok(r) => (r, None),
            Err(e) => (later(), Some(e.to_string())),
        },
        Listener::Blocking(f) => {
            let f = f.clone();
            let run = tokio::task::spawn_blocking(move || {
                let mut ctx = ctx;
                rocketmq_push_io::guarded(|| {
                    let status = f(&batch.messages, &mut ctx);
                    ctx.result(status)
                })
            });
            match run.await {
                Ok(r) => r,
                Err(e) => (later(), Some(e.to_string())),
            }
        }
        Listener::Stream(_) => (later(), Some("a stream listener has no worker".into())),
    }
}
