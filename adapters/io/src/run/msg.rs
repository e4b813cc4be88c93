//! The owner task's inbox: what the other tasks and the application tell it.

use async_channel::Sender;
use bytes::Bytes;
use rocketmq_push_core::{BatchId, Command, ConsumeResult, LinkId};

use super::direct::Direct;

/// A finished listener call: the batch, its result, and why it failed (a panic or an `Err`,
/// turned into RECONSUME_LATER).
pub(super) type Finished = (BatchId, ConsumeResult, Option<String>);

/// A listener call started: the batch, and when.
pub(super) type Started = (BatchId, std::time::Instant);

/// What a running consumer holds and has counted, at one moment.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Snapshot {
    /// Counters since start.
    pub stats: rocketmq_push_core::Stats,
    /// Every held queue: offsets, cache, broker max offset and lag, lock state.
    pub queues: Vec<rocketmq_push_core::QueueSnapshot>,
    /// Rates per subscribed topic over the last minute (as `mqadmin consumerStatus` shows them).
    pub topics: Vec<rocketmq_push_core::TopicStats>,
}

/// Everything the owner task hears about.
pub(crate) enum Msg {
    Connected {
        link: LinkId,
        writer: LinkWriter,
    },
    ConnectFailed {
        link: LinkId,
        error: std::io::Error,
    },
    Received {
        link: LinkId,
        bytes: Bytes,
    },
    Closed {
        link: LinkId,
        error: Option<std::io::Error>,
    },
    Consumed {
        batch: BatchId,
        result: ConsumeResult,
        failed: Option<String>,
    },
    Command(Command),
    /// A command whose refusal goes back to the application (a seek's bad target).
    Checked(Command, Sender<Result<(), rocketmq_push_core::UsageError>>),
    /// The application asks what the consumer holds and has counted.
    Snapshot(Sender<Snapshot>),
    /// Not sent: the owner's own note that a listener call can go on.
    ListenersReady,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connected { link, .. } => write!(f, "Connected({link})"),
            Self::ConnectFailed { link, error } => write!(f, "ConnectFailed({link}, {error})"),
            Self::Received { link, bytes } => write!(f, "Received({link}, {} bytes)", bytes.len()),
            Self::Closed { link, error } => write!(f, "Closed({link}, {error:?})"),
            Self::Consumed { batch, result, .. } => write!(f, "Consumed({batch}, {:?})", result.status),
            Self::Command(c) | Self::Checked(c, _) => write!(f, "Command({c:?})"),
            Self::Snapshot(_) => f.write_str("Snapshot"),
            Self::ListenersReady => f.write_str("ListenersReady"),
        }
    }
}

/// The owner's end of a connected link. Dropping it closes the connection: the writer finishes
/// what is queued, closes the socket, and the reader stops.
pub(crate) struct LinkWriter {
    writes: Sender<Bytes>,
    /// Writes the owner makes itself, where the runtime gives it the socket (not with TLS).
    direct: Option<Direct>,
    // Never sent on: closing it (by dropping it) is the reader's stop signal.
    _stop: Sender<()>,
}

/// Writes queued on one link at most (each one or more whole frames): a peer that stops reading
/// gets its link closed rather than our memory filled.
pub(crate) const MAX_QUEUED_WRITES: usize = 16_384;

impl LinkWriter {
    pub(super) fn new(writes: Sender<Bytes>, direct: Option<Direct>, stop: Sender<()>) -> Self {
        Self { writes, direct, _stop: stop }
    }

    /// Write `bytes`: what the socket takes at once now, the rest queued for the writer task;
    /// false when the peer has not taken what was queued before.
    pub(crate) fn write(&self, mut bytes: Bytes) -> bool {
        if let Some(d) = &self.direct {
            let taken = d.send(&bytes);
            if taken == bytes.len() {
                return true;
            }
            let _ = bytes.split_to(taken);
        }
        if self.writes.len() >= MAX_QUEUED_WRITES {
            return false;
        }
        if let Some(d) = &self.direct {
            d.queue();
        }
        // Fails only once the writer task has ended, which reports the close itself.
        let _ = self.writes.try_send(bytes);
        true
    }
}
