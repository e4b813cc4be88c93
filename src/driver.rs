//! `Driver`: the [`Consumer`] plus everything socket-based adapters would otherwise each write —
//! one connection per peer, opened lazily, frames queued while it connects, back-off after a
//! failed connect, framing of received bytes, and link events turned into consumer inputs.
//!
//! Still sans-IO: it says *what* to do with [`DriverOutput`]s and is told *what happened*; an
//! adapter (or the simulator) owns sockets, tasks or threads, a timer and the listener pool. Each
//! connection attempt has its own [`LinkId`], so reports about an old connection are recognised
//! and ignored.
//!
//! ```text
//! adapter                               Driver                              Consumer
//!   connected / connect_failed / closed ─▶ link table ── Disconnected ───────▶
//!   received(bytes) ──────────────────────▶ framing ──── Frame ──────────────▶
//!   consumed(batch, result), command ─────────────────── Consumed, Command ──▶
//!   ◀── Connect / Write / Close ─────────── link table ◀─ Transmit / Disconnect ──
//!   ◀── Consume(batch) / Event / PersistLocalOffsets / Terminated ◀──────────
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::codec::{FrameReader, Outbound, RemotingCodec};
use crate::consumer::Consumer;
use crate::error::UsageError;
use crate::event::{
    Batch, BatchId, Command, ConsumeResult, DisconnectReason, Event, Input, IoFailure, Output, PeerAddr, Run,
};
use crate::message::MessageQueue;

/// One connection attempt to a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub u64);

impl std::fmt::Display for LinkId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "link#{}", self.0)
    }
}

/// What the adapter must do. Deliberately exhaustive: an adapter's `match` stops compiling when
/// an output is added, rather than dropping it.
#[derive(Debug)]
#[must_use]
pub enum DriverOutput {
    /// Open a TCP connection to `peer`; report with [`Driver::connected`] or
    /// [`Driver::connect_failed`].
    Connect {
        /// The new link.
        link: LinkId,
        /// Where to.
        peer: PeerAddr,
    },
    /// Write these bytes (whole frames) to the link.
    Write {
        /// The link.
        link: LinkId,
        /// One or more encoded frames.
        bytes: Bytes,
    },
    /// Close the link (stop reading and writing; no report needed).
    Close {
        /// The link.
        link: LinkId,
    },
    /// Run user code on a batch, then report with [`Driver::consumed`] (and, after
    /// [`Driver::report_starts`], with [`Driver::started`] when the listener call begins).
    Consume(Batch),
    /// After [`Driver::report_starts`]: several concurrent batches of one queue at once, each to
    /// run and report as a [`Consume`](Self::Consume) (see [`Run`]).
    ConsumeRun(Run),
    /// After [`Driver::report_starts`]: do not start this batch if it has not started yet (its
    /// queue went away, or the shutdown deadline passed). A result that still comes is refused
    /// harmlessly.
    Withdraw(BatchId),
    /// Broadcasting: store these offsets (atomically).
    PersistLocalOffsets(Vec<(MessageQueue, i64)>),
    /// Something to log or show the application.
    Event(Event),
    /// Shutdown finished; nothing more will come.
    Terminated,
}

#[derive(Debug)]
enum LinkState {
    Connecting { queued: Vec<Bytes> },
    Up,
}

#[derive(Debug)]
struct Link {
    id: LinkId,
    state: LinkState,
    read: FrameReader,
    /// When the last bytes arrived (for a frame left unfinished).
    last_read: Instant,
    /// Anything arrived on it. A peer that closes before answering at all (a TLS-only port
    /// closing a plain client) is backed off from like a failed connect.
    answered: bool,
}

#[derive(Debug, Default)]
struct Backoff {
    failures: u32,
    until: Option<Instant>,
}

