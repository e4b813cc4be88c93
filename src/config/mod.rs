//! `ConsumerConfig`: every knob of Java's `DefaultMQPushConsumer` that means something here, with
//! Java's name and default, validated once when built ("parse, don't validate"), so
//! [`Consumer::new`](crate::Consumer::new) cannot fail.

mod by_name;

use std::fmt;
use std::time::Duration;

use crate::ClientId;
use crate::message::{DEFAULT_MAX_BODY_SIZE, DecodeOptions};
use crate::protocol::body::{ConsumeFromWhere, MessageModel};
use crate::protocol::{ExpressionType, SerializeType};
use crate::rebalance::AllocateStrategy;

pub use by_name::JAVA_KNOBS;

/// A knob outside its allowed range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {knob} = {value}: allowed {allowed}")]
pub struct ConfigError {
    /// The Java knob name, e.g. `pullBatchSize`.
    pub knob: &'static str,
    /// The value given.
    pub value: String,
    /// What is allowed.
    pub allowed: &'static str,
}

/// One subscription: a topic and an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// Topic (without namespace).
    pub topic: String,
    /// `*`, `tagA || tagB`, or an SQL92 predicate.
    pub expression: String,
    /// TAG or SQL92.
    pub expression_type: ExpressionType,
}

/// How messages of a queue are handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConsumeMode {
    /// `MessageListenerConcurrently`: batches of a queue run in parallel.
    #[default]
    Concurrently,
    /// `MessageListenerOrderly`: one batch per queue at a time, in offset order, under a broker lock.
    Orderly,
}

/// A validated consumer configuration. Build it with [`ConsumerConfig::builder`].
#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    pub(crate) consumer_group: String,
    pub(crate) client_id: ClientId,
    pub(crate) name_servers: Vec<String>,
    pub(crate) namespace: Option<String>,
    pub(crate) credentials: Option<crate::codec::Credentials>,
    pub(crate) message_model: MessageModel,
    pub(crate) consume_mode: ConsumeMode,
    pub(crate) consume_from_where: ConsumeFromWhere,
    pub(crate) consume_timestamp: Option<i64>,
    pub(crate) allocate_strategy: AllocateStrategy,
    pub(crate) subscriptions: Vec<Subscription>,
    pub(crate) consume_thread_min: usize,
    pub(crate) consume_thread_max: usize,
    pub(crate) consume_concurrently_max_span: i64,
    pub(crate) pull_threshold_for_queue: usize,
    pub(crate) pull_threshold_size_for_queue_mib: usize,
    pub(crate) pull_threshold_for_topic: Option<usize>,
    pub(crate) pull_threshold_size_for_topic_mib: Option<usize>,
    pub(crate) pull_interval: Duration,
    pub(crate) pull_batch_size: i32,
    pub(crate) client_rebalance: bool,
    pub(crate) pop_threshold_for_queue: usize,
    pub(crate) pop_invisible_time: Duration,
    pub(crate) pop_batch_nums: i32,
    pub(crate) orderly_pop: bool,
    pub(crate) pull_batch_size_in_bytes: i32,
    pub(crate) consume_message_batch_max_size: usize,
    pub(crate) post_subscription_when_pull: bool,
    pub(crate) new_group_skips_history: bool,
    pub(crate) unit_mode: bool,
    pub(crate) max_reconsume_times: i32,
    pub(crate) suspend_current_queue_time: Duration,
    pub(crate) consume_timeout: Duration,
    pub(crate) await_termination_when_shutdown: Duration,
    pub(crate) poll_name_server_interval: Duration,
    pub(crate) heartbeat_broker_interval: Duration,
    pub(crate) persist_consumer_offset_interval: Duration,
    pub(crate) pull_time_delay_when_exception: Duration,
    pub(crate) pull_time_delay_when_flow_control: Duration,
    pub(crate) mq_client_api_timeout: Duration,
    pub(crate) offset_rpc_timeout: Duration,
    pub(crate) rebalance_interval: Duration,
    pub(crate) broker_suspend_max_time: Duration,
    pub(crate) consumer_timeout_when_suspend: Duration,
    pub(crate) send_back_local_retry_delay: Duration,
    pub(crate) lock_interval: Duration,
    pub(crate) lock_max_live_time: Duration,
    pub(crate) serialize_type: SerializeType,
    pub(crate) decode: DecodeOptions,
    pub(crate) start_wall_ms: i64,
}

