//! The simulator's fake name server and brokers, served on loopback TCP in real time: adapters
//! are tested end to end without Java, and `rmqcat demo` needs no broker at all.
//!
//! One thread owns the simulated servers (the sim is single-owner, like the core); one thread
//! accepts per port; one reads per connection. Faults can be injected: close every connection of
//! a broker (in the middle of long polls), write bytes that are not a frame, or turn the servers
//! [hostile](Hostility) — silent, malformed, decompression bombs, absurd routes and offsets,
//! request floods — and back.

use std::collections::{BTreeMap, HashSet};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use rocketmq_push_core::codec::{RemotingCodec, encode_to_bytes};
use rocketmq_push_core::message::{Message, MessageExt};
use rocketmq_push_core::protocol::{RequestCode, ResponseCode};
use rocketmq_push_core::sim::{ConnId, SimBroker, SimBrokerConfig, SimNameServer};

mod hostile;

/// The servers, as the driver thread owns them.
pub struct World {
    /// The name server.
    pub name_server: SimNameServer,
    /// The brokers.
    pub brokers: Vec<SimBroker>,
    conns: BTreeMap<ConnId, (Target, TcpStream)>,
    next_produce: usize,
    hostility: Hostility,
    /// Pull requests waiting for their answer: (connection, opaque).
    pulls: HashSet<(ConnId, i32)>,
    /// Connections left in the middle of a frame: nothing more is written to them.
    poisoned: HashSet<ConnId>,
}

/// How the served name server and brokers misbehave (for hostile-input tests). Switch back to
/// [`Hostility::None`] and they behave again, on new and existing connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Hostility {
    /// Behave.
    #[default]
    None,
    /// Read every request, answer none, close nothing.
    Silent,
    /// Answer with a frame that declares 16 MiB, send 100 bytes of it, then nothing more on that
    /// connection.
    PartialFrames,
    /// Answer with a frame whose length field is negative.
    MalformedLengths,
    /// Routes declare 2^31 − 1 read and write queues.
    AbsurdRoutes,
    /// FOUND pull answers carry 48 zlib records, each inflating to just under 32 MiB.
    ZlibBombs,
    /// FOUND pull answers carry an inner-batch record inflating to 32 MiB of one-byte entries.
    InnerBatchBombs,
    /// FOUND pull answers carry one more record, claiming queue offset 2^62.
    AbsurdOffsets,
    /// Every broker connection gets 2,000 requests (an unknown code, answers expected) every
    /// 100 ms.
    RequestFlood,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    NameServer,
    Broker(usize),
}

type Call = Box<dyn FnOnce(&mut World, Instant) + Send>;

enum Ev {
    Accepted { conn: ConnId, target: Target, stream: TcpStream },
    Frame { conn: ConnId, cmd: rocketmq_push_core::RemotingCommand },
    Closed { conn: ConnId },
    Call(Call),
    Stop,
}

/// Fake RocketMQ servers on 127.0.0.1, driven by the real clock.
pub struct SimServer {
    name_server: String,
    brokers: Vec<String>,
    tx: Sender<Ev>,
    stop: Arc<AtomicBool>,
    listeners: Vec<String>,
    driver: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for SimServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimServer")
            .field("name_server", &self.name_server)
            .field("brokers", &self.brokers)
            .finish_non_exhaustive()
    }
}

