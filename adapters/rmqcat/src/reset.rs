//! `rmqcat group reset`: move a group's offsets of a topic (or of one queue id) to the first,
//! the last, an offset or a time — on a running group and an offline one, as
//! `mqadmin resetOffsetByTime` does.
//!
//! How depends on the broker. A 5.x broker resets on its side (INVOKE_BROKER_TO_RESET_OFFSET
//! with a queue and an offset, or a time): it commits the offset and answers the next pull of
//! any consumer with PULL_OFFSET_MOVED, so running members of every client move. A 4.9 broker
//! only resets by time, for the whole topic, by telling the group's online consumers
//! (RESET_CONSUMER_CLIENT_OFFSET); with none online, the offsets are committed directly
//! (UPDATE_CONSUMER_OFFSET), which any target allows.

use std::process::ExitCode;

use clap::Args;
use rocketmq_push_core::MessageQueue;
use rocketmq_push_core::protocol::ResponseCode;
use rocketmq_push_core::protocol::header::ResetOffsetRequestHeader;
use rocketmq_push_io::{Client, ClientError};

use crate::admin::{connect, fetch_route};
use crate::{Failure, Outcome, name_server};

/// The first `MQVersion.Version` ordinal of 5.0.0: brokers from there reset on their side.
const V5_0_0: i32 = 413;

/// Reset a group's offsets of a topic.
#[derive(Args)]
#[command(after_help = "Examples:
  rmqcat group reset -g my_group -t TopicA --to 2026-12-02T10:00:00Z   from what was stored then
  rmqcat group reset -g my_group -t TopicA --to @1764669600000          the same, in milliseconds
  rmqcat group reset -g my_group -t TopicA --to first                    everything still stored
  rmqcat group reset -g my_group -t TopicA --to last                     skip what waits
  rmqcat group reset -g my_group -t TopicA -i 3 --to 0                   queue 3 of each broker to 0

A 5.x broker resets running and offline groups alike. A 4.9 broker resets a running group by
time (first, last or a time) for the whole topic only; stop its consumers for the rest.")]
pub(crate) struct ResetOpts {
    /// Name server(s) (default: $NAMESRV_ADDR).
    #[arg(short = 'n', long = "name-server", value_name = "ADDR")]
    name_server: Option<String>,
    /// Consumer group.
    #[arg(short, long)]
    group: String,
    /// Topic.
    #[arg(short, long)]
    topic: String,
    /// Only the queues with this id (one per broker).
    #[arg(short = 'i', long = "queue", value_name = "ID")]
    queue: Option<i32>,
    /// Where to: first, last, an offset, or a time — `@` and milliseconds since the epoch,
    /// an RFC 3339 time, or `@yyyyMMddHHmmss` (UTC).
    #[arg(long, value_name = "TARGET")]
    to: String,
}

/// Where a reset moves each queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    First,
    Last,
    Offset(i64),
    Time(i64),
}

fn parse_target(s: &str) -> Result<Target, Failure> {
    let bad = || {
        Failure::Usage(format!(
            "--to {s:?}: expected first, last, an offset, or a time ({}; prefix milliseconds and \
             yyyyMMddHHmmss with @)",
            crate::time::FORMS
        ))
    };
    let target = match s {
        "first" => Target::First,
        "last" => Target::Last,
        _ if s.bytes().all(|b| b.is_ascii_digit()) => Target::Offset(s.parse().map_err(|_| bad())?),
        _ => Target::Time(crate::time::parse(s.strip_prefix('@').unwrap_or(s)).ok_or_else(bad)?),
    };
    if let Target::Time(t) = target {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        if t > now {
            return Err(Failure::Usage(format!("--to {s:?} is in the future")));
        }
    }
    Ok(target)
}

pub(crate) fn reset(mut o: ResetOpts) -> Outcome {
    o.group = crate::wire_name(&o.group);
    o.topic = crate::wire_name(&o.topic);
    let target = parse_target(&o.to)?;
    if o.queue.is_some_and(|q| q < 0) {
        return Err(Failure::Usage(format!("--queue {}: a queue id is 0 or more", o.queue.unwrap_or(0))));
    }
    let ns = name_server(o.name_server.take())?;
    let route = fetch_route(&ns, &o.topic)?;
    let queues: Vec<MessageQueue> = route
        .subscribe_queues(&o.topic)
        .into_iter()
        .filter(|q| o.queue.is_none_or(|id| q.queue_id == id))
        .collect();
    if queues.is_empty() {
        return Err(Failure::Usage(match o.queue {
            Some(id) => format!("topic {} has no readable queue {id}", o.topic),
            None => format!("topic {} has no readable queue", o.topic),
        }));
    }
    let mut rows: Vec<(MessageQueue, i64)> = Vec::new();
    let mut brokers: Vec<&str> = queues.iter().map(|q| &*q.broker_name).collect();
    brokers.dedup();
    for broker in brokers {
        let Some(addr) = route.broker(broker).and_then(|b| b.master_or_any()) else {
            return Err(Failure::Runtime(format!("broker {broker} has no address in the route")));
        };
        let mut c = connect(addr, "broker")?;
        let mine: Vec<&MessageQueue> = queues.iter().filter(|q| &*q.broker_name == broker).collect();
        let err = |e: ClientError| Failure::Runtime(format!("resetting on {broker} ({addr}): {e}"));
        let version = c.broker_version(mine[0]).map_err(err)?;
        let moved = if version >= V5_0_0 {
            on_broker(&mut c, &o, &mine, target).map_err(err)?
        } else {
            reset_v4(&mut c, &o, &mine, target, broker, addr)?
        };
        rows.extend(moved);
    }
    rows.sort();
    out!("group {} on {}: {} queue(s) reset", o.group, o.topic, rows.len());
    out!("{:<16} {:>5} {:>12}", "BROKER", "QUEUE", "OFFSET");
    for (q, to) in &rows {
        out!("{:<16} {:>5} {to:>12}", q.broker_name, q.queue_id);
    }
    Ok(ExitCode::SUCCESS)
}

