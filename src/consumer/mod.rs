//! The sequencer: `consumer/` is the only part of the crate that decides, and the only one that
//! emits outputs. This file routes every input to the file that handles it; the pieces outside
//! `consumer/` (process queue, allocation strategies, codec, protocol, timers) are pure and are
//! called from here.
//!
//! ```text
//! handle(Frame)            ─ response? ─ requests.rs: pending table ─┬─ routes.rs     (route, heartbeat)
//!                          │                                          ├─ rebalance.rs  (consumer list, start offsets)
//!                          │                                          ├─ pull.rs       (pull results)
//!                          │                                          ├─ consume.rs    (send-back, retry send)
//!                          │                                          ├─ locks.rs      (lock, renew, unlock)
//!                          │                                          └─ offsets.rs    (persist, unregister)
//!                          └ request ─ broker_requests.rs (notify, reset, running info, consume directly)
//! handle(ConsumeResult)    ─ consume.rs (concurrent) / orderly.rs
//! handle(Command)          ─ lifecycle.rs
//! handle_timeout           ─ on_timer below
//! ```

mod broker_requests;
mod consume;
mod in_flight;
mod lifecycle;
mod locks;
mod offsets;
mod orderly;
mod pop;
mod pop_ack;
mod pop_orderly;
mod pull;
mod queues;
mod rebalance;
mod requests;
mod routes;
mod seek;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hashbrown::HashMap;

use crate::config::ConsumerConfig;
use crate::error::UsageError;
use crate::event::{BatchId, DisconnectReason, Event, Input, Output, PeerAddr};
use crate::message::MessageQueue;
use crate::namespace::Namespace;
use crate::protocol::body::{HeartbeatData, SubscriptionData};
use crate::stats::{SAMPLE_EVERY, Stats, StatsBook, TopicStats};
use crate::timer::{Timer, TimerQueue};

use consume::{DirectReply, LocalRetry, SendBack};
use in_flight::InFlight;
use lifecycle::RunState;
use queues::QueueTable;
use requests::{PeerState, Pending};
use routes::TopicRoute;

/// One held queue, as [`Consumer::queue_snapshots`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueSnapshot {
    /// The queue (namespace stripped).
    pub queue: MessageQueue,
    /// Pulling (false while its start offset is looked up).
    pub pulling: bool,
    /// Next offset to pull.
    pub next_offset: i64,
    /// Offset that would be committed now (−1 = none yet).
    pub commit_offset: i64,
    /// Lowest unfinished offset, or `next_offset` when nothing is held.
    pub watermark: i64,
    /// Messages held.
    pub cached_count: usize,
    /// Body bytes held.
    pub cached_bytes: usize,
    /// Highest offset pulled (−1 = none).
    pub max_pulled: i64,
    /// Orderly: the broker lock is held and trusted (always false in other modes).
    pub locked: bool,
    /// Orderly: a batch of this queue is with user code.
    pub consuming: bool,
    /// POP: the broker hands this queue's messages out (queue id −1: every queue of the topic
    /// on that broker); `cached_count` is then the messages popped and not yet answered, and
    /// the offsets are unused (−1).
    pub popping: bool,
    /// The queue's max offset on the broker, from the last pull answer (−1 before one).
    pub broker_max_offset: i64,
}

impl QueueSnapshot {
    /// Messages stored and not yet committed: the broker's max offset minus the offset that would
    /// be committed now (what `mqadmin consumerProgress` shows as Diff, from this client's side;
    /// None until both are known).
    pub fn lag(&self) -> Option<i64> {
        let committed = if self.commit_offset >= 0 { self.commit_offset } else { self.watermark };
        (self.broker_max_offset >= 0 && committed >= 0).then(|| (self.broker_max_offset - committed).max(0))
    }
}

