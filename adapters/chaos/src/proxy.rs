//! A TCP fault proxy: put it between a consumer and a name server (and, through rewritten routes,
//! the brokers), then break the network on purpose.
//!
//! ```text
//! consumer ──► proxy :ns ──► name server        route answers rewritten: broker X ─► proxy :bx
//! consumer ──► proxy :bx ──► broker X           raw bytes, never decoded
//! ```
//!
//! Every accepted connection gets its own connection to the real server and two pump threads,
//! one per direction. A pump reads a chunk, looks at its side's [`Fault`] at that moment, and
//! forwards, holds, discards or cuts accordingly, so a fault set with [`FaultProxy::set`] applies
//! to existing connections from their next chunk on, and to new connections at once.
//!
//! Only the name server's answers to GET_ROUTEINFO_BY_TOPIC are re-encoded (the client's request
//! opaques are tracked); every other byte passes unchanged.
//!
//! Drop the proxy to close everything: listeners stop, connections get a FIN, threads are joined.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rocketmq_push_core::codec::{DEFAULT_MAX_FRAME_SIZE, decode_frame_body, encode_to_bytes};
use rocketmq_push_core::protocol::body::{BodyError, JsonBody, TopicRouteData};
use rocketmq_push_core::protocol::{RemotingCommand, RequestCode, ResponseCode};
use socket2::SockRef;

/// How often a blocked pump wakes to look at stop flags and held bytes. Resets and shutdown do not
/// wait for it (they wake pumps with `shutdown()`); it bounds how long a missed wake-up can last.
const POLL: Duration = Duration::from_millis(50);
/// Shortest sleep while waiting for held bytes to fall due or a full peer to drain.
const MIN_WAIT: Duration = Duration::from_millis(1);
/// Connecting to the real server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a reset waits for the connections' threads to close their sockets (so the RST is on
/// the wire when it returns).
const RESET_WAIT: Duration = Duration::from_secs(5);
/// A pump stops reading while this much is held for a slow or stalled peer.
const MAX_HELD: usize = 8 << 20;
const CHUNK: usize = 64 * 1024;

/// Which side of the proxy a fault or a counter query is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// The name-server listener ([`FaultProxy::addr`]).
    NameServer,
    /// The listener for one real broker, by the address the name server gives for it
    /// (`host:port`). A fault set before the proxy has seen that broker applies once it does.
    Broker(String),
    /// Every broker listener, including those created later.
    AllBrokers,
    /// The name server and every broker.
    All,
}

impl Target {
    /// [`Target::Broker`] for `real_addr`.
    pub fn broker(real_addr: impl Into<String>) -> Self {
        Self::Broker(real_addr.into())
    }
}

/// A network fault. Each side has one at a time; [`Fault::Pass`] is the default.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Fault {
    /// Forward everything as it comes.
    #[default]
    Pass,
    /// Keep connections open and discard every byte read, both ways, end-of-stream included (the
    /// peer that closed is not told to the other). New connections are accepted (and connected
    /// upstream) and get the same. A frame cut in half by the switch stays cut: the stream is
    /// garbage to its reader after `Pass`, as after a real peer that lost bytes. (A new
    /// connection whose real server cannot be reached is still reset, as under any fault.)
    Blackhole,
    /// Hold each chunk read, both ways, for this long after it was read, then forward it; order is
    /// kept (a chunk never overtakes an earlier one, even after switching back to `Pass`).
    /// End-of-stream is held the same way. Connection set-up is not delayed.
    Stall(Duration),
    /// Reset every current connection now (both ends get an RST) and reset new ones at once
    /// (as [`Fault::Refuse`] does).
    Reset,
    /// Reset new connections at once, as a port with nothing behind it would; existing ones
    /// continue as under `Pass`. The kernel completes the handshake before the proxy can say no,
    /// so the client's connect succeeds and its first read (or a later write) fails with
    /// ECONNRESET: accepted, then closed with SO_LINGER 0, never connected upstream.
    Refuse,
    /// Cut (reset, both ends) a connection with this probability per chunk read, before forwarding
    /// it; otherwise forward as under `Pass`.
    DropRandom(f64),
}

