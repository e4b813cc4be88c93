//! A deterministic, in-memory fake RocketMQ 5.x broker.
//!
//! Sans-IO like the rest of the crate: frames come in through [`SimBroker::handle`] tagged with
//! the client connection ([`ConnId`]) they arrived on, answers and broker-initiated requests come
//! out of [`SimBroker::poll_output`], and time only moves through the `now` arguments
//! ([`SimBroker::poll_timeout`] / [`SimBroker::handle_timeout`]). Nothing here reads a clock,
//! draws a random number or iterates a hash map.
//!
//! Every answer is a [`RemotingCommand`] built from the crate's protocol types, the way a 5.x
//! broker writes it: response flag, the request's opaque, language JAVA, version 479, JSON
//! header, remarks and codes as `PullMessageProcessor`, `ClientManageProcessor`,
//! `ConsumerManageProcessor`, `SendMessageProcessor` and `AdminBrokerProcessor` set them.
//!
//! Deliberate simplifications (documented, so tests do not depend on them by accident):
//! * SQL92 subscriptions are accepted (as with `enablePropertyFilter=true`) but **not evaluated**:
//!   every message matches.
//! * Every consumer group exists (`autoCreateSubscriptionGroup=true`), with 1 retry queue and
//!   `retryMaxTimes` from the config; the broker is a master and all data is "in memory".
//! * Transactions, static topics, timer messages and the proxy are not simulated; a
//!   `TRAN_MSG` message is stored as a normal one.
//!
//! POP (`pop.rs`, `docs/pop.md`): SET_MESSAGE_REQUEST_MODE, QUERY_ASSIGNMENT (PULL, POP with
//! `popShareQueueNum`, BROADCASTING; the queues of every broker when the world sets the route
//! with [`SimBroker::set_route_queues`]), POP_MESSAGE (receipts' offset lists, the v1 pop retry
//! topic read first on every 5th pop instead of 20 % at random, initMode, tag filters, offsets
//! committed at pop time, long polling until `bornTime + pollTime`), ACK_MESSAGE,
//! BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, and revive of unacked messages into
//! `%RETRY%{group}_{topic}`. Orderly pop (`order=true`, `pop_order.rs`): revive queue 999 and
//! `orderCountInfo`; the queue is locked for the group until each message popped is acked or
//! visible again, acks commit the first unacked offset, and what was not acked comes back in
//! place from the topic itself (never the retry topic, no checkpoint, no revive).
//! Simplified: checkpoints are kept in memory and revive exactly at `popTime + invisibleTime`
//! (the real revive service runs later, by a second or more), and held pops are woken exactly
//! when an orderly lock frees (the real timer ticks every 100 ms); a wake-up re-runs every
//! matching held pop (the real broker wakes one per key); no POLLING_FULL (no long-poll table
//! limit); PEEK, NOTIFICATION and POLLING_INFO are unknown.
//! [`SimBrokerConfig::pop_supported`] `false` answers every POP code as 4.9.x does.
//! * Delayed messages become visible exactly at their due time (the real schedule service polls
//!   every 100 ms).

mod handlers;
mod pop;
mod pop_order;
#[cfg(test)]
mod pop_tests;
mod store;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

pub use self::pop::{PopState, PopStats, pop_retry_topic};
use self::store::{Entry, Held, Topic};
use crate::message::{
    DecodeOptions, Message, MessageExt, MessageQueue, Properties, UniqIdGenerator, decode_messages,
    encode_stored, java_string_hash, keys, stored_size,
};
use crate::producer::{DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX};
use crate::protocol::body::{ConsumerData, MessageModel, QueueData, SubscriptionData};
use crate::protocol::header::{NotifyConsumerIdsChangedRequestHeader, OffsetResponseHeader};
use crate::protocol::{
    ExtFields, FLAG_ONEWAY, FLAG_RESPONSE, HeaderError, LanguageCode, RemotingCommand, RequestCode,
    ResponseCode, SerializeType,
};

/// The `version` a 5.3.3 broker puts in every command it writes (`MQVersion.V5_3_3`).
pub const BROKER_VERSION: i32 = 479;

/// The scheduled-message system topic (`TopicValidator.RMQ_SYS_SCHEDULE_TOPIC`).
const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// `FAQUrl.suggestTodo(FAQUrl.DEFAULT_FAQ_URL)`, appended to some remarks.
const FAQ: &str = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.";
/// `MessageStoreConfig.maxMessageSize`.
const MAX_MESSAGE_SIZE: usize = 4 << 20;
/// `BrokerConfig.regionId` default, echoed as the `MSG_REGION` ext field of send answers.
const REGION_ID: &str = "DefaultRegion";
/// `LITE_PULL_MESSAGE`, served by the pull processor.
const LITE_PULL_MESSAGE: i32 = 361;
/// `shortPollingTimeMills`: hold time and hold-check tick when long polling is off.
const SHORT_POLLING: Duration = Duration::from_millis(1000);
/// Holds and waits are capped so `Instant` arithmetic cannot overflow.
const MAX_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);
/// Record arena chunk: stored records are carved out of shared 1 MiB buffers.
const ARENA_CHUNK: usize = 1 << 20;

/// One client TCP channel, as the simulator numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// A frame the broker writes to a client connection.
#[derive(Clone, Debug)]
pub struct Outgoing {
    /// The connection.
    pub conn: ConnId,
    /// A response, or a broker-initiated request (NOTIFY_CONSUMER_IDS_CHANGED).
    pub command: RemotingCommand,
}

