//! The simulated world: the network between consumers and servers, scheduled faults, the
//! listener, and the stepping loop. Consumers run inside a [`Driver`], exactly as adapters run
//! them: links are connected (or refused) after a hop, every frame goes out as bytes finished by
//! the driver and comes back as bytes the driver frames, in pieces when reads are split.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::broker::{ConnId, SimBroker, SimBrokerConfig};
use super::invariants::Checker;
use super::name_server::SimNameServer;
use super::rng::SimRng;
use crate::codec::{RemotingCodec, encode_to_bytes};
use crate::config::ConsumerConfigBuilder;
use crate::driver::{Driver, DriverOutput, LinkId};
use crate::event::{Batch, BatchId, ConsumeResult, Event, IoFailure, PeerAddr};
use crate::message::{Message, MessageQueue, keys};
use crate::protocol::RemotingCommand;
use crate::{ClientId, Command, Consumer};

/// What the listener decided for a batch, and how long user code took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The result handed back.
    pub result: ConsumeResult,
    /// How long the listener runs before answering.
    pub took: Duration,
}

impl Verdict {
    /// Instant success.
    pub const OK: Self = Self { result: ConsumeResult::SUCCESS, took: Duration::ZERO };
    /// Instant "reconsume later".
    pub const LATER: Self = Self { result: ConsumeResult::LATER, took: Duration::ZERO };
}

/// User code in the simulation: (consumer index, batch, rng) → verdict.
pub type Listener = Box<dyn FnMut(usize, &Batch, &mut SimRng) -> Verdict>;

/// Network fault rates, applied to every frame a server sends to a consumer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Faults {
    /// Probability a frame is lost (the request then times out).
    pub drop: f64,
    /// Probability a frame is delivered twice.
    pub duplicate: f64,
    /// Probability a frame is held back by `delay_by`.
    pub delay: f64,
    /// Extra delay for delayed frames.
    pub delay_by: Duration,
    /// Requests with these codes never reach a broker (their senders time out).
    pub lose_requests: &'static [i32],
    /// Answers to requests with these codes arrive with an unreadable body.
    pub garble_answers: &'static [i32],
    /// Probability a connect is refused (the driver then backs off).
    pub refuse_connects: f64,
}

/// A fault scheduled at a point in virtual time.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Close every connection to broker `i`.
    ResetBroker(usize),
    /// Restart broker `i`; it refuses connections for `down`, and the name server leaves it out
    /// of routes meanwhile.
    RestartBroker(usize, Duration),
    /// Kill broker `i` (kill -9) for `down`: as a restart, and it loses every group's committed
    /// offsets (not flushed yet).
    KillBroker(usize, Duration),
    /// Kill consumer `i` without shutdown.
    CrashConsumer(usize),
    /// Start consumer `i` again (a new process: new client id).
    RestartConsumer(usize),
    /// Graceful shutdown of consumer `i`.
    ShutdownConsumer(usize),
    /// Set the network fault rates.
    SetFaults(Faults),
    /// Broker `i`'s connections, current and new, go silent: connects succeed, nothing is
    /// answered, nothing closes (a half-open link after a partition, a hung broker); the broker
    /// does not see the client close them either.
    BlackholeBroker(usize),
    /// New connections to broker `i` work again; the black-holed ones stay dead until closed.
    HealBroker(usize),
}

/// A message the simulation produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Produced {
    /// Its `UNIQ_KEY`.
    pub key: String,
    /// Where it was stored.
    pub queue: MessageQueue,
    /// Its queue offset.
    pub offset: i64,
    /// Its tag.
    pub tag: Option<String>,
}

/// One message handed to the listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumed {
    /// Which consumer.
    pub consumer: usize,
    /// `UNIQ_KEY` (or offset id).
    pub key: String,
    /// The queue it was pulled from (`%RETRY%group` for retries).
    pub queue: MessageQueue,
    /// Its offset in that queue.
    pub offset: i64,
    /// Its topic as the listener saw it.
    pub topic: String,
    /// How many times it had been consumed before.
    pub reconsume_times: i32,
    /// Whether the listener succeeded on it.
    pub ok: bool,
    /// Virtual time since start.
    pub at: Duration,
    /// Its POP receipt (`POP_CK`) when it was popped, `None` when pulled.
    pub receipt: Option<String>,
    /// Its commit-log offset (what a send-back names).
    pub commit_log_offset: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    NameServer,
    Broker(usize),
}

/// One simulated TCP connection, from a consumer's link to a server.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) consumer: usize,
    incarnation: u32,
    link: LinkId,
    pub(super) target: Target,
    /// The connect was answered (and succeeded).
    connected: bool,
    open: bool,
    /// Nothing passes in either direction, and nothing closes it.
    blackholed: bool,
    /// Bytes from the consumer not yet framed (the server's read buffer).
    inbox: BytesMut,
    last_to_server: Instant,
    last_to_consumer: Instant,
}

#[derive(Debug)]
enum Ev {
    ToServer {
        conn: ConnId,
        cmd: RemotingCommand,
    },
    ToConsumer {
        conn: ConnId,
        bytes: Bytes,
    },
    /// A connect attempt is answered: connected, or refused if the server is gone by then.
    ConnectDone {
        conn: ConnId,
        refuse: Option<IoFailure>,
    },
    /// The server side closed the connection; the consumer's reader notices.
    LinkClosed {
        conn: ConnId,
        error: Option<IoFailure>,
    },
    ConsumeDone {
        consumer: usize,
        incarnation: u32,
        batch: BatchId,
        result: ConsumeResult,
    },
    BrokerUp(usize),
    Fault(Fault),
}

