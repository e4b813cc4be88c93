//! The run loop's runtime calls for a consumer that needs no async runtime: one thread of its
//! own ("rmq-driver") runs every task of the consumer — the owner and each connection's reader and
//! writer — on a small executor, and waits for all their sockets and timers in one reactor call
//! (async-io's `epoll`). A thread per connection instead costs a wake-up and a context switch for
//! every frame read or written. Listener calls run on their own threads (`rocketmq-push-io`'s
//! workers), as blocking code may.

use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::thread;

use async_executor::Executor;
use rocketmq_push_io::run::async_net::{AsyncNet, Spawn};

/// The consumer's thread and its executor.
#[derive(Clone, Debug)]
pub(crate) struct OneThread {
    /// Tasks hold this, never the executor itself: when the thread ends, the executor goes with it,
    /// and so do the tasks left (their sockets close).
    executor: Weak<Executor<'static>>,
    /// Until the thread starts, the executor lives here.
    unstarted: Arc<Mutex<Option<Arc<Executor<'static>>>>>,
}

/// A runtime whose first task (the run loop's owner) starts the thread; the others join it there.
pub(crate) fn new() -> AsyncNet<OneThread> {
    let executor = Arc::new(Executor::new());
    AsyncNet(OneThread {
        executor: Arc::downgrade(&executor),
        unstarted: Arc::new(Mutex::new(Some(executor))),
    })
}

impl Spawn for OneThread {
    fn spawn(&self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        let unstarted = self.unstarted.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(executor) = unstarted {
            // The owner: the thread runs until it ends, then drops the executor.
            return thread::Builder::new()
                .name(name.into())
                .spawn(move || async_io::block_on(executor.run(task)))
                .map(drop);
        }
        match self.executor.upgrade() {
            Some(executor) => {
                executor.spawn(task).detach();
                Ok(())
            }
            None => Err(io::Error::other("the consumer has ended")),
        }
    }
}

/// Wait for `f` on the calling thread (the application's, for shutdown).
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    async_io::block_on(f)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use rocketmq_push_io::run::Runtime;

    use super::*;

    #[test]
    fn tasks_run_on_the_first_tasks_thread_and_end_with_it() {
        let rt = new();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let (stop_tx, stop) = async_channel::bounded::<()>(1);
        let inner = rt.clone();
        let names = tx.clone();
        rt.spawn("rmq-driver", async move {
            let t = tx.clone();
            inner
                .spawn("rmq-read", async move {
                    let _ = t.send(thread::current().name().unwrap_or_default().to_owned());
                    // Never ends by itself: it must go when the first task does.
                    std::future::pending::<()>().await;
                })
                .unwrap();
            let started = Instant::now();
            inner.timer(started + Duration::from_millis(20)).await;
            assert!(started.elapsed() >= Duration::from_millis(20));
            let _ = stop.recv().await;
        })
        .unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), "rmq-driver");
        drop(stop_tx);
        drop(names);
        // The owner ended: the executor and the pending task with it, so spawning fails.
        let until = Instant::now() + Duration::from_secs(5);
        while rt.spawn("late", async {}).is_ok() {
            assert!(Instant::now() < until, "the executor outlived its thread");
            thread::yield_now();
        }
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected),
            "the pending task was dropped"
        );
    }
}