/// Counters of one side, or summed over several ([`FaultProxy::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections accepted by the listener (including the ones then refused).
    pub accepted: u64,
    /// New connections reset at once: under [`Fault::Refuse`] or [`Fault::Reset`], or because the
    /// real server could not be reached.
    pub refused: u64,
    /// Established connections cut by a fault: [`Fault::Reset`], [`FaultProxy::reset_now`],
    /// [`Fault::DropRandom`].
    pub resets: u64,
    /// Connections open now.
    pub live: u64,
    /// Bytes written to the real server.
    pub bytes_to_server: u64,
    /// Bytes written to the client (after route rewriting).
    pub bytes_to_client: u64,
    /// Bytes read and thrown away under [`Fault::Blackhole`].
    pub bytes_discarded: u64,
    /// Route answers re-encoded with proxy addresses (name server only).
    pub routes_rewritten: u64,
}

/// The fault proxy. See the [module docs](self).
pub struct FaultProxy {
    addr: String,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("name_server", &self.shared.name_server.upstream)
            .field("brokers", &self.brokers())
            .finish_non_exhaustive()
    }
}

impl FaultProxy {
    /// Listen on a free loopback port in front of `name_server` (`host:port`). Nothing is
    /// connected until a client connects.
    pub fn start(name_server: &str) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            name_server: Arc::new(Side::new(name_server, true, Fault::Pass)),
            brokers: Mutex::new(BTreeMap::new()),
            new_broker_fault: Mutex::new(Fault::Pass),
            next_conn: AtomicU64::new(1),
            rng: AtomicU64::new(RandomState::new().hash_one(std::process::id())),
            threads: Mutex::new(Vec::new()),
        });
        let addr = shared.listen(&shared.name_server)?;
        Ok(Self { addr, shared })
    }

    /// The address to give consumers as their name server (`127.0.0.1:PORT`).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The real name server.
    pub fn name_server(&self) -> &str {
        &self.shared.name_server.upstream
    }

    /// The proxy listener for the real broker at `real_addr`, created if the proxy has not seen
    /// that broker in a route yet (to talk to a broker without asking for a route first).
    pub fn broker_proxy(&self, real_addr: &str) -> io::Result<String> {
        self.shared.broker_listener(real_addr)
    }

    /// Every broker the proxy listens for: (real address, proxy address).
    pub fn brokers(&self) -> Vec<(String, String)> {
        lock(&self.shared.brokers)
            .iter()
            .filter_map(|(real, side)| Some((real.clone(), lock(&side.listener).as_ref()?.0.clone())))
            .collect()
    }

    /// Set the fault of `target`'s sides, for their current and future connections.
    /// [`Fault::Reset`] returns once the current connections are reset (RST sent), or after a few
    /// seconds if some connection thread is stuck connecting upstream.
    pub fn set(&self, target: Target, fault: Fault) {
        if matches!(target, Target::AllBrokers | Target::All) {
            *lock(&self.shared.new_broker_fault) = fault;
        }
        for side in self.shared.sides(&target, true) {
            *lock(&side.fault) = fault;
            if matches!(fault, Fault::Reset) {
                side.reset_all();
            }
        }
    }

    /// Reset every current connection of `target` now (RST to both ends) and leave the fault as
    /// it is: new connections are served as before. Returns how many were reset, once they are.
    pub fn reset_now(&self, target: Target) -> usize {
        self.shared.sides(&target, false).iter().map(|side| side.reset_all()).sum()
    }

    /// The counters of `target`, summed over its sides (zero for a broker never seen).
    pub fn stats(&self, target: Target) -> Stats {
        let mut sum = Stats::default();
        for side in self.shared.sides(&target, false) {
            let c = &side.counters;
            let get = |a: &AtomicU64| a.load(Ordering::SeqCst);
            sum.accepted += get(&c.accepted);
            sum.refused += get(&c.refused);
            sum.resets += get(&c.resets);
            sum.live += lock(&side.conns).len() as u64;
            sum.bytes_to_server += get(&c.bytes_to_server);
            sum.bytes_to_client += get(&c.bytes_to_client);
            sum.bytes_discarded += get(&c.bytes_discarded);
            sum.routes_rewritten += get(&c.routes_rewritten);
        }
        sum
    }

    /// Restart [`Fault::DropRandom`]'s random sequence from `seed`. Which connection draws which
    /// number still depends on thread timing.
    pub fn seed(&self, seed: u64) {
        self.shared.rng.store(seed, Ordering::SeqCst);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for side in self.shared.sides(&Target::All, false) {
            if let Some((addr, listener)) = lock(&side.listener).take() {
                // Linux: wakes accept() at once. Elsewhere the connect below does.
                let _ = SockRef::from(&*listener).shutdown(Shutdown::Read);
                if let Ok(a) = addr.parse::<SocketAddr>() {
                    let _ = TcpStream::connect_timeout(&a, Duration::from_millis(200));
                }
            }
            for (conn, _) in lock(&side.conns).values() {
                // A FIN both ways, and the pumps' reads return at once.
                let _ = conn.client.shutdown(Shutdown::Both);
                if let Some(s) = conn.server.get() {
                    let _ = s.shutdown(Shutdown::Both);
                }
            }
        }
        // Pumps may still register (a connection accepted just before the stop): pop until none.
        loop {
            let next = lock(&self.shared.threads).pop();
            match next {
                Some(t) => {
                    let _ = t.join();
                }
                None => break,
            }
        }
    }
}

