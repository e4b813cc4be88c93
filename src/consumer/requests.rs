//! Requests in flight: opaque allocation, the pending table, request timeouts, and the
//! per-broker registration gate.
//!
//! A broker keys a consumer's registration by TCP channel, so after a (re)connection the broker
//! does not know us until a heartbeat on that connection succeeds; a pull before it fails with
//! SUBSCRIPTION_NOT_EXIST. Every request to a broker therefore passes the gate: sent at once when
//! the peer is registered, otherwise parked until a heartbeat comes back.

use std::time::{Duration, Instant};

use super::Consumer;
use crate::event::{DisconnectReason, Event, MalformedFrame, Output, PeerAddr, Request, Transmit};
use crate::protocol::{Code, RemotingCommand, RequestCode, ResponseCode};
use crate::timer::{QueueKey, Timer};

/// What a pending request was for: where its answer goes.
#[derive(Clone, Debug)]
pub(super) enum PendingKind {
    Route {
        topic: String,
    },
    /// What it said: answered after the consumer changed what it says (a newer subscription
    /// version: another topic assigned meanwhile), it registers nothing, as the broker would
    /// refuse pulls of the newer version.
    Heartbeat(std::sync::Arc<crate::protocol::body::HeartbeatData>),
    ConsumerList {
        topic: String,
    },
    QueryOffset {
        key: QueueKey,
    },
    MaxOffset {
        key: QueueKey,
    },
    SearchOffset {
        key: QueueKey,
    },
    Pull {
        key: QueueKey,
    },
    /// A `Command::Seek` lookup (first, last, timestamp) for a queue.
    Seek {
        mq: crate::message::MessageQueue,
        to: crate::event::SeekTo,
    },
    SendBack {
        id: u64,
    },
    RetrySend {
        id: u64,
    },
    UpdateOffset {
        key: QueueKey,
        offset: i64,
        shutdown: bool,
        /// The first update of this broker's offset map for the topic (the others wait for it).
        creates: Option<super::offsets::OffsetMapKey>,
    },
    Unregister,
    /// LOCK_BATCH_MQ for `keys`, sent at `sent` (the lock's age counts from there).
    Lock {
        keys: Vec<QueueKey>,
        sent: Instant,
    },
    Unlock {
        mqs: Vec<crate::message::MessageQueue>,
        shutdown: bool,
    },
    /// QUERY_ASSIGNMENT for a rebalance of `topic`.
    Assignment {
        topic: String,
    },
    Pop {
        key: QueueKey,
    },
    PopAck,
    PopChangeInvisible,
    /// Orderly POP: a held message's invisible time extended (no retry).
    PopRenew,
    /// BATCH_ACK_MESSAGE of these acks (sent again one by one if the broker does not know it).
    PopBatchAck {
        acks: Vec<super::pop_ack::QueuedAck>,
    },
    /// Orderly POP: a message out of attempts, sent to the dead-letter queue.
    PopDeadLetter(Box<super::pop_orderly::PopDeadLetter>),
}

#[derive(Debug)]
pub(super) struct Pending {
    pub(super) peer: PeerAddr,
    pub(super) code: Code<RequestCode>,
    pub(super) kind: PendingKind,
    /// When it went out (a timeout with nothing heard from the peer since means a dead link).
    pub(super) sent: Instant,
}

/// A request waiting for its broker's registration.
#[derive(Debug)]
pub(super) enum Deferred {
    /// Rebuilt from the queue's state when sent, so it is never stale.
    Pull(QueueKey),
    /// An offset update, likewise rebuilt when sent: a value parked earlier would be older than
    /// what a pull may have piggy-backed since, and commits must not go backwards.
    Persist {
        key: QueueKey,
        shutdown: bool,
    },
    Request {
        request: Box<Request>,
        kind: PendingKind,
        timeout: Duration,
    },
}

