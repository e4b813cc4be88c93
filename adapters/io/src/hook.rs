//! Consume hooks: what Java's `ConsumeMessageHook` gives (`registerConsumeMessageHook`), the
//! place message trace and metrics hang on. Every adapter runs them from the shared loop, for
//! every listener shape (async, blocking, delivery stream): `before` when user code starts on a
//! batch, `after` when it has answered, failed or panicked. A batch taken back before it
//! started (its queue went away) gets neither.
//!
//! Hooks run on the consumer's own task, between its other work: keep them quick (count, stamp,
//! queue a record for another thread). A hook that panics is logged and skipped for that call;
//! consumption goes on.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketmq_push_core::{Batch, BatchId, BatchKind, ConsumeResult, ConsumeStatus, MessageQueue, Messages};

/// Called around every listener call. Both methods do nothing unless overridden.
pub trait ConsumeHook: Send + Sync + 'static {
    /// User code starts on a batch (Java's `consumeMessageBefore`).
    fn before(&self, ctx: &HookContext<'_>) {
        let _ = ctx;
    }
    /// User code ended on a batch (Java's `consumeMessageAfter`).
    fn after(&self, ctx: &HookContext<'_>, outcome: &HookOutcome<'_>) {
        let _ = (ctx, outcome);
    }
}

/// The batch a hook is called about (Java's `ConsumeMessageContext`).
#[derive(Debug)]
#[non_exhaustive]
pub struct HookContext<'a> {
    /// The consumer group, as the application named it (no namespace).
    pub group: &'a str,
    /// The queue the messages came from.
    pub queue: &'a MessageQueue,
    /// The batch.
    pub batch: BatchId,
    /// Concurrent, orderly, or one message the broker asked to consume directly.
    pub kind: BatchKind,
    /// The messages (retry messages carry their original topic).
    pub messages: &'a Messages,
}

/// How a listener call ended.
#[derive(Debug)]
#[non_exhaustive]
pub struct HookOutcome<'a> {
    /// What goes to the core (a failure is RECONSUME_LATER).
    pub result: &'a ConsumeResult,
    /// The listener panicked or returned an `Err`: why.
    pub failure: Option<&'a str>,
    /// From `before` to the answer.
    pub elapsed: Duration,
}

impl HookOutcome<'_> {
    /// Java's `ConsumeMessageContext.success`: the batch was consumed (SUCCESS), not handed
    /// back for a retry or a suspend.
    pub fn success(&self) -> bool {
        self.failure.is_none() && self.result.status == ConsumeStatus::Success
    }
}

/// A batch between `before` and `after`.
struct Open {
    queue: Arc<MessageQueue>,
    kind: BatchKind,
    messages: Messages,
    /// `None` until user code starts (a blocking listener's batch may wait for a thread).
    started: Option<Instant>,
}

/// The registered hooks and the batches they were called `before` for.
#[derive(Default)]
pub(crate) struct Hooks {
    list: Vec<Arc<dyn ConsumeHook>>,
    group: String,
    open: HashMap<BatchId, Open>,
}

impl Hooks {
    pub(crate) fn new(list: Vec<Arc<dyn ConsumeHook>>, group: String) -> Self {
        Self { list, group, open: HashMap::new() }
    }

    /// True if any hook is registered.
    pub(crate) fn any(&self) -> bool {
        !self.list.is_empty()
    }

    /// `batch` goes to the listener; it starts now unless `starts_later` (its start is reported
    /// later: always where the listener queues batches).
    #[inline]
    pub(crate) fn handed(&mut self, batch: &Batch, now: Instant, starts_later: bool) {
        if self.list.is_empty() {
            return;
        }
        let open = Open {
            queue: batch.queue.clone(),
            kind: batch.kind,
            messages: batch.messages.clone(),
            started: None,
        };
        self.open.insert(batch.id, open);
        if !starts_later {
            self.started(batch.id, now);
        }
    }