/// Replace every broker address of `route` by `proxy_for(address)` where that gives one; returns
/// how many addresses changed.
pub fn rewrite_route(route: &mut TopicRouteData, mut proxy_for: impl FnMut(&str) -> Option<String>) -> usize {
    let mut changed = 0;
    for broker in &mut route.broker_datas {
        for addr in broker.broker_addrs.values_mut() {
            if let Some(p) = proxy_for(addr).filter(|p| p != addr) {
                *addr = p;
                changed += 1;
            }
        }
    }
    changed
}

/// The frame to send instead of `answer` (a GET_ROUTEINFO_BY_TOPIC answer): its route with
/// addresses mapped by `proxy_for` (see [`rewrite_route`]), the rest of the command unchanged.
/// `Ok(None)` when no address changes (send the original bytes).
pub fn rewrite_route_answer(
    answer: &RemotingCommand,
    proxy_for: impl FnMut(&str) -> Option<String>,
) -> Result<Option<Bytes>, BodyError> {
    let mut route = TopicRouteData::decode(&answer.body)?;
    if rewrite_route(&mut route, proxy_for) == 0 {
        return Ok(None);
    }
    let mut cmd = answer.clone();
    cmd.body = route.encode();
    Ok(Some(encode_to_bytes(&cmd)))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking pump must not take the whole proxy (and the test's report) down with it.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn add(counter: &AtomicU64, n: usize) {
    counter.fetch_add(n as u64, Ordering::SeqCst);
}

/// Arrange for an RST when the socket's last handle closes, and wake its reader now.
fn abort(s: &TcpStream) {
    let _ = SockRef::from(s).set_linger(Some(Duration::ZERO));
    // SHUT_RD sends nothing to the peer (a FIN would come before the RST).
    let _ = s.shutdown(Shutdown::Read);
}

fn connect(addr: &str) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, format!("cannot resolve {addr}"));
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

struct Shared {
    stop: AtomicBool,
    name_server: Arc<Side>,
    /// Real broker address → its side.
    brokers: Mutex<BTreeMap<String, Arc<Side>>>,
    /// What a broker seen for the first time starts with (set by `AllBrokers` / `All`).
    new_broker_fault: Mutex<Fault>,
    next_conn: AtomicU64,
    rng: AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// A uniform number in [0, 1) (splitmix64: lock-free, good enough for fault dice).
    fn chance(&self) -> f64 {
        let mut z =
            self.rng.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::SeqCst).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    fn spawn(&self, name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let t = thread::Builder::new().name(name.into()).spawn(f)?;
        let mut threads = lock(&self.threads);
        // Finished threads need no join; keep the list as long as the live connections.
        threads.retain(|t| !t.is_finished());
        threads.push(t);
        Ok(())
    }