/// 5.x: the broker resets each queue itself (by offset) or all of them (by time).
fn on_broker(
    c: &mut Client,
    o: &ResetOpts,
    queues: &[&MessageQueue],
    target: Target,
) -> Result<Vec<(MessageQueue, i64)>, ClientError> {
    let header = |queue_id: i32, timestamp: i64, offset: Option<i64>| ResetOffsetRequestHeader {
        topic: o.topic.clone(),
        group: o.group.clone(),
        timestamp,
        is_force: true,
        queue_id: Some(queue_id),
        offset,
    };
    let mut moved = Vec::new();
    for q in queues {
        let h = match target {
            Target::First => header(q.queue_id, -1, Some(c.min_offset(q)?)),
            Target::Last => header(q.queue_id, -1, None),
            Target::Offset(n) => header(q.queue_id, -1, Some(n)),
            Target::Time(t) => header(q.queue_id, t, None),
        };
        moved.extend(c.reset_offset(&h)?.into_iter().filter(|(m, _)| m.queue_id == q.queue_id));
    }
    Ok(moved)
}

/// 4.9: by time through the online consumers, else committed directly.
fn reset_v4(
    c: &mut Client,
    o: &ResetOpts,
    queues: &[&MessageQueue],
    target: Target,
    broker: &str,
    addr: &str,
) -> Result<Vec<(MessageQueue, i64)>, Failure> {
    let err = |e: ClientError| Failure::Runtime(format!("resetting on {broker} ({addr}): {e}"));
    let timestamp = match target {
        Target::First => Some(0),
        Target::Last => Some(-1),
        Target::Time(t) => Some(t),
        Target::Offset(_) => None,
    };
    if let (Some(timestamp), None) = (timestamp, o.queue) {
        let header = ResetOffsetRequestHeader {
            topic: o.topic.clone(),
            group: o.group.clone(),
            timestamp,
            is_force: true,
            queue_id: None,
            offset: None,
        };
        match c.reset_offset(&header) {
            Ok(moved) => return Ok(moved),
            Err(e) if e.is_code(ResponseCode::ConsumerNotOnline) => {}
            Err(e) => return Err(err(e)),
        }
    } else if !c.consumer_list(&o.group).map_err(err)?.is_empty() {
        return Err(Failure::Runtime(format!(
            "broker {broker} is 4.9.x: it resets a running group by time for the whole topic only; \
             stop the group's consumers to reset {}",
            if o.queue.is_some() { "one queue" } else { "to an offset" }
        )));
    }
    // Nobody online: commit the targets directly.
    let mut moved = Vec::new();
    for q in queues {
        let to = match target {
            Target::First => c.min_offset(q),
            Target::Last => c.max_offset(q),
            Target::Time(t) => c.search_offset(q, t),
            Target::Offset(n) => {
                let (min, max) = (c.min_offset(q).map_err(err)?, c.max_offset(q).map_err(err)?);
                if n < min || n > max {
                    return Err(Failure::Usage(format!(
                        "offset {n} is outside queue {} on {broker}: [{min}, {max}]",
                        q.queue_id
                    )));
                }
                Ok(n)
            }
        }
        .map_err(err)?;
        c.update_offset(&o.group, q, to).map_err(err)?;
        moved.push(((*q).clone(), to));
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_told_apart() {
        assert_eq!(parse_target("first").unwrap(), Target::First);
        assert_eq!(parse_target("last").unwrap(), Target::Last);
        assert_eq!(parse_target("1200").unwrap(), Target::Offset(1200));
        assert_eq!(parse_target("@1764669600000").unwrap(), Target::Time(1_764_669_600_000));
        assert_eq!(parse_target("2025-12-02T10:00:00Z").unwrap(), Target::Time(1_764_669_600_000));
        assert_eq!(parse_target("@20251202100000").unwrap(), Target::Time(1_764_669_600_000));
        for bad in ["", "-1", "firstly", "@", "@soon", "12ab", "99999999999999999999"] {
            assert!(matches!(parse_target(bad), Err(Failure::Usage(_))), "{bad:?}");
        }
        assert!(matches!(parse_target("@29991231235959"), Err(Failure::Usage(m)) if m.contains("future")));
    }
}