/// The push consumer state machine.
///
/// Drive it as the crate docs describe: feed inputs with [`handle`](Self::handle) and
/// [`handle_timeout`](Self::handle_timeout), then drain [`poll_output`](Self::poll_output) and sleep
/// until [`poll_timeout`](Self::poll_timeout) or the next input.
pub struct Consumer {
    cfg: ConsumerConfig,
    ns: Namespace,
    /// Wire name of the group (with namespace).
    group: String,
    start: Instant,
    now: Instant,
    /// `now` as [`ms_since_start`](Self::ms_since_start) and [`wall_ms`](Self::wall_ms) give
    /// it: read per batch, so worked out once per input.
    now_ms: u32,
    wall_now_ms: i64,
    state: RunState,
    paused: bool,
    /// Queues paused by the application (`Command::PauseQueues`); usually none.
    paused_queues: Vec<crate::event::QueueSelector>,
    outputs: VecDeque<Output>,
    timers: TimerQueue,
    // requests
    pending: HashMap<i32, Pending>,
    next_opaque: i32,
    peers: BTreeMap<PeerAddr, PeerState>,
    name_servers: Vec<PeerAddr>,
    name_server_index: usize,
    /// Per topic, failed route requests moved on to the next name server since the last refresh
    /// (at most one round of the list, then the refresh's back-off).
    route_failovers: BTreeMap<String, usize>,
    // topology
    subs: BTreeMap<String, SubscriptionData>,
    heartbeat: Arc<HeartbeatData>,
    routes: BTreeMap<String, TopicRoute>,
    brokers: BTreeMap<String, BTreeMap<i64, PeerAddr>>,
    route_retry: Duration,
    /// When the last early route refresh (after a broker failure) was due.
    last_early_refresh: Option<Instant>,
    route_queries: BTreeSet<String>,
    rebalancing: BTreeMap<String, bool>,
    rebalance_rotation: usize,
    last_rebalance: Option<Instant>,
    // queues and consumption
    queues: QueueTable,
    local_offsets: BTreeMap<MessageQueue, i64>,
    local_offsets_dirty: bool,
    /// Commits of queues dropped because their broker left the route; a queue coming back
    /// starts no lower (see `apply_assignment`).
    gone_offsets: BTreeMap<MessageQueue, i64>,
    batches: HashMap<BatchId, InFlight>,
    /// Concurrent batches with user code now (at most `consumeThreadMin`).
    running: usize,
    /// Concurrent batches waiting for a listener slot, in order (their entries are in `batches`).
    waiting: VecDeque<crate::event::Batch>,
    /// Consume deadlines of started batches, earliest first.
    timeouts: VecDeque<(Instant, BatchId)>,
    /// The adapter queues batches itself and reports starts (see [`Consumer::report_starts`]).
    starts_reported: bool,
    direct: HashMap<BatchId, DirectReply>,
    next_batch: u64,
    send_backs: HashMap<u64, SendBack>,
    /// Offset updates waiting for the one in flight for their queue.
    persist_after: HashMap<crate::timer::QueueKey, offsets::QueuedPersist>,
    /// The brokers' offset maps (per topic) this consumer has created or is creating.
    offset_maps: HashMap<offsets::OffsetMapKey, offsets::OffsetMap>,
    local_retries: BTreeMap<u64, LocalRetry>,
    next_job: u64,
    shutdown_outstanding: usize,
    stats: Stats,
    /// Per-topic windows (pull and consume rates), by the slot each queue keeps.
    windows: StatsBook,
    // orderly locks
    /// Queues with UNLOCK_BATCH_MQ requests in flight, and how many (not locked again until
    /// they answer).
    unlocking: BTreeMap<MessageQueue, u32>,
    /// Released queues whose unlock waits for their final offset update (the offset sent).
    release_unlocks: HashMap<crate::timer::QueueKey, (MessageQueue, i64)>,
    /// Topics (wire names) whose pulls the broker refuses for want of permission: reported once,
    /// pulled again only every [`pull::PERMISSION_RETRY`] until a pull is served.
    refused_topics: hashbrown::HashSet<String>,
    /// Topics (wire names) left out of heartbeats until the instant: a 4.9.x ACL broker refuses
    /// a whole heartbeat whose subscriptions name one topic without the SUB right.
    unheartbeated: BTreeMap<String, Instant>,
    // POP
    /// Brokers that answered a POP request with REQUEST_CODE_NOT_SUPPORTED (4.x): never asked again.
    no_pop: BTreeSet<PeerAddr>,
    /// Queues (wire names) the brokers assigned in POP mode.
    pop_queues: BTreeSet<MessageQueue>,
    /// Acks and invisibility changes in flight (shutdown waits for them).
    pop_requests_out: usize,
    /// Acks waiting for the next poll of outputs (`pop_ack.rs`).
    pop_acks: Vec<pop_ack::QueuedAck>,
    /// Brokers that answered BATCH_ACK_MESSAGE with REQUEST_CODE_NOT_SUPPORTED: acked one by one.
    no_batch_ack: BTreeSet<PeerAddr>,
    /// Orderly POP: per popping queue and real queue id, messages waiting for the listener.
    pop_order: HashMap<(crate::timer::QueueKey, i32), pop_orderly::PopOrderQueue>,
    /// Orderly POP: how often the listener failed each message not yet acked.
    pop_order_failures: HashMap<pop_orderly::StoredAt, i32>,
    /// Orderly POP: per real queue, the last offset a listener consumed (`pop_orderly.rs`).
    pop_order_done: HashMap<pop_orderly::QueueAt, i64>,
}