/// Settings of a [`SimBroker`]; the defaults are a stock 5.x broker's.
#[derive(Clone, Debug)]
pub struct SimBrokerConfig {
    /// Cluster name (route data and the `CLUSTER` property), "DefaultCluster".
    pub cluster: String,
    /// `messageDelayLevel` in ms; level n is entry n-1. Default `1s 5s 10s 30s 1m … 1h 2h`.
    pub delay_levels_ms: Vec<u64>,
    /// `channelExpiredTimeout`: a registration without heartbeat for this long is dropped (120 s).
    pub channel_expired_timeout: Duration,
    /// `rocketmq.broker.rebalance.lockMaxLiveTime` (60 s).
    pub lock_max_live_time: Duration,
    /// `maxTransferCountOnMessageInMemory` (32).
    pub max_transfer_count: usize,
    /// `maxTransferBytesOnMessageInMemory` (256 KiB); the first message is always returned.
    pub max_transfer_bytes: usize,
    /// `longPollingEnable`: hold pulls until arrival or `suspendTimeoutMillis`; when false, hold
    /// 1 s, check every 1 s, and ignore arrivals.
    pub long_polling: bool,
    /// The hold service's check period (5 s): held pulls are released at the first check at or
    /// after their deadline, and every check releases pulls whose queue grew (even with messages
    /// their filter rejects). Zero: release exactly at the deadline, no periodic check.
    pub hold_check_interval: Duration,
    /// A group's `retryMaxTimes` (16).
    pub retry_max_times: i32,
    /// `defaultTopicQueueNums` for topics auto-created by a send (8).
    pub auto_create_topic_queues: i32,
    /// Wall clock (ms since the epoch) at the broker's `start` instant; store and born
    /// timestamps are `start_wall_ms + (now - start)`.
    pub start_wall_ms: i64,
    /// Notify the rest of a group when a registration expires. The real broker does **not**
    /// (`ConsumerManager.scanNotActiveChannel` drops it silently and closes the channel; the
    /// others find out at their next 20 s rebalance), hence the default `false`.
    pub notify_on_expiry: bool,
    /// How long a PULL_MESSAGE waits in the pull pool before it is processed (zero). Every other
    /// request is processed at once: the real broker runs pulls and offset updates on separate
    /// thread pools, so a pull's piggy-backed commit can land after an update sent later.
    pub pull_lag: Duration,
    /// Topics whose pulls are refused with NO_PERMISSION, as an ACL broker refuses a user
    /// without the SUB right (none).
    pub deny_pull: Vec<String>,
    /// Refuse `deny_pull` topics as 4.9.x's ACL 1.0 does: SYSTEM_ERROR with an AclException,
    /// and a heartbeat subscribing to one of them is refused whole (false: 5.x's NO_PERMISSION
    /// on pulls only).
    pub deny_as_acl_v1: bool,
    /// Refuse every request with NO_PERMISSION and this remark, as an ACL broker refuses a
    /// client whose credentials it does not accept: an unknown access key, a bad signature, an
    /// expired security token (none).
    pub refuse_all: Option<String>,
    /// Serve POP, QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE (true). False: answer them as
    /// a 4.9.x broker does, REQUEST_CODE_NOT_SUPPORTED.
    pub pop_supported: bool,
    /// Serve BATCH_ACK_MESSAGE (true). False: answer it REQUEST_CODE_NOT_SUPPORTED, as a 5.x
    /// broker older than the request does.
    pub batch_ack_supported: bool,
}

impl Default for SimBrokerConfig {
    fn default() -> Self {
        const DELAY_SECS: [u64; 18] =
            [1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200];
        Self {
            cluster: "DefaultCluster".to_owned(),
            delay_levels_ms: DELAY_SECS.iter().map(|s| s * 1000).collect(),
            channel_expired_timeout: Duration::from_secs(120),
            lock_max_live_time: Duration::from_secs(60),
            max_transfer_count: 32,
            max_transfer_bytes: 256 * 1024,
            long_polling: true,
            hold_check_interval: Duration::from_secs(5),
            retry_max_times: 16,
            auto_create_topic_queues: 8,
            start_wall_ms: 1_700_000_000_000,
            notify_on_expiry: false,
            pull_lag: Duration::ZERO,
            deny_pull: Vec::new(),
            deny_as_acl_v1: false,
            refuse_all: None,
            pop_supported: true,
            batch_ack_supported: true,
        }
    }
}

/// One registration of a channel in a consumer group (`ClientChannelInfo`).
#[derive(Clone, Debug)]
struct Member {
    conn: ConnId,
    client_id: String,
    last_update: Instant,
}

/// A consumer group's live state (`ConsumerGroupInfo`).
#[derive(Clone, Debug)]
struct Group {
    /// In registration order.
    members: Vec<Member>,
    /// Topic → subscription, shared by the whole group: the last heartbeat wins.
    subscriptions: BTreeMap<String, SubscriptionData>,
    message_model: MessageModel,
}

/// `RebalanceLockManager.LockEntry`.
#[derive(Clone, Debug)]
struct LockEntry {
    client_id: String,
    last_update: Instant,
}

/// A message about to be stored; topic, queue and store fields are the store's.
#[derive(Clone, Debug)]
struct Draft {
    body: Bytes,
    flag: i32,
    sys_flag: i32,
    born_timestamp: i64,
    born_host: SocketAddr,
    reconsume_times: i32,
    properties: Properties,
}

/// A delayed message waiting in `SCHEDULE_TOPIC_XXXX`.
#[derive(Clone, Debug)]
struct Scheduled {
    topic: String,
    queue_id: i32,
    draft: Draft,
}

/// Where a commit-log offset points.
#[derive(Clone, Copy, Debug)]
struct CommitRef {
    commit_log_offset: i64,
    topic: u32,
    queue_id: i32,
    queue_offset: i64,
}

/// A simulated broker: topics with cached stored records, consumer offsets, group membership,
/// long polling, retry / dead-letter routing, delay levels and order locks.
pub struct SimBroker {
    name: String,
    addr: String,
    store_host: SocketAddr,
    config: SimBrokerConfig,
    /// Wall-clock anchor.
    start: Instant,
    /// The hold service's tick origin (reset by a restart).
    tick_origin: Instant,
    /// The last hold-check tick processed.
    last_check: Instant,
    topics: Vec<Topic>,
    topic_index: BTreeMap<String, usize>,
    /// Commit-log offset → message, in append (= offset) order.
    commit_index: Vec<CommitRef>,
    commit_cursor: i64,
    arena: BytesMut,
    /// group → topic → queue → offset.
    offsets: BTreeMap<String, BTreeMap<String, BTreeMap<i32, i64>>>,
    /// (group, topic, queue) → an admin reset the group's next pull of the queue is told of
    /// (`ConsumerOffsetManager.resetOffsetTable`); commits are ignored meanwhile.
    reset_offsets: BTreeMap<(String, String, i32), i64>,
    /// When each (group, topic) offset map was created by a commit.
    creating: BTreeMap<(String, String), Instant>,
    groups: BTreeMap<String, Group>,
    /// `consumerGroupHeartbeatTable` (heartbeat v2 fingerprints).
    fingerprints: BTreeMap<String, i32>,
    locks: BTreeMap<String, BTreeMap<MessageQueue, LockEntry>>,
    schedule: BTreeMap<(Instant, u64), Scheduled>,
    schedule_seq: u64,
    /// Next offset of each `SCHEDULE_TOPIC_XXXX` queue (one per level).
    schedule_offsets: Vec<i64>,
    held_count: usize,
    /// Pulls waiting out `pull_lag`, in arrival (= due) order.
    lagged_pulls: VecDeque<(Instant, ConnId, RemotingCommand)>,
    out: VecDeque<Outgoing>,
    closed: VecDeque<ConnId>,
    next_opaque: i32,
    uniq: UniqIdGenerator,
    uniq_seq: u64,
    round_robin: u32,
    pop: pop::PopService,
}

