//! One connection: a connect task, then a reader task and a writer task.

use async_channel::{Receiver, Sender, WeakSender};
use bytes::Bytes;
use futures_lite::future;
use rocketmq_push_core::{LinkId, PeerAddr};

use super::direct::{Direct, Queued};
use super::msg::{LinkWriter, Msg};
use super::{CONNECT_TIMEOUT, Runtime};
use crate::transport::{Session, Transport};

/// Connect in the background; on success report `Connected` first, then start the reader and
/// the writer (so nothing read can overtake the report).
pub(super) fn connect<R: Runtime>(
    rt: &R,
    link: LinkId,
    peer: PeerAddr,
    transport: &Transport,
    inbox: Sender<Msg>,
    data: Sender<Msg>,
) {
    let task_rt = rt.clone();
    let report = inbox.clone();
    let transport = transport.clone();
    let task = async move {
        let (mut rd, mut wr) = match task_rt.connect(peer.as_str(), CONNECT_TIMEOUT).await {
            Ok(halves) => halves,
            Err(error) => {
                let _ = inbox.try_send(Msg::ConnectFailed { link, error });
                return;
            }
        };
        // TLS: the handshake belongs to the connect (its failure is a failed connect).
        let mut early = Vec::new();
        let session = match transport.session(peer.as_str()) {
            Ok(None) => None,
            Ok(Some(s)) => match handshake::<R>(&task_rt, &mut rd, &mut wr, &s, &mut early).await {
                Ok(()) => Some(s),
                Err(error) => {
                    R::close(&mut wr).await;
                    let _ = inbox.try_send(Msg::ConnectFailed { link, error });
                    return;
                }
            },
            Err(error) => {
                R::close(&mut wr).await;
                let _ = inbox.try_send(Msg::ConnectFailed { link, error });
                return;
            }
        };
        let (writes, queued) = async_channel::unbounded();
        let (stop, stopped) = async_channel::bounded(1);
        let flush = writes.downgrade();
        // TLS seals what is written: only the writer task writes then.
        let (direct, done) = match &session {
            None => direct::<R>(&wr),
            Some(_) => (None, None),
        };
        if inbox.try_send(Msg::Connected { link, writer: LinkWriter::new(writes, direct, stop) }).is_err() {
            return;
        }
        let reader = Reader { link, inbox: data.clone(), stopped, tls: session.clone().map(|s| (s, flush)) };
        let writer = Writer { link, queued, inbox: data.clone(), tls: session, done };
        let started = task_rt
            .spawn("rmq-read", read::<R>(rd, reader, early))
            .and_then(|()| task_rt.spawn("rmq-write", write::<R>(wr, writer)));
        if let Err(error) = started {
            let _ = data.send(Msg::Closed { link, error: Some(error) }).await;
        }
    };
    if let Err(error) = rt.spawn("rmq-connect", task) {
        let _ = report.try_send(Msg::ConnectFailed { link, error });
    }
}

const READ_CHUNK: usize = 64 * 1024;

/// TLS's part of the connect: records both ways until the session is up, within the connect
/// timeout. Application bytes that came with the last handshake records go to `early`.
async fn handshake<R: Runtime>(
    rt: &R,
    rd: &mut R::Reader,
    wr: &mut R::Writer,
    session: &Session,
    early: &mut Vec<u8>,
) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + CONNECT_TIMEOUT;
    let exchange = async {
        let mut buf = vec![0u8; READ_CHUNK];
        let mut out = Vec::new();
        loop {
            out.clear();
            session.outgoing(&mut out)?;
            if !out.is_empty() {
                R::write_all(wr, &out).await?;
            }
            if !session.is_handshaking() {
                return Ok(());
            }
            let n = R::read(rd, &mut buf).await?;
            if n == 0 {
                return Err(Session::closed_in_handshake());
            }
            session.feed(&buf[..n], early)?;
        }
    };
    let timer = async {
        rt.timer(deadline).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("TLS handshake: no answer within {CONNECT_TIMEOUT:?}"),
        ))
    };
    future::or(exchange, timer).await
}

