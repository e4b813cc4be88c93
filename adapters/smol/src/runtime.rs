//! The run loop's runtime calls, on smol.

use std::future::Future;
use std::io;
use std::net::Shutdown;
use std::time::{Duration, Instant};

use rocketmq_push_io::StartError;
use rocketmq_push_io::run::Runtime;
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::net::TcpStream;
use smol::{Timer, future};

/// smol's global executor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Smol;

pub(crate) fn current() -> Result<Smol, StartError> {
    Ok(Smol)
}

impl Runtime for Smol {
    type Reader = TcpStream;
    type Writer = TcpStream;
    type Timer = Timer;

    fn spawn(&self, _name: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        smol::spawn(task).detach();
        Ok(())
    }

    fn unblock<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> impl Future<Output = T> + Send {
        smol::unblock(f)
    }

    fn timer(&self, at: Instant) -> Timer {
        Timer::at(at)
    }

    fn reset(&self, timer: &mut Timer, at: Instant) {
        timer.set_at(at);
    }

    fn connect(
        &self,
        addr: &str,
        timeout: Duration,
    ) -> impl Future<Output = io::Result<(TcpStream, TcpStream)>> + Send {
        let addr = addr.to_owned();
        async move {
            let late = async {
                Timer::after(timeout).await;
                Err(io::Error::new(io::ErrorKind::TimedOut, format!("no connection within {timeout:?}")))
            };
            let s = future::or(TcpStream::connect(addr), late).await?;
            s.set_nodelay(true)?;
            Ok((s.clone(), s))
        }
    }

    fn read<'a>(
        r: &'a mut TcpStream,
        buf: &'a mut [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        r.read(buf)
    }

    fn write_all<'a>(
        w: &'a mut TcpStream,
        buf: &'a [u8],
    ) -> impl Future<Output = io::Result<()>> + Send + 'a {
        w.write_all(buf)
    }

    fn close(w: &mut TcpStream) -> impl Future<Output = ()> + Send + '_ {
        // Both directions: the reader's pending read ends too.
        let _ = w.shutdown(Shutdown::Both);
        future::ready(())
    }
}
