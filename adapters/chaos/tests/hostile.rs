//! A hostile broker and name server (the simulator served over TCP, made to misbehave), against
//! the consumer as a process of its own: malformed lengths, a silent broker, frames cut short,
//! decompression bombs, absurd routes and offsets, request floods. For each: no panic, memory
//! bounded (peak RSS under 64 MiB), a clear event, recovery once the servers behave again, and a
//! SIGTERM that ends the process within the shutdown limit.
//!
//! The consumer runs with `pullThresholdSizeForQueue` at 16 MiB on a one-queue topic: what a
//! queue may hold is that threshold plus one record (a record is capped at 32 MiB decompressed,
//! or 65,536 messages for an inner batch), so 64 MiB bounds the whole process.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use rocketmq_push_chaos::process::{ConsumerProcess, Tally, read_consumed, wait_until};
use rocketmq_push_core::message::{Message, keys};
use rocketmq_push_core::sim::SimBrokerConfig;
use rocketmq_push_io::sim_server::{Hostility, SimServer};

const BIN: &str = env!("CARGO_BIN_EXE_chaos_consumer");
const RSS_LIMIT_KIB: u64 = 64 * 1024;
/// awaitTermination 2 s + offset update 3 s + unregister 3 s, and room for a busy machine.
const EXIT_LIMIT: Duration = Duration::from_secs(15);

fn out_file(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hostile");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{name}.out"));
    let _ = std::fs::remove_file(&p);
    p
}

fn produce(server: &SimServer, tag: &str, n: usize) -> BTreeSet<String> {
    let keys: Vec<String> = (0..n).map(|i| format!("{tag}-{i}")).collect();
    server.produce(
        keys.iter().map(|k| Message::new("T", "payload").with_property(keys::UNIQ_KEY, k)).collect(),
    );
    keys.into_iter().collect()
}

/// Run one hostile case: `h` from the start (routes) or after a first batch was consumed
/// (answers), for `hostile_for`; then the servers behave, new messages must arrive, and a
/// SIGTERM must end the process in time — during the hostility for floods.
fn case(name: &str, h: Hostility, from_start: bool, hostile_for: Duration, event: &str) -> String {
    let server = SimServer::start(&[("broker-a", &[("T", 1)])], SimBrokerConfig::default()).unwrap();
    let out = out_file(name);
    let before = produce(&server, "before", 20);
    if from_start {
        server.set_hostility(h);
    }
    let mut c = ConsumerProcess::spawn(
        BIN,
        server.name_server(),
        &format!("g_{name}"),
        "T",
        &out,
        &["queue_mib=16", "await_ms=2000"],
    )
    .unwrap();
    let mut during = BTreeSet::new();
    if !from_start {
        assert!(
            wait_until(Duration::from_secs(30), || read_consumed(&out).len() >= 20),
            "{name}: the first messages were not consumed"
        );
        server.set_hostility(h);
        during = produce(&server, "during", 5);
    }
    std::thread::sleep(hostile_for);
    assert!(c.alive(), "{name}: the consumer died; see {}", c.log.display());
    let log = std::fs::read_to_string(&c.log).unwrap_or_default();
    assert!(log.contains(event), "{name}: no event naming {event:?}; see {}", c.log.display());
    if h == Hostility::RequestFlood {
        // Shutdown while the flood goes on.
        let rss = c.peak_rss_kib().unwrap_or(0);
        let (took, status) =
            c.terminate(EXIT_LIMIT).unwrap_or_else(|| panic!("{name}: no exit after SIGTERM"));
        assert!(status.success(), "{name}: exit {status}");
        assert!(rss < RSS_LIMIT_KIB, "{name}: peak RSS {rss} KiB");
        return format!("{name}: peak RSS {} MiB, exit after SIGTERM in {took:.1?}", rss / 1024);
    }
    server.set_hostility(Hostility::None);
    let after = produce(&server, "after", 20);
    let recovered = wait_until(Duration::from_secs(90), || {
        let got: BTreeSet<String> = read_consumed(&out).into_iter().map(|c| c.key).collect();
        after.is_subset(&got)
    });
    let rss = c.peak_rss_kib().unwrap_or(0);
    let consumed = read_consumed(&out);
    let (took, status) = c.terminate(EXIT_LIMIT).unwrap_or_else(|| panic!("{name}: no exit after SIGTERM"));
    assert!(recovered, "{name}: nothing consumed after the servers behaved again");
    assert!(status.success(), "{name}: exit {status}");
    assert!(rss < RSS_LIMIT_KIB, "{name}: peak RSS {rss} KiB");
    let all: BTreeSet<String> = before.iter().chain(&during).chain(&after).cloned().collect();
    let tally = Tally::of(&all, &consumed);
    assert_eq!(tally.lost, 0, "{name}: {tally}");
    format!("{name}: peak RSS {} MiB, recovered, exit in {took:.1?}; {tally}", rss / 1024)
}

#[test]
fn malformed_lengths() {
    println!(
        "{}",
        case("malformed_lengths", Hostility::MalformedLengths, false, Duration::from_secs(5), "Decode(")
    );
}

#[test]
fn a_silent_broker() {
    println!("{}", case("silent", Hostility::Silent, false, Duration::from_secs(10), "Unresponsive"));
}

#[test]
fn frames_cut_short() {
    println!(
        "{}",
        case("partial_frames", Hostility::PartialFrames, false, Duration::from_secs(10), "Unresponsive")
    );
}

#[test]
fn zlib_bombs() {
    println!(
        "{}",
        case("zlib_bombs", Hostility::ZlibBombs, false, Duration::from_secs(10), "RecordsOutOfRange")
    );
}

#[test]
fn inner_batch_bombs() {
    println!(
        "{}",
        case(
            "inner_batch_bombs",
            Hostility::InnerBatchBombs,
            false,
            Duration::from_secs(10),
            "MAX_INNER_BATCH"
        )
    );
}

#[test]
fn absurd_routes() {
    println!(
        "{}",
        case("absurd_routes", Hostility::AbsurdRoutes, true, Duration::from_secs(5), "readQueueNums")
    );
}

#[test]
fn absurd_offsets() {
    println!(
        "{}",
        case("absurd_offsets", Hostility::AbsurdOffsets, false, Duration::from_secs(5), "RecordsOutOfRange")
    );
}

#[test]
fn a_request_flood() {
    println!(
        "{}",
        case(
            "request_flood",
            Hostility::RequestFlood,
            false,
            Duration::from_secs(6),
            "chaos_consumer started"
        )
    );
}
