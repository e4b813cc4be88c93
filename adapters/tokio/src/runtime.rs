//! The run loop's runtime calls, on tokio.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::{Duration, Instant};

use rocketmq_push_io::StartError;
use rocketmq_push_io::run::Runtime;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::runtime::Handle;

/// The tokio runtime the consumer was started on.
#[derive(Clone, Debug)]
pub(crate) struct Tokio(Handle);

/// The current tokio runtime; an error outside one.
pub(crate) fn current() -> Result<Tokio, StartError> {
    Handle::try_current().map(Tokio).map_err(|e| StartError::Runtime(e.to_string()))
}

impl Runtime for Tokio {
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;
    type Timer = Pin<Box<tokio::time::Sleep>>;

    fn spawn(&self, _name: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        drop(self.0.spawn(task));
        Ok(())
    }

    fn timer(&self, at: Instant) -> Self::Timer {
        Box::pin(tokio::time::sleep_until(at.into()))
    }

    fn reset(&self, timer: &mut Self::Timer, at: Instant) {
        timer.as_mut().reset(at.into());
    }

    fn connect(
        &self,
        addr: &str,
        timeout: Duration,
    ) -> impl Future<Output = io::Result<(Self::Reader, Self::Writer)>> + Send {
        let addr = addr.to_owned();
        async move {
            let s = tokio::time::timeout(timeout, TcpStream::connect(addr)).await.map_err(|_| {
                io::Error::new(io::ErrorKind::TimedOut, format!("no connection within {timeout:?}"))
            })??;
            s.set_nodelay(true)?;
            Ok(s.into_split())
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

    async fn close(w: &mut Self::Writer) {
        let _ = w.shutdown().await;
    }

    #[cfg(unix)]
    fn direct(w: &Self::Writer) -> Option<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        w.as_ref().as_fd().try_clone_to_owned().ok()
    }
}
