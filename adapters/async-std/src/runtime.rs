//! The run loop's runtime calls, on async-std.

use std::future::Future;
use std::io;
use std::net::Shutdown;
use std::pin::Pin;
use std::time::{Duration, Instant};

use async_std::net::TcpStream;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use rocketmq_push_io::StartError;
use rocketmq_push_io::run::Runtime;

/// async-std's global runtime.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AsyncStd;

pub(crate) fn current() -> Result<AsyncStd, StartError> {
    Ok(AsyncStd)
}

impl Runtime for AsyncStd {
    type Reader = TcpStream;
    type Writer = TcpStream;
    type Timer = Pin<Box<dyn Future<Output = ()> + Send>>;

    fn spawn(&self, _name: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        drop(async_std::task::spawn(task));
        Ok(())
    }

    fn timer(&self, at: Instant) -> Self::Timer {
        Box::pin(async_std::task::sleep(at.saturating_duration_since(Instant::now())))
    }

    fn reset(&self, timer: &mut Self::Timer, at: Instant) {
        *timer = self.timer(at);
    }

    fn connect(
        &self,
        addr: &str,
        timeout: Duration,
    ) -> impl Future<Output = io::Result<(Self::Reader, Self::Writer)>> + Send {
        let addr = addr.to_owned();
        async move {
            let s = async_std::io::timeout(timeout, TcpStream::connect(addr)).await?;
            s.set_nodelay(true)?;
            Ok((s.clone(), s))
        }
    }

    fn read<'a>(
        r: &'a mut Self::Reader,
        buf: &'a mut [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        r.read(buf)
    }

    fn write_all<'a>(
        w: &'a mut Self::Writer,
        buf: &'a [u8],
    ) -> impl Future<Output = io::Result<()>> + Send + 'a {
        w.write_all(buf)
    }

    fn close(w: &mut Self::Writer) -> impl Future<Output = ()> + Send + '_ {
        // Both directions: the reader's pending read ends too.
        let _ = w.shutdown(Shutdown::Both);
        std::future::ready(())
    }

    #[cfg(unix)]
    fn direct(w: &Self::Writer) -> Option<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        w.as_fd().try_clone_to_owned().ok()
    }
}
