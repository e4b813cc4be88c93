//! `rmqcat route` and `rmqcat group`: what the name server and brokers know.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use clap::Args;
use rocketmq_push_core::MessageQueue;
use rocketmq_push_core::protocol::body::{SubscriptionData, TopicRouteData, perm};
use rocketmq_push_core::protocol::{ExpressionType, ResponseCode};
use rocketmq_push_io::{Client, ClientError};

use crate::{Failure, Outcome, TIMEOUT, name_server};

/// Show a topic's route: its brokers, their addresses, and the queues on each.
#[derive(Args)]
#[command(after_help = "Examples:
  rmqcat route -n 127.0.0.1:9876 -t TopicA
  rmqcat route -t '%RETRY%my_group'          a group's retry topic")]
pub(crate) struct RouteOpts {
    /// Name server(s), `host:port[;host:port]` (default: $NAMESRV_ADDR).
    #[arg(short = 'n', long = "name-server", value_name = "ADDR")]
    name_server: Option<String>,
    /// Topic.
    #[arg(short, long)]
    topic: String,
}

/// Show a group's consumers and, per queue, its committed offset, the broker's max offset and
/// the lag; `group reset` moves its offsets, `group mode` switches it between PULL and POP.
#[derive(Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Examples:
  rmqcat group -n 127.0.0.1:9876 -g my_group -t TopicA
  rmqcat group -g my_group                  every topic the brokers hold offsets of the group for
  rmqcat group reset -g my_group -t TopicA --to first
  rmqcat group mode -g my_group -t TopicA pop    switch the group to POP (5.x brokers)"
)]
pub(crate) struct GroupOpts {
    #[command(subcommand)]
    action: Option<GroupAction>,
    /// Name server(s) (default: $NAMESRV_ADDR).
    #[arg(short = 'n', long = "name-server", value_name = "ADDR")]
    name_server: Option<String>,
    /// Consumer group.
    #[arg(short, long, required = true)]
    group: Option<String>,
    /// Only this topic (default: every topic the group has offsets for).
    #[arg(short, long)]
    topic: Option<String>,
}

/// The name servers of `-n` / `NAMESRV_ADDR` (`;`-separated), in order.
fn name_servers(ns: &str) -> impl Iterator<Item = &str> {
    ns.split(';').map(str::trim).filter(|s| !s.is_empty())
}

