//! One connection: a connect task, then a reader task and a writer task.

use std::time::Duration;

use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use rocketmq_push_core::{LinkId, PeerAddr};

use crate::driver::Msg;
use crate::runtime::{self, Sender, TcpStream};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Connect in the background; report `Connected` or `ConnectFailed`.
pub(crate) fn connect(link: LinkId, peer: PeerAddr, tx: Sender<Msg>) {
    runtime::spawn(async move {
        let msg = match runtime::connect(peer.as_str(), CONNECT_TIMEOUT).await {
            Ok(s) => Msg::Connected { link, stream: s },
            Err(e) => Msg::ConnectFailed { link, error: e.to_string() },
        };
        let _ = tx.send(msg).await;
    });
}

/// A connected link. Dropping it closes the connection.
pub(crate) struct Writer {
    tx: Sender<Bytes>,
    stream: TcpStream,
}

impl Writer {
    pub(crate) fn write(&self, bytes: Bytes) {
        let _ = self.tx.try_send(bytes);
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        runtime::shutdown(&self.stream);
    }
}

/// Start the reader and writer tasks of a connected stream.
pub(crate) fn start(link: LinkId, stream: TcpStream, events: Sender<Msg>) -> Writer {
    let (tx, rx) = runtime::unbounded::<Bytes>();
    let (mut rd, mut wr) = (stream.clone(), stream.clone());
    let ev = events.clone();
    runtime::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if ev
                        .send(Msg::Received { link, bytes: Bytes::copy_from_slice(&buf[..n]) })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
        let _ = ev.send(Msg::Closed { link }).await;
    });
    runtime::spawn(async move {
        while let Ok(bytes) = rx.recv().await {
            if wr.write_all(&bytes).await.is_err() {
                let _ = events.send(Msg::Closed { link }).await;
                return;
            }
        }
    });
    Writer { tx, stream }
}
