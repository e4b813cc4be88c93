//! What goes in and out of the [`Consumer`](crate::Consumer): inputs, actions, events.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::codec::DecodeError;
use crate::message::{MessageDecodeError, MessageExt, MessageQueue};
use crate::protocol::body::{
    BatchAckMessageRequestBody, HeartbeatData, JsonBody, LockBatchRequestBody, QueryAssignmentRequestBody,
};
use crate::protocol::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader, PopMessageRequestHeader, PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader, SearchOffsetRequestHeader, SendMessageRequestHeaderV2,
    UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use crate::protocol::{
    BodyError, CLIENT_VERSION, Code, FLAG_ONEWAY, HeaderError, LanguageCode, RemotingCommand, RequestCode,
    ResponseCode, SerializeType,
};

/// A peer address, `host:port`: a name server or a broker. Adapters connect to it lazily.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerAddr(Arc<str>);

impl PeerAddr {
    /// The address.
    pub fn new(addr: impl Into<Arc<str>>) -> Self {
        Self(addr.into())
    }

    /// As text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for PeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for PeerAddr {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

/// Identifies one [`Batch`] handed to user code; answer it with [`Input::Consumed`].
///
/// The low [`UNIT_BITS`](Self::UNIT_BITS) bits number the batches of one [`Run`]: batch `u`
/// of the run whose first batch is `r` is `r.unit(u)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BatchId(pub u64);

impl BatchId {
    /// Bits of an id that number the batches of one run (so a run holds at most 64).
    pub const UNIT_BITS: u32 = 6;
    const UNIT_MASK: u64 = (1 << Self::UNIT_BITS) - 1;

    /// Batch `u` of the run this id is the first batch of.
    pub fn unit(self, u: usize) -> Self {
        Self(self.0 | (u as u64 & Self::UNIT_MASK))
    }

    /// The run's first batch, and this batch's index in the run.
    pub fn split(self) -> (Self, usize) {
        (Self(self.0 & !Self::UNIT_MASK), (self.0 & Self::UNIT_MASK) as usize)
    }
}

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "batch#{}", self.0)
    }
}

/// Everything the core reacts to.
#[derive(Debug)]
#[non_exhaustive]
pub enum Input {
    /// A decoded frame from a peer: a response to one of our requests, or a request the broker sends.
    Frame {
        /// Where it came from.
        peer: PeerAddr,
        /// The frame.
        command: RemotingCommand,
    },
    /// A connection to `peer` is gone (or never came up). Requests in flight to it fail now.
    Disconnected {
        /// The peer.
        peer: PeerAddr,
        /// Why.
        reason: DisconnectReason,
    },
    /// User code started on a batch handed out with [`Output::Consume`] or in an
    /// [`Output::ConsumeRun`] (only where the adapter queues batches itself:
    /// [`Consumer::report_starts`](crate::consumer::Consumer::report_starts)).
    Started {
        /// The batch.
        batch: BatchId,
        /// When its listener call began (its consume timeout counts from then).
        at: Instant,
    },
    /// User code finished a batch handed out with [`Output::Consume`] or in an
    /// [`Output::ConsumeRun`].
    Consumed {
        /// The batch.
        batch: BatchId,
        /// Its outcome.
        result: ConsumeResult,
    },
    /// A command from the application.
    Command(Command),
}

/// Why a connection ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// The peer closed it (end of stream).
    Closed,
    /// The peer closed it without ever answering: what a TLS-only port (Java's
    /// `tls.server.mode=enforcing`) does to a plain client. Reconnects back off as after a
    /// failed connect.
    ClosedUnanswered,
    /// Reading or writing failed (reset, broken pipe, …).
    Io(IoFailure),
    /// It could not be opened.
    ConnectFailed(IoFailure),
    /// Not attempted: the last connect to this peer failed and its back-off has not passed.
    BackingOff,
    /// Bytes from the peer did not decode; the link was closed.
    Decode(DecodeError),
    /// A request timed out and nothing at all came from the peer since it was sent: the link
    /// is taken for dead (a silent broker, a black-holed network) and opened afresh.
    Unresponsive {
        /// The request that timed out.
        request: Code<RequestCode>,
        /// How long the peer had been silent.
        silent_for: std::time::Duration,
    },
    /// The peer stopped in the middle of a frame and sent nothing more for too long.
    Stalled {
        /// Bytes of the unfinished frame held.
        buffered: usize,
        /// How long since the last byte.
        silent_for: std::time::Duration,
    },
    /// The core asked for it ([`Output::Disconnect`]).
    Requested,
}

