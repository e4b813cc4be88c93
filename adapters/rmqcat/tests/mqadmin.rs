//! The real `mqadmin` (scripts/rocketmq.sh admin) reads a running `rmqcat consume` the way it
//! reads a Java consumer: `consumerConnection` finds its client id, `consumerStatus -i` prints its
//! running info (properties, subscription, queues, pull and consume RT/TPS), and
//! `consumerProgress` maps every queue to its address and shows the lag. Skipped without a real
//! broker (NAMESRV_ADDR), unless RMQ_REQUIRE_BROKER=1.
#![allow(clippy::disallowed_methods)] // real processes, sockets and clocks

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{bin, real_name_server};

/// `mqadmin ARGS…` against the cluster the project's script started: its stdout, and whether it
/// succeeded (it fails while the group is not online yet).
fn mqadmin(args: &[&str]) -> (bool, String) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rocketmq.sh");
    let o = Command::new("bash").arg(script).arg("admin").args(args).output().expect("mqadmin runs");
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.success(), out)
}

/// The numbers of the row for `topic` in the `#Consumer RT&TPS#` table: pull RT, pull TPS,
/// consume RT, consume OK TPS, consume failed TPS, failed messages in the hour.
fn rt_tps_row(status: &str, topic: &str) -> Option<Vec<f64>> {
    let table = status.split("#Consumer RT&TPS#").nth(1)?;
    let row = table.lines().find(|l| l.split_whitespace().next() == Some(topic))?;
    Some(row.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect())
}

/// Stops the consumer however the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn consumer_status_and_progress_show_a_running_consumer() {
    let Some(ns) = real_name_server() else { return };
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let (topic, group) = (format!("rmqcat_admin_{stamp}"), format!("rmqcat_admin_g_{stamp}"));
    let o = bin()
        .args(["produce", "-n", &ns, "-t", &topic, "--create", "4", "--count", "20000", "--size", "200"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Its stdout is a pipe nobody reads: once the pipe is full the listener blocks on the write,
    // so the consumer runs (heartbeats, answers the broker) with messages still behind — the
    // stuck consumer an operator looks at.
    let child = bin()
        .args(["consume", "-n", &ns, "-g", &group, "-t", &topic, "--from", "first"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _running = Running(child);

    // consumerConnection: our client, found by the broker.
    let deadline = Instant::now() + Duration::from_secs(30);
    let client_id = loop {
        let (_, out) = mqadmin(&["consumerConnection", "-g", &group]);
        // Rows: "CLIENT_ID  ADDR  LANGUAGE  VERSION"; ours says RUST.
        let id = out.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[2] == "RUST").then(|| f[0].to_owned())
        });
        if let Some(id) = id {
            break id;
        }
        assert!(Instant::now() < deadline, "no connection of {group}: {out}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(client_id.starts_with("127.0.0.1@"), "{client_id}");

    // consumerStatus -i: the running info, as Java's formatString prints it. Rates show once the
    // 10-second sample has been taken.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let (_, out) = mqadmin(&["consumerStatus", "-g", &group, "-i", &client_id]);
        if rt_tps_row(&out, &topic).is_some_and(|r| r.len() == 6 && r[3] > 0.0) {
            break out;
        }
        assert!(Instant::now() < deadline, "no consume TPS for {topic}: {out}");
        std::thread::sleep(Duration::from_secs(2));
    };
    let row = rt_tps_row(&status, &topic).unwrap();
    let (pull_tps, ok_tps, failed_tps) = (row[1], row[3], row[4]);
    assert!(pull_tps > 0.0 && ok_tps > 0.0, "{status}");
    assert_eq!(failed_tps, 0.0, "{status}");
    assert!(rt_tps_row(&status, &format!("%RETRY%{group}")).is_some(), "the retry topic's row: {status}");
    for prop in ["PROP_CONSUME_TYPE", "PROP_CLIENT_VERSION", "pullBatchSize"] {
        assert!(status.contains(prop), "{prop}: {status}");
    }
    assert!(status.contains("CONSUME_PASSIVELY") && status.contains("rocketmq-push-rust"), "{status}");
    let subscription = status.split("#Consumer Subscription#").nth(1).unwrap_or_default();
    assert!(
        subscription
            .lines()
            .any(|l| l.contains(&format!("Topic: {topic} ")) && l.contains("SubExpression: *")),
        "{status}"
    );
    let offsets = status.split("#Consumer Offset#").nth(1).unwrap_or_default();
    let offsets = offsets.split("#Consumer MQ Detail#").next().unwrap_or_default();
    assert_eq!(
        offsets.lines().filter(|l| l.split_whitespace().next() == Some(&*topic)).count(),
        4,
        "{status}"
    );

    // consumerProgress: every queue of the topic mapped to our address (the tool reads our
    // running info's queue table for it), and the messages still behind as Diff.
    let (ok, progress) = mqadmin(&["consumerProgress", "-g", &group, "-s", "true"]);
    assert!(ok, "{progress}");
    let rows: Vec<Vec<&str>> = progress
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.first() == Some(&&*topic))
        .collect();
    assert_eq!(rows.len(), 4, "{progress}");
    let mut diff_total = 0;
    for f in &rows {
        // #Topic #Broker Name #QID #Broker Offset #Consumer Offset #Client IP #Diff #Inflight
        // #LastTime
        assert_eq!(f.get(5), Some(&"127.0.0.1"), "queue held by us: {progress}");
        let (max, committed, diff): (i64, i64, i64) =
            (f[3].parse().unwrap(), f[4].parse().unwrap(), f[6].parse().unwrap());
        assert_eq!(diff, max - committed, "{progress}");
        diff_total += diff;
    }
    assert_eq!(rows.iter().map(|f| f[3].parse::<i64>().unwrap()).sum::<i64>(), 20_000, "{progress}");
    assert!(diff_total > 0, "the blocked consumer is behind: {progress}");
    assert!(progress.contains(&format!("Diff Total: {diff_total}\n")), "{progress}");
}

