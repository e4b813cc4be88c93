//! Golden transcripts: the exact sequence of a driver's outputs for key scenarios. A behaviour change shows
//! up here as a readable diff; update the golden lists on purpose (run with `--nocapture` to see
//! the actual sequence). Runs of one action are folded as `Name×n`.

use std::time::Duration;

use rocketmq_push_core::sim::{Sim, Verdict};
use rocketmq_push_core::{Command, ConsumeFromWhere};

fn fold(t: &[String]) -> Vec<String> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for s in t {
        match out.last_mut() {
            Some((last, n)) if last == s => *n += 1,
            _ => out.push((s.clone(), 1)),
        }
    }
    out.into_iter().map(|(s, n)| if n == 1 { s } else { format!("{s}×{n}") }).collect()
}

fn check(actual: &[String], golden: &[&str]) {
    let actual = fold(actual);
    println!("{actual:#?}");
    assert_eq!(actual, golden, "transcript changed; if on purpose, update the golden list");
}

#[test]
fn startup_then_consume_four_messages() {
    let mut sim = Sim::builder(70).broker("broker-a", &[("T", 2)]).build();
    sim.produce("T", 4);
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_for(Duration::from_millis(100));
    check(
        sim.transcript(c),
        &[
            // The name server link: connected, then both queued route queries written at once.
            "Connect",
            "Transmit:GetRouteInfoByTopic×2",
            "Connect",
            "Transmit:HeartBeat",
            // The topic's mode from the broker first (5.x, no clientRebalance): PULL, so the
            // consumer list and allocation here follow.
            "Transmit:QueryAssignment",
            "Transmit:GetConsumerListByGroup",
            "Transmit:QueryConsumerOffset×2",
            "Event:QueuesAssigned",
            // A new assignment: a newer subscription version, heartbeated before the pulls.
            "Transmit:HeartBeat",
            // The broker answered 0 for this young queue: a stored offset, nothing to commit yet.
            // Two first pulls, then each answer's next pull before its messages are handed out.
            "Transmit:PullMessage×3",
            "Consume×2",
            "Transmit:PullMessage",
            "Consume×2",
        ],
    );
}

#[test]
fn graceful_shutdown() {
    let mut sim = Sim::builder(71)
        .broker("broker-a", &[("T", 1)])
        .listener(|_, _, _| Verdict { took: Duration::from_millis(300), ..Verdict::OK })
        .build();
    sim.produce("T", 2);
    let c = sim.add_consumer(
        sim.config("G").subscribe("T", "*").consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset),
    );
    sim.run_for(Duration::from_millis(100));
    let before = sim.transcript(c).len();
    sim.command(c, Command::Shutdown);
    sim.run_until(|s| s.consumer(c).unwrap().is_terminated(), Duration::from_secs(10)).unwrap();
    check(
        &sim.transcript(c)[before..],
        &[
            "Transmit:UpdateConsumerOffset",
            "Transmit:UnregisterClient",
            "Event:Terminated",
            "Close×2",
            "Terminated",
        ],
    );
}