pub(super) struct SimConsumer {
    builder: ConsumerConfigBuilder,
    pub(super) driver: Option<Driver>,
    pub(super) incarnation: u32,
    links: BTreeMap<LinkId, ConnId>,
    /// Batches dispatched and not yet answered.
    pub(super) outstanding: BTreeMap<BatchId, crate::BatchKind>,
    /// `consumeThreadMin`: concurrent batches with user code at once, at most.
    slots: usize,
    /// With [`SimBuilder::adapter_queue`]: concurrent batches handed out and not started yet.
    queued: VecDeque<Batch>,
    /// With [`SimBuilder::adapter_queue`]: results of calls that answered at once, fed together
    /// at the end of the pass (as the adapters feed a pass's results).
    answered: Vec<(BatchId, ConsumeResult)>,
    local_offsets: Vec<(MessageQueue, i64)>,
    transcript: Vec<String>,
    events: Vec<Event>,
    replies: Vec<RemotingCommand>,
}

impl SimConsumer {
    pub(super) fn consumer(&self) -> Option<&Consumer> {
        self.driver.as_ref().map(Driver::consumer)
    }
}

/// Builder for [`Sim`].
pub struct SimBuilder {
    seed: u64,
    latency: Duration,
    jitter: Duration,
    split_reads: bool,
    broker_config: SimBrokerConfig,
    brokers: Vec<(String, Vec<(String, i32)>)>,
    listener: Option<Listener>,
    start_wall_ms: i64,
    trace: bool,
    adapter_queue: bool,
    results_together: bool,
}

impl SimBuilder {
    /// Print every output of every consumer (also on with `SIM_TRACE=1`).
    pub fn trace(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    /// One network hop.
    pub fn latency(mut self, d: Duration) -> Self {
        self.latency = d;
        self
    }

    /// Up to this much extra per hop, from the seed.
    pub fn jitter(mut self, d: Duration) -> Self {
        self.jitter = d;
        self
    }

    /// Deliver the bytes of each frame a server sends in pieces cut at random points (small
    /// frames, now and then, one byte at a time), as TCP reads may: the driver must reassemble
    /// them.
    pub fn split_reads(mut self, on: bool) -> Self {
        self.split_reads = on;
        self
    }

    /// Settings for every broker.
    pub fn broker_config(mut self, c: SimBrokerConfig) -> Self {
        self.broker_config = c;
        self
    }

    /// A broker named `name` holding `topics` (name, queue count).
    pub fn broker(mut self, name: &str, topics: &[(&str, i32)]) -> Self {
        self.brokers.push((name.to_owned(), topics.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect()));
        self
    }

    /// Run the consumers as the adapters do: the driver reports starts
    /// ([`Driver::report_starts`]), every concurrent batch comes out at once, and the sim queues
    /// them itself, starting each as one of `consumeThreadMin` slots frees.
    pub fn adapter_queue(mut self, on: bool) -> Self {
        self.adapter_queue = on;
        self
    }

    /// Feed every consume result due at one instant before reading the consumer's outputs, as
    /// the adapters feed the results ready at one wake-up (off: each result's outputs are read
    /// at once). What a consumer coalesces across results (POP acks) shows only with it on.
    pub fn results_together(mut self, on: bool) -> Self {
        self.results_together = on;
        self
    }

    /// The listener (default: instant success).
    pub fn listener(mut self, f: impl FnMut(usize, &Batch, &mut SimRng) -> Verdict + 'static) -> Self {
        self.listener = Some(Box::new(f));
        self
    }

    /// Build the world at `t0`.
    pub fn build(self) -> Sim {
        #[allow(clippy::disallowed_methods)] // the one real instant; all later time is virtual
        let t0 = Instant::now();
        let mut cfg = self.broker_config.clone();
        cfg.start_wall_ms = self.start_wall_ms;
        let brokers: Vec<SimBroker> = self
            .brokers
            .iter()
            .enumerate()
            .map(|(i, (name, topics))| {
                let mut b = SimBroker::new(name, &format!("127.0.0.1:{}", 10911 + 10 * i), cfg.clone(), t0);
                for (t, n) in topics {
                    b.create_topic(t, *n);
                }
                b
            })
            .collect();
        let broker_up = vec![true; brokers.len()];
        let blackholed = vec![false; brokers.len()];
        Sim {
            rng: SimRng::new(self.seed),
            seed: self.seed,
            t0,
            now: t0,
            latency: self.latency,
            jitter: self.jitter,
            split_reads: self.split_reads,
            faults: Faults::default(),
            garble: Default::default(),
            name_server: SimNameServer::new("127.0.0.1:9876"),
            brokers,
            broker_up,
            blackholed,
            consumers: Vec::new(),
            events: BTreeMap::new(),
            seq: 0,
            conns: BTreeMap::new(),
            next_conn: 1,
            listener: self.listener.unwrap_or_else(|| Box::new(|_, _, _| Verdict::OK)),
            produced: Vec::new(),
            consumed: Vec::new(),
            produce_seq: 0,
            start_wall_ms: self.start_wall_ms,
            checker: Checker::default(),
            steps: 0,
            trace: self.trace || std::env::var("SIM_TRACE").is_ok_and(|v| v == "1"),
            adapter_queue: self.adapter_queue,
            results_together: self.results_together,
            undrained: BTreeSet::new(),
            lean: false,
            consumed_count: 0,
            codec: RemotingCodec::new(),
        }
    }
}

/// The simulated world. See the [module docs](super).
pub struct Sim {
    rng: SimRng,
    seed: u64,
    t0: Instant,
    now: Instant,
    latency: Duration,
    jitter: Duration,
    split_reads: bool,
    faults: Faults,
    /// (connection, opaque) of requests whose answers get garbled.
    garble: std::collections::HashSet<(ConnId, i32)>,
    name_server: SimNameServer,
    pub(super) brokers: Vec<SimBroker>,
    broker_up: Vec<bool>,
    /// New connections to these brokers are black holes.
    blackholed: Vec<bool>,
    pub(super) consumers: Vec<SimConsumer>,
    events: BTreeMap<(Instant, u64), Ev>,
    seq: u64,
    pub(super) conns: BTreeMap<ConnId, Conn>,
    next_conn: u64,
    listener: Listener,
    pub(super) produced: Vec<Produced>,
    pub(super) consumed: Vec<Consumed>,
    produce_seq: u64,
    start_wall_ms: i64,
    pub(super) checker: Checker,
    steps: u64,
    trace: bool,
    adapter_queue: bool,
    results_together: bool,
    /// With `results_together`: consumers fed results this instant, outputs not read yet.
    undrained: BTreeSet<usize>,
    lean: bool,
    consumed_count: usize,
    /// The servers' side of the wire: frames the consumers' drivers wrote.
    codec: RemotingCodec,
}

impl fmt::Debug for Sim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sim")
            .field("seed", &self.seed)
            .field("elapsed", &self.elapsed())
            .finish_non_exhaustive()
    }
}