/// Reconnect back-off after a failed connect: 200 ms, doubling, at most 5 s.
const BACKOFF_MIN: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A link that stops in the middle of a frame and sends nothing more for this long is closed:
/// longer than any pause of a live broker between the bytes of one frame, and it frees what the
/// unfinished frame reserved (up to the 16 MiB frame limit).
pub const FRAME_STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The consumer with connection handling and framing; see the [module docs](self).
pub struct Driver {
    consumer: Consumer,
    codec: RemotingCodec,
    outbound: Outbound,
    links: BTreeMap<PeerAddr, Link>,
    peer_of: BTreeMap<LinkId, PeerAddr>,
    backoff: BTreeMap<PeerAddr, Backoff>,
    next_link: u64,
    out: VecDeque<DriverOutput>,
    terminated_sent: bool,
    scratch: BytesMut,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").field("links", &self.peer_of).finish_non_exhaustive()
    }
}

impl Driver {
    /// Wrap a consumer.
    pub fn new(consumer: Consumer) -> Self {
        Self::with_codec(consumer, RemotingCodec::new())
    }

    /// Wrap a consumer, with a frame-size limit.
    pub fn with_codec(consumer: Consumer, codec: RemotingCodec) -> Self {
        let outbound = Outbound::new().with_credentials(consumer.config().credentials());
        Self {
            consumer,
            codec,
            outbound,
            links: BTreeMap::new(),
            peer_of: BTreeMap::new(),
            backoff: BTreeMap::new(),
            next_link: 1,
            out: VecDeque::new(),
            terminated_sent: false,
            scratch: BytesMut::with_capacity(4096),
        }
    }

    /// The consumer (stats, snapshots, assignment).
    pub fn consumer(&self) -> &Consumer {
        &self.consumer
    }

    /// The next thing to do; `None` when idle (then wait for input or [`Driver::poll_timeout`]).
    pub fn poll_output(&mut self, now: Instant) -> Option<DriverOutput> {
        loop {
            if let Some(out) = self.out.pop_front() {
                return Some(out);
            }
            match self.consumer.poll_output() {
                // Most outputs are batches: straight through (the queue is empty here).
                Some(Output::Consume(batch)) => return Some(DriverOutput::Consume(batch)),
                Some(Output::ConsumeRun(run)) => return Some(DriverOutput::ConsumeRun(run)),
                Some(output) => self.on_output(output, now),
                None => {
                    if self.consumer.is_terminated() && !self.terminated_sent {
                        self.terminated_sent = true;
                        // Close whatever is still open: nothing will be sent or read any more.
                        let links: Vec<LinkId> = self.links.values().map(|l| l.id).collect();
                        self.links.clear();
                        self.peer_of.clear();
                        self.out.extend(links.into_iter().map(|link| DriverOutput::Close { link }));
                        self.out.push_back(DriverOutput::Terminated);
                        continue;
                    }
                    return None;
                }
            }
        }
    }