impl Consumer {
    /// A consumer that starts at `now`: it looks up routes at once, then heartbeats and
    /// rebalances. It cannot fail: the configuration was validated when it was built.
    pub fn new(config: ConsumerConfig, now: Instant) -> Self {
        let ns = Namespace::new(config.namespace.clone());
        let group = ns.wrap(&config.consumer_group);
        let name_servers = config.name_servers.iter().map(|a| PeerAddr::new(a.as_str())).collect();
        let mut c = Self {
            ns,
            group,
            start: now,
            now,
            now_ms: 0,
            wall_now_ms: config.start_wall_ms,
            state: RunState::Running,
            paused: false,
            paused_queues: Vec::new(),
            outputs: VecDeque::new(),
            timers: TimerQueue::default(),
            pending: HashMap::new(),
            next_opaque: 1,
            peers: BTreeMap::new(),
            name_servers,
            name_server_index: routes::first_name_server(
                config.client_id.as_str(),
                config.name_servers.len(),
            ),
            route_failovers: BTreeMap::new(),
            subs: BTreeMap::new(),
            heartbeat: Arc::new(HeartbeatData {
                client_id: String::new(),
                producer_data_set: vec![],
                consumer_data_set: vec![],
                heartbeat_fingerprint: 0,
                without_sub: false,
            }),
            routes: BTreeMap::new(),
            brokers: BTreeMap::new(),
            route_retry: Duration::from_secs(1),
            last_early_refresh: None,
            route_queries: BTreeSet::new(),
            rebalancing: BTreeMap::new(),
            rebalance_rotation: 0,
            last_rebalance: None,
            queues: QueueTable::default(),
            local_offsets: BTreeMap::new(),
            local_offsets_dirty: false,
            gone_offsets: BTreeMap::new(),
            batches: HashMap::new(),
            running: 0,
            waiting: VecDeque::new(),
            timeouts: VecDeque::new(),
            starts_reported: false,
            direct: HashMap::new(),
            next_batch: 1,
            send_backs: HashMap::new(),
            persist_after: HashMap::new(),
            offset_maps: HashMap::new(),
            local_retries: BTreeMap::new(),
            next_job: 1,
            shutdown_outstanding: 0,
            stats: Stats::default(),
            windows: StatsBook::default(),
            unlocking: BTreeMap::new(),
            release_unlocks: HashMap::new(),
            refused_topics: hashbrown::HashSet::new(),
            unheartbeated: BTreeMap::new(),
            no_pop: BTreeSet::new(),
            pop_queues: BTreeSet::new(),
            pop_requests_out: 0,
            pop_acks: Vec::new(),
            no_batch_ack: BTreeSet::new(),
            pop_order: HashMap::new(),
            pop_order_failures: HashMap::new(),
            pop_order_done: HashMap::new(),
            cfg: config,
        };
        c.start();
        c
    }

    /// Feed one input. Errors are caller mistakes and change nothing.
    pub fn handle(&mut self, input: Input, now: Instant) -> Result<(), UsageError> {
        if self.state == RunState::Terminated {
            return Err(UsageError::Terminated);
        }
        self.advance_clock(now);
        match input {
            Input::Frame { peer, command } => {
                self.heard_from(&peer);
                if command.is_response() {
                    self.on_response(peer, command);
                } else {
                    self.on_broker_request(peer, command);
                }
            }
            Input::Disconnected { peer, reason } => {
                if reason != DisconnectReason::Requested {
                    if reason != DisconnectReason::BackingOff {
                        self.broker_failed(&peer);
                    }
                    self.emit(Event::ConnectionLost { peer: peer.clone(), reason });
                }
                self.on_disconnected(&peer)
            }
            Input::Started { batch, at } => self.on_started(batch, at),
            Input::Consumed { batch, result } => self.on_consumed(batch, result)?,
            Input::Command(cmd) => self.on_command(cmd)?,
        }
        self.check_shutdown();
        Ok(())
    }