impl Sim {
    /// A builder; `seed` drives every random choice.
    pub fn builder(seed: u64) -> SimBuilder {
        SimBuilder {
            seed,
            latency: Duration::from_millis(1),
            jitter: Duration::ZERO,
            split_reads: false,
            broker_config: SimBrokerConfig {
                hold_check_interval: Duration::ZERO,
                ..SimBrokerConfig::default()
            },
            brokers: Vec::new(),
            listener: None,
            start_wall_ms: 1_700_000_000_000,
            trace: false,
            adapter_queue: false,
            results_together: false,
        }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Virtual time since start.
    pub fn elapsed(&self) -> Duration {
        self.now - self.t0
    }

    /// Current virtual instant.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The name server address, for consumer configs.
    pub fn name_server_addr(&self) -> &str {
        self.name_server.addr()
    }

    /// A config builder for `group` pointed at this world's name server.
    pub fn config(&self, group: &str) -> ConsumerConfigBuilder {
        crate::ConsumerConfig::builder(group).name_server(self.name_server.addr())
    }

    /// Start a consumer; returns its index. Its client id is `sim-<index>-<incarnation>`.
    pub fn add_consumer(&mut self, builder: ConsumerConfigBuilder) -> usize {
        let i = self.consumers.len();
        self.consumers.push(SimConsumer {
            builder,
            driver: None,
            incarnation: 0,
            links: BTreeMap::new(),
            outstanding: BTreeMap::new(),
            slots: 0,
            queued: VecDeque::new(),
            answered: Vec::new(),
            local_offsets: Vec::new(),
            transcript: Vec::new(),
            events: Vec::new(),
            replies: Vec::new(),
        });
        self.start_consumer(i);
        i
    }

    fn start_consumer(&mut self, i: usize) {
        let wall = self.start_wall_ms + self.elapsed().as_millis() as i64;
        let c = &mut self.consumers[i];
        c.incarnation += 1;
        let cfg = c
            .builder
            .clone()
            .client_id(ClientId::from_raw(format!("sim-{i}-{}", c.incarnation)))
            .start_wall_ms(wall)
            .build()
            .unwrap_or_else(|e| panic!("sim consumer {i}: {e}"));
        self.checker.consumer_started(i, &cfg);
        c.slots = cfg.consume_thread_min();
        let mut driver = Driver::new(Consumer::new(cfg, self.now));
        if self.adapter_queue {
            driver.report_starts();
        }
        driver.restore_local_offsets(c.local_offsets.clone());
        c.driver = Some(driver);
        c.outstanding.clear();
        c.queued.clear();
        c.answered.clear();
        c.links.clear();
        self.drain_consumer(i);
    }

    /// The consumer at `i`, if running.
    pub fn consumer(&self, i: usize) -> Option<&Consumer> {
        self.consumers[i].consumer()
    }

    /// Send a command to consumer `i` (a refusal is ignored; see [`try_command`](Self::try_command)).
    pub fn command(&mut self, i: usize, cmd: Command) {
        let _ = self.try_command(i, cmd);
    }

    /// Send a command to consumer `i` and return its refusal, if any (a consumer not running
    /// refuses with [`UsageError::Terminated`](crate::UsageError::Terminated)).
    pub fn try_command(&mut self, i: usize, cmd: Command) -> Result<(), crate::UsageError> {
        let r = match self.consumers[i].driver.as_mut() {
            Some(d) => d.command(cmd, self.now),
            None => Err(crate::UsageError::Terminated),
        };
        self.drain_consumer(i);
        r
    }

    /// Events consumer `i` emitted (all incarnations).
    pub fn events(&self, i: usize) -> &[Event] {
        &self.consumers[i].events
    }

    /// What consumer `i`'s driver did, in order: `Connect`, `Transmit:PullMessage` (one per
    /// frame written), `Transmit:Reply`, `Consume`, `Close`, `Event:QueuesAssigned`, …
    pub fn transcript(&self, i: usize) -> &[String] {
        &self.consumers[i].transcript
    }

    /// Benchmark mode: no invariant checks and no per-message records (only a count).
    pub fn lean(&mut self) {
        self.lean = true;
    }

    /// Messages the listener has seen.
    pub fn consumed_count(&self) -> usize {
        self.consumed_count
    }

    /// Consumer `i`'s driver itself, bypassing the simulator's bookkeeping (for misuse tests).
    pub fn driver_mut(&mut self, i: usize) -> Option<&mut Driver> {
        self.consumers[i].driver.as_mut()
    }

    /// Turn off the broker-side commit invariant (for inputs that forge broker answers, which
    /// may legitimately move offsets). The per-consumer invariants stay on.
    pub fn skip_broker_commit_check(&mut self) {
        self.checker.skip_broker_commits = true;
    }

    /// Replies consumer `i` sent to broker-initiated requests.
    pub fn replies(&self, i: usize) -> &[RemotingCommand] {
        &self.consumers[i].replies
    }

    /// Hand consumer `i` a frame as if broker `b` sent it on their open connection (admin relays
    /// such as running info, consume directly and reset offset come this way from real
    /// brokers). False when there is no such connection.
    pub fn deliver_from_broker(&mut self, i: usize, b: usize, cmd: RemotingCommand) -> bool {
        self.deliver_bytes_from_broker(i, b, &encode_to_bytes(&cmd))
    }

    /// Hand consumer `i` raw bytes as if broker `b` sent them on their open connection. False
    /// when there is no such connection.
    pub fn deliver_bytes_from_broker(&mut self, i: usize, b: usize, bytes: &[u8]) -> bool {
        let conn = self
            .conns
            .iter()
            .find(|(_, c)| c.open && c.connected && c.consumer == i && c.target == Target::Broker(b))
            .map(|(_, c)| (c.link, c.incarnation));
        let Some((link, incarnation)) = conn else { return false };
        if self.consumers[i].incarnation != incarnation {
            return false;
        }
        if let Some(d) = self.consumers[i].driver.as_mut() {
            d.received(link, bytes, self.now);
        }
        self.drain_consumer(i);
        true
    }

    /// Broker `i`.
    pub fn broker(&self, i: usize) -> &SimBroker {
        &self.brokers[i]
    }

    /// Broker `i`, mutably (to truncate a queue, say).
    pub fn broker_mut(&mut self, i: usize) -> &mut SimBroker {
        &mut self.brokers[i]
    }

    /// What was produced.
    pub fn produced(&self) -> &[Produced] {
        &self.produced
    }

    /// Every message the listener saw.
    pub fn consumed(&self) -> &[Consumed] {
        &self.consumed
    }

    /// Produce `n` messages to `topic`, round-robin over its queues on every broker.
    pub fn produce(&mut self, topic: &str, n: usize) {
        self.produce_with(topic, n, |_, m| m);
    }

    /// Produce `n` messages, letting `f(i, message)` add tags or properties.
    pub fn produce_with(&mut self, topic: &str, n: usize, mut f: impl FnMut(usize, Message) -> Message) {
        let mut queues: Vec<(usize, i32)> = Vec::new();
        for (bi, b) in self.brokers.iter().enumerate() {
            if let Some((_, count)) = b.topics().into_iter().find(|(t, _)| t == topic) {
                queues.extend((0..count).map(|q| (bi, q)));
            }
        }
        assert!(!queues.is_empty(), "no broker has topic {topic}");
        for i in 0..n {
            let seq = self.produce_seq;
            self.produce_seq += 1;
            let key = format!("5151{seq:028X}");
            let msg = f(i, Message::new(topic, format!("msg-{seq}")).with_property(keys::UNIQ_KEY, &key));
            let (bi, q) = queues[seq as usize % queues.len()];
            let (queue_id, offset) = self.brokers[bi].produce(topic, q, &msg, self.now);
            let name = self.brokers[bi].name().to_owned();
            self.produced.push(Produced {
                key,
                queue: MessageQueue::new(topic, name, queue_id),
                offset,
                tag: msg.properties.get(keys::TAGS).map(str::to_owned),
            });
            self.drain_broker(bi);
        }
    }

    /// Apply `fault` now.
    pub fn inject(&mut self, fault: Fault) {
        match fault {
            Fault::ResetBroker(b) => self.reset_broker_conns(b),
            Fault::RestartBroker(b, down) | Fault::KillBroker(b, down) => {
                if matches!(fault, Fault::KillBroker(..)) {
                    let (name, wall) = (self.brokers[b].name().to_owned(), self.brokers[b].wall_ms(self.now));
                    self.checker.broker_crashed(&name, wall);
                    self.brokers[b].crash(self.now);
                } else {
                    self.brokers[b].restart(self.now);
                }
                let name = self.brokers[b].name().to_owned();
                self.checker.broker_restarted(&name);
                self.reset_broker_conns(b);
                if !down.is_zero() {
                    self.broker_up[b] = false;
                    self.schedule(self.now + down, Ev::BrokerUp(b));
                }
            }
            Fault::CrashConsumer(i) => self.crash_consumer(i),
            Fault::RestartConsumer(i) => {
                if self.consumers[i].driver.is_none() {
                    self.start_consumer(i);
                }
            }
            Fault::ShutdownConsumer(i) => self.command(i, Command::Shutdown),
            Fault::SetFaults(f) => self.faults = f,
            Fault::BlackholeBroker(b) => {
                self.blackholed[b] = true;
                for c in self.conns.values_mut().filter(|c| c.open && c.target == Target::Broker(b)) {
                    c.blackholed = true;
                }
            }
            Fault::HealBroker(b) => self.blackholed[b] = false,
        }
    }

    /// Schedule `fault` at `elapsed` since start.
    pub fn inject_at(&mut self, elapsed: Duration, fault: Fault) {
        let at = (self.t0 + elapsed).max(self.now);
        self.schedule(at, Ev::Fault(fault));
    }

    /// No more network faults.
    pub fn heal(&mut self) {
        self.faults = Faults::default();
    }

    fn crash_consumer(&mut self, i: usize) {
        let c = &mut self.consumers[i];
        if c.driver.take().is_none() {
            return;
        }
        c.outstanding.clear();
        c.queued.clear();
        c.answered.clear();
        self.checker.consumer_gone(i);
        let conns: Vec<ConnId> = std::mem::take(&mut c.links).into_values().collect();
        for conn in conns {
            self.close_conn(conn, None);
        }
    }

    /// The broker resets every connection to it: the consumers' reads fail.
    fn reset_broker_conns(&mut self, b: usize) {
        let conns: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.open && c.target == Target::Broker(b))
            .map(|(id, _)| *id)
            .collect();
        let reset = IoFailure::new(std::io::ErrorKind::ConnectionReset, "connection reset by peer");
        for conn in conns {
            self.close_conn(conn, Some(Some(reset.clone())));
        }
    }