impl fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("closed by the peer"),
            Self::ClosedUnanswered => {
                f.write_str("closed by the peer before it answered anything (a TLS-only port? enable TLS)")
            }
            Self::Io(e) => write!(f, "i/o error: {e}"),
            Self::ConnectFailed(e) => write!(f, "connect failed: {e}"),
            Self::BackingOff => f.write_str("not connecting: backing off after a failed connect"),
            Self::Decode(e) => write!(f, "undecodable bytes: {e}"),
            Self::Unresponsive { request, silent_for } => {
                write!(f, "unresponsive: {request} timed out, nothing received for {silent_for:?}")
            }
            Self::Stalled { buffered, silent_for } => {
                write!(f, "stalled in a frame: {buffered} bytes held, nothing more for {silent_for:?}")
            }
            Self::Requested => f.write_str("closed on request"),
        }
    }
}

/// An I/O failure as an adapter saw it: its kind and the system's message. (The core does no
/// I/O; this is how a socket error reaches its events.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoFailure {
    /// The kind (`ConnectionRefused`, `TimedOut`, `ConnectionReset`, …).
    pub kind: std::io::ErrorKind,
    /// The error's message.
    pub message: String,
}

impl IoFailure {
    /// A failure of `kind` with `message`.
    pub fn new(kind: std::io::ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

impl From<&std::io::Error> for IoFailure {
    fn from(e: &std::io::Error) -> Self {
        Self { kind: e.kind(), message: e.to_string() }
    }
}

impl fmt::Display for IoFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Application commands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Command {
    /// Stop pulling until [`Command::Resume`] (in-flight batches finish normally).
    Suspend,
    /// Resume pulling.
    Resume,
    /// Add or replace a TAG subscription.
    Subscribe {
        /// Topic.
        topic: String,
        /// Expression.
        expression: String,
    },
    /// Drop a subscription: its queues are persisted and released.
    Unsubscribe {
        /// Topic.
        topic: String,
    },
    /// Stop pulling the selected queues until a [`Command::ResumeQueues`] with the same
    /// selector: the answer to a pull already out is set aside (its messages are pulled again on
    /// resume), so nothing pulled after this command reaches a listener. What was pulled before
    /// is still consumed — batches with user code or waiting for a listener slot, an orderly
    /// queue's cache — and orderly locks are kept. Queues assigned later are paused too. A topic
    /// not subscribed is refused. Java's push consumer can only suspend everything; its lite
    /// pull consumer pauses queues (`pause(Collection<MessageQueue>)`).
    PauseQueues(QueueSelector),
    /// Undo the [`Command::PauseQueues`] with this selector. A queue pulls again when no pause
    /// selects it (pausing a topic and one of its queues takes both resumes for that queue).
    ResumeQueues(QueueSelector),
    /// Move the group's position in the selected held queues, as `mqadmin resetOffsetByTime`
    /// does for a running Java consumer: what is cached or waiting for a listener is dropped,
    /// results of batches with user code are discarded, the new offset is committed, and pulling
    /// goes on from there ([`Event::Seeked`] per queue). First, last and a timestamp are looked
    /// up on the queue's broker ([`Event::SeekFailed`] if that fails; nothing moves). A queue
    /// still looking up its start offset (or waiting for its orderly lock) starts at the target.
    /// Refused before anything moves: a topic not subscribed, a queue not held, a negative offset
    /// or timestamp, a timestamp in the future, an offset outside the queue's range as the last
    /// pull answer gave it. Only this client's queues move; the group's other members keep
    /// theirs (a broker-side reset, `rmqcat group reset`, moves them all).
    Seek {
        /// The queues (held now) to move.
        queues: QueueSelector,
        /// Where to.
        to: SeekTo,
    },
    /// Graceful shutdown: stop pulling, wait for in-flight batches (up to
    /// `awaitTerminationMillisWhenShutdown`), persist offsets, unregister, then `Event::Terminated`.
    Shutdown,
}

/// The queues a [`Command::PauseQueues`] or [`Command::ResumeQueues`] is about, named as the
/// application names them (without the namespace).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueueSelector {
    /// Every queue of a topic.
    Topic(String),
    /// One queue.
    Queue(MessageQueue),
}

impl QueueSelector {
    /// True if `queue` (without the namespace) is selected.
    pub fn matches(&self, queue: &MessageQueue) -> bool {
        match self {
            Self::Topic(t) => *queue.topic == **t,
            Self::Queue(q) => q == queue,
        }
    }
}

/// Where a [`Command::Seek`] moves a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SeekTo {
    /// The queue's min offset on its broker (the oldest message still stored).
    First,
    /// The queue's max offset: only what arrives from now on.
    Last,
    /// This queue offset (within the queue's range).
    Offset(i64),
    /// The first message stored at or after this time, in milliseconds since the epoch (the
    /// broker's SEARCH_OFFSET_BY_TIMESTAMP; a 4.9 broker may answer the nearest message, one
    /// earlier).
    Timestamp(i64),
}