    /// The adapter keeps its own queue of batches for its listener threads and reports with
    /// [`Input::Started`] when user code starts on each. From then on every concurrent batch is
    /// handed out at once (rather than one per free `consumeThreadMin` slot), a pull's ready
    /// ones together as one [`Output::ConsumeRun`]; the adapter runs
    /// at most that many at a time, its consume timeout counts from the reported start, and
    /// batches that have not started when their queue goes away, or when the shutdown deadline
    /// (`awaitTerminationMillisWhenShutdown`) passes, are taken back with [`Output::Withdraw`]. Call before the first [`handle`](Self::handle).
    pub fn report_starts(&mut self) {
        self.starts_reported = true;
    }

    /// Several results at once, as [`Input::Consumed`] each, in order: the clock and the
    /// shutdown progress are looked at once for all of them. A refused result (an unknown
    /// batch, or the consumer terminated) goes to `refused` and changes nothing.
    pub fn handle_consumed(
        &mut self,
        results: impl IntoIterator<Item = (BatchId, crate::event::ConsumeResult)>,
        now: Instant,
        mut refused: impl FnMut(BatchId, UsageError),
    ) {
        if self.state == RunState::Terminated {
            results.into_iter().for_each(|(batch, _)| refused(batch, UsageError::Terminated));
            return;
        }
        self.advance_clock(now);
        let mut results = results.into_iter().peekable();
        while let Some((batch, result)) = results.next() {
            // Units of one run that succeeded in full are finished together: one look-up and
            // one commit update for them all.
            if self.consumed_together(batch, &result, &mut results) {
                continue;
            }
            if let Err(e) = self.on_consumed(batch, result) {
                refused(batch, e);
            }
        }
        self.check_shutdown();
    }