/// A connection to the first name server of `ns` that answers the connect (the others are
/// tried in turn, as consumers fail over).
pub(crate) fn connect_name_server(ns: &str) -> Result<(String, Client), Failure> {
    let mut last = Failure::Runtime(format!("no name server in {ns:?}"));
    for addr in name_servers(ns) {
        match connect(addr, "name server") {
            Ok(c) => return Ok((addr.to_owned(), c)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Connect to `addr`, saying what it is when that fails.
pub(crate) fn connect(addr: &str, what: &str) -> Result<Client, Failure> {
    Client::connect_with(addr, TIMEOUT, &crate::transport())
        .map(|c| c.with_credentials(crate::credentials()))
        .map_err(|e| Failure::Runtime(format!("cannot reach the {what} at {addr}: {e}")))
}

/// A topic's route; a missing topic is a one-line error that names it.
pub(crate) fn fetch_route(ns: &str, topic: &str) -> Result<TopicRouteData, Failure> {
    let (ns, mut c) = connect_name_server(ns)?;
    c.route(topic).map_err(|e| match e {
        e if e.is_code(ResponseCode::TopicNotExist) => Failure::Runtime(format!(
            "topic {topic} does not exist (the name server at {ns} has no route for it)"
        )),
        e => Failure::Runtime(format!("route of {topic} from {ns}: {e}")),
    })
}

/// Ask a master of `route` whether it can run a SQL92 filter, as Java's `start()` does
/// (`checkClientInBroker`): an expression it cannot compile is a usage error, a broker that
/// does not filter by SQL92 at all (enablePropertyFilter=false) a runtime one.
pub(crate) fn check_sql(route: &TopicRouteData, group: &str, topic: &str, sql: &str) -> Result<(), Failure> {
    let Some(addr) = route.broker_datas.iter().find_map(|b| b.broker_addrs.get(&0)) else {
        return Ok(()); // No master to ask: the consumer reports that itself.
    };
    let sub = SubscriptionData::build(topic, sql, ExpressionType::Sql92, 0);
    let client_id = format!("rmqcat@{}", std::process::id());
    connect(addr, "broker")?.check_client_config(&client_id, group, &sub).map_err(|e| match e {
        ClientError::Broker { code, remark } if code == ResponseCode::SubscriptionParseFailed => {
            // The broker's remark is the parser's multi-line message: its first line, without
            // the Java exception's class name, says where.
            let first = remark.lines().next().unwrap_or_default();
            let why = first.split_once("Exception: ").map_or(first, |(_, why)| why).trim();
            Failure::Usage(format!("invalid --sql expression {sql:?}: {why}"))
        }
        e => Failure::Runtime(format!("the broker at {addr} refuses the --sql filter: {e}")),
    })
}

/// Create `topic` with `queues` queues on every master the name server knows: those serving
/// `TBW102`, the topic brokers auto-create from.
pub(crate) fn create_topic(ns: &str, topic: &str, queues: i32) -> Result<(), Failure> {
    let template = fetch_route(ns, "TBW102").map_err(|_| {
        Failure::Runtime(format!(
            "cannot create {topic}: no broker offers topic auto-creation (TBW102); create it with mqadmin"
        ))
    })?;
    for b in &template.broker_datas {
        let Some(addr) = b.broker_addrs.get(&0) else { continue };
        connect(addr, "broker")?
            .create_topic(topic, queues)
            .map_err(|e| Failure::Runtime(format!("creating {topic} on {addr}: {e}")))?;
    }
    Ok(())
}

pub(crate) fn route(mut o: RouteOpts) -> Outcome {
    o.topic = crate::wire_name(&o.topic);
    let ns = name_server(o.name_server)?;
    let r = fetch_route(&ns, &o.topic)?;
    let read: i32 = r.queue_datas.iter().map(|q| q.read_queue_nums).sum();
    let write: i32 = r.queue_datas.iter().map(|q| q.write_queue_nums).sum();
    out!("topic {}: {read} read / {write} write queues on {} broker(s)", o.topic, r.queue_datas.len());
    out!(
        "{:<20} {:<14} {:>3}  {:<22} {:>5} {:>5}  PERM",
        "BROKER",
        "CLUSTER",
        "ID",
        "ADDRESS",
        "READ",
        "WRITE"
    );
    let mut brokers = r.broker_datas.clone();
    brokers.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    for b in &brokers {
        let q = r.queue_datas.iter().find(|q| q.broker_name == b.broker_name);
        for (id, addr) in &b.broker_addrs {
            let (rq, wq, p) = q.map_or((0, 0, 0), |q| (q.read_queue_nums, q.write_queue_nums, q.perm));
            let perm = format!(
                "{}{}",
                if p & perm::READ != 0 { "R" } else { "-" },
                if p & perm::WRITE != 0 { "W" } else { "-" }
            );
            out!("{:<20} {:<14} {id:>3}  {addr:<22} {rq:>5} {wq:>5}  {perm}", b.broker_name, b.cluster);
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Subcommand)]
enum GroupAction {
    Reset(crate::reset::ResetOpts),
    Mode(crate::mode::ModeOpts),
}

pub(crate) fn group(mut o: GroupOpts) -> Outcome {
    match o.action {
        Some(GroupAction::Reset(r)) => return crate::reset::reset(r),
        Some(GroupAction::Mode(m)) => return crate::mode::mode(m),
        None => {}
    }
    let group = crate::wire_name(o.group.as_deref().unwrap_or_default());
    o.topic = o.topic.as_deref().map(crate::wire_name);
    let ns = name_server(o.name_server)?;
    // The brokers to ask: the topic's, or those of the group's retry topic.
    let route_topic = o.topic.clone().unwrap_or_else(|| format!("%RETRY%{}", group));
    let route = fetch_route(&ns, &route_topic).map_err(|e| match (&o.topic, e) {
        (None, _) => Failure::Runtime(format!(
            "cannot find the brokers of group {}: its retry topic {route_topic} has no route; pass a topic with -t",
            group
        )),
        (Some(_), e) => e,
    })?;
    let masters: Vec<String> =
        route.broker_datas.iter().filter_map(|b| b.master_or_any()).map(str::to_owned).collect();
    // One connection per broker, for every question asked of it.
    let mut clients: BTreeMap<String, Client> = BTreeMap::new();
    for addr in &masters {
        clients.insert(addr.clone(), connect(addr, "broker")?);
    }
    let mut consumers = BTreeSet::new();
    let mut rows: Vec<(MessageQueue, Option<i64>, i64)> = Vec::new();
    for (addr, c) in &mut clients {
        let list =
            c.consumer_list(&group).map_err(|e| Failure::Runtime(format!("consumers from {addr}: {e}")))?;
        consumers.extend(list);
        if o.topic.is_none() {
            let stats = c
                .consume_stats(&group, None)
                .map_err(|e| Failure::Runtime(format!("progress of {} from {addr}: {e}", group)))?;
            rows.extend(
                stats
                    .into_iter()
                    .map(|(q, w)| (q, Some(w.consumer_offset).filter(|o| *o >= 0), w.broker_offset)),
            );
        }
    }
    if let Some(topic) = &o.topic {
        for q in route.subscribe_queues(topic) {
            let Some(addr) = route.broker(&q.broker_name).and_then(|b| b.master_or_any()) else { continue };
            let Some(c) = clients.get_mut(addr) else { continue };
            let err = |e: ClientError| Failure::Runtime(format!("offsets of {q:?} from {addr}: {e}"));
            let committed = c.query_offset(&group, &q).map_err(err)?;
            let max = c.max_offset(&q).map_err(err)?;
            rows.push((q, committed, max));
        }
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    out!("group {}: {} consumer(s)", group, consumers.len());
    for c in &consumers {
        out!("  {c}");
    }
    if rows.is_empty() {
        out!("no offsets stored for group {}", group);
        return Ok(ExitCode::SUCCESS);
    }
    out!("{:<32} {:<16} {:>5} {:>12} {:>12} {:>10}", "TOPIC", "BROKER", "QUEUE", "COMMITTED", "MAX", "LAG");
    let mut total = 0;
    for (q, committed, max) in &rows {
        let lag = committed.map_or(*max, |c| (max - c).max(0));
        total += lag;
        let committed = committed.map_or_else(|| "-".to_owned(), |c| c.to_string());
        out!("{:<32} {:<16} {:>5} {committed:>12} {max:>12} {lag:>10}", q.topic, q.broker_name, q.queue_id);
    }
    out!("total lag: {total}");
    Ok(ExitCode::SUCCESS)
}
