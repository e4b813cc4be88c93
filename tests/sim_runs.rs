//! Runs: where the adapter queues batches itself, a pull's ready messages go out as one run of
//! batches (one hand-off), but each batch is still one listener call with its own id, result,
//! start and consume timeout. A failed or timed-out batch goes back alone; the rest of its run
//! is committed.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use rocketmq_push_core::sim::{Sim, SimBrokerConfig, Verdict};
use rocketmq_push_core::{BatchId, ConsumeFromWhere, Event};

/// A listener call as the listener saw it: the batch, its messages' offsets, its reconsume count.
type Call = (BatchId, Vec<i64>, i32);

#[test]
fn each_batch_of_a_run_is_answered_failed_and_timed_out_on_its_own() {
    // Ten messages, three per listener call: batches 0-2, 3-5, 6-8 and 9, one run. The second
    // fails, the third takes 25 s (past the 10 s consume timeout), the others succeed.
    let seen: Rc<RefCell<Vec<Call>>> = Rc::default();
    let log = seen.clone();
    let mut sim = Sim::builder(31)
        .adapter_queue(true)
        .broker("broker-a", &[("T", 1)])
        .listener(move |_, b, _| {
            let offsets: Vec<i64> = b.messages.iter().map(|m| m.queue_offset).collect();
            let retry = b.messages[0].reconsume_times;
            log.borrow_mut().push((b.id, offsets.clone(), retry));
            match (retry, offsets[0]) {
                (0, 3) => Verdict::LATER,
                (0, 6) => Verdict { took: Duration::from_secs(25), ..Verdict::OK },
                _ => Verdict::OK,
            }
        })
        .build();
    sim.produce("T", 10);
    let c = sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .consume_message_batch_max_size(3)
            .consume_timeout(Duration::from_secs(10)),
    );
    sim.run_until(Sim::all_done, Duration::from_secs(120)).unwrap();
    sim.run_for(Duration::from_secs(60));

    let seen = seen.borrow();
    let first: Vec<&Call> = seen.iter().filter(|(_, _, r)| *r == 0).collect();
    let slices: Vec<&[i64]> = first.iter().map(|(_, o, _)| o.as_slice()).collect();
    assert_eq!(slices, [&[0, 1, 2][..], &[3, 4, 5], &[6, 7, 8], &[9]], "one call per batch of three");
    let runs: BTreeSet<BatchId> = first.iter().map(|(id, _, _)| id.split().0).collect();
    assert_eq!(runs.len(), 1, "one pull, one run: {first:?}");
    let units: Vec<usize> = first.iter().map(|(id, _, _)| id.split().1).collect();
    assert_eq!(units, [0, 1, 2, 3]);

    let timeouts = sim.events(c).iter().filter(|e| matches!(e, Event::ConsumeTimeout { .. })).count();
    assert_eq!(timeouts, 1, "only the slow batch timed out");
    // What came back for a retry: the failed batch and the timed-out one, each message once;
    // nothing of the batches that succeeded.
    let mut retried: BTreeMap<String, usize> = BTreeMap::new();
    for m in sim.consumed().iter().filter(|m| m.reconsume_times > 0) {
        *retried.entry(m.key.clone()).or_default() += 1;
    }
    let key_of: BTreeMap<i64, String> = sim
        .consumed()
        .iter()
        .filter(|m| m.reconsume_times == 0 && &*m.queue.topic == "T")
        .map(|m| (m.offset, m.key.clone()))
        .collect();
    let expected: BTreeMap<String, usize> = (3..9).map(|o| (key_of[&o].clone(), 1)).collect();
    assert_eq!(retried, expected);
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(10));
}

#[test]
fn a_pull_of_more_than_a_run_holds_goes_out_as_several_runs() {
    // 100 messages in one pull (a broker that transfers more than its default 32) with a batch
    // of one: at most 64 batches a run.
    let ids: Rc<RefCell<Vec<BatchId>>> = Rc::default();
    let log = ids.clone();
    let mut sim = Sim::builder(32)
        .broker_config(SimBrokerConfig {
            max_transfer_count: 100,
            hold_check_interval: Duration::ZERO,
            ..SimBrokerConfig::default()
        })
        .adapter_queue(true)
        .broker("broker-a", &[("T", 1)])
        .listener(move |_, b, _| {
            log.borrow_mut().push(b.id);
            Verdict::OK
        })
        .build();
    sim.produce("T", 100);
    sim.add_consumer(
        sim.config("G")
            .subscribe("T", "*")
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .pull_batch_size(100),
    );
    sim.run_until(Sim::all_done, Duration::from_secs(60)).unwrap();
    // The commit goes with the next pull or the periodic persist.
    sim.run_for(Duration::from_secs(10));
    let ids = ids.borrow();
    let mut per_run: BTreeMap<BatchId, usize> = BTreeMap::new();
    for id in ids.iter() {
        *per_run.entry(id.split().0).or_default() += 1;
    }
    assert_eq!(ids.len(), 100, "each message once");
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 100, "ids are distinct");
    assert!(per_run.values().all(|n| *n <= 64), "{per_run:?}");
    assert!(per_run.values().any(|n| *n == 64), "the pull filled a run: {per_run:?}");
    assert_eq!(sim.broker(0).committed_offset("G", "T", 0), Some(100));
}