/// What a listener returns (`ConsumeConcurrentlyStatus` / `ConsumeOrderlyStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConsumeStatus {
    /// `CONSUME_SUCCESS` / orderly `SUCCESS`.
    Success,
    /// `RECONSUME_LATER`: send the batch (from `ack_index + 1`) back for a later retry.
    ReconsumeLater,
    /// Orderly `SUSPEND_CURRENT_QUEUE_A_MOMENT`: retry this batch after a pause, in order.
    SuspendCurrentQueueAMoment,
}

/// A listener's answer for one batch, with the context fields Java lets it set. Built from a
/// status, [`ConsumeContext::result`], or the `with_…` methods (more fields may come).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumeResult {
    /// The status.
    pub status: ConsumeStatus,
    /// `ConsumeConcurrentlyContext.ackIndex`: with `Success`, messages after this index failed.
    /// `None` = all succeeded.
    pub ack_index: Option<usize>,
    /// `delayLevelWhenNextConsume`: 0 = broker chooses (3 + reconsume times), −1 = dead-letter now.
    pub delay_level: i32,
    /// Orderly `suspendCurrentQueueTimeMillis` override.
    pub suspend_millis: Option<u64>,
}

impl ConsumeResult {
    /// Everything succeeded.
    pub const SUCCESS: Self =
        Self { status: ConsumeStatus::Success, ack_index: None, delay_level: 0, suspend_millis: None };
    /// Retry the whole batch later.
    pub const LATER: Self =
        Self { status: ConsumeStatus::ReconsumeLater, ack_index: None, delay_level: 0, suspend_millis: None };

    /// From a bare status.
    pub fn from_status(status: ConsumeStatus) -> Self {
        Self { status, ..Self::SUCCESS }
    }

    /// With `ackIndex` set: with `Success`, the messages after `index` failed.
    #[must_use]
    pub fn with_ack_index(self, index: usize) -> Self {
        Self { ack_index: Some(index), ..self }
    }

    /// With `delayLevelWhenNextConsume` set (−1: dead-letter at once).
    #[must_use]
    pub fn with_delay_level(self, level: i32) -> Self {
        Self { delay_level: level, ..self }
    }

    /// With the orderly `suspendCurrentQueueTimeMillis` set.
    #[must_use]
    pub fn with_suspend_millis(self, millis: u64) -> Self {
        Self { suspend_millis: Some(millis), ..self }
    }
}

impl From<ConsumeStatus> for ConsumeResult {
    fn from(status: ConsumeStatus) -> Self {
        Self::from_status(status)
    }
}

/// What a listener knows besides the messages, and may set (Java's
/// `ConsumeConcurrentlyContext` / `ConsumeOrderlyContext`). More fields may come.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumeContext {
    /// The queue the batch came from (shared with the consumer: a listener call costs one
    /// reference count, not a copy of its names).
    pub queue: Arc<MessageQueue>,
    /// Concurrent, orderly or direct.
    pub kind: BatchKind,
    /// `ackIndex`: with `Success`, messages after this index failed (`None` = all succeeded).
    pub ack_index: Option<usize>,
    /// `delayLevelWhenNextConsume`: 0 = the broker's schedule, −1 = dead-letter at once.
    pub delay_level: i32,
    /// Orderly `suspendCurrentQueueTimeMillis` for this batch.
    pub suspend_millis: Option<u64>,
}

