//! The chaos suite, against real RocketMQ 5.3.3 clusters of its own (name server on 19876,
//! brokers from 20911; `scripts/rocketmq.sh` starts, kills and restarts them) and the consumer as
//! a process of its own (`chaos_consumer`, tokio adapter), under steady load:
//!
//! - the consumer killed with kill -9, and stopped with SIGTERM, again and again;
//! - the broker killed with kill -9 and restarted;
//! - a TCP fault proxy that black-holes, resets, stalls and cuts connections for longer than the
//!   long-poll hold and the pull timeout;
//! - two masters, one killed for 40 s: the other's queues must not stall;
//! - a master with a slave, the master killed: consumption goes on from the slave, and back.
//!
//! Each scenario reports produced, consumed-unique, lost, duplicates, time to resume and peak RSS
//! (printed as a table row for tests/README.md). `RMQ_CHAOS=smoke` runs a bounded version (CI),
//! `RMQ_CHAOS=full` everything (`scripts/chaos.sh`); unset, the suite is skipped.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rocketmq_push_chaos::cluster::Cluster;
use rocketmq_push_chaos::load::Load;
use rocketmq_push_chaos::process::{ConsumerProcess, Tally, read_consumed, wait_until};
use rocketmq_push_chaos::proxy::{Fault, FaultProxy, Target};

const BIN: &str = env!("CARGO_BIN_EXE_chaos_consumer");
/// Messages per second the load produces.
const RATE: u32 = 200;
/// Consumed but not yet committed when a consumer dies: about one offset-persist interval (5 s)
/// of consumption, plus what was in flight. A kill -9 may replay at most this.
const KILL_WINDOW: usize = RATE as usize * 7;

#[derive(Debug)]
struct Report {
    name: String,
    tally: Tally,
    resume: Duration,
    peak_rss_mib: u64,
    note: String,
}

impl Report {
    fn row(&self) -> String {
        let t = &self.tally;
        format!(
            "| {} | {} | {} | {} | {} | {:.1} s | {} MiB | {} |",
            self.name,
            t.produced,
            t.consumed_unique,
            t.lost,
            t.duplicates,
            self.resume.as_secs_f64(),
            self.peak_rss_mib,
            self.note
        )
    }
}

fn unique(prefix: &str) -> String {
    let n =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() % 100_000_000;
    format!("{prefix}_{n}")
}

fn out_file(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("chaos");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}.out"));
    let _ = std::fs::remove_file(&p);
    p
}

fn consumed_keys(out: &std::path::Path) -> BTreeSet<String> {
    read_consumed(out).into_iter().map(|c| c.key).collect()
}

/// Wait until everything produced was consumed (or `limit`).
fn drain(out: &std::path::Path, produced: &BTreeSet<String>, limit: Duration) -> bool {
    wait_until(limit, || produced.is_subset(&consumed_keys(out)))
}

/// Until the consumer records something new: how long that took.
fn time_to_progress(out: &std::path::Path, limit: Duration) -> Duration {
    let (before, started) = (read_consumed(out).len(), Instant::now());
    assert!(wait_until(limit, || read_consumed(out).len() > before), "no progress within {limit:?}");
    started.elapsed()
}

fn spawn(ns: &str, group: &str, topic: &str, out: &std::path::Path, knobs: &[&str]) -> ConsumerProcess {
    ConsumerProcess::spawn(BIN, ns, group, topic, out, knobs).expect("chaos_consumer starts")
}

