//! One connection: a connect task, then a reader task and a writer task.

use async_channel::{Receiver, Sender};
use bytes::Bytes;
use futures_lite::future;
use rocketmq_push_core::{LinkId, PeerAddr};

use super::msg::{LinkWriter, Msg};
use super::{CONNECT_TIMEOUT, Runtime};

/// Connect in the background; on success report `Connected` first, then start the reader and
/// the writer (so nothing read can overtake the report).
pub(super) fn connect<R: Runtime>(
    rt: &R,
    link: LinkId,
    peer: PeerAddr,
    inbox: Sender<Msg>,
    data: Sender<Msg>,
) {
    let task_rt = rt.clone();
    let report = inbox.clone();
    let task = async move {
        let (rd, wr) = match task_rt.connect(peer.as_str(), CONNECT_TIMEOUT).await {
            Ok(halves) => halves,
            Err(error) => {
                let _ = inbox.try_send(Msg::ConnectFailed { link, error });
                return;
            }
        };
        let (writes, queued) = async_channel::unbounded();
        let (stop, stopped) = async_channel::bounded(1);
        if inbox.try_send(Msg::Connected { link, writer: LinkWriter::new(writes, stop) }).is_err() {
            return;
        }
        let started = task_rt
            .spawn("rmq-read", read::<R>(rd, link, data.clone(), stopped))
            .and_then(|()| task_rt.spawn("rmq-write", write::<R>(wr, link, queued, data.clone())));
        if let Err(error) = started {
            let _ = data.send(Msg::Closed { link, error: Some(error) }).await;
        }
    };
    if let Err(error) = rt.spawn("rmq-connect", task) {
        let _ = report.try_send(Msg::ConnectFailed { link, error });
    }
}

const READ_CHUNK: usize = 64 * 1024;

async fn read<R: Runtime>(mut rd: R::Reader, link: LinkId, inbox: Sender<Msg>, stopped: Receiver<()>) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let read = future::or(async { Some(R::read(&mut rd, &mut buf).await) }, async {
            let _ = stopped.recv().await;
            None
        })
        .await;
        let msg = match read {
            // The owner closed the link: it needs no report.
            None => return,
            Some(Ok(0)) => Msg::Closed { link, error: None },
            Some(Ok(n)) => Msg::Received { link, bytes: Bytes::copy_from_slice(&buf[..n]) },
            Some(Err(error)) => Msg::Closed { link, error: Some(error) },
        };
        let last = matches!(msg, Msg::Closed { .. });
        // Waits while the owner's data queue is full: TCP then slows the peer down.
        if inbox.send(msg).await.is_err() || last {
            return;
        }
    }
}

async fn write<R: Runtime>(mut wr: R::Writer, link: LinkId, queued: Receiver<Bytes>, inbox: Sender<Msg>) {
    while let Ok(bytes) = queued.recv().await {
        if let Err(error) = R::write_all(&mut wr, &bytes).await {
            let _ = inbox.send(Msg::Closed { link, error: Some(error) }).await;
            break;
        }
    }
    R::close(&mut wr).await;
}