    /// Fire every timer due at `now`. Early or repeated calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.state == RunState::Terminated {
            return;
        }
        self.advance_clock(now);
        while let Some(timer) = self.timers.pop_due(self.now) {
            self.on_timer(timer);
        }
        self.check_shutdown();
    }

    /// The next action, in a deterministic order.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        if self.outputs.is_empty() && !self.pop_acks.is_empty() {
            // Acks of the results fed since the last poll share requests (`pop_ack.rs`).
            self.flush_pop_acks();
            // Shutdown waited for them; if none could be sent (no route), it goes on now.
            self.check_shutdown();
        }
        self.outputs.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) wants to run next; `None` once terminated.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.state == RunState::Terminated { None } else { self.timers.next_deadline() }
    }

    /// True from [`Command::Shutdown`](crate::Command::Shutdown) until termination.
    pub fn is_shutting_down(&self) -> bool {
        !matches!(self.state, RunState::Running | RunState::Terminated)
    }

    /// True once [`Event::Terminated`] was emitted.
    pub fn is_terminated(&self) -> bool {
        self.state == RunState::Terminated
    }

    /// This client's id.
    pub fn client_id(&self) -> &crate::ClientId {
        &self.cfg.client_id
    }

    /// The configuration.
    pub fn config(&self) -> &ConsumerConfig {
        &self.cfg
    }

    /// Queues consumed now, in order.
    pub fn assignment(&self) -> impl Iterator<Item = &MessageQueue> + '_ {
        self.queues.keys()
    }

    /// A snapshot of every held queue, in queue order.
    pub fn queue_snapshots(&self) -> Vec<QueueSnapshot> {
        self.queues
            .all_keys()
            .into_iter()
            .filter_map(|k| Some((k, self.queues.get(k)?)))
            .map(|(k, q)| QueueSnapshot {
                queue: (*q.user_mq).clone(),
                pulling: q.phase == queues::Phase::Pulling,
                next_offset: q.next_offset,
                commit_offset: q.offset.value(),
                watermark: if q.phase == queues::Phase::Pulling { q.pq.watermark(q.next_offset) } else { -1 },
                cached_count: if q.phase == queues::Phase::Popping { q.pop_unanswered } else { q.pq.count() },
                cached_bytes: q.pq.bytes(),
                max_pulled: q.pq.max_offset(),
                locked: self.holds_lock(k),
                consuming: q.consuming.is_some(),
                popping: q.phase == queues::Phase::Popping,
                broker_max_offset: q.broker_max_offset,
            })
            .collect()
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Rates per subscribed topic (the group's retry topic included, in clustering), over the
    /// window [`TopicStats`] describes; in topic order.
    pub fn topic_stats(&self) -> Vec<TopicStats> {
        self.subs.keys().map(|t| self.topic_report(t, self.ns.unwrap(t))).collect()
    }

    /// One topic's [`TopicStats`], named `name`; zero for a topic nothing was counted for.
    fn topic_report(&self, wire: &str, name: &str) -> TopicStats {
        self.windows.of(wire).map_or_else(
            || TopicStats { topic: name.to_owned(), ..TopicStats::default() },
            |w| w.report(name),
        )
    }

    /// Hold a queue: its table entry, and its topic's statistics slot.
    fn hold_queue(&mut self, mq: MessageQueue, user_mq: Arc<MessageQueue>) -> crate::timer::QueueKey {
        let slot = self.windows.slot(&mq.topic);
        let key = self.queues.insert(mq, user_mq);
        if let Some(q) = self.queues.get_mut(key) {
            q.stats_slot = slot;
        }
        key
    }

    /// Broadcasting: hand back the offsets last persisted with [`Output::PersistLocalOffsets`].
    /// Call before the first `handle`; they are used as the stored offsets of those queues.
    pub fn restore_local_offsets(&mut self, offsets: impl IntoIterator<Item = (MessageQueue, i64)>) {
        self.local_offsets.extend(offsets.into_iter().filter(|(_, o)| *o >= 0));
    }

    fn advance_clock(&mut self, now: Instant) {
        // Time never goes backwards here, whatever the caller passes.
        if now > self.now {
            self.now = now;
            self.now_ms = self.ms_since_start(now);
            self.wall_now_ms = self.cfg.start_wall_ms + (now - self.start).as_millis() as i64;
        }
    }

    /// Milliseconds from the consumer's start to `t` (wraps after 49 days; differences of two
    /// stay right across the wrap).
    fn ms_since_start(&self, t: Instant) -> u32 {
        t.saturating_duration_since(self.start).as_millis() as u32
    }

    /// Wall clock, derived from the caller's start time.
    fn wall_ms(&self) -> i64 {
        self.wall_now_ms
    }

    fn emit(&mut self, event: Event) {
        self.outputs.push_back(Output::Event(event));
    }

    fn on_timer(&mut self, timer: Timer) {
        match timer {
            Timer::RouteRefresh => self.refresh_routes(),
            Timer::Heartbeat => self.heartbeat_all(),
            Timer::Rebalance => self.rebalance_all(),
            Timer::PersistOffsets => self.persist_offsets_periodic(),
            Timer::Pull(key) => self.try_pull(key),
            Timer::ComputeOffset(key) => self.compute_start_offset(key),
            Timer::Request(opaque) => self.on_request_timeout(opaque),
            Timer::ConsumeTimeoutScan => self.scan_consume_timeouts(),
            Timer::LocalRetry(id) => self.run_local_retry(id),
            Timer::ShutdownDeadline => self.on_shutdown_deadline(),
            // Nothing to do but look again (`check_shutdown` runs after every timer).
            Timer::PullCommitsSettled => {}
            Timer::ShutdownLimit => self.on_shutdown_limit(),
            Timer::LockRenew => self.renew_locks(),
            Timer::PopOrderRenew => self.renew_pop_order(),
            Timer::StatsSample => {
                self.windows.sample(self.now);
                self.timers.set(Timer::StatsSample, self.now + SAMPLE_EVERY);
            }
            Timer::Lock(key) => {
                if self.queues.get(key).is_some_and(|q| q.phase == queues::Phase::Locking) {
                    self.lock_queues(&[key]);
                }
            }
            Timer::OrderlyResume(key) => self.on_orderly_resume(key),
        }
    }
}