/// The consumer stopped again and again, by kill -9 or by SIGTERM, under load.
fn consumer_restarts(cluster: &Cluster, kill9: bool, rounds: usize) -> Report {
    let name = if kill9 { "consumer_kill9" } else { "consumer_sigterm" };
    let (topic, group) = (unique(name), unique("g"));
    cluster.create_topic(&topic, 8);
    let ns = cluster.name_server().to_owned();
    let load = Load::start(&ns, &topic, &topic, RATE);
    let out = out_file(name);
    let mut c = spawn(&ns, &group, &topic, &out, &[]);
    let (mut resume, mut peak) = (Duration::ZERO, 0);
    for round in 0..rounds {
        std::thread::sleep(Duration::from_millis(3000 + 700 * (round as u64 % 4)));
        peak = peak.max(c.peak_rss_kib().unwrap_or(0));
        if kill9 {
            c.kill9();
        } else {
            let (took, status) = c.terminate(Duration::from_secs(20)).expect("exits after SIGTERM");
            assert!(status.success() && took < Duration::from_secs(15), "SIGTERM: {status} after {took:?}");
        }
        c = spawn(&ns, &group, &topic, &out, &[]);
        resume = resume.max(time_to_progress(&out, Duration::from_secs(60)));
    }
    let produced = load.stop();
    assert!(drain(&out, &produced, Duration::from_secs(90)), "{name}: not everything consumed");
    peak = peak.max(c.peak_rss_kib().unwrap_or(0));
    c.terminate(Duration::from_secs(20));
    let tally = Tally::of(&produced, &read_consumed(&out));
    assert_eq!(tally.lost, 0, "{name}: {tally}");
    let note = if kill9 {
        assert!(tally.duplicates <= rounds * KILL_WINDOW, "{name}: {tally}, window {KILL_WINDOW} per kill");
        format!("{rounds} kills; replay ≤ {KILL_WINDOW} per kill allowed ({RATE} msg/s × 7 s)")
    } else {
        assert_eq!(tally.duplicates, 0, "{name}: a graceful stop commits what it consumed");
        format!("{rounds} stops")
    };
    Report { name: format!("{name} ×{rounds}"), tally, resume, peak_rss_mib: peak / 1024, note }
}

/// The broker killed (kill -9) and restarted, under load.
fn broker_kills(cluster: &Cluster, rounds: usize) -> Report {
    let (topic, group) = (unique("broker_kill"), unique("g"));
    cluster.create_topic(&topic, 8);
    let ns = cluster.name_server().to_owned();
    let load = Load::start(&ns, &topic, &topic, RATE);
    let out = out_file("broker_kill");
    let c = spawn(&ns, &group, &topic, &out, &[]);
    let mut resume = Duration::ZERO;
    for _ in 0..rounds {
        std::thread::sleep(Duration::from_secs(5));
        cluster.kill("broker");
        std::thread::sleep(Duration::from_secs(5));
        cluster.restart("broker");
        resume = resume.max(time_to_progress(&out, Duration::from_secs(90)));
    }
    let produced = load.stop();
    assert!(drain(&out, &produced, Duration::from_secs(90)), "broker_kill: not everything consumed");
    let peak = c.peak_rss_kib().unwrap_or(0);
    c.terminate(Duration::from_secs(20));
    let tally = Tally::of(&produced, &read_consumed(&out));
    assert_eq!(tally.lost, 0, "broker_kill: {tally}");
    assert!(tally.duplicates <= rounds * KILL_WINDOW, "broker_kill: {tally}");
    let note = format!("{rounds} kills, 5 s down each; time to resume counted from the restart");
    Report { name: format!("broker_kill9 ×{rounds}"), tally, resume, peak_rss_mib: peak / 1024, note }
}