impl ConsumeContext {
    /// A fresh context for a batch of `kind` from `queue` (to test a listener, for one).
    pub fn new(queue: impl Into<Arc<MessageQueue>>, kind: BatchKind) -> Self {
        Self { queue: queue.into(), kind, ack_index: None, delay_level: 0, suspend_millis: None }
    }

    /// A fresh context for `batch`.
    pub fn for_batch(batch: &Batch) -> Self {
        Self::new(batch.queue.clone(), batch.kind)
    }

    /// The result to hand back: `status` plus what the listener set here.
    pub fn result(&self, status: ConsumeStatus) -> ConsumeResult {
        ConsumeResult {
            status,
            ack_index: self.ack_index,
            delay_level: self.delay_level,
            suspend_millis: self.suspend_millis,
        }
    }
}

/// Why a batch is being delivered. More kinds may come (POP): match with a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatchKind {
    /// Normal concurrent consumption.
    Concurrent,
    /// Orderly consumption: the next batch of this queue waits for this one.
    Orderly,
    /// CONSUME_MESSAGE_DIRECTLY from an admin tool: offsets are not touched.
    Direct,
}

/// The messages of a batch: a range of the pull they arrived in, shared rather than copied.
/// Derefs to `[MessageExt]`.
#[derive(Clone)]
pub struct Messages {
    chunk: Arc<Vec<MessageExt>>,
    start: u32,
    end: u32,
}

impl Messages {
    /// `chunk[start..end]`; out-of-range bounds are clamped.
    pub fn new(chunk: Arc<Vec<MessageExt>>, start: usize, end: usize) -> Self {
        let end = end.min(chunk.len());
        let start = start.min(end);
        Self { chunk, start: start as u32, end: end as u32 }
    }

    /// Messages of their own (a direct consume, a test).
    pub fn from_vec(v: Vec<MessageExt>) -> Self {
        let n = v.len();
        Self::new(Arc::new(v), 0, n)
    }
}

impl std::ops::Deref for Messages {
    type Target = [MessageExt];
    fn deref(&self) -> &[MessageExt] {
        &self.chunk[self.start as usize..self.end as usize]
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a MessageExt;
    type IntoIter = std::slice::Iter<'a, MessageExt>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Debug for Messages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<MessageExt>> for Messages {
    fn from(v: Vec<MessageExt>) -> Self {
        Self::from_vec(v)
    }
}

/// Messages to run through user code.
#[derive(Clone, Debug)]
pub struct Batch {
    /// Answer with this id.
    pub id: BatchId,
    /// The queue the messages came from (shared with the consumer).
    pub queue: Arc<MessageQueue>,
    /// The messages, in offset order. Retry messages carry their original topic.
    pub messages: Messages,
    /// Concurrent, orderly or direct.
    pub kind: BatchKind,
}

/// Consecutive batches of one queue handed out at once, where the adapter queues batches itself
/// ([`Consumer::report_starts`](crate::consumer::Consumer::report_starts)): one pull's ready
/// messages in listener calls of `consumeMessageBatchMaxSize`. Each batch is what a lone
/// [`Batch`] is — one listener call, started, answered, timed out and withdrawn on its own —
/// and [`batches`](Self::batches) makes them; handing them over together only saves the
/// per-batch hand-off.
#[derive(Clone, Debug)]
pub struct Run {
    pub(crate) first: BatchId,
    pub(crate) queue: Arc<MessageQueue>,
    pub(crate) messages: Messages,
    /// Messages per batch (the last may have fewer).
    pub(crate) unit: u32,
}

impl Run {
    /// How many batches.
    pub fn len(&self) -> usize {
        self.messages.len().div_ceil(self.unit.max(1) as usize)
    }

    /// Never true: a run holds a batch at least.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The queue the messages came from.
    pub fn queue(&self) -> &Arc<MessageQueue> {
        &self.queue
    }

    /// Every message of the run, in offset order.
    pub fn messages(&self) -> &[MessageExt] {
        &self.messages
    }

