//! `rmqcat group mode`: switch a group between PULL and POP on a topic, as `mqadmin
//! setConsumeMode -c` does: SET_MESSAGE_REQUEST_MODE to every master serving the topic (the
//! setting is per broker). Running consumers follow at their next rebalance.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use rocketmq_push_core::protocol::ResponseCode;
use rocketmq_push_core::protocol::body::MessageRequestMode;
use rocketmq_push_io::ClientError;

use crate::admin::{connect, fetch_route};
use crate::{Failure, Outcome, name_server};

/// The two modes, as typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    /// Offsets per queue, each queue read by one member (the classic push consumer).
    Pull,
    /// The broker hands out messages to every member and tracks each until it is acked (5.x).
    Pop,
}

/// Switch a group between PULL and POP on a topic, on every broker serving it.
#[derive(Args)]
#[command(after_help = "Examples:
  rmqcat group mode -g my_group -t TopicA pop
  rmqcat group mode -g my_group -t TopicA pop --share 1    each member also pops one other's queues
  rmqcat group mode -g my_group -t TopicA pull

The group must exist on the brokers (a consumer of it has run, or mqadmin updateSubGroup).
Running consumers follow at their next rebalance (within 20 s). Needs a 5.x broker.")]
pub(crate) struct ModeOpts {
    /// Name server(s) (default: $NAMESRV_ADDR).
    #[arg(short = 'n', long = "name-server", value_name = "ADDR")]
    name_server: Option<String>,
    /// Consumer group.
    #[arg(short, long)]
    group: String,
    /// Topic (not a %RETRY% one: brokers refuse those).
    #[arg(short, long)]
    topic: String,
    /// pop or pull.
    #[arg(value_enum)]
    mode: Mode,
    /// POP only: how many other members' queues each member pops besides its own; 0 (Java's
    /// default) lets every member pop from every queue.
    #[arg(long, value_name = "N", default_value_t = 0)]
    share: i32,
}

pub(crate) fn mode(o: ModeOpts) -> Outcome {
    if o.topic.starts_with("%RETRY%") {
        return Err(Failure::Usage(format!(
            "{}: a retry topic follows its group's topic; name that",
            o.topic
        )));
    }
    if o.share < 0 {
        return Err(Failure::Usage(format!("--share {}: must be 0 or more", o.share)));
    }
    let (group, topic) = (crate::wire_name(&o.group), crate::wire_name(&o.topic));
    let mode = match o.mode {
        Mode::Pull => MessageRequestMode::Pull,
        Mode::Pop => MessageRequestMode::Pop,
    };
    let ns = name_server(o.name_server)?;
    let route = fetch_route(&ns, &topic)?;
    let mut brokers: Vec<(String, String)> = route
        .broker_datas
        .iter()
        .filter_map(|b| Some((b.broker_name.clone(), b.broker_addrs.get(&0)?.clone())))
        .collect();
    brokers.sort();
    if brokers.is_empty() {
        return Err(Failure::Runtime(format!("topic {topic} has no master broker to switch")));
    }
    for (name, addr) in &brokers {
        connect(addr, "broker")?.set_message_request_mode(&topic, &group, mode, o.share).map_err(|e| {
            Failure::Runtime(match e {
                ClientError::Broker { code, .. } if code == ResponseCode::RequestCodeNotSupported => {
                    format!("{name} at {addr} has no POP (a 4.x broker?): nothing switched there")
                }
                ClientError::Broker { code, .. } if code == ResponseCode::SubscriptionGroupNotExist => format!(
                    "group {group} does not exist on {name} at {addr}: run a consumer of it once, or create it with mqadmin updateSubGroup"
                ),
                e => format!("switching {group} on {name} at {addr}: {e}"),
            })
        })?;
        out!("{name} {addr}: group {group} on {topic} is now {mode}");
    }
    Ok(ExitCode::SUCCESS)
}
