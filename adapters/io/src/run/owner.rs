//! The owner task: the only place the `Driver` lives and every output is carried out.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use futures_lite::future;
use rocketmq_push_core::{DriverOutput, IoFailure, LinkId};

use super::Runtime;
use super::link;
use super::listeners::Listeners;
use super::msg::{Finished, LinkWriter, Msg, Snapshot, Started};
use super::outgoing::Outgoing;
use crate::Prepared;

/// Messages of each kind fed to the driver per wake-up at most, so outputs (pulls, results) are
/// not held back behind a long queue.
const DRAIN: usize = 256;

/// Deadlines found passed and handled without waiting, at most, before the owner waits again.
const DUE_IN_A_ROW: u32 = 8;

/// Bytes read, at most this many messages queued: a peer that floods us is slowed down by TCP
/// (its reader waits) instead of filling memory, and commands never queue behind its bytes.
pub(super) const DATA_QUEUE: usize = 64;

/// The owner's two inboxes. Control (commands, consume results, connects) always goes first;
/// data (bytes read, links closed) is bounded.
pub(super) struct Inbox {
    pub(super) control_tx: Sender<Msg>,
    pub(super) control: Receiver<Msg>,
    pub(super) data_tx: Sender<Msg>,
    pub(super) data: Receiver<Msg>,
}

impl Inbox {
    pub(super) fn new() -> Self {
        let (control_tx, control) = async_channel::unbounded();
        let (data_tx, data) = async_channel::bounded(DATA_QUEUE);
        Self { control_tx, control, data_tx, data }
    }
}

