//! Queue allocation strategies: pure functions giving Java's exact assignment for the same
//! (sorted) queues and (sorted) client ids. Every member of a group computes its own share with
//! no coordinator, so any difference from Java double-owns or orphans queues in mixed groups.

use std::collections::BTreeMap;

use super::md5::md5;
use crate::message::MessageQueue;

/// `allocateMessageQueueStrategy`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum AllocateStrategy {
    /// `AVG` (default): contiguous blocks.
    #[default]
    Averagely,
    /// `AVG_BY_CIRCLE`: round robin.
    AveragelyByCircle,
    /// `CONFIG`: always this fixed list.
    Config(Vec<MessageQueue>),
    /// `MACHINE_ROOM`: only queues of brokers named `idc@name` with `idc` in this set.
    MachineRoom(Vec<String>),
    /// `CONSISTENT_HASH` with this many virtual nodes per client (Java default 10).
    ConsistentHash(usize),
}

impl AllocateStrategy {
    /// Java's `getName()`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Averagely => "AVG",
            Self::AveragelyByCircle => "AVG_BY_CIRCLE",
            Self::Config(_) => "CONFIG",
            Self::MachineRoom(_) => "MACHINE_ROOM",
            Self::ConsistentHash(_) => "CONSISTENT_HASH",
        }
    }

    /// My share. `mq_all` and `cid_all` must be sorted (the caller sorts, as `RebalanceImpl` does).
    /// Empty when I am not in `cid_all` (the broker has not seen my heartbeat yet).
    pub fn allocate(
        &self,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        if let Self::Config(list) = self {
            return list.clone();
        }
        // Java's check(): an empty current id is refused.
        if current_cid.is_empty() {
            return Vec::new();
        }
        let Some(index) = cid_all.iter().position(|c| c == current_cid) else {
            return Vec::new();
        };
        if mq_all.is_empty() {
            return Vec::new();
        }
        match self {
            Self::Averagely => averagely(index, mq_all, cid_all.len()),
            Self::AveragelyByCircle => (index..mq_all.len())
                .filter(|i| i % cid_all.len() == index)
                .map(|i| mq_all[i].clone())
                .collect(),
            Self::MachineRoom(idcs) => machine_room(idcs, index, mq_all, cid_all.len()),
            Self::ConsistentHash(vnodes) => consistent_hash(*vnodes, current_cid, mq_all, cid_all),
            Self::Config(_) => unreachable!("handled above"),
        }
    }
}

fn averagely(index: usize, mq_all: &[MessageQueue], m: usize) -> Vec<MessageQueue> {
    let n = mq_all.len();
    let modulo = n % m;
    let size = if n <= m {
        1
    } else if modulo > 0 && index < modulo {
        n / m + 1
    } else {
        n / m
    };
    let start = if modulo > 0 && index < modulo { index * size } else { index * size + modulo };
    let range = size.min(n.saturating_sub(start));
    (0..range).map(|i| mq_all[(start + i) % n].clone()).collect()
}

fn machine_room(idcs: &[String], index: usize, mq_all: &[MessageQueue], m: usize) -> Vec<MessageQueue> {
    let pre: Vec<&MessageQueue> = mq_all
        .iter()
        .filter(|q| {
            // Java `split("@")` drops trailing empty pieces; exactly two pieces are required.
            let mut parts: Vec<&str> = q.broker_name.split('@').collect();
            while parts.last() == Some(&"") {
                parts.pop();
            }
            parts.len() == 2 && idcs.iter().any(|i| i == parts[0])
        })
        .collect();
    let per = pre.len() / m;
    let rem = pre.len() % m;
    let mut out: Vec<MessageQueue> =
        pre[per * index..per * index + per].iter().map(|q| (*q).clone()).collect();
    if rem > index {
        out.push(pre[index + per * m].clone());
    }
    out
}

/// The first four bytes of MD5 as an unsigned big-endian number (`ConsistentHashRouter.MD5Hash`).
fn ring_hash(key: &str) -> u64 {
    let d = md5(key.as_bytes());
    u64::from(u32::from_be_bytes([d[0], d[1], d[2], d[3]]))
}

