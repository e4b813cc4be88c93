//! Running user code.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;

use rocketmq_push_core::{ConsumeContext, ConsumeResult, ConsumeStatus, MessageExt, Messages};

/// A synchronous listener: the messages of one batch and a context it may set (`ackIndex`,
/// delay level, orderly suspend time); returns the status.
pub type SyncListener = Arc<dyn Fn(&[MessageExt], &mut ConsumeContext) -> ConsumeStatus + Send + Sync>;

/// A listener's future, boxed.
pub type BoxFuture = Pin<Box<dyn Future<Output = ConsumeResult> + Send>>;

/// An async listener with its types erased: what the tokio and async-std adapters run.
pub type AsyncListener = Arc<dyn Fn(Messages, ConsumeContext) -> BoxFuture + Send + Sync>;

/// Erase the types of an async listener returning a `ConsumeStatus` or a `ConsumeResult`.
pub fn async_listener<F, Fut, R>(f: F) -> AsyncListener
where
    F: Fn(Messages, ConsumeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: Into<ConsumeResult>,
{
    Arc::new(move |m, c| {
        let fut = f(m, c);
        Box::pin(async move { fut.await.into() })
    })
}

/// Run `f`; a panic counts as RECONSUME_LATER (as a thrown exception does in Java) and its
/// message is returned so the adapter can report it. The worker survives, so the pool keeps its
/// size.
pub fn guarded(f: impl FnOnce() -> ConsumeResult) -> (ConsumeResult, Option<String>) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => (r, None),
        Err(p) => (ConsumeResult::from_status(ConsumeStatus::ReconsumeLater), Some(panic_message(&*p))),
    }
}

/// The message a panic carried, if it was a string.
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "listener panicked".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_reconsume_later() {
        let (r, p) = guarded(|| panic!("boom {}", 1));
        assert_eq!(r.status, ConsumeStatus::ReconsumeLater);
        assert_eq!(p.as_deref(), Some("boom 1"));
        let (r, p) = guarded(|| ConsumeResult::SUCCESS);
        assert_eq!((r, p), (ConsumeResult::SUCCESS, None));
    }
}
