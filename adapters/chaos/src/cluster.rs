//! A real RocketMQ cluster of the chaos suite's own (ports and state apart from the main test
//! broker's), through `scripts/rocketmq.sh`: start a topology, kill, stop and restart its
//! processes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

/// A running cluster; stopped on drop.
#[derive(Debug)]
pub struct Cluster {
    env: Vec<(String, String)>,
    /// `NAMESRV_ADDR`, `BROKER_ADDR`, `BROKER_B_ADDR` (2m), `SLAVE_ADDR` (ms), as `env` prints.
    pub addrs: BTreeMap<String, String>,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rocketmq.sh")
}

impl Cluster {
    /// Start `topology` (`single`, `2m`, `ms`) of RocketMQ 5.3.3 on the chaos ports (name server
    /// 19876, brokers from 20911) with its own state under `target/rocketmq-chaos`.
    pub fn start(topology: &str) -> Self {
        let state = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/rocketmq-chaos");
        let env: Vec<(String, String)> = [
            ("RMQ_STATE", state.to_string_lossy().into_owned()),
            ("RMQ_NAMESRV_PORT", "19876".to_owned()),
            ("RMQ_BROKER_PORT", "20911".to_owned()),
            ("RMQ_TOPOLOGY", topology.to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let mut c = Self { env, addrs: BTreeMap::new() };
        // A cluster left by an interrupted run would hold the ports.
        c.run(&["stop"]);
        assert!(c.run(&["start", "5.3.3"]), "the {topology} cluster did not start");
        let out = c.output(&["env"]);
        for line in out.lines() {
            if let Some((k, v)) = line.trim_start_matches("export ").split_once('=') {
                // `env` quotes values for `eval` ("a;b" with two name servers).
                c.addrs.insert(k.to_owned(), v.trim_matches('"').to_owned());
            }
        }
        c
    }

    /// The name server address.
    pub fn name_server(&self) -> &str {
        &self.addrs["NAMESRV_ADDR"]
    }

    /// kill -9 a role (`broker`, `broker-b`, `slave`, `namesrv`).
    pub fn kill(&self, role: &str) {
        assert!(self.run(&["kill", role]), "kill {role}");
    }

    /// Start a role again with its store.
    pub fn restart(&self, role: &str) {
        assert!(self.run(&["restart", role]), "restart {role}");
    }

    /// Create `topic` with `queues` on every master (the producer's auto-create makes 8).
    pub fn create_topic(&self, topic: &str, queues: i32) {
        for key in ["BROKER_ADDR", "BROKER_B_ADDR"] {
            if let Some(addr) = self.addrs.get(key) {
                let mut c = rocketmq_push_io::Client::connect(addr, std::time::Duration::from_secs(10))
                    .unwrap_or_else(|e| panic!("{addr}: {e}"));
                c.create_topic(topic, queues).unwrap_or_else(|e| panic!("create {topic} on {addr}: {e}"));
            }
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg(script()).args(args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    fn run(&self, args: &[&str]) -> bool {
        self.command(args).status().is_ok_and(|s| s.success())
    }

    fn output(&self, args: &[&str]) -> String {
        self.command(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.run(&["stop"]);
    }
}