#[derive(Debug, Default)]
pub(super) struct PeerState {
    /// A heartbeat succeeded on the current connection.
    pub(super) registered: bool,
    pub(super) heartbeat_in_flight: bool,
    pub(super) deferred: Vec<Deferred>,
    /// The broker's `version` from its heartbeat answer.
    pub(super) version: i32,
    /// When the last frame came from it (any frame: an answer, a broker request).
    pub(super) last_heard: Option<Instant>,
    /// It refused our heartbeat for want of permission (credentials it does not accept: an
    /// unknown key, a bad signature, an expired token). What waits for registration stays
    /// parked, and the heartbeat goes again only with the periodic one, not at the pace of
    /// every parked pull.
    pub(super) refused: bool,
    /// That refusal was reported; again only after a heartbeat succeeds.
    pub(super) refusal_reported: bool,
}

/// Why a request got no usable answer.
#[derive(Debug)]
pub(super) enum Failure {
    Timeout,
    Disconnected,
    Code(RemotingCommand),
}

impl Consumer {
    fn next_opaque(&mut self) -> i32 {
        let o = self.next_opaque;
        // Positive and never 0: 0 is what replies without an opaque would carry.
        self.next_opaque = if o == i32::MAX { 1 } else { o + 1 };
        o
    }

    /// Transmit now, registering the pending entry and its timeout.
    pub(super) fn transmit(
        &mut self,
        peer: PeerAddr,
        request: Request,
        kind: PendingKind,
        timeout: Duration,
    ) {
        let opaque = self.next_opaque();
        let code = request.code();
        self.pending.insert(opaque, Pending { peer: peer.clone(), code, kind, sent: self.now });
        self.timers.set(Timer::Request(opaque), self.now + timeout);
        self.outputs.push_back(Output::Transmit(Box::new(Transmit {
            peer,
            opaque,
            oneway: false,
            serialize_type: self.cfg.serialize_type,
            request,
        })));
    }

    /// Transmit a oneway request or a reply: nothing is pending.
    pub(super) fn transmit_oneway(&mut self, peer: PeerAddr, request: Request) {
        let opaque = if matches!(request, Request::Reply(_)) { 0 } else { self.next_opaque() };
        let oneway = !matches!(request, Request::Reply(_));
        self.outputs.push_back(Output::Transmit(Box::new(Transmit {
            peer,
            opaque,
            oneway,
            serialize_type: self.cfg.serialize_type,
            request,
        })));
    }

    /// Send to a broker through the registration gate.
    pub(super) fn send_to_broker(
        &mut self,
        peer: PeerAddr,
        request: Request,
        kind: PendingKind,
        timeout: Duration,
    ) {
        if self.peer(&peer).registered {
            self.transmit(peer, request, kind, timeout);
        } else {
            self.peer(&peer).deferred.push(Deferred::Request { request: Box::new(request), kind, timeout });
            self.ensure_heartbeat(&peer);
        }
    }

    /// Park an offset update of `key` behind the gate of `peer` (true if parked).
    pub(super) fn park_persist_until_registered(
        &mut self,
        peer: &PeerAddr,
        key: QueueKey,
        shutdown: bool,
    ) -> bool {
        let state = self.peer(peer);
        // A shutdown does not wait for a broker that refuses us: the update goes (and is
        // refused, or lands if the credentials were renewed meanwhile).
        if state.registered || (shutdown && state.refused) {
            return false;
        }
        state.deferred.push(Deferred::Persist { key, shutdown });
        self.ensure_heartbeat(peer);
        true
    }

    /// Queue a pull of `key` behind the gate of `peer` (true if parked).
    pub(super) fn park_pull_until_registered(&mut self, peer: &PeerAddr, key: QueueKey) -> bool {
        if self.peer(peer).registered {
            return false;
        }
        self.peer(peer).deferred.push(Deferred::Pull(key));
        self.ensure_heartbeat(peer);
        true
    }

