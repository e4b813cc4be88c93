//! Batches as a stream, each answered explicitly.

use std::pin::Pin;
use std::task::{Context, Poll};

use rocketmq_push_core::{
    Batch, BatchId, ConsumeContext, ConsumeResult, ConsumeStatus, MessageQueue, Messages,
};
use tokio::sync::mpsc;

use crate::driver::Msg;

/// The stream of batches from [`Builder::start_stream`](crate::Builder::start_stream).
#[derive(Debug)]
pub struct Deliveries {
    rx: mpsc::UnboundedReceiver<Delivery>,
}

impl Deliveries {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<Delivery>) -> Self {
        Self { rx }
    }

    /// The next batch; `None` once the consumer has terminated.
    pub async fn next(&mut self) -> Option<Delivery> {
        self.rx.recv().await
    }
}

impl futures_core::Stream for Deliveries {
    type Item = Delivery;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Delivery>> {
        self.rx.poll_recv(cx)
    }
}

/// One batch to process; answer it exactly once. Dropping it unanswered counts as
/// RECONSUME_LATER.
#[derive(Debug)]
pub struct Delivery {
    batch: BatchId,
    /// The messages, in offset order.
    pub messages: Messages,
    /// The queue they came from, and the batch kind.
    pub context: ConsumeContext,
    results: Option<mpsc::UnboundedSender<Msg>>,
}

impl Delivery {
    pub(crate) fn new(b: Batch, results: mpsc::UnboundedSender<Msg>) -> Self {
        let context = ConsumeContext::for_batch(&b);
        Self { batch: b.id, messages: b.messages, context, results: Some(results) }
    }

    /// The queue the batch came from.
    pub fn queue(&self) -> &MessageQueue {
        &self.context.queue
    }

    /// Everything succeeded.
    pub fn ack(self) {
        self.finish(ConsumeResult::SUCCESS);
    }

    /// Messages up to and including `index` succeeded; the rest go back for retry.
    pub fn ack_up_to(self, index: usize) {
        self.finish(ConsumeResult { ack_index: Some(index), ..ConsumeResult::SUCCESS });
    }

    /// Retry the whole batch later.
    pub fn reconsume_later(self) {
        self.finish(ConsumeResult::LATER);
    }

    /// Answer with any result.
    pub fn finish(mut self, result: ConsumeResult) {
        if let Some(tx) = self.results.take() {
            let _ = tx.send(Msg::Done { batch: self.batch, result, panic: None });
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if let Some(tx) = self.results.take() {
            let result = ConsumeResult::from_status(ConsumeStatus::ReconsumeLater);
            let _ = tx.send(Msg::Done {
                batch: self.batch,
                result,
                panic: Some("delivery dropped unanswered".into()),
            });
        }
    }
}