/// Network faults between the consumer and the cluster, longer than the long-poll hold (15 s)
/// and the pull timeout (30 s).
fn proxy_faults(cluster: &Cluster, full: bool) -> Report {
    let (topic, group) = (unique("proxy"), unique("g"));
    cluster.create_topic(&topic, 8);
    let ns = cluster.name_server().to_owned();
    let proxy = FaultProxy::start(&ns).expect("proxy starts");
    let load = Load::start(&ns, &topic, &topic, RATE);
    let out = out_file("proxy");
    let c = spawn(proxy.addr(), &group, &topic, &out, &[]);
    std::thread::sleep(Duration::from_secs(5));
    let mut phases: Vec<(&str, Fault, Duration)> =
        vec![("blackhole", Fault::Blackhole, Duration::from_secs(35))];
    if full {
        phases.push(("stall", Fault::Stall(Duration::from_secs(35)), Duration::from_secs(40)));
        phases.push(("refuse", Fault::Refuse, Duration::from_secs(10)));
        phases.push(("random cuts", Fault::DropRandom(0.02), Duration::from_secs(20)));
    }
    let mut resume = Duration::ZERO;
    let mut note = Vec::new();
    for (what, fault, length) in phases {
        proxy.set(Target::AllBrokers, fault);
        std::thread::sleep(length);
        proxy.set(Target::AllBrokers, Fault::Pass);
        let took = time_to_progress(&out, Duration::from_secs(90));
        resume = resume.max(took);
        note.push(format!("{what} {}s → {took:.1?}", length.as_secs()));
        std::thread::sleep(Duration::from_secs(3));
    }
    proxy.reset_now(Target::All);
    let took = time_to_progress(&out, Duration::from_secs(60));
    note.push(format!("reset → {took:.1?}"));
    let produced = load.stop();
    assert!(drain(&out, &produced, Duration::from_secs(90)), "proxy: not everything consumed");
    let peak = c.peak_rss_kib().unwrap_or(0);
    c.terminate(Duration::from_secs(20));
    let tally = Tally::of(&produced, &read_consumed(&out));
    assert_eq!(tally.lost, 0, "proxy: {tally}");
    Report {
        name: "network faults (proxy)".into(),
        tally,
        resume: resume.max(took),
        peak_rss_mib: peak / 1024,
        note: note.join(", "),
    }
}

/// Two masters; broker-b killed for 40 s: broker-a's queues keep flowing, and nothing broker-b
/// had committed is replayed when it is back.
fn two_masters(cluster: &Cluster) -> Report {
    let (topic, group) = (unique("two_masters"), unique("g"));
    cluster.create_topic(&topic, 4);
    let ns = cluster.name_server().to_owned();
    let load = Load::start(&ns, &topic, &topic, RATE);
    let out = out_file("two_masters");
    let c = spawn(&ns, &group, &topic, &out, &[]);
    std::thread::sleep(Duration::from_secs(10));
    cluster.kill("broker-b");
    // While it is down, broker-a's messages keep arriving: the longest pause between new records.
    let (mut last_len, mut last_growth, mut longest) =
        (read_consumed(&out).len(), Instant::now(), Duration::ZERO);
    let down = Instant::now();
    while down.elapsed() < Duration::from_secs(40) {
        std::thread::sleep(Duration::from_millis(250));
        let len = read_consumed(&out).len();
        if len > last_len {
            longest = longest.max(last_growth.elapsed());
            (last_len, last_growth) = (len, Instant::now());
        }
    }
    longest = longest.max(last_growth.elapsed());
    cluster.restart("broker-b");
    std::thread::sleep(Duration::from_secs(10));
    let produced = load.stop();
    assert!(drain(&out, &produced, Duration::from_secs(120)), "two_masters: not everything consumed");
    let peak = c.peak_rss_kib().unwrap_or(0);
    c.terminate(Duration::from_secs(20));
    let tally = Tally::of(&produced, &read_consumed(&out));
    assert_eq!(tally.lost, 0, "two_masters: {tally}");
    assert!(longest < Duration::from_secs(15), "broker-a's queues stalled for {longest:?}");
    assert!(tally.duplicates <= KILL_WINDOW, "two_masters: {tally}");
    let note = format!("broker-b down 40 s; longest pause meanwhile {longest:.1?}");
    Report {
        name: "two masters, one killed 40 s".into(),
        tally,
        resume: longest,
        peak_rss_mib: peak / 1024,
        note,
    }
}

