//! The runtime calls on smol's building blocks — async-io's reactor (one `epoll` wait for every
//! socket and timer) and async-net's sockets — with spawning left to the adapter: smol's global
//! executor, or the blocking adapter's one thread.

use std::future::Future;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration, Instant};

use async_io::Timer;
use async_net::TcpStream;
use futures_lite::future;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};

use super::Runtime;

/// Where tasks run.
pub trait Spawn: Clone + Send + Sync + 'static {
    /// Run `task` in the background.
    fn spawn(&self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()>;
}

/// A [`Runtime`] on async-io and async-net, spawning with `S`.
#[derive(Clone, Debug)]
pub struct AsyncNet<S>(pub S);

impl<S: Spawn> Runtime for AsyncNet<S> {
    type Reader = TcpStream;
    type Writer = TcpStream;
    type Timer = Timer;

    fn spawn(&self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        self.0.spawn(name, task)
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
            let connect = async {
                // An address needs no resolver (async-net resolves names on a blocking pool).
                match addr.parse::<SocketAddr>() {
                    Ok(sa) => TcpStream::connect(sa).await,
                    Err(_) => TcpStream::connect(addr.as_str()).await,
                }
            };
            let s = future::or(connect, late).await?;
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

    #[cfg(unix)]
    fn direct(w: &TcpStream) -> Option<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        w.as_fd().try_clone_to_owned().ok()
    }
}