    /// User code started on `batch` at `at`.
    #[inline]
    pub(crate) fn started(&mut self, batch: BatchId, at: Instant) {
        if self.open.is_empty() {
            return;
        }
        // Once: an async call is told here as it starts, and again in its start report.
        let Some(o) = self.open.get_mut(&batch).filter(|o| o.started.is_none()) else { return };
        o.started = Some(at);
        let ctx =
            HookContext { group: &self.group, queue: &o.queue, batch, kind: o.kind, messages: &o.messages };
        for h in &self.list {
            guard("before", || h.before(&ctx));
        }
    }

    /// The core took `batch` back before it started.
    pub(crate) fn withdrawn(&mut self, batch: BatchId) {
        if !self.open.is_empty() {
            self.open.remove(&batch);
        }
    }

    /// User code ended on `batch`.
    #[inline]
    pub(crate) fn finished(
        &mut self,
        batch: BatchId,
        result: &ConsumeResult,
        failure: Option<&str>,
        now: Instant,
    ) {
        if self.open.is_empty() {
            // No hooks (the usual case): nothing to look up, not even a hash.
            return;
        }
        let Some(o) = self.open.remove(&batch) else { return };
        let Some(started) = o.started else { return };
        let ctx =
            HookContext { group: &self.group, queue: &o.queue, batch, kind: o.kind, messages: &o.messages };
        let outcome = HookOutcome { result, failure, elapsed: now.saturating_duration_since(started) };
        for h in &self.list {
            guard("after", || h.after(&ctx, &outcome));
        }
    }
}

fn guard(which: &str, f: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        tracing::error!(hook = which, why = %crate::listener::panic_message(&*p), "a consume hook panicked; consumption goes on");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl ConsumeHook for Log {
        fn before(&self, ctx: &HookContext<'_>) {
            self.0.lock().unwrap().push(format!("before {} {}", ctx.batch, ctx.messages.len()));
        }
        fn after(&self, ctx: &HookContext<'_>, o: &HookOutcome<'_>) {
            self.0.lock().unwrap().push(format!("after {} {} {:?}", ctx.batch, o.success(), o.elapsed));
        }
    }

    struct Panics;
    impl ConsumeHook for Panics {
        fn before(&self, _: &HookContext<'_>) {
            panic!("hook bug");
        }
    }

    fn batch(id: u64) -> Batch {
        Batch {
            id: BatchId(id),
            queue: MessageQueue::new("T", "b", 0).into(),
            messages: Messages::from_vec(vec![]),
            kind: BatchKind::Concurrent,
        }
    }

    #[test]
    fn before_at_the_start_after_at_the_end_and_nothing_for_a_withdrawn_batch() {
        let log = Arc::new(Log::default());
        let mut hooks = Hooks::new(vec![Arc::new(Panics), log.clone()], "G".into());
        let t0 = Instant::now();
        hooks.handed(&batch(1), t0, false);
        hooks.handed(&batch(2), t0, true);
        hooks.handed(&batch(3), t0, true);
        hooks.started(BatchId(2), t0 + Duration::from_millis(5));
        hooks.withdrawn(BatchId(3));
        hooks.finished(BatchId(2), &ConsumeResult::SUCCESS, None, t0 + Duration::from_millis(8));
        hooks.finished(
            BatchId(1),
            &ConsumeResult::SUCCESS,
            Some("panicked: x"),
            t0 + Duration::from_millis(9),
        );
        hooks.finished(BatchId(3), &ConsumeResult::SUCCESS, None, t0 + Duration::from_millis(9));
        assert_eq!(
            *log.0.lock().unwrap(),
            ["before batch#1 0", "before batch#2 0", "after batch#2 true 3ms", "after batch#1 false 9ms"],
            "a panicking hook does not stop the others"
        );
        assert!(hooks.open.is_empty());
    }
}
