//! Answers to popped messages: acks, one by one or batched, and changes of invisibility.
//!
//! An ack does not go as its result arrives: it waits in `pop_acks` until the adapter next
//! polls outputs (or [`MAX_QUEUED_ACKS`] wait), then each broker gets one request — a
//! BATCH_ACK_MESSAGE with one entry per checkpoint when two or more wait for it, a plain
//! ACK_MESSAGE for one. So the results an adapter feeds in one wake-up share a request under
//! load, and an idle consumer still acks at once; no timer delays anything. A broker that
//! answers BATCH_ACK with REQUEST_CODE_NOT_SUPPORTED gets single acks from then on, that
//! batch's included. Java's push consumer acks one by one; its proxy batches like this.
//!
//! Neither is retried: a lost ack or change means the message comes back after its invisible
//! time, which POP promises anyway.

use std::time::Duration;

use super::Consumer;
use super::requests::{Failure, PendingKind};
use crate::event::{PeerAddr, Request};
use crate::protocol::body::{BatchAck, BatchAckMessageRequestBody};
use crate::protocol::header::{AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader};
use crate::protocol::receipt::{PopReceipt, RetryFlag};
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode};

/// ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME time out after this (Java's
/// `ASYNC_TIMEOUT`).
const POP_RPC_TIMEOUT: Duration = Duration::from_secs(3);

/// Acks waiting for a poll are sent at once when this many collect (bounds the buffer of an
/// adapter that feeds results without polling).
pub(super) const MAX_QUEUED_ACKS: usize = 1024;

/// One success waiting to be acked: the subscribed topic (wire name) and the receipt.
pub(super) type QueuedAck = (String, PopReceipt);

impl Consumer {
    /// Queue the ack of one popped message.
    pub(super) fn ack(&mut self, topic: &str, r: &PopReceipt) {
        self.pop_acks.push((topic.to_owned(), r.clone()));
        if self.pop_acks.len() >= MAX_QUEUED_ACKS {
            self.flush_pop_acks();
        }
    }

    /// Send every queued ack: one request per broker, in the order the brokers first appear.
    pub(super) fn flush_pop_acks(&mut self) {
        let mut acks = std::mem::take(&mut self.pop_acks);
        while let Some((_, first)) = acks.first() {
            let broker = first.broker_name.clone();
            let (mine, rest) = acks.into_iter().partition(|(_, r)| r.broker_name == broker);
            acks = rest;
            self.ack_on_broker(&broker, mine);
        }
    }

    fn ack_on_broker(&mut self, broker: &str, acks: Vec<QueuedAck>) {
        let Some(peer) = self.master_addr(broker) else {
            self.stats.pop_request_failures += acks.len() as u64;
            return;
        };
        if acks.len() == 1 || self.no_batch_ack.contains(&peer) {
            for (topic, r) in &acks {
                self.ack_one(&peer, topic, r);
            }
            return;
        }
        let mut body = BatchAckMessageRequestBody { broker_name: broker.to_owned(), acks: Vec::new() };
        let mut batched = Vec::with_capacity(acks.len());
        let mut alone = Vec::new();
        for (topic, r) in acks {
            // Earlier brokers compared the flag with "1" and would take a V2 retry topic for the
            // topic itself (5.3.3 maps it); those, and offsets a bitset cannot hold, go one by one.
            let fits = r.retry != RetryFlag::RetryV2
                && match body.acks.iter_mut().find(|a| a.same_checkpoint(&topic, &r)) {
                    Some(entry) => entry.set(r.queue_offset),
                    None => {
                        let mut entry = BatchAck::for_checkpoint(&self.group, &topic, &r);
                        let set = entry.set(r.queue_offset);
                        if set {
                            body.acks.push(entry);
                        }
                        set
                    }
                };
            if fits { batched.push((topic, r)) } else { alone.push((topic, r)) }
        }
        if batched.len() == 1 {
            alone.append(&mut batched);
        } else if !batched.is_empty() {
            self.pop_requests_out += 1;
            let kind = PendingKind::PopBatchAck { acks: batched };
            self.send_to_broker(peer.clone(), Request::BatchAckMessage(body), kind, POP_RPC_TIMEOUT);
        }
        for (topic, r) in &alone {
            self.ack_one(&peer, topic, r);
        }
    }