    /// Close `conn` on the server side. `tell`: report it to the consumer's driver (with the read
    /// error, `None` for end of stream); `None` when the consumer closed it or is gone.
    fn close_conn(&mut self, conn: ConnId, tell: Option<Option<IoFailure>>) {
        let Some(c) = self.conns.get_mut(&conn) else { return };
        if !c.open {
            return;
        }
        c.open = false;
        let (target, connected, silent) = (c.target, c.connected, c.blackholed);
        if let Target::Broker(b) = target {
            // A black-holed link's close never reaches the broker (no FIN gets through): it
            // keeps the channel, and the client in its lists, until the channel expires.
            if !silent {
                self.brokers[b].disconnect(conn, self.now);
                self.drain_broker(b);
            }
        }
        // A connect still pending is refused when it is answered instead.
        if let (Some(error), true) = (tell, connected) {
            if self.live_consumer_of(conn).is_some() {
                self.schedule(self.now, Ev::LinkClosed { conn, error });
            }
        }
    }

    fn schedule(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        self.events.insert((at, self.seq), ev);
    }

    fn hop(&mut self) -> Duration {
        let j = self.jitter.as_micros() as u64;
        self.latency + Duration::from_micros(self.rng.below(j + 1))
    }

    fn target_of(&self, peer: &PeerAddr) -> Option<Target> {
        if peer.as_str() == self.name_server.addr() {
            return Some(Target::NameServer);
        }
        self.brokers.iter().position(|b| b.addr() == peer.as_str()).map(Target::Broker)
    }