    pub(super) fn peer(&mut self, peer: &PeerAddr) -> &mut PeerState {
        self.peers.entry(peer.clone()).or_default()
    }

    /// Registration confirmed: release everything parked.
    pub(super) fn on_registered(&mut self, peer: &PeerAddr, version: i32) {
        let state = self.peer(peer);
        state.registered = true;
        state.refused = false;
        state.refusal_reported = false;
        state.version = version;
        let deferred = std::mem::take(&mut state.deferred);
        for d in deferred {
            match d {
                Deferred::Pull(key) => self.try_pull(key),
                Deferred::Persist { key, shutdown } => self.send_persist(key, shutdown),
                Deferred::Request { request, kind, timeout } => {
                    self.transmit(peer.clone(), *request, kind, timeout)
                }
            }
        }
    }

    /// A refusal for want of permission from `peer`, reported once until a heartbeat to it
    /// succeeds (every request is refused alike when the credentials are).
    pub(super) fn report_refusal(&mut self, peer: &PeerAddr, request: RequestCode, cmd: &RemotingCommand) {
        if !std::mem::replace(&mut self.peer(peer).refusal_reported, true) {
            self.emit_broker_error(peer.clone(), request, cmd);
        }
    }

    /// A broker no longer knows us (connection gone, or it said so).
    pub(super) fn mark_unregistered(&mut self, peer: &PeerAddr) {
        if let Some(p) = self.peers.get_mut(peer) {
            p.registered = false;
        }
    }

    pub(super) fn on_response(&mut self, peer: PeerAddr, cmd: RemotingCommand) {
        let known = self.pending.get(&cmd.opaque).is_some_and(|p| p.peer == peer);
        if !known {
            // Late (timed out), duplicated, or not ours: nothing depends on it.
            self.emit(Event::UnexpectedResponse { peer, opaque: cmd.opaque });
            return;
        }
        let Some(p) = self.pending.remove(&cmd.opaque) else { return };
        self.timers.stop(Timer::Request(cmd.opaque));
        if cmd.code == ResponseCode::GoAway as i32 {
            // The broker is shutting down: treat as a failure; the connection will drop.
            self.on_failure(p, Failure::Code(cmd));
            return;
        }
        self.on_answer(p, cmd);
    }

    fn on_answer(&mut self, p: Pending, cmd: RemotingCommand) {
        match p.kind {
            PendingKind::Route { topic } => self.on_route(&p.peer, &topic, Ok(cmd)),
            PendingKind::Heartbeat(sent) => self.on_heartbeat(&p.peer, &sent, Ok(cmd)),
            PendingKind::ConsumerList { topic } => self.on_consumer_list(&p.peer, &topic, Ok(cmd)),
            PendingKind::QueryOffset { key } => self.on_query_offset(key, &p.peer, Ok(cmd)),
            PendingKind::MaxOffset { key } => self.on_found_start_offset(key, &p.peer, p.code, Ok(cmd)),
            PendingKind::SearchOffset { key } => self.on_found_start_offset(key, &p.peer, p.code, Ok(cmd)),
            PendingKind::Pull { key } => self.on_pull(key, &p.peer, Ok(cmd)),
            PendingKind::Seek { mq, to } => self.on_seek_lookup(&mq, to, Ok(cmd)),
            PendingKind::SendBack { id } => self.on_send_back(id, &p.peer, Ok(cmd)),
            PendingKind::RetrySend { id } => self.on_retry_send(id, &p.peer, Ok(cmd)),
            PendingKind::UpdateOffset { key, offset, shutdown, creates } => {
                self.on_update_offset(key, offset, shutdown, creates, &p.peer, Ok(cmd))
            }
            PendingKind::Unregister => self.on_unregistered(&p.peer, Ok(cmd)),
            PendingKind::Lock { keys, sent } => self.on_lock(&keys, sent, &p.peer, Ok(cmd)),
            PendingKind::Unlock { mqs, shutdown } => self.on_unlock(&mqs, shutdown),
            PendingKind::Assignment { topic } => self.on_assignment(&p.peer, &topic, Ok(cmd)),
            PendingKind::Pop { key } => self.on_pop(key, &p.peer, Ok(cmd)),
            PendingKind::PopAck => self.on_pop_answer(&p.peer, true, true, Ok(cmd)),
            PendingKind::PopChangeInvisible => self.on_pop_answer(&p.peer, false, true, Ok(cmd)),
            PendingKind::PopRenew => self.on_pop_answer(&p.peer, false, false, Ok(cmd)),
            PendingKind::PopBatchAck { acks } => self.on_batch_ack_answer(&p.peer, acks, Ok(cmd)),
            PendingKind::PopDeadLetter(d) => self.on_pop_dead_letter(*d, &p.peer, Ok(cmd)),
        }
    }

