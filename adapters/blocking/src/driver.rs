//! The single owner of the core: one thread, one channel in, one timer from `poll_timeout`.

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use bytes::Bytes;
use rocketmq_push_core::{BatchId, Command, ConsumeResult, IoCommand, LinkId};
use rocketmq_push_io::Prepared;

use crate::Listener;
use crate::conn::{self, Writer};
use crate::pool::Pool;

/// Everything the driver thread hears about.
pub(crate) enum Msg {
    Connected { link: LinkId, stream: TcpStream },
    ConnectFailed { link: LinkId, error: String },
    Received { link: LinkId, bytes: Bytes },
    Closed { link: LinkId },
    Done { batch: BatchId, result: ConsumeResult, panic: Option<String> },
    Command(Command),
}

pub(crate) fn spawn(
    p: Prepared,
    listener: Listener,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
) -> std::io::Result<JoinHandle<()>> {
    let pool = Pool::start(p.consume_threads, listener, tx.clone())?;
    thread::Builder::new().name("rmq-driver".into()).spawn(move || run(p, &pool, &tx, &rx))
}

fn run(mut p: Prepared, pool: &Pool, tx: &Sender<Msg>, rx: &Receiver<Msg>) {
    let mut writers: HashMap<LinkId, Writer> = HashMap::new();
    loop {
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
                IoCommand::Terminated => return,
                _ => {}
            }
        }
        let msg = match p.driver.poll_timeout() {
            Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            },
            None => match rx.recv() {
                Ok(m) => Some(m),
                Err(_) => return,
            },
        };
        let now = Instant::now();
        match msg {
            None => p.driver.handle_timeout(now),
            Some(Msg::Connected { link, stream }) => match conn::start(link, stream, tx.clone()) {
                Ok(w) => {
                    writers.insert(link, w);
                    p.driver.connected(link, now);
                }
                Err(e) => p.driver.connect_failed(link, e.to_string(), now),
            },
            Some(Msg::ConnectFailed { link, error }) => p.driver.connect_failed(link, error, now),
            Some(Msg::Received { link, bytes }) => p.driver.received(link, &bytes, now),
            Some(Msg::Closed { link }) => {
                writers.remove(&link);
                p.driver.closed(link, now);
            }
            Some(Msg::Done { batch, result, panic }) => p.consume_done(batch, result, panic, now),
            Some(Msg::Command(c)) => p.command(c, now),
        }
    }
}
