//! `rmqcat consume` without a group: kcat's `-C`. Plain pulls from offsets the user picks, no
//! group membership, no commits: reading a topic leaves nothing behind on the brokers (a 5.x
//! broker with `autoCreateSubscriptionGroup` records the reader group's name, as it does for any
//! puller).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use rocketmq_push_core::MessageQueue;
use rocketmq_push_core::namespace::Namespace;
use rocketmq_push_core::protocol::ExpressionType;
use rocketmq_push_core::protocol::body::{SubscriptionData, TopicRouteData};
use rocketmq_push_io::Client;

use crate::format::{self, Format};
use crate::progress::thousands;
use crate::{Failure, Outcome, admin};

/// The group named in the reader's pulls: brokers want one; nothing is committed for it.
pub(crate) const READER_GROUP: &str = "rmqcat_reader";

/// Where each queue starts (`-o`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// The first stored message.
    Beginning,
    /// After the last stored message: only what arrives from now on.
    End,
    /// This offset (clamped to what is stored).
    At(i64),
    /// This many before the end.
    Last(i64),
    /// The first message stored at or after this time (ms since the epoch).
    Time(i64),
}

/// The accepted `-o` values, for usage errors.
pub(crate) const OFFSETS: &str = "beginning, end, an offset N, -N (the last N of each queue), or @TIMESTAMP";

impl Start {
    /// Parse `-o`.
    pub(crate) fn parse(s: &str) -> Result<Self, Failure> {
        let bad = || Failure::Usage(format!("-o {s:?}: expected {OFFSETS}"));
        Ok(match s {
            "beginning" | "begin" | "first" => Self::Beginning,
            "end" | "last" => Self::End,
            _ if s.starts_with('@') => Self::Time(crate::time::parse(&s[1..]).ok_or_else(|| {
                Failure::Usage(format!("-o {s:?}: the time after @ must be {}", crate::time::FORMS))
            })?),
            _ if s.starts_with('-') => Self::Last(digits(&s[1..]).ok_or_else(bad)?),
            _ => Self::At(digits(s).ok_or_else(bad)?),
        })
    }
}

/// Unsigned decimal digits (`str::parse` would also take a sign).
fn digits(s: &str) -> Option<i64> {
    s.bytes().all(|b| b.is_ascii_digit()).then(|| s.parse().ok()).flatten()
}

/// What to read and how to show it.
pub(crate) struct Reader {
    pub(crate) topic: String,
    pub(crate) queue: Option<i32>,
    pub(crate) start: Start,
    pub(crate) exit_at_end: bool,
    pub(crate) count: Option<u64>,
    pub(crate) tags: String,
    pub(crate) format: Option<Format>,
}

struct Cursor {
    mq: MessageQueue,
    offset: i64,
    /// Caught up with the queue's max offset at the last check.
    at_end: bool,
}

