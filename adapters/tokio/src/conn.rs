//! One connection: a connect task, then a reader task and a writer task.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rocketmq_push_core::{LinkId, PeerAddr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::driver::Msg;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Connect in the background; report `Connected` or `ConnectFailed`.
pub(crate) fn connect(link: LinkId, peer: PeerAddr, tx: mpsc::UnboundedSender<Msg>) {
    tokio::spawn(async move {
        let msg = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(peer.as_str())).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                Msg::Connected { link, stream: s }
            }
            Ok(Err(e)) => Msg::ConnectFailed { link, error: e.to_string() },
            Err(_) => Msg::ConnectFailed { link, error: format!("no connection within {CONNECT_TIMEOUT:?}") },
        };
        let _ = tx.send(msg);
    });
}

/// A connected link. Dropping it closes the connection.
pub(crate) struct Writer {
    tx: mpsc::UnboundedSender<Bytes>,
    reader: JoinHandle<()>,
}

impl Writer {
    pub(crate) fn write(&self, bytes: Bytes) {
        let _ = self.tx.send(bytes);
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // The writer task ends when its queue closes (dropping the write half); stop reading.
        self.reader.abort();
    }
}

/// Start the reader and writer tasks of a connected stream.
pub(crate) fn start(link: LinkId, stream: TcpStream, events: mpsc::UnboundedSender<Msg>) -> Writer {
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
    let ev = events.clone();
    let reader = tokio::spawn(async move {
        let mut buf = BytesMut::with_capacity(64 * 1024);
        loop {
            buf.reserve(64 * 1024);
            match rd.read_buf(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if ev.send(Msg::Received { link, bytes: buf.split().freeze() }).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = ev.send(Msg::Closed { link });
    });
    tokio::spawn(async move {
        while let Some(bytes) = rx.recv().await {
            if wr.write_all(&bytes).await.is_err() {
                let _ = events.send(Msg::Closed { link });
                return;
            }
        }
        let _ = wr.shutdown().await;
    });
    Writer { tx, reader }
}