    /// A driver asked to connect `link` to `peer`: the answer comes after a hop.
    fn connect(&mut self, i: usize, link: LinkId, peer: PeerAddr) {
        let target = self.target_of(&peer);
        let refused = |why: &str| Some(IoFailure::new(std::io::ErrorKind::ConnectionRefused, why));
        let refuse = match target {
            None => refused("no server at this address"),
            Some(Target::Broker(b)) if !self.broker_up[b] => refused("connection refused"),
            _ if self.rng.chance(self.faults.refuse_connects) => refused("connection refused (fault)"),
            _ => None,
        };
        let id = ConnId(self.next_conn);
        self.next_conn += 1;
        self.conns.insert(
            id,
            Conn {
                consumer: i,
                incarnation: self.consumers[i].incarnation,
                link,
                target: target.unwrap_or(Target::NameServer),
                connected: false,
                open: true,
                blackholed: matches!(target, Some(Target::Broker(b)) if self.blackholed[b]),
                inbox: BytesMut::new(),
                last_to_server: self.now,
                last_to_consumer: self.now,
            },
        );
        self.consumers[i].links.insert(link, id);
        let hop = self.hop();
        self.schedule(self.now + hop, Ev::ConnectDone { conn: id, refuse });
    }

    /// Bytes a driver wrote to `link`: the server frames them and handles each request a hop
    /// later.
    fn write(&mut self, i: usize, link: LinkId, bytes: &[u8]) {
        let Some(&conn) = self.consumers[i].links.get(&link) else { return };
        let Some(c) = self.conns.get_mut(&conn).filter(|c| c.open && c.connected) else { return };
        if c.blackholed {
            return;
        }
        c.inbox.extend_from_slice(bytes);
        let mut frames = Vec::new();
        loop {
            match self.codec.decode(&mut c.inbox) {
                Ok(Some(cmd)) => frames.push(cmd),
                Ok(None) => break,
                // The driver writes only frames the codec made: anything else is a bug here.
                Err(e) => panic!("seed {}: consumer {i} wrote an undecodable frame: {e}", self.seed),
            }
        }
        let target = c.target;
        for cmd in frames {
            let name = if cmd.is_response() {
                "Reply".to_owned()
            } else {
                crate::RequestCode::from_i32(cmd.code)
                    .map_or_else(|| cmd.code.to_string(), |r| format!("{r:?}"))
            };
            if self.trace {
                let detail: String = format!("{cmd:?}").chars().take(600).collect();
                println!("{:>10.3?} c{i} writes {name}: {detail}", self.elapsed());
            }
            self.consumers[i].transcript.push(format!("Transmit:{name}"));
            if cmd.is_response() {
                self.consumers[i].replies.push(cmd.clone());
            }
            if self.faults.lose_requests.contains(&cmd.code) {
                continue;
            }
            let broker = match target {
                Target::Broker(b) => Some(self.brokers[b].name().to_owned()),
                Target::NameServer => None,
            };
            let elapsed = self.elapsed();
            self.checker.on_request(i, conn, broker.as_deref(), &cmd, elapsed);
            if self.faults.garble_answers.contains(&cmd.code) {
                self.garble.insert((conn, cmd.opaque));
            }
            let hop = self.hop();
            let Some(c) = self.conns.get_mut(&conn) else { return };
            let at = (self.now + hop).max(c.last_to_server);
            c.last_to_server = at;
            self.schedule(at, Ev::ToServer { conn, cmd });
        }
    }

    fn send_to_consumer(&mut self, conn: ConnId, mut cmd: RemotingCommand) {
        if !self.conns.get(&conn).is_some_and(|c| c.open && c.connected && !c.blackholed) {
            return;
        }
        if self.rng.chance(self.faults.drop) {
            return;
        }
        let copies = if self.rng.chance(self.faults.duplicate) { 2 } else { 1 };
        let mut hop = self.hop();
        if self.rng.chance(self.faults.delay) {
            hop += self.faults.delay_by;
        }
        if cmd.is_response() && self.garble.remove(&(conn, cmd.opaque)) {
            cmd.body = Bytes::from_static(b"{\"lockOKMQSet\":[{\"topic\":");
        }
        let frame = encode_to_bytes(&cmd);
        let pieces = self.cut(&frame);
        let c = self.conns.get_mut(&conn).expect("open connection");
        let at = (self.now + hop).max(c.last_to_consumer);
        c.last_to_consumer = at;
        for _ in 0..copies {
            for piece in &pieces {
                self.schedule(at, Ev::ToConsumer { conn, bytes: piece.clone() });
            }
        }
    }

    /// The pieces a reader gets `frame` in.
    fn cut(&mut self, frame: &Bytes) -> Vec<Bytes> {
        if !self.split_reads || frame.len() < 2 {
            return vec![frame.clone()];
        }
        if frame.len() <= 256 && self.rng.below(8) == 0 {
            return (0..frame.len()).map(|i| frame.slice(i..i + 1)).collect();
        }
        let mut cuts: Vec<usize> =
            (0..self.rng.below(4)).map(|_| 1 + self.rng.below(frame.len() as u64 - 1) as usize).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut pieces = Vec::with_capacity(cuts.len() + 1);
        let mut from = 0;
        for at in cuts.into_iter().chain([frame.len()]) {
            pieces.push(frame.slice(from..at));
            from = at;
        }
        pieces
    }

