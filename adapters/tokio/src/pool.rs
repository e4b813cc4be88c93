//! Running listeners: tasks (async), `spawn_blocking` (blocking) or a stream, at most
//! `consumeThreadMin` at once; a panic counts as RECONSUME_LATER and is reported.

use std::sync::Arc;

use rocketmq_push_core::{Batch, ConsumeContext, ConsumeResult, ConsumeStatus};
use tokio::sync::{Semaphore, mpsc};

use crate::Listener;
use crate::driver::Msg;
use crate::stream::Delivery;

pub(crate) struct Pool {
    listener: Listener,
    permits: Arc<Semaphore>,
    results: mpsc::UnboundedSender<Msg>,
}

impl Pool {
    pub(crate) fn new(listener: Listener, threads: usize, results: mpsc::UnboundedSender<Msg>) -> Self {
        Self { listener, permits: Arc::new(Semaphore::new(threads.max(1))), results }
    }

    pub(crate) fn submit(&self, batch: Batch) {
        let results = self.results.clone();
        let id = batch.id;
        let ctx = ConsumeContext::for_batch(&batch);
        match &self.listener {
            Listener::Stream(tx) => {
                if let Err(e) = tx.send(Delivery::new(batch, results.clone())) {
                    // Nobody reads the stream: the batch must still get its one result.
                    drop(e);
                    let result = ConsumeResult::from_status(ConsumeStatus::ReconsumeLater);
                    let _ = results.send(Msg::Done {
                        batch: id,
                        result,
                        panic: Some("the delivery stream was dropped".into()),
                    });
                }
            }
            Listener::Async(f) => {
                let (f, permits) = (f.clone(), self.permits.clone());
                tokio::spawn(async move {
                    let _permit = permits.acquire_owned().await;
                    // The listener runs in a task of its own so that a panic is caught here.
                    let (result, panic) = match tokio::spawn(f(batch.messages, ctx)).await {
                        Ok(r) => (r, None),
                        Err(e) => {
                            (ConsumeResult::from_status(ConsumeStatus::ReconsumeLater), Some(e.to_string()))
                        }
                    };
                    let _ = results.send(Msg::Done { batch: id, result, panic });
                });
            }
            Listener::Blocking(f) => {
                let (f, permits) = (f.clone(), self.permits.clone());
                tokio::spawn(async move {
                    let _permit = permits.acquire_owned().await;
                    let run = tokio::task::spawn_blocking(move || {
                        let mut ctx = ctx;
                        rocketmq_push_io::guarded(|| {
                            let status = f(&batch.messages, &mut ctx);
                            ctx.result(status)
                        })
                    });
                    let (result, panic) = match run.await {
                        Ok(r) => r,
                        Err(e) => {
                            (ConsumeResult::from_status(ConsumeStatus::ReconsumeLater), Some(e.to_string()))
                        }
                    };
                    let _ = results.send(Msg::Done { batch: id, result, panic });
                });
            }
        }
    }
}
