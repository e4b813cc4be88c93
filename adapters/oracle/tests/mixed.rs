//! Mixed groups: Java's DefaultMQPushConsumer and ours as members of one group, under steady
//! load, each leaving in turn. They must split the queues disjointly and agree on the
//! assignment, hand a leaver's queues over within seconds, lose nothing, and (orderly) keep each
//! queue's order on each side.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rocketmq_push_oracle::{
    From, Java, Ours, Rec, Running, Setup, broker, create_topic, now_ms, serial, unique,
};

const QUEUES: i32 = 8;

/// Queues a member consumed from at or after `since_ms`.
fn queues_since(recs: &[Rec], since_ms: i64) -> BTreeSet<i32> {
    recs.iter().filter(|r| r.ms >= since_ms).map(|r| r.queue).collect()
}

/// Wait until `c` consumes from every queue after `since_ms`: how long that took.
fn takes_all(c: &dyn Running, since_ms: i64, limit: Duration) -> Duration {
    let started = Instant::now();
    while queues_since(&c.seen(), since_ms).len() < QUEUES as usize {
        assert!(started.elapsed() < limit, "no hand-over within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    started.elapsed()
}

fn load(ns: &str, topic: &str, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<BTreeSet<String>> {
    let (ns, topic) = (ns.to_owned(), topic.to_owned());
    std::thread::spawn(move || {
        let mut p = rocketmq_push_io::Producer::new(&ns, Duration::from_secs(5));
        let mut sent = BTreeSet::new();
        let mut i = 0;
        while !stop.load(Ordering::SeqCst) {
            let key = format!("mixed-{i}");
            let m = rocketmq_push_core::message::Message::new(topic.as_str(), "x")
                .with_property(rocketmq_push_core::message::keys::UNIQ_KEY, &key);
            if p.send(m).is_ok() {
                sent.insert(key);
                i += 1;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        sent
    })
}

fn mixed(orderly: bool) {
    let _one_at_a_time = serial();
    let Some((ns, b)) = broker() else { return };
    let topic = unique(if orderly { "mixed_orderly" } else { "mixed" });
    create_topic(&b, &topic, QUEUES);
    let s = Setup { orderly, from: From::First, ..Setup::new(&unique("g_mixed"), &topic) };
    let stop = Arc::new(AtomicBool::new(false));
    let producer = load(&ns, &topic, stop.clone());

    let java: Box<dyn Running> = Box::new(Java::start(&ns, &s));
    let ours: Box<dyn Running> = Box::new(Ours::start(&ns, &s));
    std::thread::sleep(Duration::from_secs(12));
    // Settled: disjoint, and together every queue, in a 5 s window. Java's own race (its
    // heartbeat skipped while its lock is busy: its pulls are then refused as
    // SUBSCRIPTION_NOT_LATEST until a heartbeat raises the group's version, ours at an assignment
    // change or its own within 30 s) can hold its queues a while longer: windows until 45 s.
    let settle = Instant::now() + Duration::from_secs(45);
    let (qj, qr) = loop {
        let window = now_ms();
        std::thread::sleep(Duration::from_secs(5));
        let (qj, qr) = (queues_since(&java.seen(), window), queues_since(&ours.seen(), window));
        let settled = qj.len() + qr.len() == QUEUES as usize && !qj.is_empty() && !qr.is_empty();
        if settled || Instant::now() > settle {
            break (qj, qr);
        }
        eprintln!("    not settled yet: java {qj:?}, ours {qr:?}");
    };
    assert!(qj.is_disjoint(&qr), "both consumed from {:?}", qj.intersection(&qr).collect::<Vec<_>>());
    assert_eq!(qj.len() + qr.len(), QUEUES as usize, "java {qj:?}, ours {qr:?}");
    assert!(!qj.is_empty() && !qr.is_empty(), "java {qj:?}, ours {qr:?}");

    // Java leaves: ours takes everything.
    let left = now_ms();
    let java_first = java.stop();
    let to_ours = takes_all(ours.as_ref(), left + 500, Duration::from_secs(40));

    // Java joins again, ours leaves: Java takes everything.
    let java: Box<dyn Running> = Box::new(Java::start(&ns, &s));
    std::thread::sleep(Duration::from_secs(12));
    let left = now_ms();
    let ours_seen = ours.stop();
    let to_java = takes_all(java.as_ref(), left + 500, Duration::from_secs(40));
    let seen: Vec<Rec> = java_first.iter().chain(&ours_seen).cloned().collect();

    stop.store(true, Ordering::SeqCst);
    let sent = producer.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sent.iter().all(|k| java.seen().iter().chain(&seen).any(|r| &r.key == k))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    let java_seen = java.stop();
    let all: Vec<&Rec> = seen.iter().chain(&java_seen).collect();
    let got: BTreeSet<&str> = all.iter().map(|r| r.key.as_str()).collect();
    let lost = sent.iter().filter(|k| !got.contains(k.as_str())).count();
    let duplicates = all.len() - got.len();
    eprintln!(
        "mixed ({}): {} sent, {lost} lost, {duplicates} duplicates; hand-over to ours {to_ours:.1?}, to Java {to_java:.1?}",
        if orderly { "orderly" } else { "concurrent" },
        sent.len()
    );
    assert_eq!(lost, 0);
    assert!(to_ours < Duration::from_secs(25) && to_java < Duration::from_secs(25));
    if orderly {
        // Each member saw every queue's offsets in increasing order.
        for (who, recs) in [("java, first", &java_first), ("ours", &ours_seen), ("java, again", &java_seen)] {
            for q in 0..QUEUES {
                let offs: Vec<i64> = recs.iter().filter(|r| r.queue == q).map(|r| r.offset).collect();
                assert!(offs.windows(2).all(|w| w[0] < w[1]), "{who}, queue {q}: out of order: {offs:?}");
            }
        }
    }
}

#[test]
fn java_and_ours_share_a_group() {
    mixed(false);
}

#[test]
fn java_and_ours_share_an_orderly_group() {
    mixed(true);
}

/// A group switched to POP with Java's push consumer (`clientRebalance=false`) and ours as
/// members, on a topic of two queues: both pop from every queue (under PULL the queues would be
/// split), nothing is lost, and a message one side fails comes back to the group after its
/// invisible time.
#[test]
fn java_and_ours_share_a_pop_group() {
    use rocketmq_push_core::protocol::body::MessageRequestMode;
    let _one_at_a_time = serial();
    let Some((ns, b)) = broker() else { return };
    let topic = unique("mixed_pop");
    create_topic(&b, &topic, 2);
    let group = unique("g_mixed_pop");
    rocketmq_push_io::Client::connect(&b, Duration::from_secs(10))
        .unwrap()
        .set_message_request_mode(&topic, &group, MessageRequestMode::Pop, 0)
        .unwrap();
    let s = Setup { from: From::First, broker_rebalance: true, ..Setup::new(&group, &topic) };
    let java: Box<dyn Running> = Box::new(Java::start(&ns, &s));
    let ours: Box<dyn Running> = Box::new(Ours::start(&ns, &s));
    // Java dispatches its first pops 500 ms after its first rebalance.
    std::thread::sleep(Duration::from_secs(5));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = load(&ns, &topic, stop.clone());
    std::thread::sleep(Duration::from_secs(8));
    stop.store(true, Ordering::SeqCst);
    let sent = producer.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    let all_seen = || {
        let seen: BTreeSet<String> = java.seen().into_iter().chain(ours.seen()).map(|r| r.key).collect();
        sent.iter().all(|k| seen.contains(k))
    };
    while !all_seen() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let (java_seen, ours_seen) = (java.stop(), ours.stop());
    let all: Vec<&Rec> = java_seen.iter().chain(&ours_seen).collect();
    let got: BTreeSet<&str> = all.iter().map(|r| r.key.as_str()).collect();
    let lost = sent.iter().filter(|k| !got.contains(k.as_str())).count();
    let (qj, qr) = (queues_since(&java_seen, 0), queues_since(&ours_seen, 0));
    eprintln!(
        "mixed (pop): {} sent, {lost} lost, {} duplicates; java {} from queues {qj:?}, ours {} from {qr:?}",
        sent.len(),
        all.len() - got.len(),
        java_seen.len(),
        ours_seen.len()
    );
    assert_eq!(lost, 0);
    assert!(!java_seen.is_empty() && !ours_seen.is_empty(), "both members popped");
    // Each side sees the queue it popped, -1 ("every queue"), as Java's context reports it.
    assert_eq!(qj, BTreeSet::from([-1]), "java pops");
    assert_eq!(qr, BTreeSet::from([-1]), "ours pops");
}