/// A master with a slave; the master killed mid-way: the rest is consumed from the slave; the
/// master back, new messages flow from it again.
fn master_slave(cluster: &Cluster) -> Report {
    let (topic, group) = (unique("master_slave"), unique("g"));
    cluster.create_topic(&topic, 4);
    let created = Instant::now();
    let ns = cluster.name_server().to_owned();
    let first = Load::start(&ns, &topic, &format!("{topic}-1"), 1000);
    std::thread::sleep(Duration::from_secs(3));
    let mut produced = first.stop();
    // Messages replicate at once, but 5.3.3 copies topic settings to the slave once a minute
    // (scripts/rocketmq.sh fact 21): before that the slave answers TOPIC_NOT_EXIST.
    std::thread::sleep(Duration::from_secs(65).saturating_sub(created.elapsed()));
    let out = out_file("master_slave");
    // About 100 messages a second, at most 10 cached per queue: the kill comes mid-way, and what
    // is left must be pulled from the slave.
    let c = spawn(&ns, &group, &topic, &out, &["threads=1", "delay_ms=10", "queue_msgs=10"]);
    assert!(wait_until(Duration::from_secs(30), || read_consumed(&out).len() >= 300), "consuming started");
    cluster.kill("broker");
    // The failover time: the longest pause in consumption from the kill until all is consumed.
    let (mut last_len, mut last_growth, mut pause) =
        (read_consumed(&out).len(), Instant::now(), Duration::ZERO);
    let rest = wait_until(Duration::from_secs(120), || {
        let len = read_consumed(&out).len();
        if len > last_len {
            pause = pause.max(last_growth.elapsed());
            (last_len, last_growth) = (len, Instant::now());
        }
        produced.is_subset(&consumed_keys(&out))
    });
    assert!(rest, "master_slave: the rest was not consumed from the slave");
    cluster.restart("broker");
    let second = Load::start(&ns, &topic, &format!("{topic}-2"), RATE);
    std::thread::sleep(Duration::from_secs(5));
    produced.extend(second.stop());
    assert!(
        drain(&out, &produced, Duration::from_secs(120)),
        "master_slave: nothing after the master came back"
    );
    let peak = c.peak_rss_kib().unwrap_or(0);
    c.terminate(Duration::from_secs(20));
    let tally = Tally::of(&produced, &read_consumed(&out));
    assert_eq!(tally.lost, 0, "master_slave: {tally}");
    let note = format!(
        "master killed mid-way: the rest from the slave after a pause of {pause:.1?}, then back to the master"
    );
    Report {
        name: "master + slave, master killed".into(),
        tally,
        resume: pause,
        peak_rss_mib: peak / 1024,
        note,
    }
}

#[test]
fn chaos() {
    let mode = std::env::var("RMQ_CHAOS").unwrap_or_default();
    if mode != "smoke" && mode != "full" {
        eprintln!("note: RMQ_CHAOS is not smoke or full; the chaos suite is skipped");
        return;
    }
    let full = mode == "full";
    let rounds = if full { 10 } else { 2 };
    // CHAOS_ONLY=word runs the scenarios whose name contains it (kill9, sigterm, broker, proxy,
    // masters, slave).
    let only = std::env::var("CHAOS_ONLY").unwrap_or_default();
    let wanted = |name: &str| name.contains(only.as_str());
    let mut reports = Vec::new();
    if ["kill9", "sigterm", "broker", "proxy"].iter().any(|n| wanted(n)) {
        let cluster = Cluster::start("single");
        if wanted("kill9") {
            reports.push(consumer_restarts(&cluster, true, rounds));
        }
        if wanted("sigterm") {
            reports.push(consumer_restarts(&cluster, false, rounds));
        }
        if wanted("broker") {
            reports.push(broker_kills(&cluster, if full { 3 } else { 1 }));
        }
        if wanted("proxy") {
            reports.push(proxy_faults(&cluster, full));
        }
    }
    if wanted("masters") {
        reports.push(two_masters(&Cluster::start("2m")));
    }
    if wanted("slave") {
        reports.push(master_slave(&Cluster::start("ms")));
    }
    println!(
        "\n| scenario | produced | consumed-unique | lost | duplicates | time to resume | peak RSS | notes |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in &reports {
        println!("{}", r.row());
    }
}
