//! Queue allocation parity with Java: replays `tests/data/allocate_java.jsonl`, the assignments the
//! REAL strategies of rocketmq-client 5.3.3 computed (regenerate with
//! `scripts/java-allocate-golden.sh`; generator: `tests/java/src/main/java/rmqtest/AllocateGolden.java`),
//! through [`AllocateStrategy::allocate`] and requires the identical list, in the same order.
//!
//! Each line: `{"scenario":N,"strategy":"AVG","param":…,"mqAll":[["T","broker-a",0],…],
//! "cidAll":[…],"current":"…","result":[…]}`, or `"error":"…"` instead of `"result"` when Java threw
//! (`AbstractAllocateMessageQueueStrategy.check`: empty current cid, empty `mqAll`, empty `cidAll`).
//! Rust has no error path, so for those lines it must return nothing. (In Java's `RebalanceImpl` a
//! thrown allocation keeps the previous assignment rather than dropping every queue; that is the
//! caller's concern and not checked here.)
//!
//! `mqAll` and `cidAll` are in Java's `Collections.sort` order; the test also checks that Rust's
//! `Ord` sorts them into the same order, since every group member must agree on it.

#![allow(clippy::disallowed_methods)] // reads the golden file: test I/O, not the core

use std::fmt::Write as _;
use std::path::Path;

use rocketmq_push_core::MessageQueue;
use rocketmq_push_core::json::Value;
use rocketmq_push_core::rebalance::AllocateStrategy;

const DATA: &str = "tests/data/allocate_java.jsonl";

/// One line of the golden file.
struct Case {
    line: usize,
    scenario: i64,
    strategy: AllocateStrategy,
    mq_all: Vec<MessageQueue>,
    cid_all: Vec<String>,
    current: String,
    /// `Ok(result)` or `Err(java exception)`.
    expected: Result<Vec<MessageQueue>, String>,
}

fn field<'a>(v: &'a Value, key: &str, line: usize) -> &'a Value {
    v.get(key).unwrap_or_else(|| panic!("{DATA}:{line}: no field {key:?}"))
}

fn queue(v: &Value, line: usize) -> MessageQueue {
    match v.as_array() {
        Some([topic, broker, id]) => MessageQueue::new(
            topic.as_str().unwrap_or_else(|| panic!("{DATA}:{line}: topic is {}", topic.kind())),
            broker.as_str().unwrap_or_else(|| panic!("{DATA}:{line}: broker is {}", broker.kind())),
            id.as_i64()
                .and_then(|i| i32::try_from(i).ok())
                .unwrap_or_else(|| panic!("{DATA}:{line}: bad id")),
        ),
        _ => panic!("{DATA}:{line}: a queue must be [topic, brokerName, queueId], got {v:?}"),
    }
}

fn queues(v: &Value, line: usize) -> Vec<MessageQueue> {
    let items =
        v.as_array().unwrap_or_else(|| panic!("{DATA}:{line}: expected a queue array, got {}", v.kind()));
    items.iter().map(|q| queue(q, line)).collect()
}

fn strings(v: &Value, line: usize) -> Vec<String> {
    let items =
        v.as_array().unwrap_or_else(|| panic!("{DATA}:{line}: expected a string array, got {}", v.kind()));
    items
        .iter()
        .map(|s| {
            s.as_str().unwrap_or_else(|| panic!("{DATA}:{line}: expected a string, got {}", s.kind())).into()
        })
        .collect()
}

