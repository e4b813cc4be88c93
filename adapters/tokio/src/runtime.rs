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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rocketmq_push_io::run::Listener;
    use rocketmq_push_io::{ConsumerOptions, async_listener};
    use tokio::io::AsyncReadExt;

    use super::*;
    use crate::ConsumeStatus;

    /// Tokio with timers that never fire: what the consumer does without waiting for one.
    #[derive(Clone)]
    struct Frozen(Tokio);

    impl Runtime for Frozen {
        type Reader = OwnedReadHalf;
        type Writer = OwnedWriteHalf;
        type Timer = std::future::Pending<()>;

        fn spawn(
            &self,
            name: &'static str,
            task: impl Future<Output = ()> + Send + 'static,
        ) -> io::Result<()> {
            self.0.spawn(name, task)
        }
        fn timer(&self, _: Instant) -> Self::Timer {
            std::future::pending()
        }
        fn reset(&self, _: &mut Self::Timer, _: Instant) {}
        fn connect(
            &self,
            addr: &str,
            timeout: Duration,
        ) -> impl Future<Output = io::Result<(Self::Reader, Self::Writer)>> + Send {
            self.0.connect(addr, timeout)
        }
        fn read<'a>(
            r: &'a mut Self::Reader,
            buf: &'a mut [u8],
        ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
            Tokio::read(r, buf)
        }
        fn write_all<'a>(
            w: &'a mut Self::Writer,
            buf: &'a [u8],
        ) -> impl Future<Output = io::Result<()>> + Send + 'a {
            Tokio::write_all(w, buf)
        }
        async fn close(w: &mut Self::Writer) {
            Tokio::close(w).await;
        }
    }

    #[tokio::test]
    async fn the_first_route_lookup_goes_out_without_waiting_for_a_timer() {
        // The core asks for routes at a deadline of "now"; the owner must see that it has passed
        // rather than arm a runtime timer for it (tokio's would fire up to a millisecond later;
        // these never do).
        let name_server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = name_server.local_addr().unwrap().to_string();
        let options = ConsumerOptions::new("G").name_server(addr).subscribe("T", "*");
        let listener = Listener::Async(async_listener(|_, _| async { ConsumeStatus::Success }));
        let handle = rocketmq_push_io::run::start(Frozen(current().unwrap()), options, listener).unwrap();
        let first_frame = async {
            let (mut s, _) = name_server.accept().await.unwrap();
            let mut len = [0u8; 4];
            s.read_exact(&mut len).await.unwrap();
            let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
            s.read_exact(&mut frame).await.unwrap();
            frame
        };
        let frame = tokio::time::timeout(Duration::from_secs(30), first_frame)
            .await
            .expect("no request reached the name server: the route lookup waited for a timer");
        let text = String::from_utf8_lossy(&frame);
        assert!(text.contains("\"code\":105"), "a route lookup (GET_ROUTEINFO_BY_TOPIC) first: {text}");
        drop(handle);
    }
}
