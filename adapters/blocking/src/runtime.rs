//! The run loop's runtime calls, on plain threads: every task gets a thread of its own and runs
//! to completion there ([`block_on`]); its socket calls block that thread, which is what the
//! thread is for. Timers park the thread until their deadline or a wake-up.

use std::cell::Cell;
use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use rocketmq_push_io::run::Runtime;

/// One thread per task.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Threads;

thread_local! {
    /// The earliest deadline of a [`Sleep`] polled in this thread's current poll.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

struct Unpark {
    thread: Thread,
    woken: AtomicBool,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// Run `f` to completion on this thread, parking while it waits (until a wake-up or the earliest
/// [`Sleep`] deadline).
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    let unpark = Arc::new(Unpark { thread: thread::current(), woken: AtomicBool::new(false) });
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        DEADLINE.set(None);
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        while !unpark.woken.swap(false, Ordering::Acquire) {
            match DEADLINE.get() {
                Some(at) => {
                    let left = at.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    thread::park_timeout(left);
                }
                None => thread::park(),
            }
        }
    }
}

/// A timer for [`block_on`].
#[derive(Debug)]
pub(crate) struct Sleep(Instant);

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.0 {
            return Poll::Ready(());
        }
        DEADLINE.set(Some(DEADLINE.get().map_or(self.0, |d| d.min(self.0))));
        Poll::Pending
    }
}

impl Runtime for Threads {
    type Reader = TcpStream;
    type Writer = TcpStream;
    type Timer = Sleep;

    fn spawn(&self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        thread::Builder::new().name(name.into()).spawn(move || block_on(task)).map(drop)
    }

    async fn unblock<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        // Already on a thread of its own.
        f()
    }

    fn timer(&self, at: Instant) -> Sleep {
        Sleep(at)
    }

    fn reset(&self, timer: &mut Sleep, at: Instant) {
        timer.0 = at;
    }

    fn connect(
        &self,
        addr: &str,
        timeout: Duration,
    ) -> impl Future<Output = io::Result<(TcpStream, TcpStream)>> + Send {
        let addr = addr.to_owned();
        async move {
            let sock = addr.to_socket_addrs()?.next().ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("cannot resolve {addr}"))
            })?;
            let s = TcpStream::connect_timeout(&sock, timeout)?;
            s.set_nodelay(true)?;
            Ok((s.try_clone()?, s))
        }
    }

    async fn read(r: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        r.read(buf)
    }

    async fn write_all(w: &mut TcpStream, buf: &[u8]) -> io::Result<()> {
        w.write_all(buf)
    }

    fn close(w: &mut TcpStream) -> impl Future<Output = ()> + Send + '_ {
        // Both directions: wakes the reader's blocked read.
        let _ = w.shutdown(Shutdown::Both);
        std::future::ready(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_on_sleeps_until_the_deadline_and_wakes_on_a_message() {
        let (tx, rx) = async_channel::unbounded::<u32>();
        let start = Instant::now();
        block_on(Sleep(start + Duration::from_millis(30)));
        assert!(start.elapsed() >= Duration::from_millis(30));
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            tx.send_blocking(7).unwrap();
        });
        let got = block_on(async {
            futures_lite::future::or(async { rx.recv().await.ok() }, async {
                Sleep(Instant::now() + Duration::from_secs(10)).await;
                None
            })
            .await
        });
        assert_eq!(got, Some(7));
        assert!(start.elapsed() < Duration::from_secs(5), "woken by the message, not the timer");
    }
}