    /// The batches, in order (concurrent ones; ids `first.unit(0)`, `first.unit(1)`, …).
    pub fn batches(self) -> impl Iterator<Item = Batch> {
        let unit = self.unit.max(1);
        let n = self.len();
        let Self { first, queue, messages, .. } = self;
        (0..n).map(move |u| {
            let start = messages.start + u as u32 * unit;
            let end = start.saturating_add(unit).min(messages.end);
            Batch {
                id: first.unit(u),
                queue: queue.clone(),
                messages: Messages { chunk: messages.chunk.clone(), start, end },
                kind: BatchKind::Concurrent,
            }
        })
    }
}

/// What the adapter should do next.
#[derive(Debug)]
#[must_use]
#[non_exhaustive]
pub enum Output {
    /// Send a request to `peer` (connect first if needed). Boxed: requests are far larger than
    /// the other actions, and a batch dispatch should not move a request's worth of bytes.
    Transmit(Box<Transmit>),
    /// Run user code on a batch, then answer with [`Input::Consumed`].
    Consume(Batch),
    /// Run user code on each batch of a run, and answer each (only where the adapter reports
    /// starts: an adapter that calls
    /// [`Consumer::report_starts`](crate::consumer::Consumer::report_starts) must handle this
    /// output, or the run's messages are never consumed).
    ConsumeRun(Run),
    /// Do not start this batch after all (its queue was released, or the consumer is shutting
    /// down): drop it if it has not started. Only where the adapter reports starts; a result
    /// that still comes is ignored.
    Withdraw(BatchId),
    /// Close the connection to `peer`.
    Disconnect {
        /// The peer.
        peer: PeerAddr,
    },
    /// Broadcasting mode: store these local offsets (atomically); give them back with
    /// [`Consumer::restore_local_offsets`](crate::Consumer::restore_local_offsets) at the next start.
    PersistLocalOffsets(Vec<(MessageQueue, i64)>),
    /// Something the application may want to know or log.
    Event(Event),
}

/// A request for the adapter to write.
#[derive(Clone, Debug)]
pub struct Transmit {
    /// Destination.
    pub peer: PeerAddr,
    /// The request id (`opaque`); 0 for replies, which carry their own.
    pub opaque: i32,
    /// No response expected.
    pub oneway: bool,
    /// Header encoding.
    pub serialize_type: SerializeType,
    /// What to send.
    pub request: Request,
}

/// The typed requests the consumer sends.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Request {
    /// GET_ROUTEINFO_BY_TOPIC.
    GetRouteInfo(GetRouteInfoRequestHeader),
    /// HEART_BEAT.
    HeartBeat(Arc<HeartbeatData>),
    /// UNREGISTER_CLIENT.
    UnregisterClient(UnregisterClientRequestHeader),
    /// GET_CONSUMER_LIST_BY_GROUP.
    GetConsumerList(GetConsumerListByGroupRequestHeader),
    /// QUERY_CONSUMER_OFFSET.
    QueryConsumerOffset(QueryConsumerOffsetRequestHeader),
    /// UPDATE_CONSUMER_OFFSET.
    UpdateConsumerOffset(UpdateConsumerOffsetRequestHeader),
    /// GET_MAX_OFFSET.
    GetMaxOffset(GetMaxOffsetRequestHeader),
    /// GET_MIN_OFFSET.
    GetMinOffset(GetMinOffsetRequestHeader),
    /// SEARCH_OFFSET_BY_TIMESTAMP.
    SearchOffset(SearchOffsetRequestHeader),
    /// PULL_MESSAGE.
    PullMessage(PullMessageRequestHeader),
    /// CONSUMER_SEND_MSG_BACK.
    SendMsgBack(ConsumerSendMsgBackRequestHeader),
    /// SEND_MESSAGE_V2: the send-back fallback.
    SendMessage {
        /// Header.
        header: SendMessageRequestHeaderV2,
        /// Body.
        body: Bytes,
    },
    /// LOCK_BATCH_MQ.
    LockBatchMq(LockBatchRequestBody),
    /// UNLOCK_BATCH_MQ.
    UnlockBatchMq(LockBatchRequestBody),
    /// QUERY_ASSIGNMENT (5.x): the broker's assignment and mode (PULL or POP) of a topic.
    QueryAssignment(QueryAssignmentRequestBody),
    /// POP_MESSAGE (5.x).
    PopMessage(PopMessageRequestHeader),
    /// ACK_MESSAGE (5.x).
    AckMessage(AckMessageRequestHeader),
    /// CHANGE_MESSAGE_INVISIBLETIME (5.x).
    ChangeInvisibleTime(ChangeInvisibleTimeRequestHeader),
    /// BATCH_ACK_MESSAGE (5.x): acks of many popped messages in one request.
    BatchAckMessage(BatchAckMessageRequestBody),
    /// An answer to a broker-initiated request (opaque and flags already set).
    Reply(RemotingCommand),
}