fn consistent_hash(
    vnodes: usize,
    current: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Vec<MessageQueue> {
    // The ring: hash → client. Later puts overwrite earlier ones on collision, as in a TreeMap.
    let mut ring: BTreeMap<u64, &str> = BTreeMap::new();
    for cid in cid_all {
        let existing = ring.values().filter(|c| **c == cid.as_str()).count();
        for i in 0..vnodes {
            ring.insert(ring_hash(&format!("{cid}-{}", i + existing)), cid.as_str());
        }
    }
    if ring.is_empty() {
        return Vec::new();
    }
    mq_all
        .iter()
        .filter(|q| {
            let h = ring_hash(&q.to_string());
            let owner = ring.range(h..).next().or_else(|| ring.iter().next()).map(|(_, c)| *c);
            owner == Some(current)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|i| MessageQueue::new("T", "broker-a", i)).collect()
    }

    fn cids(m: usize) -> Vec<String> {
        (0..m).map(|i| format!("c{i}")).collect()
    }

    fn ids(v: &[MessageQueue]) -> Vec<i32> {
        v.iter().map(|q| q.queue_id).collect()
    }

    #[test]
    fn behaviour_doc_examples() {
        let s = AllocateStrategy::Averagely;
        assert_eq!(ids(&s.allocate("c0", &queues(8), &cids(3))), [0, 1, 2]);
        assert_eq!(ids(&s.allocate("c1", &queues(8), &cids(3))), [3, 4, 5]);
        assert_eq!(ids(&s.allocate("c2", &queues(8), &cids(3))), [6, 7]);
        assert_eq!(ids(&s.allocate("c2", &queues(2), &cids(3))), Vec::<i32>::new());
        let c = AllocateStrategy::AveragelyByCircle;
        assert_eq!(ids(&c.allocate("c0", &queues(8), &cids(3))), [0, 3, 6]);
        assert_eq!(ids(&c.allocate("c2", &queues(8), &cids(3))), [2, 5]);
        assert!(s.allocate("stranger", &queues(8), &cids(3)).is_empty(), "not yet registered: nothing");
    }

    #[test]
    fn every_strategy_assigns_each_queue_exactly_once() {
        let strategies = [
            AllocateStrategy::Averagely,
            AllocateStrategy::AveragelyByCircle,
            AllocateStrategy::ConsistentHash(10),
        ];
        for s in &strategies {
            for n in [1, 2, 3, 7, 8, 16, 33] {
                for m in 1..=9 {
                    let all = queues(n);
                    let cs = cids(m);
                    let mut got: Vec<i32> = cs.iter().flat_map(|c| ids(&s.allocate(c, &all, &cs))).collect();
                    got.sort();
                    assert_eq!(got, (0..n).collect::<Vec<_>>(), "{s:?} n={n} m={m}");
                    if *s != AllocateStrategy::ConsistentHash(10) {
                        let sizes: Vec<usize> = cs.iter().map(|c| s.allocate(c, &all, &cs).len()).collect();
                        let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                        assert!(hi - lo <= 1, "{s:?} balanced within one: {sizes:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn machine_room_takes_only_listed_rooms() {
        let all: Vec<MessageQueue> = ["hz@broker-a", "sh@broker-b", "plain"]
            .iter()
            .flat_map(|b| (0..3).map(move |i| MessageQueue::new("T", *b, i)))
            .collect();
        let mut all = all;
        all.sort();
        let s = AllocateStrategy::MachineRoom(vec!["hz".into()]);
        let c = cids(2);
        let a = s.allocate("c0", &all, &c);
        let b = s.allocate("c1", &all, &c);
        assert_eq!(a.len() + b.len(), 3);
        assert!(a.iter().chain(&b).all(|q| q.broker_name.starts_with("hz@")));
        assert_eq!(ids(&a), [0, 2], "block of 1, plus the remainder queue at index 0 + 1*2");
    }

    #[test]
    fn config_returns_the_list() {
        let list = vec![MessageQueue::new("T", "b", 9)];
        assert_eq!(AllocateStrategy::Config(list.clone()).allocate("x", &[], &[]), list);
    }
}