impl SimServer {
    /// Start a name server and one broker per entry of `brokers` (name, topics with queue
    /// counts), each on a free loopback port.
    pub fn start(brokers: &[(&str, &[(&str, i32)])], mut config: SimBrokerConfig) -> io::Result<Self> {
        // Real time: store timestamps follow the wall clock, so searches by timestamp work.
        config.start_wall_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let conn_ids = Arc::new(AtomicU64::new(1));
        let ns_listener = TcpListener::bind("127.0.0.1:0")?;
        let ns_addr = ns_listener.local_addr()?.to_string();
        let mut listeners = vec![ns_addr.clone()];
        let mut addrs = Vec::new();
        let mut sim_brokers = Vec::new();
        let start = Instant::now();
        let mut broker_listeners = Vec::new();
        for (name, topics) in brokers {
            let l = TcpListener::bind("127.0.0.1:0")?;
            let addr = l.local_addr()?.to_string();
            let mut b = SimBroker::new(name, &addr, config.clone(), start);
            for (t, n) in *topics {
                b.create_topic(t, *n);
            }
            sim_brokers.push(b);
            addrs.push(addr.clone());
            listeners.push(addr);
            broker_listeners.push(l);
        }
        spawn_acceptor(ns_listener, Target::NameServer, tx.clone(), stop.clone(), conn_ids.clone())?;
        for (i, l) in broker_listeners.into_iter().enumerate() {
            spawn_acceptor(l, Target::Broker(i), tx.clone(), stop.clone(), conn_ids.clone())?;
        }
        let world = World {
            name_server: SimNameServer::new(&ns_addr),
            brokers: sim_brokers,
            conns: BTreeMap::new(),
            next_produce: 0,
            hostility: Hostility::None,
            pulls: HashSet::new(),
            poisoned: HashSet::new(),
        };
        let driver = thread::Builder::new().name("sim-server".into()).spawn(move || drive(world, &rx))?;
        Ok(Self { name_server: ns_addr, brokers: addrs, tx, stop, listeners, driver: Some(driver) })
    }

    /// The name server address.
    pub fn name_server(&self) -> &str {
        &self.name_server
    }

    /// Broker `i`'s address.
    pub fn broker_addr(&self, i: usize) -> &str {
        &self.brokers[i]
    }

    /// Run `f` on the servers (on their thread) and return its result.
    pub fn with<R: Send + 'static>(&self, f: impl FnOnce(&mut World, Instant) -> R + Send + 'static) -> R {
        let (rtx, rrx) = mpsc::channel();
        let call: Call = Box::new(move |w, now| {
            let _ = rtx.send(f(w, now));
        });
        self.tx.send(Ev::Call(call)).expect("sim server running");
        rrx.recv().expect("sim server answered")
    }

    /// Store `messages`, round-robin over every queue of their topic on every broker.
    pub fn produce(&self, messages: Vec<Message>) -> usize {
        self.with(move |w, now| {
            let n = messages.len();
            for m in messages {
                let mut queues = Vec::new();
                for (bi, b) in w.brokers.iter().enumerate() {
                    if let Some((_, c)) = b.topics().into_iter().find(|(t, _)| *t == m.topic) {
                        queues.extend((0..c).map(|q| (bi, q)));
                    }
                }
                if queues.is_empty() {
                    continue;
                }
                let (bi, q) = queues[w.next_produce % queues.len()];
                w.next_produce += 1;
                w.brokers[bi].produce(&m.topic, q, &m, now);
                flush(w, bi);
            }
            n
        })
    }

    /// Store `messages` in queue `queue_id` of the first broker.
    pub fn produce_to(&self, messages: Vec<Message>, queue_id: i32) {
        self.with(move |w, now| {
            for m in messages {
                w.brokers[0].produce(&m.topic, queue_id, &m, now);
            }
            flush(w, 0);
        });
    }

    /// Create a topic on every broker.
    pub fn create_topic(&self, topic: &str, queues: i32) {
        let topic = topic.to_owned();
        self.with(move |w, _| w.brokers.iter_mut().for_each(|b| b.create_topic(&topic, queues)));
    }

    /// A group's committed offset on broker `b`.
    pub fn committed_offset(&self, b: usize, group: &str, topic: &str, queue: i32) -> Option<i64> {
        let (g, t) = (group.to_owned(), topic.to_owned());
        self.with(move |w, _| w.brokers[b].committed_offset(&g, &t, queue))
    }

    /// Messages in `%DLQ%<group>` on every broker.
    pub fn dead_lettered(&self, group: &str) -> Vec<MessageExt> {
        let dlq = rocketmq_push_core::producer::dlq_topic(group);
        self.with(move |w, _| w.brokers.iter().flat_map(|b| b.messages(&dlq, 0)).collect())
    }

    /// Fault: close every client connection of broker `b` now (held long polls included).
    pub fn close_connections(&self, b: usize) -> usize {
        self.with(move |w, now| {
            let ids: Vec<ConnId> =
                w.conns.iter().filter(|(_, (t, _))| *t == Target::Broker(b)).map(|(c, _)| *c).collect();
            for c in &ids {
                close(w, *c, now);
            }
            ids.len()
        })
    }

    /// Fault: write bytes that are not a frame to every client connection of broker `b`.
    pub fn send_garbage(&self, b: usize) -> usize {
        self.with(move |w, _| {
            let mut n = 0;
            for (t, s) in w.conns.values_mut() {
                if *t == Target::Broker(b) {
                    // A frame length of 4 with serialize type 9: rejected by any decoder.
                    let _ = s.write_all(&[0, 0, 0, 4, 9, 0, 0, 0]);
                    n += 1;
                }
            }
            n
        })
    }

    /// Make the servers misbehave (or behave again with [`Hostility::None`]).
    pub fn set_hostility(&self, h: Hostility) {
        self.with(move |w, _| {
            w.hostility = h;
            if h == Hostility::None {
                w.poisoned.clear();
            }
        });
    }

    /// Stop everything and close every connection.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if self.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = self.tx.send(Ev::Stop);
        // Wake the acceptors so they see the flag.
        for l in &self.listeners {
            let _ = TcpStream::connect(l);
        }
        if let Some(d) = self.driver.take() {
            let _ = d.join();
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn_acceptor(
    l: TcpListener,
    target: Target,
    tx: Sender<Ev>,
    stop: Arc<AtomicBool>,
    ids: Arc<AtomicU64>,
) -> io::Result<()> {
    thread::Builder::new().name("sim-accept".into()).spawn(move || {
        for stream in l.incoming() {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let Ok(stream) = stream else { continue };
            let _ = stream.set_nodelay(true);
            let conn = ConnId(ids.fetch_add(1, Ordering::SeqCst));
            let Ok(writer) = stream.try_clone() else { continue };
            if tx.send(Ev::Accepted { conn, target, stream: writer }).is_err() {
                return;
            }
            let tx = tx.clone();
            let _ =
                thread::Builder::new().name("sim-read".into()).spawn(move || read_loop(stream, conn, &tx));
        }
    })?;
    Ok(())
}

fn read_loop(mut stream: TcpStream, conn: ConnId, tx: &Sender<Ev>) {
    let codec = RemotingCodec::new();
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(cmd)) => {
                    if tx.send(Ev::Frame { conn, cmd }).is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    let _ = tx.send(Ev::Closed { conn });
                    return;
                }
            }
        }
    }
    let _ = tx.send(Ev::Closed { conn });
}