fn parse_case(text: &str, line: usize) -> Case {
    let v = Value::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{DATA}:{line}: {e}"));
    let name = field(&v, "strategy", line).as_str().unwrap_or_else(|| panic!("{DATA}:{line}: strategy"));
    let param = field(&v, "param", line);
    let strategy = match name {
        "AVG" => AllocateStrategy::Averagely,
        "AVG_BY_CIRCLE" => AllocateStrategy::AveragelyByCircle,
        "CONSISTENT_HASH" => AllocateStrategy::ConsistentHash(
            param
                .as_i64()
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or_else(|| panic!("{DATA}:{line}: virtual node count {param:?}")),
        ),
        "MACHINE_ROOM" => AllocateStrategy::MachineRoom(strings(param, line)),
        "CONFIG" => AllocateStrategy::Config(queues(param, line)),
        other => panic!("{DATA}:{line}: unknown strategy {other:?}"),
    };
    assert_eq!(strategy.name(), name, "{DATA}:{line}: Java getName()");
    let expected = match (v.get("result"), v.get("error")) {
        (Some(r), None) => Ok(queues(r, line)),
        (None, Some(e)) => Err(e.as_str().unwrap_or_else(|| panic!("{DATA}:{line}: error")).to_owned()),
        _ => panic!("{DATA}:{line}: exactly one of \"result\" and \"error\" is required"),
    };
    Case {
        line,
        scenario: field(&v, "scenario", line).as_i64().unwrap_or(-1),
        strategy,
        mq_all: queues(field(&v, "mqAll", line), line),
        cid_all: strings(field(&v, "cidAll", line), line),
        current: field(&v, "current", line)
            .as_str()
            .unwrap_or_else(|| panic!("{DATA}:{line}: current"))
            .into(),
        expected,
    }
}

fn load() -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DATA);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e} (regenerate with scripts/java-allocate-golden.sh)", path.display())
    });
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_case(l, i + 1))
        .collect()
}

fn describe(c: &Case, got: &[MessageQueue]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{DATA}:{} (scenario {}): {:?}", c.line, c.scenario, c.strategy);
    let _ = writeln!(s, "  current = {:?}", c.current);
    let _ = writeln!(s, "  cidAll  = {:?}", c.cid_all);
    let _ = writeln!(s, "  mqAll   = {:?}", c.mq_all);
    match &c.expected {
        Ok(want) => {
            let _ = writeln!(s, "  java    = {want:?}");
        }
        Err(e) => {
            let _ = writeln!(s, "  java    = threw {e} (Rust must return nothing)");
        }
    }
    let _ = write!(s, "  rust    = {got:?}");
    s
}

#[test]
fn every_strategy_matches_java() {
    let cases = load();
    assert!(cases.len() > 1000, "suspiciously few cases: {}", cases.len());

    let mut mismatches = Vec::new();
    let mut errors = 0;
    for c in &cases {
        let got = c.strategy.allocate(&c.current, &c.mq_all, &c.cid_all);
        let ok = match &c.expected {
            Ok(want) => got == *want,
            Err(_) => {
                errors += 1;
                got.is_empty()
            }
        };
        if !ok {
            mismatches.push(describe(c, &got));
        }
    }
    println!(
        "allocate_parity: checked {} Java allocations ({} where Java threw) from {DATA}",
        cases.len(),
        errors
    );
    assert!(
        mismatches.is_empty(),
        "{} of {} allocations differ from Java; the first:\n{}\n{}",
        mismatches.len(),
        cases.len(),
        mismatches[0],
        if mismatches.len() > 1 {
            format!("and the others:\n{}", mismatches[1..].join("\n"))
        } else {
            String::new()
        }
    );
}

#[test]
fn rust_sorts_queues_and_client_ids_like_java() {
    let cases = load();
    let mut checked = 0;
    let mut last_scenario = None;
    for c in &cases {
        if last_scenario == Some(c.scenario) {
            continue; // every line of a scenario has the same mqAll and cidAll
        }
        last_scenario = Some(c.scenario);
        checked += 1;
        // Start from the reverse order so that sorting really has work to do.
        let mut mqs: Vec<MessageQueue> = c.mq_all.iter().rev().cloned().collect();
        mqs.sort();
        assert_eq!(mqs, c.mq_all, "{DATA}:{}: MessageQueue order differs from Java compareTo", c.line);
        let mut cids: Vec<String> = c.cid_all.iter().rev().cloned().collect();
        cids.sort();
        assert_eq!(cids, c.cid_all, "{DATA}:{}: client id order differs from Java String.compareTo", c.line);
    }
    println!("allocate_parity: {checked} scenarios sorted like Java");
}