/// Message trace: the real Java producer traces six messages (enableMsgTrace), `rmqcat consume
/// --trace` consumes them, and the real `mqadmin queryMsgTraceById` shows our SubAfter for a
/// message next to the Java producer's Pub: our records are in Java's format, found by the
/// message id.
#[test]
fn query_msg_trace_by_id_shows_our_consumption_next_to_the_java_producers_send() {
    let Some(ns) = real_name_server() else { return };
    let broker = std::env::var("BROKER_ADDR").unwrap_or_else(|_| "127.0.0.1:10911".into());
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let (topic, group) = (format!("rmqcat_trace_{stamp}"), format!("rmqcat_trace_g_{stamp}"));
    // A customized trace topic (customizedTraceTopic): brokers refuse to create
    // RMQ_SYS_TRACE_TOPIC on request, and the test broker does not run with traceTopicEnable.
    let trace_topic = format!("rmqcat_trace_data_{stamp}");
    let mut admin = rocketmq_push_io::Client::connect(&broker, Duration::from_secs(5)).unwrap();
    admin.create_topic(&topic, 4).unwrap();
    admin.create_topic(&trace_topic, 1).unwrap();
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = std::env::temp_dir().join(format!("rmqcat-trace-{stamp}.jsonl"));
    let o = Command::new("bash")
        .arg(repo.join("scripts/java-producer.sh"))
        .args([ns.as_str(), topic.as_str()])
        .arg(&manifest)
        .env("RMQ_JAVA_OPTS", format!("-Drmqtest.trace=true -Drmqtest.traceTopic={trace_topic}"))
        .output()
        .unwrap();
    assert!(o.status.success(), "java producer: {}", String::from_utf8_lossy(&o.stderr));
    let lines = std::fs::read_to_string(&manifest).unwrap();
    let _ = std::fs::remove_file(&manifest);
    let first = rocketmq_push_core::json::Value::parse(lines.lines().next().unwrap().as_bytes()).unwrap();
    let msg_id = first.get("msgId").and_then(rocketmq_push_core::json::Value::as_str).unwrap().to_owned();

    let o = bin()
        .args([
            "consume",
            "-n",
            &ns,
            "-g",
            &group,
            "-t",
            &topic,
            "--from",
            "first",
            "-c",
            "6",
            "-q",
            "--trace",
            &trace_topic,
        ])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The broker indexes the trace messages' keys a moment after storing them.
    let deadline = Instant::now() + Duration::from_secs(60);
    let out = loop {
        let (_, out) = mqadmin(&["queryMsgTraceById", "-i", &msg_id, "-t", &trace_topic]);
        let sub = out.lines().any(|l| l.starts_with("Sub ") && l.contains(&group));
        let pubbed = out.lines().any(|l| l.starts_with("Pub "));
        if sub && pubbed {
            break out;
        }
        assert!(Instant::now() < deadline, "no Sub and Pub rows for {msg_id}: {out}");
        std::thread::sleep(Duration::from_secs(1));
    };
    let sub = out.lines().find(|l| l.starts_with("Sub ") && l.contains(&group)).unwrap();
    let f: Vec<&str> = sub.split_whitespace().collect();
    // Sub GROUP CLIENT_HOST yyyy-MM-dd HH:mm:ss COSTms STATUS
    assert_eq!((f[1], f.last().copied()), (group.as_str(), Some("success")), "{out}");
    assert!(f[f.len() - 2].ends_with("ms"), "{out}");
    let pub_row = out.lines().find(|l| l.starts_with("Pub ")).unwrap();
    assert!(pub_row.contains("rmq_rust_test_producer"), "{out}");
}
