//! The owner task: the only place the `Driver` lives and every output is carried out.

use std::collections::HashMap;
use std::time::Instant;

use async_channel::{Receiver, Sender};
use futures_lite::future;
use rocketmq_push_core::{DriverOutput, IoFailure, LinkId};

use super::Runtime;
use super::link;
use super::msg::{LinkWriter, Msg};
use super::pool::Pool;
use crate::Prepared;

/// Messages fed to the driver per wake-up at most, so outputs (pulls, results) are not held back
/// behind a long queue.
const DRAIN: usize = 256;

pub(super) async fn run<R: Runtime>(
    rt: R,
    mut p: Prepared,
    pool: Pool,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    // Dropped when this task ends: that is what `Handle::terminated` waits for.
    _done: Sender<()>,
) {
    let mut links: HashMap<LinkId, LinkWriter> = HashMap::new();
    let mut timer: Option<(R::Timer, Instant)> = None;
    loop {
        let now = Instant::now();
        while let Some(out) = p.driver.poll_output(now) {
            match out {
                DriverOutput::Connect { link, peer } => link::connect(&rt, link, peer, tx.clone()),
                DriverOutput::Write { link, bytes } => {
                    if let Some(w) = links.get(&link) {
                        w.write(bytes);
                    }
                }
                DriverOutput::Close { link } => {
                    links.remove(&link);
                }
                DriverOutput::Consume(batch) => pool.consume(batch),
                DriverOutput::PersistLocalOffsets(offsets) => p.persist(&offsets),
                DriverOutput::Event(e) => p.event(&e),
                DriverOutput::Terminated => return,
            }
        }
        let first = match p.driver.poll_timeout() {
            None => rx.recv().await.ok(),
            Some(at) => {
                let t = match &mut timer {
                    Some((t, armed)) => {
                        if *armed != at {
                            rt.reset(t, at);
                            *armed = at;
                        }
                        t
                    }
                    None => &mut timer.insert((rt.timer(at), at)).0,
                };
                let woke = future::or(async { Some(rx.recv().await.ok()) }, async {
                    t.await;
                    None
                })
                .await;
                match woke {
                    Some(msg) => msg,
                    None => {
                        // The timer fired: it must be re-armed before it is awaited again.
                        timer = None;
                        p.driver.handle_timeout(Instant::now());
                        continue;
                    }
                }
            }
        };
        // The inbox cannot close while this task holds `tx`; `None` is unreachable but harmless.
        let Some(first) = first else { return };
        let now = Instant::now();
        feed(&mut p, &mut links, first, now);
        for _ in 1..DRAIN {
            let Ok(msg) = rx.try_recv() else { break };
            feed(&mut p, &mut links, msg, now);
        }
        if p.driver.poll_timeout().is_some_and(|at| at <= now) {
            p.driver.handle_timeout(now);
        }
    }
}

fn feed(p: &mut Prepared, links: &mut HashMap<LinkId, LinkWriter>, msg: Msg, now: Instant) {
    match msg {
        Msg::Connected { link, writer } => {
            links.insert(link, writer);
            p.driver.connected(link, now);
        }
        Msg::ConnectFailed { link, error } => p.driver.connect_failed(link, IoFailure::from(&error), now),
        Msg::Received { link, bytes } => p.driver.received(link, &bytes, now),
        Msg::Closed { link, error } => {
            links.remove(&link);
            p.driver.closed(link, error.as_ref().map(IoFailure::from), now);
        }
        Msg::Consumed { batch, result, panic } => p.consumed(batch, result, panic, now),
        Msg::Command(c) => p.command(c, now),
    }
}