pub(super) async fn run<R: Runtime>(
    rt: R,
    mut p: Prepared,
    mut listeners: Listeners,
    inbox: Inbox,
    // Dropped when this task ends: that is what `Handle::terminated` waits for.
    _done: Sender<()>,
) {
    let Inbox { control_tx, control, data_tx, data } = inbox;
    let mut links: HashMap<LinkId, LinkWriter> = HashMap::new();
    let mut timer: Option<(R::Timer, Instant)> = None;
    let mut next_log_flush = Instant::now();
    let mut finished: Vec<Finished> = Vec::new();
    let mut started: Vec<Started> = Vec::new();
    let mut outgoing = Outgoing::default();
    let mut handouts: Vec<Handout> = Vec::new();
    let mut due_in_a_row = 0;
    loop {
        let now = Instant::now();
        // Carry out the outputs; listeners that answer at once feed the driver right away, which
        // may make more outputs (the next batches, commits, pulls).
        loop {
            while let Some(out) = p.driver.poll_output(now) {
                match out {
                    DriverOutput::Connect { link, peer } => {
                        link::connect(&rt, link, peer, &p.transport, control_tx.clone(), data_tx.clone())
                    }
                    DriverOutput::Write { link, bytes } => outgoing.push(link, bytes),
                    DriverOutput::Close { link } => {
                        outgoing.flush_link(link, &links);
                        links.remove(&link);
                    }
                    // Listeners run once this pass's writes are handed over (below): the pull
                    // a read answer asks for leaves before its messages are consumed.
                    DriverOutput::Consume(batch) => handouts.push(Handout::Consume(batch)),
                    // A run is its batches, in order: each one listener call, as ever.
                    DriverOutput::ConsumeRun(run) => handouts.extend(run.batches().map(Handout::Consume)),
                    // The listeners hear of it now, before any batch of this pass: one handed
                    // out and taken back in the same pass must not start. Hooks hear of both
                    // in order, below.
                    DriverOutput::Withdraw(batch) => {
                        listeners.withdraw(batch);
                        handouts.push(Handout::Withdraw(batch));
                    }
                    DriverOutput::PersistLocalOffsets(offsets) => p.persist(&offsets),
                    DriverOutput::Event(e) => p.event(&e, now),
                    DriverOutput::Terminated => {
                        outgoing.flush(&links);
                        return;
                    }
                }
            }
            let stalled = outgoing.flush(&links);
            if !stalled.is_empty() {
                for link in stalled {
                    // The peer does not read what we write: close rather than queue more.
                    links.remove(&link);
                    let why = std::io::Error::other(format!(
                        "{} writes queued: the peer is not reading",
                        super::msg::MAX_QUEUED_WRITES
                    ));
                    p.driver.closed(link, Some(IoFailure::from(&why)), now);
                }
                // Closing made outputs of its own.
                continue;
            }
            for h in handouts.drain(..) {
                match h {
                    Handout::Consume(batch) => {
                        p.hooks.handed(&batch, now, listeners.reports_starts());
                        listeners.consume(batch, now, &mut p.hooks, &mut started, &mut finished)
                    }
                    Handout::Withdraw(batch) => p.hooks.withdrawn(batch),
                }
            }
            listeners.poll_woken(now, &mut p.hooks, &mut started, &mut finished);
            for (batch, at) in started.drain(..) {
                p.hooks.started(batch, at);
                p.driver.started(batch, at, now);
            }
            if finished.is_empty() {
                break;
            }
            p.consumed_all(&mut finished, now);
        }
        // A deadline already passed (the first route lookup at start, a timer set for now while
        // the outputs were carried out) is handled at once: a runtime timer would fire at its
        // next tick, up to a millisecond later with tokio. A few times in a row at most, so a
        // timer that keeps coming due cannot starve the inboxes.
        let due_at = Instant::now();
        if due_in_a_row < DUE_IN_A_ROW && p.driver.poll_timeout().is_some_and(|at| at <= due_at) {
            due_in_a_row += 1;
            p.driver.handle_timeout(due_at);
            continue;
        }
        due_in_a_row = 0;
        let check = listeners.check(now);
        let listeners_ready = listeners.ready();
        let next = async {
            // Control first (`or` polls its first future first), then listener calls that can go
            // on, then bytes read.
            future::or(async { control.recv().await.ok() }, async {
                future::or(
                    async {
                        listeners_ready.await;
                        Some(Msg::ListenersReady)
                    },
                    async { data.recv().await.ok() },
                )
                .await
            })
            .await
        };
        let deadline = match (p.driver.poll_timeout(), check) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let first = match deadline {
            None => next.await,
            Some(at) => {
                let t = match &mut timer {
                    Some((t, armed)) => {
                        // Moved only to an earlier deadline. A later one keeps the armed timer,
                        // which then fires early once and is armed anew (below): deadlines move
                        // later at nearly every pull answer, and with async-io (async-std, smol)
                        // each move of a timer wakes its reactor thread.
                        if at < *armed {
                            rt.reset(t, at);
                            *armed = at;
                        }
                        t
                    }
                    None => &mut timer.insert((rt.timer(at), at)).0,
                };
                let woke = future::or(async { Some(next.await) }, async {
                    t.await;
                    None
                })
                .await;
                match woke {
                    Some(msg) => msg,
                    None => {
                        // The timer fired: it must be re-armed before it is awaited again. Its
                        // deadline, now passed, is handled before the next wait.
                        timer = None;
                        continue;
                    }
                }
            }
        };
        // The inboxes cannot close while this task holds their senders; `None` is unreachable.
        let Some(first) = first else { return };
        let now = Instant::now();
        feed(&mut p, &mut links, first, now);
        for rx in [&control, &data] {
            for _ in 1..DRAIN {
                let Ok(msg) = rx.try_recv() else { break };
                feed(&mut p, &mut links, msg, now);
            }
        }
        if p.driver.poll_timeout().is_some_and(|at| at <= now) {
            p.driver.handle_timeout(now);
        }
        if now >= next_log_flush {
            p.flush_log(now);
            p.sample_metrics();
            next_log_flush = now + Duration::from_secs(1);
        }
    }
}

/// What the driver gave the listeners this pass, kept in order until the writes are out.
enum Handout {
    Consume(rocketmq_push_core::Batch),
    Withdraw(rocketmq_push_core::BatchId),
}

fn feed(p: &mut Prepared, links: &mut HashMap<LinkId, LinkWriter>, msg: Msg, now: Instant) {
    match msg {
        Msg::Connected { link, writer } => {
            links.insert(link, writer);
            p.driver.connected(link, now);
        }
        Msg::ConnectFailed { link, error } => p.driver.connect_failed(link, IoFailure::from(&error), now),
        Msg::Received { link, bytes } => p.driver.received_bytes(link, bytes, now),
        Msg::Closed { link, error } => {
            links.remove(&link);
            p.driver.closed(link, error.as_ref().map(IoFailure::from), now);
        }
        Msg::Consumed { batch, result, failed } => p.consumed(batch, result, failed, now),
        Msg::Command(c) => p.command(c, now),
        Msg::Checked(c, reply) => {
            let _ = reply.try_send(p.checked_command(c, now));
        }
        Msg::Snapshot(reply) => {
            let c = p.driver.consumer();
            let _ = reply.try_send(Snapshot {
                stats: c.stats().clone(),
                queues: c.queue_snapshots(),
                topics: c.topic_stats(),
            });
        }
        // Picked up at the top of the loop.
        Msg::ListenersReady => {}
    }
}