/// A link's reading side.
struct Reader {
    link: LinkId,
    inbox: Sender<Msg>,
    /// Closed when the owner drops the link.
    stopped: Receiver<()>,
    /// TLS: the session, and the writer's queue (an empty write asks it to send what TLS wants).
    tls: Option<(Session, WeakSender<Bytes>)>,
}

impl Reader {
    /// What `bytes` read from the socket mean: plain bytes as they are, TLS records decrypted.
    fn take(&self, bytes: &[u8]) -> Msg {
        let link = self.link;
        let Some((session, flush)) = &self.tls else {
            return Msg::Received { link, bytes: Bytes::copy_from_slice(bytes) };
        };
        let mut plain = Vec::new();
        match session.feed(bytes, &mut plain) {
            Err(error) => Msg::Closed { link, error: Some(error) },
            Ok(fed) => {
                if fed.wants_write {
                    if let Some(w) = flush.upgrade() {
                        let _ = w.try_send(Bytes::new());
                    }
                }
                // A close_notify ends the stream after what came before it.
                if fed.closed && plain.is_empty() {
                    Msg::Closed { link, error: None }
                } else {
                    Msg::Received { link, bytes: Bytes::from(plain) }
                }
            }
        }
    }
}

async fn read<R: Runtime>(mut rd: R::Reader, r: Reader, early: Vec<u8>) {
    let link = r.link;
    if !early.is_empty() && r.inbox.send(Msg::Received { link, bytes: Bytes::from(early) }).await.is_err() {
        return;
    }
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let read = future::or(async { Some(R::read(&mut rd, &mut buf).await) }, async {
            let _ = r.stopped.recv().await;
            None
        })
        .await;
        let msg = match read {
            // The owner closed the link: it needs no report.
            None => return,
            Some(Ok(0)) => Msg::Closed { link, error: None },
            Some(Ok(n)) => r.take(&buf[..n]),
            Some(Err(error)) => Msg::Closed { link, error: Some(error) },
        };
        // Records that held no application data (a session ticket): nothing to report.
        if matches!(&msg, Msg::Received { bytes, .. } if bytes.is_empty()) {
            continue;
        }
        let last = matches!(msg, Msg::Closed { .. });
        // Waits while the owner's data queue is full: TCP then slows the peer down.
        if r.inbox.send(msg).await.is_err() || last {
            return;
        }
    }
}

/// Direct writes on `wr`'s socket, where the runtime gives a duplicate of it.
fn direct<R: Runtime>(wr: &R::Writer) -> (Option<Direct>, Option<Queued>) {
    #[cfg(unix)]
    if let Some(fd) = R::direct(wr) {
        let (d, q) = Direct::new(fd);
        return (Some(d), Some(q));
    }
    let _ = wr;
    (None, None)
}

/// A link's writing side.
struct Writer {
    link: LinkId,
    /// What the owner could not write at once.
    queued: Receiver<Bytes>,
    inbox: Sender<Msg>,
    tls: Option<Session>,
    /// Counted down per write done, with direct writes (the owner waits for zero).
    done: Option<Queued>,
}

async fn write<R: Runtime>(mut wr: R::Writer, w: Writer) {
    let mut sealed = Vec::new();
    while let Ok(bytes) = w.queued.recv().await {
        let wrote = match &w.tls {
            None => R::write_all(&mut wr, &bytes).await,
            Some(session) => {
                sealed.clear();
                match session.encrypt(&bytes, &mut sealed) {
                    Ok(()) if sealed.is_empty() => Ok(()),
                    Ok(()) => R::write_all(&mut wr, &sealed).await,
                    Err(e) => Err(e),
                }
            }
        };
        if let Some(done) = &w.done {
            done.done();
        }
        if let Err(error) = wrote {
            let _ = w.inbox.send(Msg::Closed { link: w.link, error: Some(error) }).await;
            break;
        }
    }
    R::close(&mut wr).await;
}
