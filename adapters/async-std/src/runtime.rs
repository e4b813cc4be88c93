//! Every call into the async runtime, in one file. async-std is discontinued upstream
//! (RUSTSEC-2025-0052): moving this adapter to smol means rewriting this file only
//! (`smol::spawn`, `smol::unblock`, `smol::net::TcpStream`, `smol::Timer::at`, `async_channel`).

use std::future::Future;
use std::io;
use std::net::Shutdown;
use std::time::{Duration, Instant};

pub(crate) use async_std::channel::{Receiver, Sender, unbounded};
pub(crate) use async_std::net::TcpStream;

/// Run `f` in the background.
pub(crate) fn spawn(f: impl Future<Output = ()> + Send + 'static) {
    drop(async_std::task::spawn(f));
}

/// Run blocking `f` on the runtime's blocking pool.
pub(crate) async fn spawn_blocking<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    async_std::task::spawn_blocking(f).await
}

/// Connect within `timeout`.
pub(crate) async fn connect(addr: &str, timeout: Duration) -> io::Result<TcpStream> {
    let s = async_std::io::timeout(timeout, TcpStream::connect(addr)).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Close both directions (wakes a pending read).
pub(crate) fn shutdown(s: &TcpStream) {
    let _ = s.shutdown(Shutdown::Both);
}

/// Wait until `at` (at once if it passed).
pub(crate) async fn sleep_until(at: Instant) {
    async_std::task::sleep(at.saturating_duration_since(Instant::now())).await;
}