    pub(super) fn on_failure(&mut self, p: Pending, f: Failure) {
        match &f {
            Failure::Timeout => self.emit(Event::RequestTimeout { peer: p.peer.clone(), request: p.code }),
            Failure::Code(cmd) => self.emit_broker_error(p.peer.clone(), p.code, cmd),
            Failure::Disconnected => {}
        }
        match p.kind {
            PendingKind::Route { topic } => self.on_route(&p.peer, &topic, Err(f)),
            PendingKind::Heartbeat(sent) => self.on_heartbeat(&p.peer, &sent, Err(f)),
            PendingKind::ConsumerList { topic } => self.on_consumer_list(&p.peer, &topic, Err(f)),
            PendingKind::QueryOffset { key } => self.on_query_offset(key, &p.peer, Err(f)),
            PendingKind::MaxOffset { key } | PendingKind::SearchOffset { key } => {
                self.on_found_start_offset(key, &p.peer, p.code, Err(f))
            }
            PendingKind::Pull { key } => self.on_pull(key, &p.peer, Err(f)),
            PendingKind::Seek { mq, to } => self.on_seek_lookup(&mq, to, Err(f)),
            PendingKind::SendBack { id } => self.on_send_back(id, &p.peer, Err(f)),
            PendingKind::RetrySend { id } => self.on_retry_send(id, &p.peer, Err(f)),
            PendingKind::UpdateOffset { key, offset, shutdown, creates } => {
                self.on_update_offset(key, offset, shutdown, creates, &p.peer, Err(f))
            }
            PendingKind::Unregister => self.on_unregistered(&p.peer, Err(f)),
            PendingKind::Lock { keys, sent } => self.on_lock(&keys, sent, &p.peer, Err(f)),
            PendingKind::Unlock { mqs, shutdown } => self.on_unlock(&mqs, shutdown),
            PendingKind::Assignment { topic } => self.on_assignment(&p.peer, &topic, Err(f)),
            PendingKind::Pop { key } => self.on_pop(key, &p.peer, Err(f)),
            PendingKind::PopAck => self.on_pop_answer(&p.peer, true, true, Err(f)),
            PendingKind::PopChangeInvisible => self.on_pop_answer(&p.peer, false, true, Err(f)),
            PendingKind::PopRenew => self.on_pop_answer(&p.peer, false, false, Err(f)),
            PendingKind::PopBatchAck { acks } => self.on_batch_ack_answer(&p.peer, acks, Err(f)),
            PendingKind::PopDeadLetter(d) => self.on_pop_dead_letter(*d, &p.peer, Err(f)),
        }
    }

    /// Report an error answer to `request`.
    pub(super) fn emit_broker_error(
        &mut self,
        peer: PeerAddr,
        request: impl Into<Code<RequestCode>>,
        cmd: &RemotingCommand,
    ) {
        let (request, code) = (request.into(), Code::from_i32(cmd.code));
        self.emit(Event::BrokerError { peer, request, code, remark: cmd.remark_str().to_owned() });
    }