    /// An admin tool's request to broker `b` (as `mqadmin` sends it, on a connection of its
    /// own), and the broker's answer; what the request makes the broker send its clients is
    /// delivered as usual.
    pub fn admin(&mut self, b: usize, cmd: RemotingCommand) -> Option<RemotingCommand> {
        const ADMIN: ConnId = ConnId(u64::MAX);
        self.brokers[b].handle(ADMIN, cmd, self.now);
        let mut answer = None;
        let mut others = Vec::new();
        while let Some(out) = self.brokers[b].poll_output() {
            if out.conn == ADMIN {
                answer = Some(out.command);
            } else {
                others.push(out);
            }
        }
        for out in others {
            self.checker.on_broker_output(out.conn, &out.command);
            self.send_to_consumer(out.conn, out.command);
        }
        self.drain_broker(b);
        answer
    }

    pub(super) fn drain_broker(&mut self, b: usize) {
        while let Some(out) = self.brokers[b].poll_output() {
            self.checker.on_broker_output(out.conn, &out.command);
            self.send_to_consumer(out.conn, out.command);
        }
        while let Some(conn) = self.brokers[b].poll_closed() {
            self.close_conn(conn, Some(None));
        }
    }

    fn drain_consumer(&mut self, i: usize) {
        loop {
            let now = self.now;
            let Some(out) = self.consumers[i].driver.as_mut().and_then(|d| d.poll_output(now)) else {
                // The end of the adapter's pass: queued batches start (after the pass's
                // withdrawals), and those that answered at once are answered together.
                self.start_queued(i);
                let c = &mut self.consumers[i];
                let (Some(d), false) = (c.driver.as_mut(), c.answered.is_empty()) else { return };
                let seed = self.seed;
                d.consumed_all(c.answered.drain(..), now, |id, e| {
                    panic!("seed {seed}: consumer {i} refused the result of {id}, answered at once: {e}")
                });
                continue;
            };
            if self.trace && !matches!(out, DriverOutput::Write { .. }) {
                let detail: String = format!("{out:?}").chars().take(600).collect();
                println!("{:>10.3?} c{i}: {detail}", self.elapsed());
            }
            let name = match &out {
                DriverOutput::Connect { .. } => Some("Connect".to_owned()),
                DriverOutput::Write { .. } => None,
                DriverOutput::Close { .. } => Some("Close".to_owned()),
                DriverOutput::Consume(_) => Some("Consume".to_owned()),
                // As the batches one by one would read.
                DriverOutput::ConsumeRun(r) => {
                    let t = &mut self.consumers[i].transcript;
                    t.extend((1..r.len()).map(|_| "Consume".to_owned()));
                    Some("Consume".to_owned())
                }
                DriverOutput::Withdraw(_) => Some("Withdraw".to_owned()),
                DriverOutput::PersistLocalOffsets(_) => Some("PersistLocalOffsets".to_owned()),
                DriverOutput::Event(e) => Some(format!("Event:{}", event_name(e))),
                DriverOutput::Terminated => Some("Terminated".to_owned()),
            };
            if let Some(name) = name {
                self.consumers[i].transcript.push(name);
            }
            match out {
                DriverOutput::Connect { link, peer } => self.connect(i, link, peer),
                DriverOutput::Write { link, bytes } => self.write(i, link, &bytes),
                DriverOutput::Close { link } => {
                    if let Some(conn) = self.consumers[i].links.remove(&link) {
                        self.close_conn(conn, None);
                    }
                }
                DriverOutput::Consume(batch) => self.dispatch(i, batch),
                DriverOutput::ConsumeRun(run) => run.batches().for_each(|b| self.dispatch(i, b)),
                DriverOutput::Withdraw(id) => {
                    let c = &mut self.consumers[i];
                    let at = c.queued.iter().position(|b| b.id == id);
                    let Some(at) = at else {
                        panic!(
                            "seed {}: consumer {i} withdrew {id}, which is not waiting to start",
                            self.seed
                        )
                    };
                    c.queued.remove(at);
                }
                DriverOutput::PersistLocalOffsets(table) => self.consumers[i].local_offsets = table,
                DriverOutput::Event(e) => {
                    self.checker.on_event(i, &e);
                    self.consumers[i].events.push(e);
                }
                DriverOutput::Terminated => {}
            }
        }
    }

    fn dispatch(&mut self, i: usize, batch: Batch) {
        if !self.adapter_queue || batch.kind != crate::BatchKind::Concurrent {
            self.run_listener(i, batch);
            return;
        }
        let c = &mut self.consumers[i];
        assert!(
            !c.outstanding.contains_key(&batch.id) && c.queued.iter().all(|b| b.id != batch.id),
            "seed {}: consumer {i} dispatched {} twice",
            self.seed,
            batch.id
        );
        // Started when the pass's outputs are drained (`drain_consumer`), as the adapters do.
        c.queued.push_back(batch);
    }

    /// Start queued batches while slots are free. As in the adapters, a call that takes time
    /// reports its start, and one that answers at once is never reported started; its result
    /// is fed with the others of the pass (`drain_consumer`).
    fn start_queued(&mut self, i: usize) {
        loop {
            let c = &mut self.consumers[i];
            let running = c.outstanding.values().filter(|k| **k == crate::BatchKind::Concurrent).count();
            if running >= c.slots {
                return;
            }
            let Some(batch) = c.queued.pop_front() else { return };
            let id = batch.id;
            let Some(result) = self.run_listener(i, batch) else { continue };
            let c = &mut self.consumers[i];
            c.outstanding.remove(&id);
            c.answered.push((id, result));
        }
    }