    /// When to call [`Driver::handle_timeout`] next; `None`: no timer (only input wakes it).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let stall = self
            .links
            .values()
            .filter(|l| l.read.buffered() > 0)
            .map(|l| l.last_read + FRAME_STALL_TIMEOUT)
            .min();
        [self.consumer.poll_timeout(), stall].into_iter().flatten().min()
    }

    /// Timers due: the consumer's, and links stalled in the middle of a frame.
    pub fn handle_timeout(&mut self, now: Instant) {
        let stalled: Vec<(PeerAddr, LinkId, usize, Duration)> = self
            .links
            .iter()
            .filter(|(_, l)| l.read.buffered() > 0 && l.last_read + FRAME_STALL_TIMEOUT <= now)
            .map(|(p, l)| (p.clone(), l.id, l.read.buffered(), now - l.last_read))
            .collect();
        for (peer, link, buffered, silent_for) in stalled {
            self.drop_link(link);
            self.out.push_back(DriverOutput::Close { link });
            let reason = DisconnectReason::Stalled { buffered, silent_for };
            let _ = self.consumer.handle(Input::Disconnected { peer, reason }, now);
        }
        self.consumer.handle_timeout(now);
    }

    /// A connect succeeded: frames queued meanwhile are written now.
    pub fn connected(&mut self, link: LinkId, _now: Instant) {
        let Some(peer) = self.peer_of.get(&link).cloned() else {
            // Stale or already closed: tell the adapter to drop it.
            self.out.push_back(DriverOutput::Close { link });
            return;
        };
        if let Some(l) = self.links.get_mut(&peer) {
            if let LinkState::Connecting { queued } = std::mem::replace(&mut l.state, LinkState::Up) {
                if !queued.is_empty() {
                    let bytes = concat(queued);
                    self.out.push_back(DriverOutput::Write { link, bytes });
                }
            }
        }
    }

    /// A connect failed: back off before the next attempt to this peer.
    pub fn connect_failed(&mut self, link: LinkId, error: IoFailure, now: Instant) {
        let Some(peer) = self.drop_link(link) else { return };
        self.back_off(&peer, now);
        let reason = DisconnectReason::ConnectFailed(error);
        let _ = self.consumer.handle(Input::Disconnected { peer, reason }, now);
    }

    /// No new connect to `peer` for a while, longer after each failure in a row.
    fn back_off(&mut self, peer: &PeerAddr, now: Instant) {
        let b = self.backoff.entry(peer.clone()).or_default();
        let delay = BACKOFF_MIN.saturating_mul(1u32 << b.failures.min(8)).min(BACKOFF_MAX);
        b.failures = b.failures.saturating_add(1);
        b.until = Some(now + delay);
    }

    /// Bytes read from a link, in any pieces. Complete frames go to the consumer; a corrupt
    /// stream closes the link.
    pub fn received(&mut self, link: LinkId, bytes: &[u8], now: Instant) {
        self.received_bytes(link, Bytes::copy_from_slice(bytes), now);
    }

    /// [`received`](Self::received) for bytes the caller owns: the frames in them are decoded
    /// in place (message bodies are slices of `bytes`). Only a frame split across reads is
    /// copied, and only as far as it goes.
    pub fn received_bytes(&mut self, link: LinkId, bytes: Bytes, now: Instant) {
        let Some(peer) = self.peer_of.get(&link).cloned() else { return };
        let Some(l) = self.links.get_mut(&peer) else { return };
        l.last_read = now;
        if !l.answered && !bytes.is_empty() {
            // The peer talks: whatever failed before is over.
            l.answered = true;
            self.backoff.remove(&peer);
        }
        l.read.push(bytes);
        loop {
            let Some(l) = self.links.get_mut(&peer) else { return };
            let decoded = l.read.next(&self.codec);
            match decoded {
                Ok(Some(command)) => {
                    let _ = self.consumer.handle(Input::Frame { peer: peer.clone(), command }, now);
                }
                Ok(None) => return,
                Err(e) => {
                    self.drop_link(link);
                    self.out.push_back(DriverOutput::Close { link });
                    let reason = DisconnectReason::Decode(e);
                    let _ = self.consumer.handle(Input::Disconnected { peer, reason }, now);
                    return;
                }
            }
        }
    }

    /// The link closed: `None` at end of stream, else the read or write error.
    pub fn closed(&mut self, link: LinkId, error: Option<IoFailure>, now: Instant) {
        let answered = self.peer_of.get(&link).and_then(|p| self.links.get(p)).is_none_or(|l| l.answered);
        let Some(peer) = self.drop_link(link) else { return };
        let reason = match error {
            Some(e) => DisconnectReason::Io(e),
            None if answered => DisconnectReason::Closed,
            None => {
                self.back_off(&peer, now);
                DisconnectReason::ClosedUnanswered
            }
        };
        let _ = self.consumer.handle(Input::Disconnected { peer, reason }, now);
    }

    /// The adapter queues batches for its listener threads itself: see
    /// [`Consumer::report_starts`]. Call before anything else.
    pub fn report_starts(&mut self) {
        self.consumer.report_starts();
    }

    /// User code started on a batch at `at` (after [`report_starts`](Self::report_starts)).
    pub fn started(&mut self, batch: BatchId, at: Instant, now: Instant) {
        let _ = self.consumer.handle(Input::Started { batch, at }, now);
    }

    /// User code finished a batch handed out with [`DriverOutput::Consume`] or in a
    /// [`DriverOutput::ConsumeRun`].
    pub fn consumed(
        &mut self,
        batch: BatchId,
        result: ConsumeResult,
        now: Instant,
    ) -> Result<(), UsageError> {
        self.consumer.handle(Input::Consumed { batch, result }, now)
    }

    /// Results of several batches at once, as [`consumed`](Self::consumed) for each in order
    /// (cheaper per result); each refused one goes to `refused`.
    pub fn consumed_all(
        &mut self,
        results: impl IntoIterator<Item = (BatchId, ConsumeResult)>,
        now: Instant,
        refused: impl FnMut(BatchId, UsageError),
    ) {
        self.consumer.handle_consumed(results, now, refused);
    }

    /// An application command.
    pub fn command(&mut self, cmd: Command, now: Instant) -> Result<(), UsageError> {
        self.consumer.handle(Input::Command(cmd), now)
    }

    /// Broadcasting: offsets read back from the local store (before anything else).
    pub fn restore_local_offsets(&mut self, offsets: impl IntoIterator<Item = (MessageQueue, i64)>) {
        self.consumer.restore_local_offsets(offsets);
    }

    fn drop_link(&mut self, link: LinkId) -> Option<PeerAddr> {
        let peer = self.peer_of.remove(&link)?;
        if self.links.get(&peer).is_some_and(|l| l.id == link) {
            self.links.remove(&peer);
        }
        Some(peer)
    }

    fn on_output(&mut self, output: Output, now: Instant) {
        match output {
            Output::Transmit(t) => {
                self.scratch.clear();
                self.outbound.finish(&t.to_command(), &mut self.scratch);
                let bytes = self.scratch.split().freeze();
                self.send(t.peer, bytes, now);
            }
            Output::Consume(batch) => self.out.push_back(DriverOutput::Consume(batch)),
            Output::ConsumeRun(run) => self.out.push_back(DriverOutput::ConsumeRun(run)),
            Output::Withdraw(id) => self.out.push_back(DriverOutput::Withdraw(id)),
            Output::Disconnect { peer } => {
                if let Some(l) = self.links.remove(&peer) {
                    self.peer_of.remove(&l.id);
                    self.out.push_back(DriverOutput::Close { link: l.id });
                    let reason = DisconnectReason::Requested;
                    let _ = self.consumer.handle(Input::Disconnected { peer, reason }, now);
                }
            }
            Output::PersistLocalOffsets(v) => self.out.push_back(DriverOutput::PersistLocalOffsets(v)),
            Output::Event(e) => self.out.push_back(DriverOutput::Event(e)),
        }
    }

    fn send(&mut self, peer: PeerAddr, bytes: Bytes, now: Instant) {
        if let Some(l) = self.links.get_mut(&peer) {
            match &mut l.state {
                LinkState::Up => self.out.push_back(DriverOutput::Write { link: l.id, bytes }),
                LinkState::Connecting { queued } => queued.push(bytes),
            }
            return;
        }
        if let Some(until) = self.backoff.get(&peer).and_then(|b| b.until) {
            if now < until {
                // Refused at once while backing off: the consumer's own retry timers pace it.
                let reason = DisconnectReason::BackingOff;
                let _ = self.consumer.handle(Input::Disconnected { peer, reason }, now);
                return;
            }
        }
        let id = LinkId(self.next_link);
        self.next_link += 1;
        self.links.insert(
            peer.clone(),
            Link {
                id,
                state: LinkState::Connecting { queued: vec![bytes] },
                read: FrameReader::new(),
                last_read: now,
                answered: false,
            },
        );
        self.peer_of.insert(id, peer.clone());
        self.out.push_back(DriverOutput::Connect { link: id, peer });
    }
}