impl Request {
    /// The request code.
    pub fn code(&self) -> Code<RequestCode> {
        let c = match self {
            Self::GetRouteInfo(_) => RequestCode::GetRouteInfoByTopic,
            Self::HeartBeat(_) => RequestCode::HeartBeat,
            Self::UnregisterClient(_) => RequestCode::UnregisterClient,
            Self::GetConsumerList(_) => RequestCode::GetConsumerListByGroup,
            Self::QueryConsumerOffset(_) => RequestCode::QueryConsumerOffset,
            Self::UpdateConsumerOffset(_) => RequestCode::UpdateConsumerOffset,
            Self::GetMaxOffset(_) => RequestCode::GetMaxOffset,
            Self::GetMinOffset(_) => RequestCode::GetMinOffset,
            Self::SearchOffset(_) => RequestCode::SearchOffsetByTimestamp,
            Self::PullMessage(_) => RequestCode::PullMessage,
            Self::SendMsgBack(_) => RequestCode::ConsumerSendMsgBack,
            Self::SendMessage { .. } => RequestCode::SendMessageV2,
            Self::LockBatchMq(_) => RequestCode::LockBatchMq,
            Self::UnlockBatchMq(_) => RequestCode::UnlockBatchMq,
            Self::QueryAssignment(_) => RequestCode::QueryAssignment,
            Self::PopMessage(_) => RequestCode::PopMessage,
            Self::AckMessage(_) => RequestCode::AckMessage,
            Self::ChangeInvisibleTime(_) => RequestCode::ChangeMessageInvisibleTime,
            Self::BatchAckMessage(_) => RequestCode::BatchAckMessage,
            Self::Reply(r) => return Code::from_i32(r.code),
        };
        Code::Known(c)
    }

    /// A short name for logs and transcripts, e.g. `PullMessage`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::GetRouteInfo(_) => "GetRouteInfoByTopic",
            Self::HeartBeat(_) => "HeartBeat",
            Self::UnregisterClient(_) => "UnregisterClient",
            Self::GetConsumerList(_) => "GetConsumerListByGroup",
            Self::QueryConsumerOffset(_) => "QueryConsumerOffset",
            Self::UpdateConsumerOffset(_) => "UpdateConsumerOffset",
            Self::GetMaxOffset(_) => "GetMaxOffset",
            Self::GetMinOffset(_) => "GetMinOffset",
            Self::SearchOffset(_) => "SearchOffsetByTimestamp",
            Self::PullMessage(_) => "PullMessage",
            Self::SendMsgBack(_) => "ConsumerSendMsgBack",
            Self::SendMessage { .. } => "SendMessageV2",
            Self::LockBatchMq(_) => "LockBatchMq",
            Self::UnlockBatchMq(_) => "UnlockBatchMq",
            Self::QueryAssignment(_) => "QueryAssignment",
            Self::PopMessage(_) => "PopMessage",
            Self::AckMessage(_) => "AckMessage",
            Self::ChangeInvisibleTime(_) => "ChangeMessageInvisibleTime",
            Self::BatchAckMessage(_) => "BatchAckMessage",
            Self::Reply(_) => "Reply",
        }
    }
}

impl Transmit {
    /// The frame to write.
    pub fn to_command(&self) -> RemotingCommand {
        let mut cmd = match &self.request {
            Request::Reply(r) => return r.clone(),
            Request::GetRouteInfo(h) => with(h),
            Request::HeartBeat(b) => bare().with_body(b.encode()),
            Request::UnregisterClient(h) => with(h),
            Request::GetConsumerList(h) => with(h),
            Request::QueryConsumerOffset(h) => with(h),
            Request::UpdateConsumerOffset(h) => with(h),
            Request::GetMaxOffset(h) => with(h),
            Request::GetMinOffset(h) => with(h),
            Request::SearchOffset(h) => with(h),
            Request::PullMessage(h) => with(h),
            Request::SendMsgBack(h) => with(h),
            Request::SendMessage { header, body } => with(header).with_body(body.clone()),
            Request::LockBatchMq(b) | Request::UnlockBatchMq(b) => bare().with_body(b.encode()),
            Request::QueryAssignment(b) => bare().with_body(b.encode()),
            Request::BatchAckMessage(b) => bare().with_body(b.encode()),
            Request::PopMessage(h) => with(h),
            Request::AckMessage(h) => with(h),
            Request::ChangeInvisibleTime(h) => with(h),
        };
        cmd.code = self.request.code().value();
        cmd.opaque = self.opaque;
        cmd.language = LanguageCode::RUST;
        cmd.version = CLIENT_VERSION;
        cmd.serialize_type = self.serialize_type;
        if self.oneway {
            cmd.flag |= FLAG_ONEWAY;
        }
        cmd
    }
}