impl fmt::Debug for SimBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimBroker")
            .field("name", &self.name)
            .field("addr", &self.addr)
            .field("topics", &self.topics.len())
            .field("groups", &self.groups.keys().collect::<Vec<_>>())
            .field("held_pulls", &self.held_count)
            .field("scheduled", &self.schedule.len())
            .field("pending_output", &self.out.len())
            .finish()
    }
}

fn header_error(req: &RemotingCommand, e: &HeaderError) -> RemotingCommand {
    let what = match e {
        HeaderError::Missing { field, .. } => format!("the custom field <{field}> is null"),
        other => other.to_string(),
    };
    reply(req, ResponseCode::SystemError)
        .with_remark(format!("org.apache.rocketmq.remoting.exception.RemotingCommandException: {what}"))
}

/// An answer to `req` as a Java server builds it (the name server answers the same way).
pub(super) fn reply(req: &RemotingCommand, code: ResponseCode) -> RemotingCommand {
    RemotingCommand {
        code: code as i32,
        language: LanguageCode::JAVA,
        version: BROKER_VERSION,
        opaque: req.opaque,
        flag: FLAG_RESPONSE,
        remark: None,
        ext_fields: ExtFields::new(),
        body: Bytes::new(),
        serialize_type: SerializeType::Json,
    }
}

fn error(req: &RemotingCommand, code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    reply(req, code).with_remark(remark)
}

fn offset_reply(req: &RemotingCommand, offset: i64) -> RemotingCommand {
    reply(req, ResponseCode::Success).with_header(&OffsetResponseHeader { offset })
}