/// Read until COUNT, the end of every queue (`-e`), or Ctrl-C.
pub(crate) fn run(r: Reader, route: &TopicRouteData, quiet: bool) -> Outcome {
    let wire_topic = crate::wire_name(&r.topic);
    let mut queues = route.subscribe_queues(&wire_topic);
    if let Some(q) = r.queue {
        let ids: Vec<i32> = queues.iter().map(|m| m.queue_id).collect();
        queues.retain(|m| m.queue_id == q);
        if queues.is_empty() {
            return Err(Failure::Usage(format!("-p {q}: {} has queues {ids:?}", r.topic)));
        }
    }
    if queues.is_empty() {
        return Err(Failure::Runtime(format!("{} has no readable queue", r.topic)));
    }
    let mut clients: BTreeMap<String, Client> = BTreeMap::new();
    for mq in &queues {
        if clients.contains_key(mq.broker_name.as_ref()) {
            continue;
        }
        let addr = route.broker(&mq.broker_name).and_then(|b| b.master_or_any()).ok_or_else(|| {
            Failure::Runtime(format!("broker {} has no address in the route", mq.broker_name))
        })?;
        clients.insert(mq.broker_name.to_string(), admin::connect(addr, "broker")?);
    }
    let fail = |mq: &MessageQueue, what: &str, e: rocketmq_push_io::ClientError| {
        Failure::Runtime(format!("{what} of {}/{}/{}: {e}", r.topic, mq.broker_name, mq.queue_id))
    };
    let mut cursors = Vec::with_capacity(queues.len());
    for mq in queues {
        let c = clients.get_mut(mq.broker_name.as_ref()).expect("connected above");
        let min = c.min_offset(&mq).map_err(|e| fail(&mq, "min offset", e))?;
        let max = c.max_offset(&mq).map_err(|e| fail(&mq, "max offset", e))?;
        let offset = match r.start {
            Start::Beginning => min,
            Start::End => max,
            // Not clamp(): a broker answering min > max must not panic us.
            Start::At(n) => n.max(min).min(max),
            Start::Last(n) => max.saturating_sub(n).max(min),
            Start::Time(ts) => c.search_offset(&mq, ts).map_err(|e| fail(&mq, "offset by time", e))?,
        };
        cursors.push(Cursor { mq, offset, at_end: false });
    }
    let filter = SubscriptionData::build(&wire_topic, &r.tags, ExpressionType::Tag, 0);
    let ns = Namespace::new(crate::namespace());
    let mut printed = 0u64;
    let mut out = Vec::new();
    let stop = crate::interrupted();
    'read: loop {
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        let mut idle = true;
        for cur in &mut cursors {
            let c = clients.get_mut(cur.mq.broker_name.as_ref()).expect("connected above");
            let (msgs, next) =
                c.pull(READER_GROUP, &cur.mq, cur.offset).map_err(|e| fail(&cur.mq, "pull", e))?;
            if msgs.is_empty() {
                // Nothing at this offset: caught up if the queue ends here (checked now, so a
                // queue that grows while we read is read to its new end).
                let max = c.max_offset(&cur.mq).map_err(|e| fail(&cur.mq, "max offset", e))?;
                cur.at_end = next >= max;
                if next >= 0 {
                    cur.offset = next; // moved (below min, past max): where the broker says
                }
                continue;
            }
            idle = false;
            cur.at_end = false;
            // Never back: a broker answering a next offset at or before the messages it gave
            // would have them printed again.
            let next = msgs.iter().map(|m| m.queue_offset.saturating_add(1)).fold(next, i64::max);
            for mut m in msgs {
                if m.queue_offset < cur.offset || !filter.matches_tag(m.tags()) {
                    continue;
                }
                let shown = ns.unwrap(&m.topic).to_owned();
                m.topic = shown.as_str().into();
                out.clear();
                format::render(r.format.as_ref(), &m, &mut out);
                if !crate::stdout_bytes(&out) {
                    break 'read;
                }
                printed += 1;
                if r.count.is_some_and(|n| printed >= n) {
                    break 'read;
                }
            }
            cur.offset = next;
        }
        if r.exit_at_end && cursors.iter().all(|c| c.at_end) {
            break;
        }
        if idle {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    if !quiet {
        say!("rmqcat: read {} message(s); nothing committed", thousands(printed));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_offset_form() {
        let ok = |s: &str| Start::parse(s).unwrap();
        assert_eq!(ok("beginning"), Start::Beginning);
        assert_eq!(ok("end"), Start::End);
        assert_eq!(ok("42"), Start::At(42));
        assert_eq!(ok("-10"), Start::Last(10));
        assert_eq!(ok("@1700000000000"), Start::Time(1_700_000_000_000));
        assert_eq!(ok("@2026-12-02T10:00:00Z"), Start::Time(1_796_205_600_000));
        for bad in ["", "middle", "--1", "1.5", "@", "@yesterday", "-", "99999999999999999999", "+5", "-+5"] {
            match Start::parse(bad) {
                Err(Failure::Usage(m)) => assert!(m.contains("-o"), "{bad}: {m}"),
                _ => panic!("{bad:?} accepted"),
            }
        }
    }
}
