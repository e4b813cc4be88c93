//! One connection: a connect thread, then a reader thread and a writer thread.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Sender};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use rocketmq_push_core::{LinkId, PeerAddr};

use crate::driver::Msg;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Connect in the background; report `Connected` or `ConnectFailed`.
pub(crate) fn connect(link: LinkId, peer: PeerAddr, tx: Sender<Msg>) {
    let spawned = thread::Builder::new().name("rmq-connect".into()).spawn({
        let tx = tx.clone();
        move || {
            let result = peer
                .as_str()
                .to_socket_addrs()
                .and_then(|mut a| {
                    a.next().ok_or_else(|| std::io::Error::other(format!("cannot resolve {peer}")))
                })
                .and_then(|a| TcpStream::connect_timeout(&a, CONNECT_TIMEOUT));
            let _ = match result {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    tx.send(Msg::Connected { link, stream: s })
                }
                Err(e) => tx.send(Msg::ConnectFailed { link, error: e.to_string() }),
            };
        }
    });
    if let Err(e) = spawned {
        let _ = tx.send(Msg::ConnectFailed { link, error: e.to_string() });
    }
}

/// A connected link: its writer's queue. Dropping it closes the connection.
pub(crate) struct Writer {
    tx: Sender<Bytes>,
    stream: TcpStream,
}

impl Writer {
    pub(crate) fn write(&self, bytes: Bytes) {
        let _ = self.tx.send(bytes);
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Wakes the reader (EOF) and fails the writer: both threads end.
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// Start the reader and writer threads of a connected stream.
pub(crate) fn start(link: LinkId, stream: TcpStream, events: Sender<Msg>) -> std::io::Result<Writer> {
    let (tx, rx) = mpsc::channel::<Bytes>();
    let mut reader = stream.try_clone()?;
    let mut writer = stream.try_clone()?;
    let ev = events.clone();
    thread::Builder::new().name("rmq-read".into()).spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if ev.send(Msg::Received { link, bytes: Bytes::copy_from_slice(&buf[..n]) }).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = ev.send(Msg::Closed { link });
    })?;
    thread::Builder::new().name("rmq-write".into()).spawn(move || {
        for bytes in rx {
            if writer.write_all(&bytes).is_err() {
                let _ = writer.shutdown(Shutdown::Both);
                let _ = events.send(Msg::Closed { link });
                return;
            }
        }
    })?;
    Ok(Writer { tx, stream })
}