    fn sides(&self, target: &Target, create: bool) -> Vec<Arc<Side>> {
        let mut out = Vec::new();
        if matches!(target, Target::NameServer | Target::All) {
            out.push(self.name_server.clone());
        }
        match target {
            Target::AllBrokers | Target::All => out.extend(lock(&self.brokers).values().cloned()),
            Target::Broker(addr) if create => out.push(self.broker_side(addr)),
            Target::Broker(addr) => out.extend(lock(&self.brokers).get(addr).cloned()),
            Target::NameServer => {}
        }
        out
    }

    fn broker_side(&self, real: &str) -> Arc<Side> {
        let mut brokers = lock(&self.brokers);
        if let Some(side) = brokers.get(real) {
            return side.clone();
        }
        let side = Arc::new(Side::new(real, false, *lock(&self.new_broker_fault)));
        brokers.insert(real.to_owned(), side.clone());
        side
    }

    fn broker_listener(self: &Arc<Self>, real: &str) -> io::Result<String> {
        let side = self.broker_side(real);
        if let Some((addr, _)) = lock(&side.listener).as_ref() {
            return Ok(addr.clone());
        }
        self.listen(&side)
    }

    /// Give `side` its listener (unless it has one) and its acceptor thread; returns its address.
    fn listen(self: &Arc<Self>, side: &Arc<Side>) -> io::Result<String> {
        let mut slot = lock(&side.listener);
        if let Some((addr, _)) = slot.as_ref() {
            return Ok(addr.clone());
        }
        if self.stopping() {
            return Err(io::Error::other("fault proxy stopped"));
        }
        let listener = Arc::new(TcpListener::bind("127.0.0.1:0")?);
        let addr = listener.local_addr()?.to_string();
        let (shared, side2, l) = (self.clone(), side.clone(), listener.clone());
        self.spawn("chaos-accept", move || shared.accept_loop(&side2, &l))?;
        *slot = Some((addr.clone(), listener));
        Ok(addr)
    }