fn bare() -> RemotingCommand {
    RemotingCommand::raw_request(0)
}

fn with<H: crate::protocol::CommandHeader>(h: &H) -> RemotingCommand {
    bare().with_header(h)
}

/// Things worth knowing; none needs an answer.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// Queues now consumed by this client.
    QueuesAssigned {
        /// Topic.
        topic: String,
        /// New queues.
        queues: Vec<MessageQueue>,
    },
    /// How the group reads a topic changed: an operator switched it between PULL and POP on the
    /// brokers (`mqadmin setConsumeMode`), seen at a rebalance. Only without `clientRebalance`.
    MessageRequestModeChanged {
        /// Topic.
        topic: String,
        /// The mode from now on.
        mode: crate::protocol::body::MessageRequestMode,
    },
    /// Queues no longer consumed by this client (offsets persisted first).
    QueuesRevoked {
        /// Topic.
        topic: String,
        /// Released queues.
        queues: Vec<MessageQueue>,
    },
    /// A broker or name server answered with an error code. A broker that refuses the client
    /// itself for want of permission (credentials it does not accept: an unknown key, a bad
    /// signature, an expired token) is reported once, until a heartbeat to it succeeds; what
    /// waits on it is tried again with the periodic heartbeat (30 s) and pulls every 30 s.
    BrokerError {
        /// The peer.
        peer: PeerAddr,
        /// The request answered.
        request: Code<RequestCode>,
        /// The response code.
        code: Code<ResponseCode>,
        /// The remark.
        remark: String,
    },
    /// A frame from a peer whose header or body could not be read: an answer (to `request`) or
    /// a request the peer sent (`request` is then its code). It is not used; what depended on
    /// it is retried like a failed request.
    Malformed {
        /// The peer.
        peer: PeerAddr,
        /// The request answered, or the peer's request.
        request: Code<RequestCode>,
        /// What could not be read.
        error: MalformedFrame,
    },
    /// A request got no answer in time.
    RequestTimeout {
        /// The peer.
        peer: PeerAddr,
        /// The request.
        request: Code<RequestCode>,
    },
    /// A broker refused to serve a subscribed topic for want of permission, naming the topic
    /// (ACL: no SUB right; a topic not readable): that topic's queues are pulled again only every 30 s, without another report, until a
    /// pull is served; other topics go on.
    TopicRefused {
        /// The topic.
        topic: String,
        /// The broker.
        peer: PeerAddr,
        /// The response code (NO_PERMISSION; 4.9.x answers SYSTEM_ERROR with an AclException).
        code: Code<ResponseCode>,
        /// The broker's reason.
        remark: String,
    },
    /// A name server does not know a subscribed topic.
    TopicNotFound {
        /// The topic.
        topic: String,
    },
    /// The broker moved a queue's offset (out of range, or an admin reset).
    OffsetMoved {
        /// The queue.
        queue: MessageQueue,
        /// Where we were.
        from: i64,
        /// Where we continue.
        to: i64,
    },
    /// A pull body did not decode; the pull is retried, the offset does not move.
    CorruptPull {
        /// The queue.
        queue: MessageQueue,
        /// What was wrong.
        error: MessageDecodeError,
    },
    /// Records of a pull answer claimed queue offsets it cannot hold (before the offset asked
    /// for, or at or past the broker's max): dropped, reported, and the queue goes on.
    RecordsOutOfRange {
        /// The queue.
        queue: MessageQueue,
        /// How many records.
        count: usize,
        /// The offset the pull asked for.
        requested: i64,
        /// The broker's max offset in that answer.
        max: i64,
    },
    /// A batch ran past `consumeTimeout`; its messages were sent back for retry.
    ConsumeTimeout {
        /// The batch.
        batch: BatchId,
        /// Its queue.
        queue: MessageQueue,
    },
    /// A message could not be sent back nor re-sent to the retry topic; it is consumed again
    /// locally after a delay.
    LocalRetry {
        /// The queue.
        queue: MessageQueue,
        /// The message's queue offset.
        offset: i64,
    },
    /// Broadcasting: failed messages are not retried (as in Java).
    FailedMessagesDropped {
        /// The queue.
        queue: MessageQueue,
        /// How many.
        count: usize,
    },
    /// A response that matched no request (late, duplicated or unknown); ignored.
    UnexpectedResponse {
        /// The peer.
        peer: PeerAddr,
        /// Its opaque.
        opaque: i32,
    },
    /// A connection was lost (or could not be opened); requests on it are retried.
    ConnectionLost {
        /// The peer.
        peer: PeerAddr,
        /// Why.
        reason: DisconnectReason,
    },
    /// Orderly: a queue could not be locked; it is not consumed until it is.
    LockFailed {
        /// The queue.
        queue: MessageQueue,
    },
    /// A [`Command::PauseQueues`] took effect: those queues are not pulled from now on, and no
    /// pull answer of theirs is used until they are resumed.
    QueuesPaused {
        /// What was paused.
        selector: QueueSelector,
    },
    /// A [`Command::ResumeQueues`] took effect (queues no other pause selects pull again).
    QueuesResumed {
        /// What was resumed.
        selector: QueueSelector,
    },
    /// A [`Command::Seek`] moved a queue: cached work was dropped, `to` is committed and pulled
    /// from.
    Seeked {
        /// The queue.
        queue: MessageQueue,
        /// Where it was (the next offset to pull; −1 if it had not started).
        from: i64,
        /// Where it continues.
        to: i64,
    },
    /// A [`Command::Seek`] could not be carried out for a queue (its broker's lookup failed or
    /// the queue went away meanwhile); the queue did not move.
    SeekFailed {
        /// The queue.
        queue: MessageQueue,
        /// The target asked for.
        to: SeekTo,
        /// Why.
        reason: String,
    },
    /// Shutdown finished: nothing more will happen.
    Terminated,
}