/// `TopicValidator.validateTopic`.
fn validate_topic(topic: &str) -> Result<(), String> {
    if topic.trim().is_empty() {
        return Err("The specified topic is blank.".to_owned());
    }
    if !topic.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-')) {
        return Err(format!(
            "The specified topic: {topic}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    if topic.starts_with(RETRY_TOPIC_PREFIX) || topic.starts_with(DLQ_TOPIC_PREFIX) {
        if topic.len() > 255 {
            return Err(format!(
                "The specified topic is DLQ or Retry topic: {topic}, and it's longer than topic max length: 255"
            ));
        }
    } else if topic.len() > 127 {
        return Err(format!("The specified topic: {topic}, is longer than topic max length: 127"));
    }
    Ok(())
}

/// The V1 SEND_MESSAGE header under its V2 short keys.
fn v1_as_v2(ext: &ExtFields) -> ExtFields {
    const MAP: [(&str, &str); 14] = [
        ("producerGroup", "a"),
        ("topic", "b"),
        ("defaultTopic", "c"),
        ("defaultTopicQueueNums", "d"),
        ("queueId", "e"),
        ("sysFlag", "f"),
        ("bornTimestamp", "g"),
        ("flag", "h"),
        ("properties", "i"),
        ("reconsumeTimes", "j"),
        ("unitMode", "k"),
        ("maxReconsumeTimes", "l"),
        ("batch", "m"),
        ("bname", "n"),
    ];
    MAP.iter().filter_map(|(long, short)| ext.get(long).map(|v| (*short, v))).collect()
}

fn body_crc(body: &[u8]) -> i32 {
    let mut crc = flate2::Crc::new();
    crc.update(body);
    // `UtilAll.crc32` masks the sign bit.
    (crc.sum() & 0x7FFF_FFFF) as i32
}

/// The codes a 4.9.x broker does not know: POP and the broker-side rebalance.
fn is_pop_code(code: RequestCode) -> bool {
    matches!(
        code,
        RequestCode::PopMessage
            | RequestCode::AckMessage
            | RequestCode::ChangeMessageInvisibleTime
            | RequestCode::BatchAckMessage
            | RequestCode::QueryAssignment
            | RequestCode::SetMessageRequestMode
    )
}

fn tags_code(properties: &Properties) -> i32 {
    properties.get(keys::TAGS).map_or(0, java_string_hash)
}

impl SimBroker {
    /// A broker named `name` listening on `addr` (`ip:port`; also the store host of its
    /// records, 127.0.0.1 if not an IP address), started at `start`.
    pub fn new(name: &str, addr: &str, config: SimBrokerConfig, start: Instant) -> Self {
        let store_host = addr.parse().unwrap_or_else(|_| {
            let port = addr.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(10911);
            SocketAddr::from((Ipv4Addr::LOCALHOST, port))
        });
        let instance = java_string_hash(name) as u32;
        let ip = match store_host {
            SocketAddr::V4(a) => *a.ip(),
            SocketAddr::V6(_) => Ipv4Addr::LOCALHOST,
        };
        let levels = config.delay_levels_ms.len();
        Self {
            name: name.to_owned(),
            addr: addr.to_owned(),
            store_host,
            config,
            start,
            tick_origin: start,
            last_check: start,
            topics: Vec::new(),
            topic_index: BTreeMap::new(),
            commit_index: Vec::new(),
            commit_cursor: 0,
            arena: BytesMut::new(),
            offsets: BTreeMap::new(),
            reset_offsets: BTreeMap::new(),
            creating: BTreeMap::new(),
            groups: BTreeMap::new(),
            fingerprints: BTreeMap::new(),
            locks: BTreeMap::new(),
            schedule: BTreeMap::new(),
            schedule_seq: 0,
            schedule_offsets: vec![0; levels],
            held_count: 0,
            lagged_pulls: VecDeque::new(),
            out: VecDeque::new(),
            closed: VecDeque::new(),
            next_opaque: 0,
            uniq: UniqIdGenerator::new(ip, 0, instance),
            uniq_seq: 0,
            round_robin: 0,
            pop: pop::PopService::default(),
        }
    }

    /// Broker name, e.g. `broker-a`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Listening address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The configuration.
    pub fn config(&self) -> &SimBrokerConfig {
        &self.config
    }

    /// The store host written into records (and offset message ids).
    pub fn store_host(&self) -> SocketAddr {
        self.store_host
    }

    /// Wall-clock milliseconds at `now`.
    pub fn wall_ms(&self, now: Instant) -> i64 {
        self.config.start_wall_ms + now.saturating_duration_since(self.start).as_millis() as i64
    }

    /// Move the wall clock forward so that [`wall_ms`](Self::wall_ms)`(now)` is at least
    /// `wall_ms`; never back, so store timestamps stay ordered within a queue. A server on real
    /// time calls this with the system clock: the monotonic clock `now` comes from does not
    /// follow steps of the wall clock (a resumed virtual machine, an NTP step), while a client
    /// on the same host reads the wall clock directly, as the real broker does.
    pub fn follow_wall_clock(&mut self, now: Instant, wall_ms: i64) {
        let behind = wall_ms - self.wall_ms(now);
        if behind > 0 {
            self.config.start_wall_ms += behind;
        }
    }

    /// Refuse pulls of `topic` with NO_PERMISSION from now on (`deny`), or serve them again.
    pub fn deny_pull(&mut self, topic: &str, deny: bool) {
        self.config.deny_pull.retain(|t| t != topic);
        if deny {
            self.config.deny_pull.push(topic.to_owned());
        }
    }

    /// Refuse every request from now on with NO_PERMISSION and `remark` (`Some`), or serve
    /// them again (`None`): credentials revoked or a token expired, then renewed.
    pub fn refuse_all(&mut self, remark: Option<&str>) {
        self.config.refuse_all = remark.map(str::to_owned);
    }

    /// Create a read-write topic with `queues` queues (at most 4096), or change an existing
    /// topic's queue counts (stored messages are kept).
    pub fn create_topic(&mut self, topic: &str, queues: i32) {
        let ti = self.ensure_topic(topic, queues);
        self.topics[ti].set_queue_nums(queues, queues);
    }

    /// Append a message as a producer's SEND would: next queue offset and commit-log offset,
    /// store host = this broker, store and born timestamps = `now`, the `CLUSTER` property added,
    /// `UNIQ_KEY` kept if present (not generated). Held pulls on the queue are woken.
    ///
    /// A missing topic is created with `auto_create_topic_queues` queues; a negative `queue_id`
    /// picks queues round-robin, larger ids wrap modulo the queue count. `DELAY` is stored but not acted
    /// on (send a SEND_MESSAGE_V2 through [`handle`](Self::handle) for a delayed message).
    /// Returns (queue id, queue offset).
    pub fn produce(&mut self, topic: &str, queue_id: i32, msg: &Message, now: Instant) -> (i32, i64) {
        let ti = match self.topic_index.get(topic) {
            Some(&ti) => ti,
            None => self.ensure_topic(topic, self.config.auto_create_topic_queues.max(1)),
        };
        let n = self.topics[ti].write_queue_nums.max(1);
        let queue_id = if queue_id < 0 { self.next_round_robin(n) } else { queue_id.rem_euclid(n) };
        let properties = self.with_cluster(&msg.properties);
        let wall = self.wall_ms(now);
        let draft = Draft {
            body: msg.body.clone(),
            flag: msg.flag,
            sys_flag: 0,
            born_timestamp: wall,
            born_host: Self::born_host(ConnId(0)),
            reconsume_times: 0,
            properties,
        };
        let (queue_offset, _) = self.append(ti, queue_id, draft, now);
        (queue_id, queue_offset)
    }

    /// A frame from client connection `conn`. Requests are answered through
    /// [`poll_output`](Self::poll_output), now or later (long polling); oneway requests never
    /// are. Responses (to NOTIFY_CONSUMER_IDS_CHANGED and friends) are accepted and dropped.
    ///
    /// Time is not advanced here: run [`handle_timeout`](Self::handle_timeout) for everything
    /// due before `now` first, as a driver stepping to the earliest event does. A producer's
    /// born host (and consumer addresses in remarks) is `127.0.0.1:(1024 + conn % 64000)`.
    pub fn handle(&mut self, conn: ConnId, cmd: RemotingCommand, now: Instant) {
        if cmd.is_response() {
            return;
        }
        if let Some(remark) = &self.config.refuse_all {
            let answer = error(&cmd, ResponseCode::NoPermission, remark.clone());
            return self.respond(conn, &cmd, answer);
        }
        if cmd.code == RequestCode::PullMessage as i32 && !self.config.pull_lag.is_zero() {
            self.lagged_pulls.push_back((now + self.config.pull_lag, conn, cmd));
            return;
        }
        let code = RequestCode::from_i32(cmd.code)
            .filter(|c| self.config.pop_supported || !is_pop_code(*c))
            .filter(|c| self.config.batch_ack_supported || *c != RequestCode::BatchAckMessage);
        let answer = match code {
            Some(RequestCode::PopMessage) => self.on_pop(conn, &cmd, true, now),
            Some(RequestCode::AckMessage) => Some(self.on_ack(conn, &cmd, now)),
            Some(RequestCode::BatchAckMessage) => Some(self.on_batch_ack(conn, &cmd, now)),
            Some(RequestCode::ChangeMessageInvisibleTime) => Some(self.on_change_invisible(conn, &cmd, now)),
            Some(RequestCode::QueryAssignment) => Some(self.on_query_assignment(&cmd)),
            Some(RequestCode::SetMessageRequestMode) => Some(self.on_set_request_mode(&cmd)),
            Some(RequestCode::PullMessage) => self.on_pull(conn, &cmd, true, now),
            Some(RequestCode::QueryConsumerOffset) => Some(self.on_query_offset(&cmd)),
            Some(RequestCode::UpdateConsumerOffset) => Some(self.on_update_offset(&cmd, now)),
            Some(RequestCode::UpdateAndCreateTopic) => Some(self.on_create_topic(&cmd)),
            Some(RequestCode::SearchOffsetByTimestamp) => Some(self.on_search_offset(&cmd)),
            Some(RequestCode::GetMaxOffset) => Some(self.on_max_offset(&cmd)),
            Some(RequestCode::GetMinOffset) => Some(self.on_min_offset(&cmd)),
            Some(RequestCode::InvokeBrokerToResetOffset) => Some(self.on_reset_offset(&cmd, now)),
            Some(RequestCode::GetConsumeStats) => Some(self.on_consume_stats(&cmd)),
            Some(RequestCode::HeartBeat) => Some(self.on_heartbeat(conn, &cmd, now)),
            Some(RequestCode::UnregisterClient) => Some(self.on_unregister(conn, &cmd)),
            Some(RequestCode::ConsumerSendMsgBack) => Some(self.on_send_back(&cmd, now)),
            Some(RequestCode::GetConsumerListByGroup) => Some(self.on_consumer_list(&cmd)),
            Some(RequestCode::LockBatchMq) => Some(self.on_lock(&cmd, now)),
            Some(RequestCode::UnlockBatchMq) => Some(self.on_unlock(&cmd)),
            Some(RequestCode::SendMessage) => Some(self.on_send(conn, &cmd, true, now)),
            Some(RequestCode::SendMessageV2) => Some(self.on_send(conn, &cmd, false, now)),
            Some(RequestCode::SendBatchMessage) => Some(self.on_send_batch(conn, &cmd, now)),
            _ if cmd.code == LITE_PULL_MESSAGE => self.on_pull(conn, &cmd, true, now),
            Some(RequestCode::CheckClientConfig) => Some(self.on_check_client(&cmd)),
            _ => Some(error(
                &cmd,
                ResponseCode::RequestCodeNotSupported,
                format!(" request type {} not supported", cmd.code),
            )),
        };
        if let Some(answer) = answer {
            self.respond(conn, &cmd, answer);
        }
    }

    /// The channel closed: its registrations are removed (the rest of each group is notified)
    /// and its held pulls and unsent frames dropped. Locks stay until they expire.
    pub fn disconnect(&mut self, conn: ConnId, _now: Instant) {
        let names: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, g)| g.members.iter().any(|m| m.conn == conn))
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            self.unregister(conn, &name);
        }
        for t in &mut self.topics {
            for q in &mut t.queues {
                let before = q.held.len();
                q.held.retain(|h| h.conn != conn);
                self.held_count -= before - q.held.len();
            }
        }
        self.pop.disconnect(conn);
        self.lagged_pulls.retain(|(_, c, _)| *c != conn);
        self.out.retain(|o| o.conn != conn);
    }

    /// Restart the broker process: registrations, held pulls (never answered), locks, heartbeat
    /// fingerprints and unsent frames are lost; topics, messages, consumer offsets and delayed
    /// messages are kept. The caller drops its connections too.
    pub fn restart(&mut self, now: Instant) {
        self.groups.clear();
        self.fingerprints.clear();
        self.locks.clear();
        for t in &mut self.topics {
            for q in &mut t.queues {
                q.held.clear();
            }
        }
        self.held_count = 0;
        self.pop.restart();
        self.lagged_pulls.clear();
        self.out.clear();
        self.closed.clear();
        self.next_opaque = 0;
        self.tick_origin = now;
        self.last_check = now;
    }

    /// A crash (kill -9) before the consumer offsets were flushed: [`restart`](Self::restart),
    /// and every group's committed offsets are gone too.
    pub fn crash(&mut self, now: Instant) {
        self.restart(now);
        self.pop.forget_states();
        self.offsets.clear();
        self.reset_offsets.clear();
        self.creating.clear();
    }

    /// The next frame to write, oldest first.
    pub fn poll_output(&mut self) -> Option<Outgoing> {
        self.out.pop_front()
    }

    /// A connection the broker closed (an expired registration's channel). The driver should
    /// close it and, like a real client, reconnect.
    pub fn poll_closed(&mut self) -> Option<ConnId> {
        self.closed.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work: a lagged pull, a held pull's
    /// release, a delayed message falling due, or a registration expiring.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next = self.schedule.keys().next().map(|(t, _)| *t);
        let mut consider = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        if let Some((due, _, _)) = self.lagged_pulls.front() {
            consider(*due);
        }
        if self.held_count > 0 {
            let interval = self.check_interval();
            let mut min_deadline: Option<Instant> = None;
            let mut grown = false;
            for t in &self.topics {
                for q in &t.queues {
                    for h in &q.held {
                        min_deadline = Some(min_deadline.map_or(h.deadline, |d| d.min(h.deadline)));
                        grown |= q.max_offset() > h.offset;
                    }
                }
            }
            if let Some(d) = min_deadline {
                if interval.is_zero() {
                    consider(d);
                } else {
                    let next_tick = self.tick_after(self.last_check);
                    consider(if grown { next_tick } else { self.tick_at_or_after(d).max(next_tick) });
                }
            }
        }
        for g in self.groups.values() {
            for m in &g.members {
                consider(m.last_update + self.config.channel_expired_timeout.min(MAX_WAIT));
            }
        }
        if let Some(t) = self.pop.next_timeout() {
            consider(t);
        }
        next
    }

    /// Do what is due at `now`: deliver delayed messages, run the hold service's check, expire
    /// registrations.
    pub fn handle_timeout(&mut self, now: Instant) {
        while self.lagged_pulls.front().is_some_and(|(due, _, _)| *due <= now) {
            let Some((due, conn, cmd)) = self.lagged_pulls.pop_front() else { break };
            if let Some(answer) = self.on_pull(conn, &cmd, true, due) {
                self.respond(conn, &cmd, answer);
            }
        }
        while let Some(entry) = self.schedule.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let s = entry.remove();
            let ti = match self.topic_index.get(s.topic.as_str()) {
                Some(&ti) => ti,
                None => self.ensure_topic(&s.topic, s.queue_id.saturating_add(1).max(1)),
            };
            self.append(ti, s.queue_id.max(0), s.draft, now);
        }
        self.pop_timeouts(now);

        if self.check_interval().is_zero() {
            self.check_held(now, now);
        } else {
            // Ticks missed by a late call happened at their own times: the last one decides.
            let tick = self.tick_at_or_before(now);
            if tick > self.last_check {
                self.last_check = tick;
                self.check_held(tick, now);
            }
        }

        self.expire_members(now);
    }

    // ----- inspection ---------------------------------------------------------------------

    /// The group's committed offset for a queue.
    pub fn committed_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.offsets.get(group)?.get(topic)?.get(&queue_id).copied()
    }

    /// One past the queue's last offset; 0 for an unknown queue.
    pub fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.queue(topic, queue_id).map_or(0, store::Queue::max_offset)
    }

    /// The queue's first stored offset; 0 for an unknown queue.
    pub fn min_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.queue(topic, queue_id).map_or(0, |q| q.min)
    }

    /// The stored messages of a queue, decoded from their records (bodies decompressed).
    pub fn messages(&self, topic: &str, queue_id: i32) -> Vec<MessageExt> {
        let Some(q) = self.queue(topic, queue_id) else { return Vec::new() };
        let mut body = BytesMut::with_capacity(q.entries.iter().map(|e| e.record.len()).sum());
        for e in &q.entries {
            body.extend_from_slice(&e.record);
        }
        decode_messages(&body.freeze(), &DecodeOptions::default()).unwrap_or_default()
    }

    /// The raw stored record at an offset (what a pull body carries).
    pub fn record(&self, topic: &str, queue_id: i32, offset: i64) -> Option<Bytes> {
        self.queue(topic, queue_id)?.entry(offset).map(|e| e.record.clone())
    }

    /// Topics and their queue counts, by name.
    pub fn topics(&self) -> Vec<(String, i32)> {
        self.topic_index.iter().map(|(n, &i)| (n.clone(), self.topics[i].queue_nums())).collect()
    }

    /// The route entry of a topic on this broker (what the name server serves).
    pub fn topic_route(&self, topic: &str) -> Option<QueueData> {
        let t = &self.topics[*self.topic_index.get(topic)?];
        Some(QueueData {
            broker_name: self.name.clone(),
            read_queue_nums: t.read_queue_nums,
            write_queue_nums: t.write_queue_nums,
            perm: t.perm,
            topic_sys_flag: t.topic_sys_flag,
        })
    }

    /// Client ids of the group's live registrations, sorted.
    pub fn members(&self, group: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .groups
            .get(group)
            .map(|g| g.members.iter().map(|m| m.client_id.clone()).collect())
            .unwrap_or_default();
        ids.sort();
        ids
    }

    /// The group's subscription for a topic, as the broker last heard it.
    pub fn subscription(&self, group: &str, topic: &str) -> Option<&SubscriptionData> {
        self.groups.get(group)?.subscriptions.get(topic)
    }

    /// The client holding an unexpired lock on `mq` for `group`.
    pub fn lock_owner(&self, group: &str, mq: &MessageQueue, now: Instant) -> Option<String> {
        let e = self.locks.get(group)?.get(mq)?;
        (!self.lock_expired(e, now)).then(|| e.client_id.clone())
    }

    /// Pulls currently held by long polling.
    pub fn held_pulls(&self) -> usize {
        self.held_count
    }

    /// Delayed messages not yet due.
    pub fn scheduled(&self) -> usize {
        self.schedule.len()
    }

    /// Rewrite the stored record at `offset` (a corrupt or forged record, for fault tests): `f`
    /// gets its bytes; what it leaves is what pulls serve from then on.
    pub fn rewrite_record(&mut self, topic: &str, queue_id: i32, offset: i64, f: impl FnOnce(&mut Vec<u8>)) {
        let Some(&ti) = self.topic_index.get(topic) else { return };
        let Some(q) = usize::try_from(queue_id).ok().and_then(|i| self.topics[ti].queues.get_mut(i)) else {
            return;
        };
        if let Some(e) = q.entry_mut(offset) {
            let mut bytes = e.record.to_vec();
            f(&mut bytes);
            e.record = Bytes::from(bytes);
        }
    }

    /// Retention: forget a queue's messages below `new_min` (clamped to the queue's range), so
    /// that older offsets get PULL_OFFSET_MOVED.
    pub fn truncate(&mut self, topic: &str, queue_id: i32, new_min: i64) {
        if let Some(&ti) = self.topic_index.get(topic) {
            if let Some(q) = usize::try_from(queue_id).ok().and_then(|i| self.topics[ti].queues.get_mut(i)) {
                q.truncate(new_min);
            }
        }
    }

    // ----- storage ------------------------------------------------------------------------

    fn queue(&self, topic: &str, queue_id: i32) -> Option<&store::Queue> {
        let t = &self.topics[*self.topic_index.get(topic)?];
        usize::try_from(queue_id).ok().and_then(|i| t.queues.get(i))
    }

    fn ensure_topic(&mut self, topic: &str, queues: i32) -> usize {
        if let Some(&ti) = self.topic_index.get(topic) {
            return ti;
        }
        self.topics.push(Topic::new(topic, queues));
        self.topic_index.insert(topic.to_owned(), self.topics.len() - 1);
        self.topics.len() - 1
    }

    /// A `UNIQ_KEY` for a message sent without one (5.x brokers add it): the generator's time
    /// field carries a sequence number, so ids are unique and deterministic.
    fn next_uniq_id(&mut self) -> String {
        let id = self.uniq.next_id(self.uniq_seq >> 16);
        self.uniq_seq += 1;
        id
    }

    fn next_round_robin(&mut self, n: i32) -> i32 {
        self.round_robin = self.round_robin.wrapping_add(1);
        (self.round_robin % n.max(1) as u32) as i32
    }

    /// Carve `len` bytes out of the record arena (one allocation per 1 MiB of records).
    fn arena_for(&mut self, len: usize) -> &mut BytesMut {
        if self.arena.capacity() - self.arena.len() < len {
            self.arena = BytesMut::with_capacity(ARENA_CHUNK.max(len));
        }
        &mut self.arena
    }

    /// `properties` with `CLUSTER` set, appended in place when absent (no re-encoding).
    fn with_cluster(&mut self, properties: &Properties) -> Properties {
        if properties.get(keys::CLUSTER).is_some() {
            return properties.with(keys::CLUSTER, &self.config.cluster);
        }
        let raw = properties.as_bytes();
        let cluster = self.config.cluster.clone();
        let tail = !raw.is_empty() && !raw.ends_with(&[2]);
        let arena = self.arena_for(raw.len() + 1 + keys::CLUSTER.len() + cluster.len() + 2);
        arena.extend_from_slice(raw);
        if tail {
            arena.extend_from_slice(&[2]);
        }
        arena.extend_from_slice(keys::CLUSTER.as_bytes());
        arena.extend_from_slice(&[1]);
        arena.extend_from_slice(cluster.as_bytes());
        arena.extend_from_slice(&[2]);
        Properties::from_wire(arena.split().freeze())
    }

    /// Store a message: encode its record once, index it, wake held pulls.
    /// Returns (queue offset, commit-log offset).
    fn append(&mut self, ti: usize, queue_id: i32, d: Draft, now: Instant) -> (i64, i64) {
        let qi = queue_id.max(0) as usize;
        self.topics[ti].grow(qi + 1);
        let tags_code = tags_code(&d.properties);
        let queue_offset = self.topics[ti].queues[qi].max_offset();
        let commit_log_offset = self.commit_cursor;
        let m = MessageExt {
            topic: self.topics[ti].name.clone(),
            queue_id,
            flag: d.flag,
            queue_offset,
            commit_log_offset,
            sys_flag: d.sys_flag,
            born_timestamp: d.born_timestamp,
            born_host: d.born_host,
            store_timestamp: self.wall_ms(now),
            store_host: self.store_host,
            reconsume_times: d.reconsume_times,
            prepared_transaction_offset: 0,
            body_crc: body_crc(&d.body),
            store_size: 0,
            body: d.body,
            properties: d.properties,
        };
        let arena = self.arena_for(stored_size(&m));
        encode_stored(&m, arena);
        let record = arena.split().freeze();
        self.commit_cursor += record.len() as i64;
        self.commit_index.push(CommitRef { commit_log_offset, topic: ti as u32, queue_id, queue_offset });
        let entry = Entry { record, store_timestamp: m.store_timestamp, tags_code };
        self.topics[ti].queues[qi].entries.push(entry);
        self.notify_arrival(ti, qi, tags_code, now);
        self.pop_arrival(ti, queue_id, tags_code, now);
        (queue_offset, commit_log_offset)
    }

    /// The stored record at a commit-log offset, if still in its queue.
    fn lookup(&self, commit_log_offset: i64) -> Option<Bytes> {
        let i = self.commit_index.binary_search_by_key(&commit_log_offset, |c| c.commit_log_offset).ok()?;
        let c = self.commit_index[i];
        let q = self.topics[c.topic as usize].queues.get(c.queue_id.max(0) as usize)?;
        q.entry(c.queue_offset).map(|e| e.record.clone())
    }

    /// `ConsumerOffsetManager.commitOffset`. The first commit of a topic for a group creates
    /// its map with a get-then-put (not putIfAbsent), and commits run on thread pools: two first
    /// commits of different queues processed together each put a fresh map, and the last one
    /// replaces the other (seen on 5.3.3: a queue's final commit lost at shutdown). Modelled as:
    /// commits that arrive at the instant a map was created — sent together, not one after the
    /// other's answer — each put a map of their own, the last one kept.
    fn commit_offset(&mut self, group: &str, topic: &str, queue_id: i32, offset: i64, now: Instant) {
        let back =
            self.offsets.get(group).and_then(|t| t.get(topic)?.get(&queue_id)).is_some_and(|o| *o > offset);
        if back {
            self.pop.forget_from(group, topic, queue_id, offset);
        }
        let topics = self.offsets.entry(group.to_owned()).or_default();
        let key = (group.to_owned(), topic.to_owned());
        let racing = self.creating.get(&key).is_some_and(|created| now == *created);
        match topics.get_mut(topic) {
            Some(queues) if !racing => {
                queues.insert(queue_id, offset);
            }
            _ => {
                topics.insert(topic.to_owned(), BTreeMap::from([(queue_id, offset)]));
                self.creating.insert(key, now);
            }
        }
    }

    fn respond(&mut self, conn: ConnId, req: &RemotingCommand, answer: RemotingCommand) {
        if !req.is_oneway() {
            self.out.push_back(Outgoing { conn, command: answer });
        }
    }

    fn born_host(conn: ConnId) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 1024 + (conn.0 % 64_000) as u16))
    }

    // ----- long polling -------------------------------------------------------------------

    fn check_interval(&self) -> Duration {
        if self.config.hold_check_interval.is_zero() {
            Duration::ZERO
        } else if self.config.long_polling {
            self.config.hold_check_interval
        } else {
            SHORT_POLLING
        }
    }

    /// Hold-check tick number `k` (k ≥ 0 ticks after the origin) at or before `t`.
    fn ticks_until(&self, t: Instant) -> u128 {
        t.saturating_duration_since(self.tick_origin).as_nanos() / self.check_interval().as_nanos().max(1)
    }

    fn tick(&self, k: u128) -> Instant {
        let nanos = self.check_interval().as_nanos().saturating_mul(k).min(u128::from(u64::MAX));
        self.tick_origin + Duration::from_nanos(nanos as u64)
    }

    fn tick_at_or_before(&self, t: Instant) -> Instant {
        self.tick(self.ticks_until(t))
    }

    fn tick_after(&self, t: Instant) -> Instant {
        self.tick(self.ticks_until(t) + 1)
    }

    fn tick_at_or_after(&self, t: Instant) -> Instant {
        let before = self.tick_at_or_before(t);
        if before >= t { before } else { self.tick_after(t) }
    }

    /// `notifyMessageArriving` for a new message (long polling only): wake held pulls whose
    /// filter matches it, and any past their deadline.
    fn notify_arrival(&mut self, ti: usize, qi: usize, tags_code: i32, now: Instant) {
        if !self.config.long_polling || self.topics[ti].queues[qi].held.is_empty() {
            return;
        }
        let q = &mut self.topics[ti].queues[qi];
        let max = q.max_offset();
        let (wake, keep): (Vec<Held>, Vec<Held>) = std::mem::take(&mut q.held)
            .into_iter()
            .partition(|h| (max > h.offset && h.filter.matches(tags_code)) || now >= h.deadline);
        q.held = keep;
        self.wake(wake, now);
    }

    /// `checkHoldRequest` run at `check_at`: wake held pulls whose queue grew (whatever the
    /// filter says) or whose deadline passed; they answer as of `now`.
    fn check_held(&mut self, check_at: Instant, now: Instant) {
        if self.held_count == 0 {
            return;
        }
        let mut wake = Vec::new();
        for t in &mut self.topics {
            for q in &mut t.queues {
                if q.held.is_empty() {
                    continue;
                }
                let max = q.max_offset();
                let (w, keep): (Vec<Held>, Vec<Held>) = std::mem::take(&mut q.held)
                    .into_iter()
                    .partition(|h| max > h.offset || check_at >= h.deadline);
                q.held = keep;
                wake.extend(w);
            }
        }
        self.wake(wake, now);
    }

    /// `executeRequestWhenWakeup`: re-run each pull with suspension (and offset commit) off.
    fn wake(&mut self, pulls: Vec<Held>, now: Instant) {
        self.held_count -= pulls.len();
        for h in pulls {
            if let Some(answer) = self.on_pull(h.conn, &h.request, false, now) {
                self.respond(h.conn, &h.request, answer);
            }
        }
    }

    // ----- membership ---------------------------------------------------------------------

    fn notify_ids_changed(&mut self, group: &str) {
        let Some(g) = self.groups.get(group) else { return };
        if g.message_model == MessageModel::Broadcasting {
            return;
        }
        let conns: Vec<ConnId> = g.members.iter().map(|m| m.conn).collect();
        let header = NotifyConsumerIdsChangedRequestHeader { consumer_group: group.to_owned() };
        for conn in conns {
            let mut cmd =
                RemotingCommand::request(RequestCode::NotifyConsumerIdsChanged).with_header(&header);
            cmd.language = LanguageCode::JAVA;
            cmd.version = BROKER_VERSION;
            cmd.opaque = self.next_opaque;
            cmd.flag = FLAG_ONEWAY;
            self.next_opaque = self.next_opaque.wrapping_add(1);
            self.out.push_back(Outgoing { conn, command: cmd });
        }
    }

    /// `ConsumerManager.registerConsumer`; true if the channel is new or the subscription set
    /// changed.
    fn register(
        &mut self,
        conn: ConnId,
        client_id: &str,
        cd: &ConsumerData,
        with_subs: bool,
        now: Instant,
    ) -> bool {
        let g = self.groups.entry(cd.group_name.clone()).or_insert_with(|| Group {
            members: Vec::new(),
            subscriptions: BTreeMap::new(),
            message_model: cd.message_model,
        });
        g.message_model = cd.message_model;
        let new_channel = match g.members.iter_mut().find(|m| m.conn == conn) {
            Some(m) => {
                if m.client_id != client_id {
                    client_id.clone_into(&mut m.client_id);
                }
                m.last_update = now;
                false
            }
            None => {
                g.members.push(Member { conn, client_id: client_id.to_owned(), last_update: now });
                true
            }
        };
        if !with_subs {
            return new_channel;
        }
        // `ConsumerGroupInfo.updateSubscription`: add new topics, take newer versions, drop
        // topics this heartbeat no longer lists.
        let mut changed = false;
        for s in &cd.subscription_data_set {
            match g.subscriptions.get_mut(&s.topic) {
                None => {
                    g.subscriptions.insert(s.topic.clone(), s.clone());
                    changed = true;
                }
                Some(old) if s.sub_version > old.sub_version => *old = s.clone(),
                Some(_) => {}
            }
        }
        let before = g.subscriptions.len();
        g.subscriptions.retain(|t, _| cd.subscription_data_set.iter().any(|s| &s.topic == t));
        changed |= g.subscriptions.len() != before;
        new_channel || changed
    }

    /// `ConsumerManager.unregisterConsumer`: drop the channel, drop an empty group, notify.
    fn unregister(&mut self, conn: ConnId, group: &str) {
        let Some(g) = self.groups.get_mut(group) else { return };
        g.members.retain(|m| m.conn != conn);
        if g.members.is_empty() {
            self.groups.remove(group);
        } else {
            self.notify_ids_changed(group);
        }
    }

    /// `scanNotActiveChannel`: drop registrations without a heartbeat for
    /// `channel_expired_timeout` (silently, unless `notify_on_expiry`), then close their
    /// channels, which unregisters them everywhere else.
    fn expire_members(&mut self, now: Instant) {
        let timeout = self.config.channel_expired_timeout.min(MAX_WAIT);
        let mut expired = Vec::new();
        let mut touched = Vec::new();
        for (name, g) in &mut self.groups {
            let before = g.members.len();
            g.members.retain(|m| {
                let keep = now < m.last_update + timeout;
                if !keep {
                    expired.push(m.conn);
                }
                keep
            });
            if g.members.len() != before {
                touched.push(name.clone());
            }
        }
        if expired.is_empty() {
            return;
        }
        for name in touched {
            if self.groups.get(&name).is_some_and(|g| g.members.is_empty()) {
                self.groups.remove(&name);
            } else if self.config.notify_on_expiry {
                self.notify_ids_changed(&name);
            }
        }
        expired.sort();
        expired.dedup();
        for conn in expired {
            self.disconnect(conn, now);
            self.closed.push_back(conn);
        }
    }

    fn lock_expired(&self, e: &LockEntry, now: Instant) -> bool {
        now.saturating_duration_since(e.last_update) > self.config.lock_max_live_time
    }

    /// `RebalanceLockManager.isLockAllExpired`.
    fn locks_all_expired(&self, group: &str, now: Instant) -> bool {
        self.locks.get(group).is_none_or(|m| m.values().all(|e| self.lock_expired(e, now)))
    }
}