fn close(w: &mut World, conn: ConnId, now: Instant) {
    w.poisoned.remove(&conn);
    w.pulls.retain(|(c, _)| *c != conn);
    if let Some((target, s)) = w.conns.remove(&conn) {
        let _ = s.shutdown(Shutdown::Both);
        if let Target::Broker(b) = target {
            w.brokers[b].disconnect(conn, now);
            flush(w, b);
        }
    }
}

fn flush(w: &mut World, b: usize) {
    while let Some(mut out) = w.brokers[b].poll_output() {
        let pull = out.command.is_response() && w.pulls.remove(&(out.conn, out.command.opaque));
        if pull && out.command.code == ResponseCode::Success as i32 {
            hostile::mangle_pull(w.hostility, &mut out.command);
        }
        write_answer(w, out.conn, &out.command);
    }
    while let Some(conn) = w.brokers[b].poll_closed() {
        if let Some((_, s)) = w.conns.remove(&conn) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Write an answer as the hostility says: as it is, not at all, or broken.
fn write_answer(w: &mut World, conn: ConnId, cmd: &rocketmq_push_core::RemotingCommand) {
    if w.poisoned.contains(&conn) {
        return;
    }
    let bytes = match w.hostility {
        Hostility::Silent => return,
        Hostility::PartialFrames => {
            w.poisoned.insert(conn);
            hostile::partial_frame()
        }
        Hostility::MalformedLengths => bytes::Bytes::from_static(&[0xff, 0xff, 0xff, 0xfb, 1, 0, 0, 0]),
        _ => encode_to_bytes(cmd),
    };
    if let Some((_, s)) = w.conns.get_mut(&conn) {
        if s.write_all(&bytes).is_err() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn drive(mut w: World, rx: &Receiver<Ev>) {
    let mut next_flood = Instant::now();
    loop {
        let next = w.brokers.iter().filter_map(SimBroker::poll_timeout).min();
        let wait = next.map_or(Duration::from_millis(100), |t| t.saturating_duration_since(Instant::now()));
        let ev = match rx.recv_timeout(wait) {
            Ok(ev) => Some(ev),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let now = Instant::now();
        let wall_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        for b in &mut w.brokers {
            b.follow_wall_clock(now, wall_ms);
        }
        match ev {
            Some(Ev::Stop) => {
                let all: Vec<ConnId> = w.conns.keys().copied().collect();
                for c in all {
                    close(&mut w, c, now);
                }
                return;
            }
            Some(Ev::Accepted { conn, target, stream }) => {
                w.conns.insert(conn, (target, stream));
            }
            Some(Ev::Frame { conn, cmd }) => match w.conns.get(&conn).map(|(t, _)| *t) {
                Some(Target::NameServer) => {
                    let brokers: Vec<&SimBroker> = w.brokers.iter().collect();
                    if let Some(mut reply) = w.name_server.handle(&cmd, &brokers) {
                        if cmd.code == RequestCode::GetRouteInfoByTopic as i32 {
                            hostile::mangle_route(w.hostility, &mut reply);
                        }
                        write_answer(&mut w, conn, &reply);
                    }
                }
                Some(Target::Broker(b)) => {
                    if cmd.code == RequestCode::PullMessage as i32 && !cmd.is_response() {
                        w.pulls.insert((conn, cmd.opaque));
                    }
                    w.brokers[b].handle(conn, cmd, now);
                    flush(&mut w, b);
                }
                None => {}
            },
            Some(Ev::Closed { conn }) => close(&mut w, conn, now),
            Some(Ev::Call(f)) => f(&mut w, now),
            None => {}
        }
        if w.hostility == Hostility::RequestFlood && now >= next_flood {
            next_flood = now + Duration::from_millis(100);
            hostile::flood(&mut w);
        }
        for b in 0..w.brokers.len() {
            if w.brokers[b].poll_timeout().is_some_and(|t| t <= now) {
                w.brokers[b].handle_timeout(now);
            }
            flush(&mut w, b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Client;
    use rocketmq_push_core::MessageQueue;

    #[test]
    fn serves_routes_and_pulls_over_tcp() {
        let server = SimServer::start(&[("broker-a", &[("T", 2)])], SimBrokerConfig::default()).unwrap();
        let mut ns = Client::connect(server.name_server(), Duration::from_secs(5)).unwrap();
        let route = ns.route("T").unwrap();
        assert_eq!(route.subscribe_queues("T").len(), 2);
        assert_eq!(server.produce(vec![Message::new("T", "a"), Message::new("T", "b")]), 2);
        let mut b = Client::connect(server.broker_addr(0), Duration::from_secs(5)).unwrap();
        assert_eq!(b.max_offset(&MessageQueue::new("T", "broker-a", 1)).unwrap(), 1);
        assert_eq!(server.close_connections(0), 1);
        assert!(b.max_offset(&MessageQueue::new("T", "broker-a", 1)).is_err(), "closed");
        server.stop();
    }

    /// A TLS client against a plain RocketMQ port: the server takes the client hello for a
    /// frame far over its size limit and hangs up; the error says TLS is the likely cause.
    #[cfg(feature = "tls")]
    #[test]
    fn a_tls_client_at_a_plain_port_is_told_so() {
        let server = SimServer::start(&[("broker-a", &[("T", 2)])], SimBrokerConfig::default()).unwrap();
        let tls = crate::Transport::with_tls(Some(crate::Tls::insecure()));
        let err = Client::connect_with(server.name_server(), Duration::from_secs(5), &tls).unwrap_err();
        let crate::ClientError::Io(io) = &err else { panic!("an I/O error, not {err:?}") };
        assert!(
            matches!(
                crate::TlsError::of(io),
                Some(crate::TlsError::ClosedInHandshake | crate::TlsError::NotTls(_))
            ),
            "{err}"
        );
        assert!(err.to_string().contains("is TLS enabled on"), "{err}");
        server.stop();
    }
}
