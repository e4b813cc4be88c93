//! Batches as a stream, each answered explicitly.

use std::pin::Pin;
use std::task::{Context, Poll};

use async_channel::{Receiver, Sender};
use rocketmq_push_core::{
    Batch, BatchId, ConsumeContext, ConsumeResult, ConsumeStatus, MessageQueue, Messages,
};

use super::msg::Msg;

/// The stream of batches of a consumer started without a listener.
#[derive(Debug)]
pub struct Deliveries {
    // Boxed: the receiver is not `Unpin`, and `Stream` wants to poll it through `&mut self`.
    rx: Pin<Box<Receiver<Delivery>>>,
}

impl Deliveries {
    pub(crate) fn new(rx: Receiver<Delivery>) -> Self {
        Self { rx: Box::pin(rx) }
    }

    /// The next batch; `None` once the consumer has terminated.
    pub async fn next(&mut self) -> Option<Delivery> {
        self.rx.recv().await.ok()
    }
}

impl futures_core::Stream for Deliveries {
    type Item = Delivery;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Delivery>> {
        self.rx.as_mut().poll_next(cx)
    }
}

/// One batch to process; answer it exactly once. Dropping it unanswered counts as
/// RECONSUME_LATER.
pub struct Delivery {
    batch: BatchId,
    /// The messages, in offset order.
    pub messages: Messages,
    /// The queue they came from, and the batch kind.
    pub context: ConsumeContext,
    results: Option<Sender<Msg>>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("batch", &self.batch)
            .field("messages", &self.messages)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl Delivery {
    pub(crate) fn new(b: Batch, results: Sender<Msg>) -> Self {
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
        self.finish(ConsumeResult::SUCCESS.with_ack_index(index));
    }

    /// Retry the whole batch later.
    pub fn reconsume_later(self) {
        self.finish(ConsumeResult::LATER);
    }

    /// Answer with any result.
    pub fn finish(mut self, result: ConsumeResult) {
        if let Some(tx) = self.results.take() {
            let _ = tx.try_send(Msg::Consumed { batch: self.batch, result, failed: None });
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if let Some(tx) = self.results.take() {
            let result = ConsumeResult::from_status(ConsumeStatus::ReconsumeLater);
            let failed = Some("dropped its delivery unanswered".to_owned());
            let _ = tx.try_send(Msg::Consumed { batch: self.batch, result, failed });
        }
    }
}

/// A stream listener's sender and the stream it feeds.
pub fn channel() -> (Sender<Delivery>, Deliveries) {
    let (tx, rx) = async_channel::unbounded();
    (tx, Deliveries::new(rx))
}
