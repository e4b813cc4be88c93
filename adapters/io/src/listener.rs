//! Running user code.

use std::any::Any;
use std::fmt::Display;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rocketmq_push_core::{ConsumeContext, ConsumeResult, ConsumeStatus, Messages};

/// What a listener may return: a [`ConsumeStatus`], a full [`ConsumeResult`], or either inside a
/// `Result`, so that `?` works in a listener. An `Err` counts as RECONSUME_LATER (as an exception
/// thrown from Java's `consumeMessage` does) and its message is logged with the batch.
pub trait ListenerOutput: Send + 'static {
    /// The batch's result; `status` turns a bare status into one. `Err` says why the listener
    /// failed.
    fn into_result(
        self,
        status: impl FnOnce(ConsumeStatus) -> ConsumeResult,
    ) -> Result<ConsumeResult, String>;
}

impl ListenerOutput for ConsumeStatus {
    fn into_result(self, status: impl FnOnce(Self) -> ConsumeResult) -> Result<ConsumeResult, String> {
        Ok(status(self))
    }
}

impl ListenerOutput for ConsumeResult {
    fn into_result(self, _: impl FnOnce(ConsumeStatus) -> Self) -> Result<Self, String> {
        Ok(self)
    }
}

impl<T: ListenerOutput, E: Display + Send + 'static> ListenerOutput for Result<T, E> {
    fn into_result(
        self,
        status: impl FnOnce(ConsumeStatus) -> ConsumeResult,
    ) -> Result<ConsumeResult, String> {
        match self {
            Ok(t) => t.into_result(status),
            Err(e) => Err(format!("returned an error: {e}")),
        }
    }
}

/// A synchronous listener with its answer type erased: the messages of one batch and their
/// context, as an async listener gets them; `Err` = it failed, and why.
pub type SyncListener = Arc<dyn Fn(Messages, ConsumeContext) -> Result<ConsumeResult, String> + Send + Sync>;

/// Erase the answer type of a blocking listener. It takes what an async listener takes, so a
/// listener moves between adapters unchanged: a bare status keeps Java's defaults, and
/// `ctx.result(status)` carries `ack_index`, the delay level or the suspend time.
pub fn sync_listener<F, R>(f: F) -> SyncListener
where
    F: Fn(Messages, ConsumeContext) -> R + Send + Sync + 'static,
    R: ListenerOutput,
{
    Arc::new(move |m, ctx| f(m, ctx).into_result(ConsumeResult::from_status))
}

/// One slot for an async listener's calls: the future of the call in progress lives in the
/// slot's own allocation, and the next call reuses it, so a call allocates nothing. Its answer
/// is erased as in [`SyncListener`].
pub trait CallSlot: Send {
    /// Start a call on `messages` (the slot's previous call has ended).
    fn start(self: Pin<&mut Self>, messages: Messages, ctx: ConsumeContext);

    /// Poll the call in progress. Once it is ready the slot is empty again (its future dropped);
    /// an empty slot answers with an `Err`.
    fn poll_call(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<ConsumeResult, String>>;
}

/// An async listener with its types erased: a maker of call slots, which the async adapters fill
/// and poll.
pub type AsyncListener = Arc<dyn Fn() -> Pin<Box<dyn CallSlot>> + Send + Sync>;

pin_project_lite::pin_project! {
    struct Slot<F, Fut> {
        f: Arc<F>,
        #[pin]
        call: Option<Fut>,
    }
}

impl<F, Fut, R> CallSlot for Slot<F, Fut>
where
    F: Fn(Messages, ConsumeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: ListenerOutput,
{
    fn start(self: Pin<&mut Self>, messages: Messages, ctx: ConsumeContext) {
        let mut this = self.project();
        let fut = (this.f)(messages, ctx);
        this.call.set(Some(fut));
    }

    fn poll_call(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<ConsumeResult, String>> {
        let mut this = self.project();
        let Some(fut) = this.call.as_mut().as_pin_mut() else {
            return Poll::Ready(Err("no call in progress".to_owned()));
        };
        let Poll::Ready(answer) = fut.poll(cx) else { return Poll::Pending };
        // Dropped now, not at the next call: it may hold the batch's messages.
        this.call.set(None);
        // The context went to the listener: a bare status keeps Java's defaults.
        Poll::Ready(answer.into_result(ConsumeResult::from_status))
    }
}

/// Erase the types of an async listener returning any [`ListenerOutput`].
pub fn async_listener<F, Fut, R>(f: F) -> AsyncListener
where
    F: Fn(Messages, ConsumeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: ListenerOutput,
{
    let f = Arc::new(f);
    Arc::new(move || Box::pin(Slot { f: f.clone(), call: None }))
}

/// Run `f`; a panic or an `Err` counts as RECONSUME_LATER (as a thrown exception does in
/// Java), and why is returned so the adapter can report it. The worker survives, so the pool
/// keeps its size.
pub fn guarded(f: impl FnOnce() -> Result<ConsumeResult, String>) -> (ConsumeResult, Option<String>) {
    settled(catch_unwind(AssertUnwindSafe(f)))
}

/// What a listener call that ended (answered, failed or panicked) gives the core, and why it
/// failed.
pub(crate) fn settled(
    ended: std::thread::Result<Result<ConsumeResult, String>>,
) -> (ConsumeResult, Option<String>) {
    match ended {
        Ok(Ok(r)) => (r, None),
        Ok(Err(why)) => (ConsumeResult::LATER, Some(why)),
        Err(p) => (ConsumeResult::LATER, Some(panic_message(&*p))),
    }
}

/// The message a panic carried, if it was a string.
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .map(|m| format!("panicked: {m}"))
        .unwrap_or_else(|| "panicked".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_or_an_error_is_reconsume_later_and_says_why() {
        let (r, why) = guarded(|| panic!("boom {}", 1));
        assert_eq!((r, why.as_deref()), (ConsumeResult::LATER, Some("panicked: boom 1")));
        let (r, why) = guarded(|| Ok(ConsumeResult::SUCCESS));
        assert_eq!((r, why), (ConsumeResult::SUCCESS, None));
        let failing = |n: &str| -> Result<ConsumeStatus, std::num::ParseIntError> {
            n.parse::<u8>()?;
            Ok(ConsumeStatus::Success)
        };
        let (r, why) = guarded(|| failing("x").into_result(ConsumeResult::from_status));
        assert_eq!(r, ConsumeResult::LATER);
        assert_eq!(why.as_deref(), Some("returned an error: invalid digit found in string"));
        let (r, _) = guarded(|| failing("7").into_result(ConsumeResult::from_status));
        assert_eq!(r, ConsumeResult::SUCCESS);
    }

    #[test]
    fn a_blocking_listener_answers_as_an_async_one() {
        let ctx = || {
            let q = rocketmq_push_core::MessageQueue::new("T", "b", 0);
            ConsumeContext::new(q, rocketmq_push_core::BatchKind::Concurrent)
        };
        let bare = sync_listener(|_, mut ctx: ConsumeContext| {
            ctx.ack_index = Some(0);
            Ok::<_, String>(ConsumeStatus::Success)
        });
        assert_eq!(
            bare(Messages::from_vec(vec![]), ctx()).unwrap(),
            ConsumeResult::SUCCESS,
            "Java's defaults"
        );
        let full = sync_listener(|_, mut ctx: ConsumeContext| {
            ctx.ack_index = Some(0);
            ctx.result(ConsumeStatus::Success)
        });
        assert_eq!(full(Messages::from_vec(vec![]), ctx()).unwrap().ack_index, Some(0));
    }
}
