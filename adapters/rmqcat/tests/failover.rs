//! Name-server fail-over against two real name servers (`RMQ_NAMESRVS=2 scripts/rocketmq.sh
//! start`): consumers given both keep working with either one stopped, whether it stops under a
//! running consumer or before one starts. Skipped unless `NAMESRV_B_ADDR` says the cluster has
//! two; scripts/test.sh runs it. It stops and restarts the name servers through the script.
#![allow(clippy::disallowed_methods)] // real processes and clocks

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

struct Cluster {
    /// Both, as consumers are given them ("a;b").
    both: String,
    a: String,
    b: String,
}

fn cluster() -> Option<Cluster> {
    let (Ok(both), Ok(b)) = (std::env::var("NAMESRV_ADDR"), std::env::var("NAMESRV_B_ADDR")) else {
        eprintln!(
            "skipped: one name server (RMQ_NAMESRVS=2 scripts/rocketmq.sh start; eval \"$(scripts/rocketmq.sh env)\")"
        );
        return None;
    };
    let a = both.split(';').next().unwrap().to_owned();
    Some(Cluster { both, a, b })
}

fn script(args: &[&str]) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rocketmq.sh");
    let o = Command::new("bash").arg(path).args(args).output().unwrap();
    assert!(o.status.success(), "rocketmq.sh {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

fn rmqcat(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rmqcat"));
    c.env("NAMESRV_ADDR", ns).arg("--quiet").args(args);
    c
}

fn produce(ns: &str, topic: &str, n: usize) {
    let n = n.to_string();
    let o = rmqcat(ns, &["produce", "-t", topic, "--create", "4", "--count", &n]).output().unwrap();
    assert!(o.status.success(), "produce: {}", String::from_utf8_lossy(&o.stderr));
}

/// Wait for `child` at most `limit`; kill it if it is still running then.
fn finish(mut child: Child, limit: Duration) -> (Output, Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let took = t0.elapsed();
    let mut out = Vec::new();
    let mut err = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_end(&mut err).unwrap();
    let status = child.wait().unwrap();
    (Output { status, stdout: out, stderr: err }, took)
}

fn consume(ns: &str, topic: &str, group: &str, count: usize) -> Child {
    let count = count.to_string();
    rmqcat(ns, &["consume", "-t", topic, "-g", group, "--from", "first", "-c", &count])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait until the name server at `ns` has a route for `topic` (a broker registers every 30 s).
fn wait_route(ns: &str, topic: &str) {
    let t0 = Instant::now();
    while !rmqcat(ns, &["route", "-t", topic]).output().unwrap().status.success() {
        assert!(t0.elapsed() < Duration::from_secs(60), "no route for {topic} at {ns} within 60 s");
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn lines(o: &Output) -> usize {
    String::from_utf8_lossy(&o.stdout).lines().count()
}

/// Consumers started while `down` is stopped: each gets its routes from the other at once (a
/// consumer left waiting for the 30 s route refresh would miss the limit). Several runs, since
/// each client picks its first name server by its client id.
fn fresh_consumers_get_going(c: &Cluster, topic: &str, stamp: u128, down: &str) {
    for i in 0..4 {
        let group = format!("fo_{down}_{stamp}_{i}");
        let (o, took) = finish(consume(&c.both, topic, &group, 20), Duration::from_secs(20));
        assert!(
            o.status.success() && lines(&o) == 20,
            "with {down} down, consumer {i} got {} of 20 in {took:?}: {}",
            lines(&o),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn either_name_server_may_stop_under_running_and_starting_consumers() {
    let Some(c) = cluster() else { return };
    let stamp = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis();
    let topic = format!("failover_{stamp}");
    // The script waits for the broker's registration with the first name server only.
    wait_route(&c.b, "TBW102");
    produce(&c.b, &topic, 20);

    // A running consumer keeps going when the first name server stops under it.
    let running = consume(&c.both, &topic, &format!("fo_run_{stamp}"), 40);
    std::thread::sleep(Duration::from_secs(3));
    script(&["term", "namesrv"]);
    produce(&c.b, &topic, 20);
    let (o, _) = finish(running, Duration::from_secs(60));
    assert!(
        o.status.success() && lines(&o) == 40,
        "{} of 40: {}",
        lines(&o),
        String::from_utf8_lossy(&o.stderr)
    );

    fresh_consumers_get_going(&c, &topic, stamp, "namesrv");

    // The other way round: a back, b stopped. A restarted name server learns the broker at the
    // broker's next registration (up to 30 s): wait for the route there first.
    script(&["restart", "namesrv"]);
    wait_route(&c.a, &topic);
    script(&["term", "namesrv-b"]);
    fresh_consumers_get_going(&c, &topic, stamp, "namesrv-b");
    script(&["restart", "namesrv-b"]);
}