/// What could not be read in a [`Event::Malformed`] frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MalformedFrame {
    /// The header's fields.
    #[error("header: {0}")]
    Header(#[from] HeaderError),
    /// The body.
    #[error("body: {0}")]
    Body(#[from] BodyError),
    /// A pop answer whose offset lists do not give its messages receipts (they are not
    /// consumed; the broker hands them out again after their invisible time).
    #[error("pop receipts: {0}")]
    Receipt(#[from] crate::protocol::receipt::ReceiptError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_its_batches_in_order_each_with_its_own_id_and_messages() {
        // Messages 2..12 of a chunk of 14, three per batch: 2-4, 5-7, 8-10, 11.
        let chunk: Vec<MessageExt> = (0..14)
            .map(|o| {
                let mut m = MessageExt::new("T", vec![0u8; 1]);
                m.queue_offset = o;
                m
            })
            .collect();
        let first = BatchId(5 << BatchId::UNIT_BITS);
        let queue = Arc::new(MessageQueue::new("T", "b", 0));
        let run = Run { first, queue, messages: Messages::new(Arc::new(chunk), 2, 12), unit: 3 };
        assert_eq!((run.len(), run.messages().len()), (4, 10));
        let batches: Vec<(BatchId, Vec<i64>, BatchKind)> = run
            .batches()
            .map(|b| (b.id, b.messages.iter().map(|m| m.queue_offset).collect(), b.kind))
            .collect();
        let expected: Vec<(BatchId, Vec<i64>, BatchKind)> =
            [vec![2, 3, 4], vec![5, 6, 7], vec![8, 9, 10], vec![11]]
                .into_iter()
                .enumerate()
                .map(|(u, o)| (first.unit(u), o, BatchKind::Concurrent))
                .collect();
        assert_eq!(batches, expected);
        for (u, (id, _, _)) in batches.iter().enumerate() {
            assert_eq!(id.split(), (first, u), "{id} is batch {u} of {first}");
        }
    }
}