    /// Run the listener on `batch`: its result comes when the call ends, or, with an adapter
    /// queue, is returned for a call that answers at once (after its start is reported for
    /// one that takes time).
    fn run_listener(&mut self, i: usize, batch: Batch) -> Option<ConsumeResult> {
        let c = &mut self.consumers[i];
        assert!(
            c.outstanding.insert(batch.id, batch.kind).is_none(),
            "seed {}: consumer {i} dispatched {} twice",
            self.seed,
            batch.id
        );
        let running = c.outstanding.values().filter(|k| **k == crate::BatchKind::Concurrent).count();
        assert!(
            running <= c.slots,
            "seed {}: consumer {i} has {running} concurrent batches with user code, more than consumeThreadMin {}",
            self.seed,
            c.slots
        );
        let verdict = (self.listener)(i, &batch, &mut self.rng);
        let orderly = batch.kind == crate::BatchKind::Orderly;
        let ok_count = match verdict.result.status {
            // Orderly results have no ack index: success is the whole batch.
            crate::ConsumeStatus::Success if orderly => batch.messages.len(),
            crate::ConsumeStatus::Success => verdict.result.ack_index.map_or(batch.messages.len(), |a| a + 1),
            _ => 0,
        };
        if orderly && !self.lean {
            self.checker.on_orderly_dispatch(i, &batch, ok_count == batch.messages.len());
        }
        let at = self.elapsed() + verdict.took;
        self.consumed_count += batch.messages.len();
        for (n, m) in batch.messages.iter().enumerate().filter(|_| !self.lean) {
            let rec = Consumed {
                consumer: i,
                key: m.msg_id().into_owned(),
                queue: MessageQueue::clone(&batch.queue),
                offset: m.queue_offset,
                topic: m.topic.to_string(),
                reconsume_times: m.reconsume_times,
                ok: n < ok_count,
                at,
                receipt: m.property(keys::POP_CK).map(str::to_owned),
                commit_log_offset: m.commit_log_offset,
            };
            // A direct consume is not consumption of the queue.
            if batch.kind != crate::BatchKind::Direct {
                self.checker.on_consumed(&rec);
                self.consumed.push(rec);
            }
        }
        if self.adapter_queue && batch.kind == crate::BatchKind::Concurrent {
            if verdict.took.is_zero() {
                return Some(verdict.result);
            }
            let now = self.now;
            if let Some(d) = self.consumers[i].driver.as_mut() {
                d.started(batch.id, now, now);
            }
        }
        let incarnation = self.consumers[i].incarnation;
        let when = self.now + verdict.took;
        self.schedule(
            when,
            Ev::ConsumeDone { consumer: i, incarnation, batch: batch.id, result: verdict.result },
        );
        None
    }

    /// The earliest thing that will happen.
    fn next_time(&self) -> Option<Instant> {
        let ev = self.events.keys().next().map(|(t, _)| *t);
        let consumers = self.consumers.iter().filter_map(|c| c.driver.as_ref()?.poll_timeout()).min();
        let brokers = self.brokers.iter().filter_map(SimBroker::poll_timeout).min();
        [ev, consumers, brokers].into_iter().flatten().min()
    }

    /// Advance to the next event and process everything due then. False when nothing is left.
    pub fn step(&mut self) -> bool {
        let Some(t) = self.next_time() else { return false };
        if t > self.now {
            self.now = t;
        }
        self.steps += 1;
        while let Some((&(at, seq), _)) = self.events.iter().next() {
            if at > self.now {
                break;
            }
            let ev = self.events.remove(&(at, seq)).expect("key just seen");
            self.process(ev);
        }
        for i in std::mem::take(&mut self.undrained) {
            self.drain_consumer(i);
        }
        for b in 0..self.brokers.len() {
            if self.brokers[b].poll_timeout().is_some_and(|d| d <= self.now) {
                self.brokers[b].handle_timeout(self.now);
                self.drain_broker(b);
            }
        }
        for i in 0..self.consumers.len() {
            let now = self.now;
            let due =
                self.consumers[i].driver.as_ref().and_then(Driver::poll_timeout).is_some_and(|d| d <= now);
            if due {
                if let Some(d) = self.consumers[i].driver.as_mut() {
                    d.handle_timeout(now);
                }
                self.drain_consumer(i);
            }
        }
        self.check_invariants();
        true
    }

    /// The consumer a connection belongs to, if that incarnation still runs.
    fn live_consumer_of(&self, conn: ConnId) -> Option<(usize, LinkId)> {
        let c = self.conns.get(&conn)?;
        let sc = &self.consumers[c.consumer];
        (sc.incarnation == c.incarnation && sc.driver.is_some()).then_some((c.consumer, c.link))
    }

    fn process(&mut self, ev: Ev) {
        match ev {
            Ev::ToServer { conn, cmd } => {
                let target = match self.conns.get(&conn) {
                    Some(c) if c.open => c.target,
                    _ => return,
                };
                match target {
                    Target::NameServer => {
                        // A broker that is down has no channel to the name server: not routed.
                        let brokers: Vec<&SimBroker> = self
                            .brokers
                            .iter()
                            .zip(&self.broker_up)
                            .filter(|(_, up)| **up)
                            .map(|(b, _)| b)
                            .collect();
                        if let Some(reply) = self.name_server.handle(&cmd, &brokers) {
                            self.send_to_consumer(conn, reply);
                        }
                    }
                    Target::Broker(b) => {
                        if cmd.code == crate::RequestCode::QueryAssignment as i32 {
                            self.route_for_assignment(b, &cmd);
                        }
                        self.brokers[b].handle(conn, cmd, self.now);
                        self.drain_broker(b);
                    }
                }
            }
            Ev::ToConsumer { conn, bytes } => {
                if !self.conns.get(&conn).is_some_and(|c| c.open) {
                    return;
                }
                let Some((i, link)) = self.live_consumer_of(conn) else { return };
                if let Some(d) = self.consumers[i].driver.as_mut() {
                    d.received(link, &bytes, self.now);
                }
                self.drain_consumer(i);
            }
            Ev::ConnectDone { conn, refuse } => {
                let Some((i, link)) = self.live_consumer_of(conn) else { return };
                let c = self.conns.get_mut(&conn).expect("live connection");
                // Closed meanwhile (the consumer gave up, or the broker went down): refused.
                let down = matches!(c.target, Target::Broker(b) if !self.broker_up[b]);
                let refuse = refuse.or_else(|| {
                    (!c.open || down)
                        .then(|| IoFailure::new(std::io::ErrorKind::ConnectionRefused, "connection refused"))
                });
                match refuse {
                    None => {
                        c.connected = true;
                        if let Some(d) = self.consumers[i].driver.as_mut() {
                            d.connected(link, self.now);
                        }
                    }
                    Some(error) => {
                        c.open = false;
                        self.consumers[i].links.remove(&link);
                        if let Some(d) = self.consumers[i].driver.as_mut() {
                            d.connect_failed(link, error, self.now);
                        }
                    }
                }
                self.drain_consumer(i);
            }
            Ev::LinkClosed { conn, error } => {
                let Some((i, link)) = self.live_consumer_of(conn) else { return };
                self.consumers[i].links.remove(&link);
                if let Some(d) = self.consumers[i].driver.as_mut() {
                    d.closed(link, error, self.now);
                }
                self.drain_consumer(i);
            }
            Ev::ConsumeDone { consumer: i, incarnation, batch, result } => {
                if self.consumers[i].incarnation != incarnation {
                    return;
                }
                let seed = self.seed;
                let c = &mut self.consumers[i];
                if c.outstanding.remove(&batch).is_none() {
                    return;
                }
                // The freed slot takes the next queued batch before its result is reported.
                self.start_queued(i);
                self.checker.on_orderly_result(i, batch);
                let c = &mut self.consumers[i];
                if let Some(d) = c.driver.as_mut() {
                    if let Err(e) = d.consumed(batch, result, self.now) {
                        // The sim answers each dispatch exactly once: the consumer must know it.
                        if !d.consumer().is_terminated() {
                            panic!("seed {seed}: consumer {i} refused the result of {batch}: {e}");
                        }
                    }
                }
                if self.results_together {
                    self.undrained.insert(i);
                } else {
                    self.drain_consumer(i);
                }
            }
            Ev::BrokerUp(b) => self.broker_up[b] = true,
            Ev::Fault(f) => self.inject(f),
        }
    }