fn concat(parts: Vec<Bytes>) -> Bytes {
    if parts.len() == 1 {
        return parts.into_iter().next().unwrap_or_default();
    }
    let mut b = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
    for p in parts {
        b.extend_from_slice(&p);
    }
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ConsumerConfig;

    fn driver(now: Instant) -> Driver {
        let cfg =
            ConsumerConfig::builder("g").name_server("127.0.0.1:9876").subscribe("T", "*").build().unwrap();
        Driver::new(Consumer::new(cfg, now))
    }

    fn drain(d: &mut Driver, now: Instant) -> Vec<DriverOutput> {
        std::iter::from_fn(|| d.poll_output(now)).collect()
    }

    #[test]
    fn lazy_connect_queues_then_flushes() {
        #[allow(clippy::disallowed_methods)] // one real instant to start virtual time
        let t0 = Instant::now();
        let mut d = driver(t0);
        d.handle_timeout(t0);
        let cmds = drain(&mut d, t0);
        // Two route queries (T and %RETRY%g) to the name server: one connect, both queued.
        let connects: Vec<_> = cmds.iter().filter(|c| matches!(c, DriverOutput::Connect { .. })).collect();
        assert_eq!(connects.len(), 1);
        assert!(!cmds.iter().any(|c| matches!(c, DriverOutput::Write { .. })));
        let DriverOutput::Connect { link, .. } = connects[0] else { unreachable!() };
        let link = *link;
        d.connected(link, t0);
        let cmds = drain(&mut d, t0);
        let writes: Vec<_> = cmds
            .iter()
            .filter_map(|c| if let DriverOutput::Write { bytes, .. } = c { Some(bytes) } else { None })
            .collect();
        assert_eq!(writes.len(), 1, "queued frames written together");
        let mut buf = BytesMut::from(&writes[0][..]);
        let codec = RemotingCodec::new();
        assert_eq!(codec.decode(&mut buf).unwrap().unwrap().code, 105);
        assert_eq!(codec.decode(&mut buf).unwrap().unwrap().code, 105);
    }

    #[test]
    fn failed_connect_backs_off_and_garbage_closes_the_link() {
        #[allow(clippy::disallowed_methods)] // one real instant to start virtual time
        let t0 = Instant::now();
        let mut d = driver(t0);
        d.handle_timeout(t0);
        let cmds = drain(&mut d, t0);
        let DriverOutput::Connect { link, .. } =
            cmds.iter().find(|c| matches!(c, DriverOutput::Connect { .. })).unwrap()
        else {
            unreachable!()
        };
        d.connect_failed(*link, IoFailure::new(std::io::ErrorKind::ConnectionRefused, "refused"), t0);
        assert!(
            drain(&mut d, t0).iter().all(|c| !matches!(c, DriverOutput::Connect { .. })),
            "no reconnect loop"
        );
        // The route retry fires after its back-off; the link back-off (200 ms) refuses sooner sends.
        let later = t0 + Duration::from_secs(2);
        d.handle_timeout(later);
        let cmds = drain(&mut d, later);
        let DriverOutput::Connect { link, .. } = cmds
            .iter()
            .find(|c| matches!(c, DriverOutput::Connect { .. }))
            .expect("reconnects after the back-off")
        else {
            unreachable!()
        };
        let link = *link;
        d.connected(link, later);
        let _ = drain(&mut d, later);
        d.received(link, &[0, 0, 0, 4, 9, 0, 0, 0], later);
        let cmds = drain(&mut d, later);
        assert!(
            cmds.iter().any(|c| matches!(c, DriverOutput::Close { link: l } if *l == link)),
            "corrupt stream closes the link"
        );
        d.received(link, b"ignored: stale link", later);
        d.closed(link, None, later);
    }

    #[test]
    fn a_peer_that_closes_before_answering_is_named_and_backed_off_from() {
        #[allow(clippy::disallowed_methods)] // one real instant to start virtual time
        let t0 = Instant::now();
        let mut d = driver(t0);
        d.handle_timeout(t0);
        let connect = |cmds: &[DriverOutput]| {
            cmds.iter().find_map(|c| {
                if let DriverOutput::Connect { link, peer } = c { Some((*link, peer.clone())) } else { None }
            })
        };
        let lost = |cmds: &[DriverOutput]| {
            cmds.iter()
                .filter_map(|c| match c {
                    DriverOutput::Event(Event::ConnectionLost { reason, .. }) => Some(reason.clone()),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let (link, peer) = connect(&drain(&mut d, t0)).unwrap();
        d.connected(link, t0);
        let _ = drain(&mut d, t0);
        // A TLS-only port closes a plain client's connection without a word.
        d.closed(link, None, t0);
        let reasons = lost(&drain(&mut d, t0));
        assert_eq!(reasons, vec![DisconnectReason::ClosedUnanswered]);
        assert!(reasons[0].to_string().contains("TLS"), "the text names the likely cause");
        let first = d.backoff[&peer].until.unwrap();
        assert!(first > t0, "backed off from as after a failed connect");
        // Again, later: the back-off grows.
        let later = t0 + Duration::from_secs(2);
        d.handle_timeout(later);
        let (link, _) = connect(&drain(&mut d, later)).expect("reconnects after the back-off");
        d.connected(link, later);
        d.closed(link, None, later);
        assert!(d.backoff[&peer].until.unwrap() - later > first - t0, "longer each time");
        // A peer that answered and then closed is a plain close, and clears the back-off.
        let again = later + Duration::from_secs(5);
        d.handle_timeout(again);
        let (link, _) = connect(&drain(&mut d, again)).expect("reconnects");
        d.connected(link, again);
        d.received(link, &[0, 0, 0], again);
        assert!(!d.backoff.contains_key(&peer));
        d.closed(link, None, again);
        assert_eq!(lost(&drain(&mut d, again)), vec![DisconnectReason::Closed]);
    }

    #[test]
    fn a_link_stalled_in_a_frame_is_closed_and_its_buffer_freed() {
        #[allow(clippy::disallowed_methods)] // one real instant to start virtual time
        let t0 = Instant::now();
        let mut d = driver(t0);
        d.handle_timeout(t0);
        let cmds = drain(&mut d, t0);
        let link = first_connect(&cmds);
        d.connected(link, t0);
        let _ = drain(&mut d, t0);
        // A frame that declares 16 MiB and stops after a few bytes.
        d.received(link, &[0, 0xff, 0xff, 0xf0, 0, 0, 0, 0, 1, 2, 3], t0);
        assert!(drain(&mut d, t0).iter().all(|c| !matches!(c, DriverOutput::Close { .. })));
        let due = d.poll_timeout().expect("a deadline");
        assert!(due <= t0 + FRAME_STALL_TIMEOUT, "the stall has a deadline");
        let later = t0 + FRAME_STALL_TIMEOUT;
        d.handle_timeout(later);
        let cmds = drain(&mut d, later);
        assert!(cmds.iter().any(|c| matches!(c, DriverOutput::Close { link: l } if *l == link)), "{cmds:?}");
        let stalled = cmds.iter().any(|c| {
            matches!(
                c,
                DriverOutput::Event(Event::ConnectionLost {
                    reason: DisconnectReason::Stalled { buffered: 11, .. },
                    ..
                })
            )
        });
        assert!(stalled, "{cmds:?}");
    }

    fn first_connect(cmds: &[DriverOutput]) -> LinkId {
        cmds.iter()
            .find_map(|c| match c {
                DriverOutput::Connect { link, .. } => Some(*link),
                _ => None,
            })
            .expect("a connect")
    }
}