    fn accept_loop(self: &Arc<Self>, side: &Arc<Side>, listener: &TcpListener) {
        loop {
            let accepted = listener.accept();
            if self.stopping() {
                return;
            }
            match accepted {
                Ok((stream, _)) => self.admit(side, stream),
                Err(e)
                    if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => {}
                // Out of descriptors and the like: back off instead of spinning.
                Err(_) => thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    fn admit(self: &Arc<Self>, side: &Arc<Side>, stream: TcpStream) {
        add(&side.counters.accepted, 1);
        if matches!(side.fault(), Fault::Refuse | Fault::Reset) {
            let _ = SockRef::from(&stream).set_linger(Some(Duration::ZERO));
            drop(stream);
            add(&side.counters.refused, 1);
            return;
        }
        let _ = stream.set_nodelay(true);
        let id = self.next_conn.fetch_add(1, Ordering::SeqCst);
        let conn = Arc::new(Conn { client: stream, server: OnceLock::new(), cut: AtomicBool::new(false) });
        let gate = Arc::new(Gate { pumps: Mutex::new(1), closed: Condvar::new() });
        lock(&side.conns).insert(id, (conn.clone(), gate.clone()));
        let leave = Leave { gate, side: side.clone(), id };
        let (shared, c) = (self.clone(), conn.clone());
        let spawned = self.spawn("chaos-conn", move || {
            let leave = leave;
            shared.serve(&leave, c);
        });
        if spawned.is_err() {
            // The closure (and its `Leave`) was dropped unrun: the registry entry is gone.
            conn.cut();
        }
    }

    /// Connect upstream, then pump both ways (server → client on a new thread).
    fn serve(self: &Arc<Self>, leave: &Leave, conn: Arc<Conn>) {
        let side = &leave.side;
        let Ok(server) = connect(&side.upstream) else {
            // Like the real port: the client sees its connection reset.
            conn.cut();
            add(&side.counters.refused, 1);
            return;
        };
        let _ = server.set_nodelay(true);
        let server = conn.server.get_or_init(|| server);
        // A reset that ran while we connected could not reach this socket.
        if conn.is_cut() {
            abort(server);
            return;
        }
        let opaques = Arc::new(Mutex::new(HashSet::new()));
        let (to_server_tap, to_client_tap) = if side.rewrites_routes {
            (
                Tap::Requests(FrameSplitter::default(), opaques.clone()),
                Tap::Answers(FrameSplitter::default(), opaques),
            )
        } else {
            (Tap::Raw, Tap::Raw)
        };
        *lock(&leave.gate.pumps) += 1;
        let back = Leave { gate: leave.gate.clone(), side: side.clone(), id: leave.id };
        let pump = Pump {
            shared: self.clone(),
            side: side.clone(),
            conn: conn.clone(),
            to_server: false,
            tap: to_client_tap,
        };
        if self
            .spawn("chaos-pump", move || {
                let _back = back;
                pump.run();
            })
            .is_err()
        {
            conn.cut();
            return;
        }
        Pump { shared: self.clone(), side: side.clone(), conn, to_server: true, tap: to_server_tap }.run();
    }
}

/// One listener's worth of state: a name server or one real broker.
struct Side {
    upstream: String,
    rewrites_routes: bool,
    fault: Mutex<Fault>,
    listener: Mutex<Option<(String, Arc<TcpListener>)>>,
    conns: Mutex<Registry>,
    counters: Counters,
}

/// A side's open connections, by id.
type Registry = BTreeMap<u64, (Arc<Conn>, Arc<Gate>)>;

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    refused: AtomicU64,
    resets: AtomicU64,
    bytes_to_server: AtomicU64,
    bytes_to_client: AtomicU64,
    bytes_discarded: AtomicU64,
    routes_rewritten: AtomicU64,
}

impl Side {
    fn new(upstream: &str, rewrites_routes: bool, fault: Fault) -> Self {
        Self {
            upstream: upstream.to_owned(),
            rewrites_routes,
            fault: Mutex::new(fault),
            listener: Mutex::new(None),
            conns: Mutex::new(BTreeMap::new()),
            counters: Counters::default(),
        }
    }

    fn fault(&self) -> Fault {
        *lock(&self.fault)
    }

    /// Cut every current connection and wait until their sockets are closed (RST sent).
    fn reset_all(&self) -> usize {
        let conns: Vec<(Arc<Conn>, Arc<Gate>)> = lock(&self.conns).values().cloned().collect();
        let mut gates = Vec::with_capacity(conns.len());
        let mut n = 0;
        for (conn, gate) in conns {
            if conn.cut() {
                n += 1;
            }
            // Our handle must not be the one keeping the socket open.
            drop(conn);
            gates.push(gate);
        }
        add(&self.counters.resets, n);
        let deadline = Instant::now() + RESET_WAIT;
        for gate in gates {
            gate.wait_closed(deadline);
        }
        n
    }
}

/// One proxied connection. Its sockets close (FIN, or RST once cut) when the last `Arc` goes: the
/// side's registry entry and one per running pump.
struct Conn {
    client: TcpStream,
    server: OnceLock<TcpStream>,
    cut: AtomicBool,
}

impl Conn {
    /// Make both ends get an RST and stop the pumps. False if already cut.
    fn cut(&self) -> bool {
        if self.cut.swap(true, Ordering::SeqCst) {
            return false;
        }
        abort(&self.client);
        if let Some(s) = self.server.get() {
            abort(s);
        }
        true
    }

    fn is_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }
}

/// Counts a connection's running threads, so that a reset can wait for its sockets to close.
struct Gate {
    pumps: Mutex<usize>,
    closed: Condvar,
}

impl Gate {
    fn wait_closed(&self, deadline: Instant) {
        let mut pumps = lock(&self.pumps);
        while *pumps > 0 {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { return };
            pumps = self.closed.wait_timeout(pumps, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

/// Dropped when a connection thread ends (panics included), after the thread's `Arc<Conn>`: the
/// last one out removes the registry entry, which closes the sockets, then wakes waiting resets.
struct Leave {
    gate: Arc<Gate>,
    side: Arc<Side>,
    id: u64,
}

impl Drop for Leave {
    fn drop(&mut self) {
        let mut pumps = lock(&self.gate.pumps);
        *pumps -= 1;
        if *pumps == 0 {
            let entry = lock(&self.side.conns).remove(&self.id);
            drop(entry);
            self.gate.closed.notify_all();
        }
    }
}

/// Bytes read and waiting to be written: `None` is the end of the stream (a FIN to forward).
struct Held {
    due: Instant,
    data: Option<Bytes>,
    written: usize,
}

/// One direction of one connection.
struct Pump {
    shared: Arc<Shared>,
    side: Arc<Side>,
    conn: Arc<Conn>,
    to_server: bool,
    tap: Tap,
}

impl Pump {
    fn run(mut self) {
        let conn = self.conn.clone();
        let Some(server) = conn.server.get() else { return };
        let (from, to) = if self.to_server { (&conn.client, server) } else { (server, &conn.client) };
        // A peer that does not read must not block the pump past its stop checks.
        let _ = to.set_write_timeout(Some(POLL));
        let mut held: VecDeque<Held> = VecDeque::new();
        let mut held_bytes = 0usize;
        let mut reading = true;
        let mut read_timeout = None;
        let mut buf = vec![0u8; CHUNK];
        loop {
            if self.shared.stopping() || conn.is_cut() {
                return;
            }
            if self.write_due(&mut held, &mut held_bytes, to).is_err() {
                // The receiving end is gone: pass the failure on to the sending end.
                conn.cut();
                return;
            }
            if !reading && held.is_empty() {
                return;
            }
            let now = Instant::now();
            let wait =
                held.front().map_or(POLL, |h| h.due.saturating_duration_since(now)).clamp(MIN_WAIT, POLL);
            if !reading || held_bytes >= MAX_HELD {
                thread::sleep(wait);
                continue;
            }
            if read_timeout != Some(wait) {
                let _ = from.set_read_timeout(Some(wait));
                read_timeout = Some(wait);
            }
            let n = match (&*from).read(&mut buf) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue;
                }
                Err(_) => {
                    // The sending end reset: so does the receiving end (unless we caused it).
                    conn.cut();
                    return;
                }
            };
            if self.shared.stopping() || conn.is_cut() {
                return;
            }
            let now = Instant::now();
            let fault = self.side.fault();
            let due = match fault {
                Fault::Blackhole => {
                    add(&self.side.counters.bytes_discarded, n);
                    if n == 0 {
                        reading = false;
                    }
                    continue;
                }
                // A connection that slipped in while the fault was being set.
                Fault::Reset => {
                    self.cut_by_fault();
                    return;
                }
                Fault::DropRandom(p) if n > 0 && self.shared.chance() < p => {
                    self.cut_by_fault();
                    return;
                }
                Fault::Stall(d) => now + d,
                Fault::Pass | Fault::Refuse | Fault::DropRandom(_) => now,
            };
            if n == 0 {
                reading = false;
                let rest = self.tap.finish();
                if !rest.is_empty() {
                    held_bytes += rest.len();
                    held.push_back(Held { due, data: Some(rest), written: 0 });
                }
                held.push_back(Held { due, data: None, written: 0 });
                continue;
            }
            let data = self.tap.feed(&buf[..n], &self.shared, &self.side);
            if !data.is_empty() {
                held_bytes += data.len();
                held.push_back(Held { due, data: Some(data), written: 0 });
            }
        }
    }

    fn cut_by_fault(&self) {
        if self.conn.cut() {
            add(&self.side.counters.resets, 1);
        }
    }

    /// Write what is due, in order, as far as the peer takes it without blocking long.
    fn write_due(&self, held: &mut VecDeque<Held>, held_bytes: &mut usize, to: &TcpStream) -> io::Result<()> {
        let counter = if self.to_server {
            &self.side.counters.bytes_to_server
        } else {
            &self.side.counters.bytes_to_client
        };
        let now = Instant::now();
        while let Some(h) = held.front_mut() {
            if h.due > now || self.conn.is_cut() {
                return Ok(());
            }
            let Some(data) = h.data.clone() else {
                let _ = to.shutdown(Shutdown::Write);
                held.pop_front();
                continue;
            };
            match (&*to).write(&data[h.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(k) => {
                    h.written += k;
                    *held_bytes -= k;
                    add(counter, k);
                    if h.written == data.len() {
                        held.pop_front();
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) =>
                {
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// What a pump does to the bytes it forwards.
enum Tap {
    /// Nothing (brokers).
    Raw,
    /// Client → name server: forward as read; note the opaques of route requests.
    Requests(FrameSplitter, Arc<Mutex<HashSet<i32>>>),
    /// Name server → client: forward whole frames; rewrite the answers to noted opaques.
    Answers(FrameSplitter, Arc<Mutex<HashSet<i32>>>),
}

impl Tap {
    fn feed(&mut self, bytes: &[u8], shared: &Arc<Shared>, side: &Side) -> Bytes {
        match self {
            Self::Raw => Bytes::copy_from_slice(bytes),
            Self::Requests(frames, opaques) => {
                // Noted before the request is forwarded, so before its answer can come back.
                for raw in frames.push(bytes) {
                    if let Ok(cmd) = decode_frame_body(raw.slice(4..)) {
                        if !cmd.is_response()
                            && !cmd.is_oneway()
                            && cmd.code == RequestCode::GetRouteInfoByTopic as i32
                        {
                            lock(opaques).insert(cmd.opaque);
                        }
                    }
                }
                if frames.broken {
                    frames.pending.clear();
                }
                Bytes::copy_from_slice(bytes)
            }
            Self::Answers(frames, opaques) => {
                let mut out = BytesMut::new();
                for raw in frames.push(bytes) {
                    let rewritten = match decode_frame_body(raw.slice(4..)) {
                        Ok(cmd)
                            if cmd.is_response()
                                && lock(opaques).remove(&cmd.opaque)
                                && cmd.code == ResponseCode::Success as i32 =>
                        {
                            // A broker we cannot listen for keeps its real address.
                            rewrite_route_answer(&cmd, |addr| shared.broker_listener(addr).ok())
                                .ok()
                                .flatten()
                        }
                        _ => None,
                    };
                    if rewritten.is_some() {
                        add(&side.counters.routes_rewritten, 1);
                    }
                    out.extend_from_slice(&rewritten.unwrap_or(raw));
                }
                if frames.broken {
                    // Not frames: pass whatever comes, as it comes.
                    out.extend_from_slice(&frames.pending.split());
                }
                out.freeze()
            }
        }
    }

    /// At end of stream: whatever is held (an incomplete frame goes out as it is).
    fn finish(&mut self) -> Bytes {
        match self {
            Self::Answers(frames, _) => frames.pending.split().freeze(),
            Self::Raw | Self::Requests(..) => Bytes::new(),
        }
    }
}

/// Cuts a byte stream into whole raw frames (length field included), without decoding them.
#[derive(Default)]
struct FrameSplitter {
    pending: BytesMut,
    /// Saw a length no frame can have: stop looking for frames.
    broken: bool,
}

impl FrameSplitter {
    /// Append `bytes`; return the frames now complete (the rest stays in `pending`).
    fn push(&mut self, bytes: &[u8]) -> Vec<Bytes> {
        self.pending.extend_from_slice(bytes);
        let mut frames = Vec::new();
        while !self.broken && self.pending.len() >= 4 {
            let len =
                i32::from_be_bytes([self.pending[0], self.pending[1], self.pending[2], self.pending[3]]);
            if len < 4 || len as usize + 4 > DEFAULT_MAX_FRAME_SIZE {
                self.broken = true;
                break;
            }
            let whole = len as usize + 4;
            if self.pending.len() < whole {
                break;
            }
            frames.push(self.pending.split_to(whole).freeze());
        }
        frames
    }
}