    /// QUERY_ASSIGNMENT allocates the topic's queues on every broker the name server routes (up
    /// brokers, readable queues), as the real broker reads them from its route cache.
    fn route_for_assignment(&mut self, b: usize, cmd: &RemotingCommand) {
        use crate::protocol::JsonBody;
        let Ok(body) = crate::protocol::body::QueryAssignmentRequestBody::decode(&cmd.body) else { return };
        let mut queues = Vec::new();
        for (broker, _) in self.brokers.iter().zip(&self.broker_up).filter(|(_, up)| **up) {
            if let Some(r) = broker.topic_route(&body.topic) {
                if r.perm & crate::protocol::body::perm::READ != 0 {
                    let name = broker.name();
                    queues.extend(
                        (0..r.read_queue_nums).map(|q| MessageQueue::new(body.topic.as_str(), name, q)),
                    );
                }
            }
        }
        self.brokers[b].set_route_queues(&body.topic, queues);
    }

    /// Step until `done(self)` or `limit` of virtual time passes. Err with a description if the
    /// limit is reached first.
    pub fn run_until(&mut self, mut done: impl FnMut(&Self) -> bool, limit: Duration) -> Result<(), String> {
        let deadline = self.now + limit;
        while !done(self) {
            if self.now >= deadline || !self.step() {
                return Err(format!(
                    "seed {}: not done after {:?} (elapsed {:?})",
                    self.seed,
                    limit,
                    self.elapsed()
                ));
            }
        }
        Ok(())
    }

    /// Run for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let deadline = self.now + d;
        while self.next_time().is_some_and(|t| t <= deadline) {
            self.step();
        }
        self.now = self.now.max(deadline);
    }

    /// Every produced message was consumed successfully at least once, dead-lettered, or
    /// skipped by a `Command::Seek`.
    pub fn all_done(&self) -> bool {
        self.checker.all_done(self)
    }

    /// How many times the message with `key` was consumed successfully.
    pub fn times_consumed(&self, key: &str) -> usize {
        self.consumed.iter().filter(|c| c.ok && c.key == key).count()
    }

    /// Messages in `%DLQ%<group>` on every broker.
    pub fn dead_lettered(&self, group: &str) -> Vec<crate::MessageExt> {
        let dlq = crate::producer::dlq_topic(group);
        // A dead-letter topic has one queue.
        self.brokers.iter().flat_map(|b| b.messages(&dlq, 0)).collect()
    }

    fn check_invariants(&mut self) {
        if self.lean {
            return;
        }
        let mut checker = std::mem::take(&mut self.checker);
        if let Err(e) = checker.check(self) {
            panic!(
                "seed {}: invariant violated at {:?}: {e}\nreplay with SIM_SEED={}",
                self.seed,
                self.elapsed(),
                self.seed
            );
        }
        self.checker = checker;
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }
}

/// A stable name for an event, for transcripts.
fn event_name(e: &Event) -> &'static str {
    match e {
        Event::QueuesAssigned { .. } => "QueuesAssigned",
        Event::QueuesRevoked { .. } => "QueuesRevoked",
        Event::BrokerError { .. } => "BrokerError",
        Event::Malformed { .. } => "Malformed",
        Event::RequestTimeout { .. } => "RequestTimeout",
        Event::TopicNotFound { .. } => "TopicNotFound",
        Event::TopicRefused { .. } => "TopicRefused",
        Event::OffsetMoved { .. } => "OffsetMoved",
        Event::CorruptPull { .. } => "CorruptPull",
        Event::RecordsOutOfRange { .. } => "RecordsOutOfRange",
        Event::ConsumeTimeout { .. } => "ConsumeTimeout",
        Event::LocalRetry { .. } => "LocalRetry",
        Event::FailedMessagesDropped { .. } => "FailedMessagesDropped",
        Event::UnexpectedResponse { .. } => "UnexpectedResponse",
        Event::LockFailed { .. } => "LockFailed",
        Event::ConnectionLost { .. } => "ConnectionLost",
        Event::QueuesPaused { .. } => "QueuesPaused",
        Event::QueuesResumed { .. } => "QueuesResumed",
        Event::Seeked { .. } => "Seeked",
        Event::SeekFailed { .. } => "SeekFailed",
        Event::MessageRequestModeChanged { .. } => "MessageRequestModeChanged",
        Event::Terminated => "Terminated",
    }
}