macro_rules! getters {
    ($($(#[$m:meta])* $name:ident: $ty:ty;)*) => {
        impl ConsumerConfig {
            $($(#[$m])* pub fn $name(&self) -> $ty { self.$name.clone() })*
        }
    };
}

getters! {
    /// `consumerGroup`.
    consumer_group: String;
    /// The client id (`clientIP@instanceName[@unitName]`).
    client_id: ClientId;
    /// `namesrvAddr`, split on `;`.
    name_servers: Vec<String>;
    /// `namespace`.
    namespace: Option<String>;
    /// ACL credentials (Java: an `AclClientRPCHook` with `SessionCredentials`), default none.
    credentials: Option<crate::codec::Credentials>;
    /// `messageModel`, default CLUSTERING.
    message_model: MessageModel;
    /// Concurrent or orderly listener.
    consume_mode: ConsumeMode;
    /// `consumeFromWhere`, default CONSUME_FROM_LAST_OFFSET.
    consume_from_where: ConsumeFromWhere;
    /// `consumeThreadMin`, default 20: listener concurrency in the adapters.
    consume_thread_min: usize;
    /// `consumeThreadMax`, default 20 (the effective concurrency is `consumeThreadMin`, as in Java).
    consume_thread_max: usize;
    /// `consumeMessageBatchMaxSize`, default 1.
    consume_message_batch_max_size: usize;
    /// `consumeTimeout`, default 15 min.
    consume_timeout: Duration;
    /// `awaitTerminationMillisWhenShutdown`; Java 0, ours 30 s: shutdown drains by default.
    await_termination_when_shutdown: Duration;
    /// `mqClientApiTimeout`, default 3 s.
    mq_client_api_timeout: Duration;
    /// The header encoding of requests (JSON, as Java).
    serialize_type: SerializeType;
    /// `maxReconsumeTimes` as configured (−1 = default).
    max_reconsume_times: i32;
}

impl ConsumerConfig {
    /// A builder for `group`, with Java's defaults.
    pub fn builder(group: impl Into<String>) -> ConsumerConfigBuilder {
        ConsumerConfigBuilder::new(group.into())
    }

    /// Subscriptions, in the order given.
    pub fn subscriptions(&self) -> &[Subscription] {
        &self.subscriptions
    }

    /// `maxReconsumeTimes` in effect: −1 means 16, in both modes (Java's orderly default is
    /// unbounded, which blocks a queue forever on a poison message; ours dead-letters it).
    pub fn effective_max_reconsume_times(&self) -> i32 {
        if self.max_reconsume_times < 0 { 16 } else { self.max_reconsume_times }
    }
}

/// Builder for [`ConsumerConfig`]. Setters take Java's units unless the type says otherwise.
#[derive(Clone, Debug)]
pub struct ConsumerConfigBuilder {
    c: ConsumerConfig,
    name_server_raw: Option<String>,
}

const MIB: usize = 1024 * 1024;

macro_rules! setters {
    ($($(#[$m:meta])* $name:ident: $ty:ty;)*) => {
        impl ConsumerConfigBuilder {
            $($(#[$m])* pub fn $name(mut self, v: $ty) -> Self { self.c.$name = v; self })*
        }
    };
}

setters! {
    /// `messageModel`: CLUSTERING (default) or BROADCASTING.
    message_model: MessageModel;
    /// Concurrent (default) or orderly consumption.
    consume_mode: ConsumeMode;
    /// `consumeFromWhere`, default CONSUME_FROM_LAST_OFFSET. Only used for queues with no offset.
    consume_from_where: ConsumeFromWhere;
    /// `allocateMessageQueueStrategy`, default AVG.
    allocate_strategy: AllocateStrategy;
    /// `consumeThreadMin`, default 20, 1..=1000.
    consume_thread_min: usize;
    /// `consumeThreadMax`, default 20, 1..=1000, ≥ min.
    consume_thread_max: usize;
    /// `consumeConcurrentlyMaxSpan`, default 2000, 1..=65535. Measured here as the highest pulled
    /// offset minus the commit watermark (Java samples the cache, which lets it grow unbounded).
    consume_concurrently_max_span: i64;
    /// `pullThresholdForQueue`, default 1000 messages, 1..=65535.
    pull_threshold_for_queue: usize;
    /// `pullThresholdSizeForQueue`, default 100 MiB, 1..=1024.
    pull_threshold_size_for_queue_mib: usize;
    /// `pullThresholdForTopic`, default off (−1 in Java), 1..=6 553 500.
    pull_threshold_for_topic: Option<usize>;
    /// `pullThresholdSizeForTopic` in MiB, default off (−1 in Java), 1..=102 400.
    pull_threshold_size_for_topic_mib: Option<usize>;
    /// `pullInterval`, default 0: delay after a pull that found messages, 0..=65535 ms.
    pull_interval: Duration;
    /// `pullBatchSize`, default 32, 1..=1024 (brokers cap a pull at 32 by default).
    pull_batch_size: i32;
    /// `pullBatchSizeInBytes`, default 256 KiB.
    pull_batch_size_in_bytes: i32;
    /// `clientRebalance`. Default **false** here, true in Java: each rebalance asks a broker
    /// how the group reads each topic (QUERY_ASSIGNMENT; 5.x brokers) and pops where an
    /// operator switched the group to POP (`mqadmin setConsumeMode`, `rmqcat group mode`);
    /// where it reads by PULL, queues are still allocated here, by `allocateMessageQueueStrategy`.
    /// True keeps pulling whatever the broker says, as Java's default does. Broadcasting
    /// consumers always allocate here and pull, as in Java; orderly ones too unless
    /// `orderly_pop` is on.
    client_rebalance: bool;
    /// `popThresholdForQueue`, default 96, 1..=65535: popped messages not yet acked or made
    /// invisible again, above which a POP queue pops no more for 50 ms.
    pop_threshold_for_queue: usize;
    /// `popInvisibleTime`, default 60 000 ms, 5 000..=300 000: how long popped messages stay
    /// invisible to the group before the broker hands them out again unless acked.
    pop_invisible_time: Duration;
    /// `popBatchNums`, default 32, 1..=32: most messages per pop.
    pop_batch_nums: i32;
    /// No Java counterpart (Java's orderly push consumer always pulls with locks); default
    /// false. True lets an orderly clustering consumer follow the broker's mode as a concurrent
    /// one does and, where the group pops, pop with `order=true`: the broker locks each queue
    /// for the group until what it handed out is acked, so members share queues without client
    /// locks; each queue's messages go to the listener one batch at a time, in order, and a
    /// suspended batch comes back in place, counted (`docs/pop.md` §0). Keep it false while
    /// orderly members that pull (Java's, or older ones) share the group: they would not see
    /// the broker's lock.
    orderly_pop: bool;
    /// `consumeMessageBatchMaxSize`, default 1, 1..=1024: messages per listener call.
    consume_message_batch_max_size: usize;
    /// `postSubscriptionWhenPull`, default false.
    post_subscription_when_pull: bool;
    /// No Java counterpart; default false (as Java). A queue a new group has never committed
    /// starts where the broker says: 4.9.x and 5.x brokers answer 0 for a "young" queue (its
    /// first message still in memory), so even CONSUME_FROM_LAST_OFFSET reads that history, as
    /// Java does. True asks 5.x brokers not to (`setZeroIfNotFound=false`), so LAST means only
    /// what arrives after the start; 4.9.x brokers ignore the request.
    new_group_skips_history: bool;
    /// `unitMode`, default false.
    unit_mode: bool;
    /// `maxReconsumeTimes`, default −1 (= 16), −1..=16 384.
    max_reconsume_times: i32;
    /// `suspendCurrentQueueTimeMillis`, default 1 s: orderly back-off, clamped to 10 ms..=30 s.
    suspend_current_queue_time: Duration;
    /// `consumeTimeout`, default 15 min (Java's unit is minutes): a batch running longer is sent
    /// back for retry. Checked per batch, on time, not on Java's 15–30 min sweep. ≥ 1 s.
    consume_timeout: Duration;
    /// `awaitTerminationMillisWhenShutdown`; Java 0, ours 30 s.
    await_termination_when_shutdown: Duration;
    /// `pollNameServerInterval`, default 30 s.
    poll_name_server_interval: Duration;
    /// `heartbeatBrokerInterval`, default 30 s.
    heartbeat_broker_interval: Duration;
    /// `persistConsumerOffsetInterval`, default 5 s.
    persist_consumer_offset_interval: Duration;
    /// `pullTimeDelayMillsWhenException`, default 1 s.
    pull_time_delay_when_exception: Duration;
    /// `PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL`, 50 ms (a constant in Java).
    pull_time_delay_when_flow_control: Duration;
    /// `mqClientApiTimeout`, default 3 s (route, heartbeat, consumer list, unregister).
    mq_client_api_timeout: Duration;
    /// Offset query/update and send-back timeout, 5 s (constants in Java).
    offset_rpc_timeout: Duration;
    /// `rocketmq.client.rebalance.waitInterval`, default 20 s.
    rebalance_interval: Duration;
    /// `BROKER_SUSPEND_MAX_TIME_MILLIS`, 15 s: how long the broker may hold a pull.
    broker_suspend_max_time: Duration;
    /// `CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND`, 30 s: client timeout of a held pull.
    consumer_timeout_when_suspend: Duration;
    /// Local re-consume delay when send-back and its fallback both failed, 5 s (Java constant).
    send_back_local_retry_delay: Duration;
    /// `rocketmq.client.rebalance.lockInterval`, default 20 s (orderly).
    lock_interval: Duration;
    /// `rocketmq.client.rebalance.lockMaxLiveTime`, default 30 s (orderly).
    lock_max_live_time: Duration;
    /// Request header encoding, default JSON (what Java sends; both verified against brokers).
    serialize_type: SerializeType;
    /// Pull-body decoding: decompression and its output cap (default 32 MiB).
    decode: DecodeOptions;
    /// Wall clock (ms since the epoch) at the `now` given to `Consumer::new`; the core derives
    /// timestamps from it. Adapters set it.
    start_wall_ms: i64;
    /// The client id; adapters set `ip@pid#nanos` as Java does. Default `127.0.0.1@DEFAULT`.
    client_id: ClientId;
}

impl ConsumerConfigBuilder {
    fn new(group: String) -> Self {
        let secs = Duration::from_secs;
        let ms = Duration::from_millis;
        Self {
            c: ConsumerConfig {
                consumer_group: group,
                client_id: ClientId::from_raw("127.0.0.1@DEFAULT"),
                name_servers: Vec::new(),
                namespace: None,
                credentials: None,
                message_model: MessageModel::Clustering,
                consume_mode: ConsumeMode::Concurrently,
                consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
                consume_timestamp: None,
                allocate_strategy: AllocateStrategy::Averagely,
                subscriptions: Vec::new(),
                consume_thread_min: 20,
                consume_thread_max: 20,
                consume_concurrently_max_span: 2000,
                pull_threshold_for_queue: 1000,
                pull_threshold_size_for_queue_mib: 100,
                pull_threshold_for_topic: None,
                pull_threshold_size_for_topic_mib: None,
                pull_interval: Duration::ZERO,
                pull_batch_size: 32,
                client_rebalance: false,
                pop_threshold_for_queue: 96,
                pop_invisible_time: Duration::from_secs(60),
                pop_batch_nums: 32,
                orderly_pop: false,
                pull_batch_size_in_bytes: 256 * 1024,
                consume_message_batch_max_size: 1,
                post_subscription_when_pull: false,
                new_group_skips_history: false,
                unit_mode: false,
                max_reconsume_times: -1,
                suspend_current_queue_time: secs(1),
                consume_timeout: secs(15 * 60),
                await_termination_when_shutdown: secs(30),
                poll_name_server_interval: secs(30),
                heartbeat_broker_interval: secs(30),
                persist_consumer_offset_interval: secs(5),
                pull_time_delay_when_exception: secs(1),
                pull_time_delay_when_flow_control: ms(50),
                mq_client_api_timeout: secs(3),
                offset_rpc_timeout: secs(5),
                rebalance_interval: secs(20),
                broker_suspend_max_time: secs(15),
                consumer_timeout_when_suspend: secs(30),
                send_back_local_retry_delay: secs(5),
                lock_interval: secs(20),
                lock_max_live_time: secs(30),
                serialize_type: SerializeType::Json,
                decode: DecodeOptions { decompress: true, max_body_size: DEFAULT_MAX_BODY_SIZE },
                start_wall_ms: 0,
            },
            name_server_raw: None,
        }
    }

    /// `namesrvAddr`: one address or several separated by `;`. Required: this client never looks
    /// name servers up over HTTP.
    pub fn name_server(mut self, addr: impl Into<String>) -> Self {
        self.name_server_raw = Some(addr.into());
        self
    }

    /// `namespace`: topics and groups travel as `namespace%name`; messages come back without it.
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.c.namespace = Some(ns.into()).filter(|n: &String| !n.is_empty());
        self
    }

    /// ACL credentials: every request is signed as Java's `AclClientRPCHook(new
    /// SessionCredentials(accessKey, secretKey))` signs it. Default none.
    pub fn credentials(mut self, c: crate::codec::Credentials) -> Self {
        self.c.credentials = Some(c);
        self
    }

    /// `subscribe(topic, expression)` with a TAG expression (`*`, `a || b`).
    pub fn subscribe(mut self, topic: impl Into<String>, expression: impl Into<String>) -> Self {
        self.c.subscriptions.push(Subscription {
            topic: topic.into(),
            expression: expression.into(),
            expression_type: ExpressionType::Tag,
        });
        self
    }

    /// `subscribe(topic, MessageSelector.bySql(expression))`. Needs `enablePropertyFilter=true`.
    pub fn subscribe_sql(mut self, topic: impl Into<String>, expression: impl Into<String>) -> Self {
        self.c.subscriptions.push(Subscription {
            topic: topic.into(),
            expression: expression.into(),
            expression_type: ExpressionType::Sql92,
        });
        self
    }

    /// `consumeTimestamp` as milliseconds since the epoch, for CONSUME_FROM_TIMESTAMP. Java takes
    /// `yyyyMMddHHmmss` in local time; default "30 minutes before start".
    pub fn consume_timestamp_ms(mut self, ms: i64) -> Self {
        self.c.consume_timestamp = Some(ms);
        self
    }

    /// Validate and build.
    pub fn build(mut self) -> Result<ConsumerConfig, ConfigError> {
        let c = &mut self.c;
        let bad =
            |knob, value: &dyn fmt::Display, allowed| ConfigError { knob, value: value.to_string(), allowed };
        let group = &c.consumer_group;
        if group.is_empty()
            || group.len() > 255
            || !group.bytes().all(|b| b.is_ascii_alphanumeric() || b"%|_-".contains(&b))
            || group == "DEFAULT_CONSUMER"
        {
            return Err(bad(
                "consumerGroup",
                group,
                "1..=255 characters of [%|a-zA-Z0-9_-], not DEFAULT_CONSUMER",
            ));
        }
        let raw = self.name_server_raw.take().unwrap_or_default();
        c.name_servers = raw.split(';').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
        if c.name_servers.is_empty() || c.name_servers.iter().any(|a| !is_host_port(a)) {
            return Err(bad("namesrvAddr", &raw, "one or more host:port separated by ';'"));
        }
        if c.subscriptions.is_empty() {
            return Err(bad("subscription", &"(none)", "at least one subscribe(topic, expression)"));
        }
        for s in &c.subscriptions {
            let t = &s.topic;
            if t.is_empty()
                || t.len() > 127
                || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b"%|_-".contains(&b))
            {
                return Err(bad("subscription.topic", t, "1..=127 characters of [%|a-zA-Z0-9_-]"));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(dup) = c.subscriptions.iter().find(|s| !seen.insert(s.topic.clone())) {
            return Err(bad("subscription.topic", &dup.topic, "each topic once"));
        }
        range(c.consume_thread_min, 1, 1000, "consumeThreadMin", "1..=1000")?;
        range(c.consume_thread_max, 1, 1000, "consumeThreadMax", "1..=1000")?;
        if c.consume_thread_min > c.consume_thread_max {
            return Err(bad("consumeThreadMin", &c.consume_thread_min, "<= consumeThreadMax"));
        }
        range(c.consume_concurrently_max_span, 1, 65_535, "consumeConcurrentlyMaxSpan", "1..=65535")?;
        range(c.pull_threshold_for_queue, 1, 65_535, "pullThresholdForQueue", "1..=65535")?;
        range(c.pull_threshold_size_for_queue_mib, 1, 1024, "pullThresholdSizeForQueue", "1..=1024 (MiB)")?;
        if let Some(t) = c.pull_threshold_for_topic {
            range(t, 1, 6_553_500, "pullThresholdForTopic", "1..=6553500 or off")?;
        }
        if let Some(t) = c.pull_threshold_size_for_topic_mib {
            range(t, 1, 102_400, "pullThresholdSizeForTopic", "1..=102400 (MiB) or off")?;
        }
        range(c.pull_interval.as_millis(), 0, 65_535, "pullInterval", "0..=65535 ms")?;
        range(c.pull_batch_size, 1, 1024, "pullBatchSize", "1..=1024")?;
        range(c.pop_threshold_for_queue, 1, 65_535, "popThresholdForQueue", "1..=65535")?;
        range(c.pop_invisible_time.as_millis(), 5_000, 300_000, "popInvisibleTime", "5000..=300000 ms")?;
        range(c.pop_batch_nums, 1, 32, "popBatchNums", "1..=32")?;
        range(c.pull_batch_size_in_bytes, 1, i32::MAX, "pullBatchSizeInBytes", ">= 1")?;
        range(c.consume_message_batch_max_size, 1, 1024, "consumeMessageBatchMaxSize", "1..=1024")?;
        range(c.max_reconsume_times, -1, 16_384, "maxReconsumeTimes", "-1..=16384")?;
        range(c.consume_timeout.as_millis(), 1000, u128::MAX, "consumeTimeout", ">= 1 s")?;
        let positive = [
            (c.poll_name_server_interval, "pollNameServerInterval"),
            (c.heartbeat_broker_interval, "heartbeatBrokerInterval"),
            (c.persist_consumer_offset_interval, "persistConsumerOffsetInterval"),
            (c.pull_time_delay_when_exception, "pullTimeDelayMillsWhenException"),
            (c.mq_client_api_timeout, "mqClientApiTimeout"),
            (c.offset_rpc_timeout, "offsetRpcTimeout"),
            (c.rebalance_interval, "rebalanceInterval"),
            (c.consumer_timeout_when_suspend, "consumerTimeoutMillisWhenSuspend"),
            (c.lock_interval, "lockInterval"),
            (c.lock_max_live_time, "lockMaxLiveTime"),
        ];
        for (d, knob) in positive {
            if d.is_zero() {
                return Err(bad(knob, &format!("{d:?}"), "> 0"));
            }
        }
        // Every duration becomes a deadline `now + d`: one past what an Instant holds would
        // panic there, so none may exceed a week (Java has no bound; none of its defaults
        // comes near one). suspendCurrentQueueTimeMillis is clamped below, as Java clamps it.
        let week = Duration::from_secs(7 * 24 * 3600);
        let durations = [
            (c.consume_timeout, "consumeTimeout"),
            (c.await_termination_when_shutdown, "awaitTerminationMillisWhenShutdown"),
            (c.pull_time_delay_when_flow_control, "pullTimeDelayMillsWhenFlowControl"),
            (c.broker_suspend_max_time, "brokerSuspendMaxTimeMillis"),
            (c.send_back_local_retry_delay, "sendBackLocalRetryDelay"),
        ];
        for (d, knob) in durations.into_iter().chain(positive) {
            if d > week {
                return Err(bad(knob, &format!("{d:?}"), "<= 7 days"));
            }
        }
        if c.consumer_timeout_when_suspend <= c.broker_suspend_max_time {
            return Err(bad(
                "consumerTimeoutMillisWhenSuspend",
                &format!("{:?}", c.consumer_timeout_when_suspend),
                "> brokerSuspendMaxTimeMillis",
            ));
        }
        c.suspend_current_queue_time =
            c.suspend_current_queue_time.clamp(Duration::from_millis(10), Duration::from_secs(30));
        if c.decode.max_body_size == 0 {
            return Err(bad("maxBodySize", &0, ">= 1"));
        }
        Ok(self.c)
    }
}

fn range<T: PartialOrd + fmt::Display>(
    v: T,
    lo: T,
    hi: T,
    knob: &'static str,
    allowed: &'static str,
) -> Result<(), ConfigError> {
    if v < lo || v > hi {
        return Err(ConfigError { knob, value: v.to_string(), allowed });
    }
    Ok(())
}

fn is_host_port(s: &str) -> bool {
    match s.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0),
        None => false,
    }
}

impl ConsumerConfig {
    pub(crate) fn pull_threshold_size_for_queue_bytes(&self) -> usize {
        self.pull_threshold_size_for_queue_mib * MIB
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> ConsumerConfigBuilder {
        ConsumerConfig::builder("g").name_server("127.0.0.1:9876").subscribe("T", "*")
    }

    #[test]
    fn defaults_are_javas() {
        let c = base().build().unwrap();
        assert_eq!(c.pull_batch_size, 32);
        assert_eq!(c.pull_threshold_for_queue, 1000);
        assert_eq!(c.consume_concurrently_max_span, 2000);
        assert_eq!(c.consume_from_where(), ConsumeFromWhere::ConsumeFromLastOffset);
        assert_eq!(c.effective_max_reconsume_times(), 16);
        assert_eq!(c.name_servers(), ["127.0.0.1:9876"]);
    }

    #[test]
    fn errors_name_the_knob_and_range() {
        let e = base().pull_batch_size(0).build().unwrap_err();
        assert_eq!(e.to_string(), "invalid pullBatchSize = 0: allowed 1..=1024");
        assert_eq!(
            base().consume_thread_min(30).consume_thread_max(20).build().unwrap_err().knob,
            "consumeThreadMin"
        );
        assert_eq!(
            ConsumerConfig::builder("DEFAULT_CONSUMER")
                .name_server("a:1")
                .subscribe("T", "*")
                .build()
                .unwrap_err()
                .knob,
            "consumerGroup"
        );
        assert_eq!(ConsumerConfig::builder("g").subscribe("T", "*").build().unwrap_err().knob, "namesrvAddr");
        assert_eq!(
            ConsumerConfig::builder("g").name_server("x:1;y").subscribe("T", "*").build().unwrap_err().knob,
            "namesrvAddr"
        );
        assert_eq!(base().subscribe("T", "a").build().unwrap_err().knob, "subscription.topic");
        assert_eq!(base().subscribe("bad topic", "a").build().unwrap_err().knob, "subscription.topic");
        assert_eq!(
            base().consume_timeout(Duration::from_millis(10)).build().unwrap_err().knob,
            "consumeTimeout"
        );
        assert_eq!(
            base().pull_threshold_for_topic(Some(0)).build().unwrap_err().knob,
            "pullThresholdForTopic"
        );
        let c = base()
            .name_server("a:1; b:2")
            .suspend_current_queue_time(Duration::from_secs(99))
            .build()
            .unwrap();
        assert_eq!(c.name_servers(), ["a:1", "b:2"]);
        assert_eq!(c.suspend_current_queue_time, Duration::from_secs(30), "clamped as Java does");
    }
}