    fn ack_one(&mut self, peer: &PeerAddr, topic: &str, r: &PopReceipt) {
        let header = AckMessageRequestHeader {
            consumer_group: self.group.clone(),
            topic: r.retry.real_topic(topic, &self.group),
            queue_id: r.queue_id,
            extra_info: r.to_string(),
            offset: r.queue_offset,
            bname: Some(r.broker_name.clone()),
        };
        self.pop_requests_out += 1;
        let request = Request::AckMessage(header);
        self.send_to_broker(peer.clone(), request, PendingKind::PopAck, POP_RPC_TIMEOUT);
    }

    /// Make one popped message visible again `after` from now.
    pub(super) fn change_invisible_time(&mut self, topic: &str, r: &PopReceipt, after: Duration) {
        self.send_change_invisible(topic, r, after, PendingKind::PopChangeInvisible);
    }

    /// CHANGE_MESSAGE_INVISIBLETIME, answered as `kind`.
    pub(super) fn send_change_invisible(
        &mut self,
        topic: &str,
        r: &PopReceipt,
        after: Duration,
        kind: PendingKind,
    ) {
        let Some(peer) = self.master_addr(&r.broker_name) else {
            self.stats.pop_request_failures += 1;
            return;
        };
        let header = ChangeInvisibleTimeRequestHeader {
            consumer_group: self.group.clone(),
            topic: r.retry.real_topic(topic, &self.group),
            queue_id: r.queue_id,
            extra_info: r.to_string(),
            offset: r.queue_offset,
            invisible_time: after.as_millis() as i64,
            bname: Some(r.broker_name.clone()),
        };
        self.pop_requests_out += 1;
        let request = Request::ChangeInvisibleTime(header);
        self.send_to_broker(peer, request, kind, POP_RPC_TIMEOUT);
    }

    /// An ack or change of invisibility answered (or failed). Failures are counted and
    /// reported, not retried; a successful change counts as a retry unless `counted` is false
    /// (a renewal).
    pub(super) fn on_pop_answer(
        &mut self,
        peer: &PeerAddr,
        ack: bool,
        counted: bool,
        result: Result<RemotingCommand, Failure>,
    ) {
        self.pop_requests_out = self.pop_requests_out.saturating_sub(1);
        match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => {
                if ack {
                    self.stats.pop_acks += 1;
                } else if counted {
                    self.stats.pop_retries += 1;
                }
            }
            Ok(cmd) => {
                self.stats.pop_request_failures += 1;
                let code =
                    if ack { RequestCode::AckMessage } else { RequestCode::ChangeMessageInvisibleTime };
                self.emit_broker_error(peer.clone(), code, &cmd);
            }
            Err(_) => self.stats.pop_request_failures += 1,
        }
    }

    /// A BATCH_ACK answered (or failed). A broker that does not know the request gets the
    /// same acks one by one, now and from then on.
    pub(super) fn on_batch_ack_answer(
        &mut self,
        peer: &PeerAddr,
        acks: Vec<QueuedAck>,
        result: Result<RemotingCommand, Failure>,
    ) {
        self.pop_requests_out = self.pop_requests_out.saturating_sub(1);
        let n = acks.len() as u64;
        match result {
            Ok(cmd) if cmd.code == ResponseCode::Success as i32 => {
                self.stats.pop_acks += n;
                self.stats.pop_batch_acks += 1;
            }
            Ok(cmd) if cmd.code == ResponseCode::RequestCodeNotSupported as i32 => {
                self.no_batch_ack.insert(peer.clone());
                for (topic, r) in &acks {
                    self.ack_one(peer, topic, r);
                }
            }
            Ok(cmd) => {
                self.stats.pop_request_failures += n;
                self.emit_broker_error(peer.clone(), RequestCode::BatchAckMessage, &cmd);
            }
            Err(_) => self.stats.pop_request_failures += n,
        }
    }
}
