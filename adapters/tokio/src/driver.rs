//! The single owner of the core: one task, one channel in, one timer from `poll_timeout`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rocketmq_push_core::{BatchId, Command, ConsumeResult, IoCommand, LinkId};
use rocketmq_push_io::Prepared;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use crate::Listener;
use crate::conn::{self, Writer};
use crate::pool::Pool;

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
    tx: mpsc::UnboundedSender<Msg>,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    done: oneshot::Sender<()>,
) {
    let pool = Pool::new(listener, p.consume_threads, tx.clone());
    let mut writers: HashMap<LinkId, Writer> = HashMap::new();
    let far = || tokio::time::Instant::now() + Duration::from_secs(3600);
    let sleep = tokio::time::sleep_until(far());
    tokio::pin!(sleep);
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
        let deadline = p.driver.poll_timeout().map_or_else(far, tokio::time::Instant::from_std);
        if sleep.deadline() != deadline {
            sleep.as_mut().reset(deadline);
        }
        tokio::select! {
            msg = rx.recv() => {
                let now = Instant::now();
                match msg {
                    Some(Msg::Connected { link, stream }) => {
                        writers.insert(link, conn::start(link, stream, tx.clone()));
                        p.driver.connected(link, now);
                    }
                    Some(Msg::ConnectFailed { link, error }) => p.driver.connect_failed(link, error, now),
                    Some(Msg::Received { link, bytes }) => p.driver.received(link, &bytes, now),
                    Some(Msg::Closed { link }) => {
                        writers.remove(&link);
                        p.driver.closed(link, now);
                    }
                    Some(Msg::Done { batch, result, panic }) => p.consume_done(batch, result, panic, now),
                    Some(Msg::Command(c)) => p.command(c, now),
                    None => break 'run,
                }
            }
            () = &mut sleep => p.driver.handle_timeout(Instant::now()),
        }
    }
    let _ = done.send(());
}
