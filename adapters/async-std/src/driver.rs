//! The single owner of the core: one task, one channel in, one timer from `poll_timeout`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_lite::future;
use rocketmq_push_core::{BatchId, Command, ConsumeResult, IoCommand, LinkId};
use rocketmq_push_io::Prepared;

use crate::Listener;
use crate::conn::{self, Writer};
use crate::pool::Pool;
use crate::runtime::{self, Receiver, Sender, TcpStream};

/// Everything the driver task hears about.
pub(crate) enum Msg {
    Connected { link: LinkId, stream: TcpStream },
    ConnectFailed { link: LinkId, error: String },
    Received { link: LinkId, bytes: Bytes },
    Closed { link: LinkId },
    Done { batch: BatchId, result: ConsumeResult, panic: Option<String> },
    Command(Command),
}

pub(crate) async fn run(
    mut p: Prepared,
    listener: Listener,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    done: Sender<()>,
) {
    let pool = Pool::start(listener, p.consume_threads, tx.clone());
    let mut writers: HashMap<LinkId, Writer> = HashMap::new();
    'run: loop {
        while let Some(cmd) = p.next(Instant::now()) {
            match cmd {
                IoCommand::Connect { link, peer } => conn::connect(link, peer, tx.clone()),
                IoCommand::Write { link, bytes } => {
                    if let Some(w) = writers.get(&link) {
                        w.write(bytes);
                    }
                }
                IoCommand::Close { link } => {
                    writers.remove(&link);
                }
                IoCommand::Run(batch) => pool.submit(batch),
                IoCommand::Terminated => break 'run,
                _ => {}
            }
        }
        let deadline = p.driver.poll_timeout().unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        let msg = future::or(async { rx.recv().await.ok().map(Some) }, async {
            runtime::sleep_until(deadline).await;
            Some(None)
        })
        .await;
        let now = Instant::now();
        match msg {
            None => break 'run,
            Some(None) => p.driver.handle_timeout(now),
            Some(Some(Msg::Connected { link, stream })) => {
                writers.insert(link, conn::start(link, stream, tx.clone()));
                p.driver.connected(link, now);
            }
            Some(Some(Msg::ConnectFailed { link, error })) => p.driver.connect_failed(link, error, now),
            Some(Some(Msg::Received { link, bytes })) => p.driver.received(link, &bytes, now),
            Some(Some(Msg::Closed { link })) => {
                writers.remove(&link);
                p.driver.closed(link, now);
            }
            Some(Some(Msg::Done { batch, result, panic })) => p.consume_done(batch, result, panic, now),
            Some(Some(Msg::Command(c))) => p.command(c, now),
        }
    }
    let _ = done.send(()).await;
}