    /// Report a frame from `peer` whose header or body did not read.
    pub(super) fn emit_malformed(
        &mut self,
        peer: PeerAddr,
        request: impl Into<Code<RequestCode>>,
        error: impl Into<MalformedFrame>,
    ) {
        self.emit(Event::Malformed { peer, request: request.into(), error: error.into() });
    }

    /// A request timed out. If nothing at all came from its peer since it was sent, the link is
    /// taken for dead and closed (as Java's `clientCloseSocketIfTimeout`): everything else in
    /// flight on it fails now and is retried on a fresh connection, instead of each waiting for
    /// its own timeout on a link that will never answer.
    pub(super) fn on_request_timeout(&mut self, opaque: i32) {
        let Some(p) = self.pending.remove(&opaque) else { return };
        let heard = self.peers.get(&p.peer).and_then(|s| s.last_heard);
        let silent = heard.is_none_or(|h| h < p.sent);
        let (peer, request, silent_for) = (p.peer.clone(), p.code, self.now - heard.unwrap_or(p.sent));
        self.on_failure(p, Failure::Timeout);
        if silent {
            self.emit(Event::ConnectionLost {
                peer: peer.clone(),
                reason: DisconnectReason::Unresponsive { request, silent_for },
            });
            self.outputs.push_back(Output::Disconnect { peer });
        }
    }

    /// Something came from `peer`: its link is alive.
    pub(super) fn heard_from(&mut self, peer: &PeerAddr) {
        let now = self.now;
        self.peer(peer).last_heard = Some(now);
    }

    /// The connection to `peer` is gone: every request in flight to it fails now (in opaque
    /// order, for determinism) and the broker forgets our registration.
    pub(super) fn on_disconnected(&mut self, peer: &PeerAddr) {
        self.mark_unregistered(peer);
        // Before the failures below: the updates they send again must see the maps unknown.
        self.forget_offset_maps(peer);
        if let Some(p) = self.peers.get_mut(peer) {
            p.heartbeat_in_flight = false;
        }
        let mut gone: Vec<i32> =
            self.pending.iter().filter(|(_, p)| &p.peer == peer).map(|(o, _)| *o).collect();
        gone.sort_unstable();
        for opaque in gone {
            self.timers.stop(Timer::Request(opaque));
            if let Some(p) = self.pending.remove(&opaque) {
                self.on_failure(p, Failure::Disconnected);
            }
        }
        self.locks_in_doubt(peer);
        // Anything parked for this peer failed with the heartbeat (see `fail_parked`) and retries
        // on its own schedule: never an immediate reconnect loop.
    }

    /// The registration heartbeat failed: everything parked behind it fails too, and each request
    /// kind retries with its own back-off (a pull after 1 s, an offset query after 1 s, a
    /// send-back falls back to the retry topic, …).
    pub(super) fn fail_parked(&mut self, peer: &PeerAddr) {
        let parked = std::mem::take(&mut self.peer(peer).deferred);
        for d in parked {
            match d {
                Deferred::Pull(key) => self.retry_pull_later(key, self.cfg.pull_time_delay_when_exception),
                Deferred::Persist { key, shutdown } => self.persist_failed(key, shutdown),
                Deferred::Request { request, kind, .. } => {
                    let p = Pending { peer: peer.clone(), code: request.code(), kind, sent: self.now };
                    self.on_failure(p, Failure::Disconnected);
                }
            }
        }
    }
}

/// A refusal for want of permission: NO_PERMISSION (5.x ACL 2.0), or 4.9.x's ACL 1.0, whose
/// AclException reaches the client as SYSTEM_ERROR with the exception in the remark.
pub(super) fn is_permission_refusal(cmd: &RemotingCommand) -> bool {
    match ResponseCode::from_i32(cmd.code) {
        Some(ResponseCode::NoPermission) => true,
        Some(ResponseCode::SystemError) => cmd.remark_str().contains("AclException"),
        _ => false,
    }
}
