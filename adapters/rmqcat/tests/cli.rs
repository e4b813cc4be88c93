//! The `rmqcat` binary, run for real: against the simulator served on loopback TCP and, when one
//! is running (`scripts/rocketmq.sh start`; NAMESRV_ADDR), the real broker.
#![allow(clippy::disallowed_methods)] // real processes, sockets and clocks

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rocketmq_push_core::json::Value;
use rocketmq_push_core::sim::SimBrokerConfig;
use rocketmq_push_io::sim_server::SimServer;

mod common;
use common::{bin, real_name_server};

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("rmqcat runs")
}

fn run_with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rmqcat runs");
    // A run that fails before reading its stdin closes it: a broken pipe here is that, not a bug.
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exit `code`, and stderr is exactly one line that contains `what` (no panic, no usage block).
fn one_line_error(o: &Output, code: i32, what: &str) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(what), "{what:?} in {err:?}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{err}");
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(name)
}

fn sim(topics: &[(&str, i32)]) -> SimServer {
    SimServer::start(&[("broker-a", topics)], SimBrokerConfig::default()).unwrap()
}

#[test]
fn every_subcommand_has_help_with_examples() {
    let top = run(&["--help"]);
    assert!(top.status.success());
    let top = text(&top.stdout);
    for sub in ["consume", "produce", "decode", "route", "group", "demo"] {
        assert!(top.contains(sub), "{sub} listed");
        let o = run(&[sub, "--help"]);
        assert!(o.status.success(), "{sub} --help");
        assert!(text(&o.stdout).contains("Examples:"), "{sub} --help has examples");
    }
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    one_line_error(&run(&["consume", "--bogus"]), 2, "unexpected argument '--bogus'");
    one_line_error(&run(&["consume", "-g", "G"]), 2, "--topic");
    one_line_error(&run(&["frobnicate"]), 2, "unrecognized subcommand");
    one_line_error(&run(&["consume", "-g", "G", "-t", "T"]), 2, "pass -n HOST:PORT or set NAMESRV_ADDR");
    let ns = ["-n", "127.0.0.1:1"];
    let o = run(&[&["consume", "-g", "G", "-t", "T", "-f", "%s %z"][..], &ns].concat());
    one_line_error(&o, 2, "unknown placeholder %z");
    let o = run(&[&["consume", "-g", "G", "-t", "T", "-f", "100%"][..], &ns].concat());
    one_line_error(&o, 2, "lone %");
    let o = run(&[&["consume", "-g", "G", "-t", "T", "--from", "yesterday"][..], &ns].concat());
    one_line_error(&o, 2, "--from \"yesterday\"");
    let o = run(&[&["consume", "-g", "G", "-t", "T", "-f", "%s", "--json"][..], &ns].concat());
    one_line_error(&o, 2, "cannot be used with");
    let o = run(&[&["produce", "-t", "T", "-p", "novalue"][..], &ns].concat());
    one_line_error(&o, 2, "-p expects KEY=VALUE");
    let o = run(&[&["produce", "-t", "T", "--create", "0"][..], &ns].concat());
    one_line_error(&o, 2, "--create");
}

#[test]
fn runtime_errors_exit_1_with_one_line() {
    let unreachable = ["-n", "127.0.0.1:1"];
    let o = run(&[&["consume", "-g", "G", "-t", "T"][..], &unreachable].concat());
    one_line_error(&o, 1, "cannot reach the name server at 127.0.0.1:1");
    let o = run_with_stdin(&[&["produce", "-t", "T"][..], &unreachable].concat(), b"x\n");
    one_line_error(&o, 1, "cannot reach the name server");
    one_line_error(&run(&[&["route", "-t", "T"][..], &unreachable].concat()), 1, "cannot reach");
    let s = sim(&[("T", 2)]);
    let ns = s.name_server();
    one_line_error(&run(&["consume", "-n", ns, "-g", "G", "-t", "Nope"]), 1, "topic Nope does not exist");
    let o = run_with_stdin(&["produce", "-n", ns, "-t", "Nope"], b"x\n");
    one_line_error(&o, 1, "topic Nope does not exist");
    one_line_error(&run(&["group", "-n", ns, "-g", "NoSuchGroup"]), 1, "pass a topic with -t");
    one_line_error(&run(&["decode", "/no/such/file"]), 1, "/no/such/file");
}

#[test]
fn decode_prints_golden_frames_as_json() {
    let o = run(&["decode", "--hex", data("pull_found_three.hex").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert_eq!(out.lines().count(), 1);
    let v = Value::parse(out.trim().as_bytes()).unwrap();
    assert_eq!(v.get("kind").and_then(Value::as_str), Some("response"));
    assert_eq!(v.get("name").and_then(Value::as_str), Some("SUCCESS"));
    let msgs = v.get("messages").and_then(Value::as_array).expect("the pull body's messages");
    assert_eq!(msgs.len(), 3);
    assert!(msgs.iter().all(|m| m.get("msgId").and_then(Value::as_str).is_some()));
    // Several frames in one input, raw bytes on stdin.
    let mut raw = Vec::new();
    for name in ["route_standard_json.hex", "heartbeat_response.hex", "running_info_request.hex"] {
        let hex = std::fs::read_to_string(data(name)).unwrap();
        let digits: String = hex.lines().filter(|l| !l.starts_with('#')).collect();
        raw.extend((0..digits.len()).step_by(2).map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap()));
    }
    let o = run_with_stdin(&["decode", "-"], &raw);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let lines: Vec<Value> = text(&o.stdout).lines().map(|l| Value::parse(l.as_bytes()).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].get("json").and_then(|j| j.get("brokerDatas")).is_some(), "route body as JSON");
    assert_eq!(lines[2].get("name").and_then(Value::as_str), Some("GET_CONSUMER_RUNNING_INFO"));
    assert_eq!(lines[2].get("kind").and_then(Value::as_str), Some("request"));
    // The same bytes cut short: the first frames print, then a precise error.
    let o = run_with_stdin(&["decode", "-"], &raw[..raw.len() - 5]);
    assert_eq!(text(&o.stdout).lines().count(), 2);
    one_line_error(&o, 1, "frame 3 at byte");
    assert!(text(&o.stderr).contains("truncated"));
    // Not hex.
    one_line_error(&run_with_stdin(&["decode", "--hex", "-"], b"00 zz\n"), 1, "line 1");
    // A length field that lies: rejected before anything is allocated.
    let o = run_with_stdin(&["decode", "-"], &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1]);
    one_line_error(&o, 1, "frame 1 at byte 0");
}

/// `(queue id, offset)` per line of `%q %o …` output.
fn positions(out: &str) -> Vec<(i32, i64)> {
    out.lines()
        .map(|l| {
            let mut f = l.split(' ');
            (f.next().unwrap().parse().unwrap(), f.next().unwrap().parse().unwrap())
        })
        .collect()
}

fn in_order_per_queue(p: &[(i32, i64)]) -> bool {
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    p.iter().all(|(q, o)| last.insert(*q, *o).is_none_or(|prev| prev < *o))
}

#[test]
fn produce_then_consume_against_the_simulator() {
    let s = sim(&[("T", 4)]);
    let ns = s.name_server();
    let lines: String = (1..=50).map(|i| format!("line-{i}\n")).collect();
    let o = run_with_stdin(
        &["produce", "-n", ns, "-t", "T", "-T", "TagA", "-k", "k1,k2", "-p", "color=red"],
        lines.as_bytes(),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("sent 50, failed 0"), "{}", text(&o.stderr));

    let fmt = "%q %o %s %g [%k] {%h}\\n";
    let o = run(&["consume", "-n", ns, "-g", "G", "-t", "T", "--from", "first", "-c", "20", "-f", fmt]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let first = text(&o.stdout);
    assert_eq!(first.lines().count(), 20);
    assert!(first.lines().all(|l| l.contains(" TagA [k1 k2] {color=red}")), "{first}");
    let p1 = positions(&first);
    assert!(in_order_per_queue(&p1), "{first}");
    // Exactly what was printed is committed.
    let committed: i64 = (0..4).filter_map(|q| s.committed_offset(0, "G", "T", q)).sum();
    assert_eq!(committed, 20);

    // The rest, as JSON: nothing printed twice, nothing missing.
    let o = run(&["consume", "-n", ns, "-g", "G", "-t", "T", "-c", "30", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rest: Vec<Value> = text(&o.stdout).lines().map(|l| Value::parse(l.as_bytes()).unwrap()).collect();
    assert_eq!(rest.len(), 30);
    let mut bodies: BTreeSet<String> =
        first.lines().map(|l| l.split(' ').nth(2).unwrap().to_owned()).collect();
    for v in &rest {
        assert!(bodies.insert(v.get("body").and_then(Value::as_str).unwrap().to_owned()), "printed twice");
        assert_eq!(v.get("properties").and_then(|p| p.get("color")).and_then(Value::as_str), Some("red"));
    }
    assert_eq!(bodies, (1..=50).map(|i| format!("line-{i}")).collect());

    // Orderly, another group: every queue in offset order.
    let o = run(&[
        "consume",
        "-n",
        ns,
        "-g",
        "G2",
        "-t",
        "T",
        "--from",
        "first",
        "-c",
        "50",
        "--orderly",
        "-f",
        "%q %o\\n",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let p = positions(&text(&o.stdout));
    assert_eq!(p.len(), 50);
    assert!(in_order_per_queue(&p));

    // -X: Java's knobs by name reach the consumer (broadcasting: offsets stay local).
    let dir = std::env::temp_dir().join(format!("rmqcat-x-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = bin()
        .args(["consume", "-n", ns, "-g", "GX", "-t", "T", "--from", "first", "-c", "50"])
        .args(["-X", "messageModel=BROADCASTING", "-X", "pullBatchSize=8", "-f", "%q %o\\n"])
        .env("HOME", &dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(positions(&text(&o.stdout)).len(), 50);
    assert!((0..4).all(|q| s.committed_offset(0, "GX", "T", q).is_none()), "nothing committed on the broker");
    let _ = std::fs::remove_dir_all(&dir);
    for (x, what) in [
        ("pullBatchSize=0", "pullBatchSize"),
        ("pullBatchSise=8", "unknown knob \"pullBatchSise\"; known: messageModel"),
        ("consumeTimeout=soon", "minutes"),
        ("pullBatchSize", "expected KNOB=VALUE"),
    ] {
        one_line_error(&run(&["consume", "-n", ns, "-g", "G3", "-t", "T", "-X", x]), 2, what);
    }
    one_line_error(&run(&["consume", "-n", ns, "-t", "T", "-X", "pullBatchSize=8"]), 2, "-X needs a group");
    for own in ["consumeThreadMax=4", "consumeMessageBatchMaxSize=8", "namespace=x"] {
        one_line_error(&run(&["consume", "-n", ns, "-g", "G3", "-t", "T", "-X", own]), 2, "rmqcat sets");
    }

    // Generated load, then the group's lag.
    let o = run(&["produce", "-n", ns, "-t", "T", "--count", "100", "--size", "10"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(&["group", "-n", ns, "-g", "G", "-t", "T"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("total lag: 100"), "{}", text(&o.stdout));
    let o = run(&["route", "-n", ns, "-t", "T"]);
    assert!(text(&o.stdout).contains("4 read / 4 write queues"), "{}", text(&o.stdout));
}

#[test]
fn group_reset_moves_a_group_to_first_last_an_offset_or_a_time_and_refuses_bad_targets() {
    let s = sim(&[("T", 4)]);
    let ns = s.name_server();
    let produce = |n: usize, tag: &str| {
        let lines: String = (0..n).map(|i| format!("{tag}-{i}\n")).collect();
        let o = run_with_stdin(&["produce", "-n", ns, "-t", "T"], lines.as_bytes());
        assert!(o.status.success(), "{}", text(&o.stderr));
    };
    let committed = || (0..4).map(|q| s.committed_offset(0, "G", "T", q)).collect::<Vec<_>>();
    let reset =
        |extra: &[&str]| run(&[&["group", "reset", "-n", ns, "-g", "G", "-t", "T"][..], extra].concat());
    produce(40, "old");
    let o = run(&["consume", "-n", ns, "-g", "G", "-t", "T", "--from", "first", "-c", "40", "-f", "%s\n"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(committed(), vec![Some(10); 4]);

    let o = reset(&["--to", "first"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("4 queue(s) reset"), "{}", text(&o.stdout));
    assert_eq!(committed(), vec![Some(0); 4]);
    let o = reset(&["-i", "2", "--to", "7"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(committed(), vec![Some(0), Some(0), Some(7), Some(0)]);
    let o = reset(&["--to", "last"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(committed(), vec![Some(10); 4]);

    // Store times are milliseconds: the cut stays apart from both rounds.
    std::thread::sleep(Duration::from_millis(20));
    let cut = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    std::thread::sleep(Duration::from_millis(20));
    produce(8, "new");
    let o = run(&["consume", "-n", ns, "-g", "G", "-t", "T", "-c", "8", "-f", "%s\n"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = reset(&["--to", &format!("@{cut}")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(committed(), vec![Some(10); 4], "back to the first message stored after the cut");
    let o = run(&["consume", "-n", ns, "-g", "G", "-t", "T", "-c", "8", "-f", "%s\n"]);
    let again: BTreeSet<String> = text(&o.stdout).lines().map(str::to_owned).collect();
    assert_eq!(again, (0..8).map(|i| format!("new-{i}")).collect(), "the second round again, and only it");

    for (args, code, what) in [
        (&["--to", "soon"][..], 2, "expected first, last, an offset, or a time"),
        (&["--to", "@29991231235959"], 2, "in the future"),
        (&["--to=-3"], 2, "expected first, last"),
        (&["-i", "9", "--to", "first"], 2, "has no readable queue 9"),
        (&["-i", "0", "--to", "500"], 1, "Target offset 500 not in consume queue range [0-12]"),
    ] {
        one_line_error(&reset(args), code, what);
    }
    one_line_error(
        &run(&["group", "reset", "-n", ns, "-g", "G", "-t", "NoSuchTopic", "--to", "first"]),
        1,
        "does not exist",
    );
    assert_eq!(committed(), vec![Some(12); 4], "a refusal moves nothing");
}

#[test]
fn reading_without_a_group_pulls_from_the_offsets_asked_and_commits_nothing() {
    let s = sim(&[("T", 4)]);
    let ns = s.name_server();
    let lines: String = (1..=40).map(|i| format!("m-{i}\n")).collect();
    let tagged = |i: i32| if i % 2 == 0 { "TagA" } else { "TagB" };
    for tag in ["TagA", "TagB"] {
        let mine: String = lines
            .lines()
            .enumerate()
            .filter(|(i, _)| tagged(*i as i32) == tag)
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        let o = run_with_stdin(&["produce", "-n", ns, "-t", "T", "-T", tag], mine.as_bytes());
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let read = |extra: &[&str]| {
        let o = run(&[&["consume", "-n", ns, "-t", "T", "-f", "%p %o %g %s\\n"][..], extra].concat());
        assert!(o.status.success(), "{extra:?}: {}", text(&o.stderr));
        (text(&o.stdout), text(&o.stderr))
    };
    // -e: every queue to its end, in offset order per queue, and a count on stderr.
    let (all, err) = read(&["-e"]);
    let p = positions(&all);
    assert_eq!(p.len(), 40, "{all}");
    assert!(in_order_per_queue(&p));
    assert!(err.contains("read 40 message(s)"), "{err}");
    // -o -N: the last N of each queue; -o N: from offset N; -o end: nothing yet.
    let (last, _) = read(&["-e", "-o", "-2"]);
    let maxes: Vec<i64> = (0..4).map(|q| s.with(move |w, _| w.brokers[0].max_offset("T", q))).collect();
    let want: Vec<(i32, i64)> =
        (0..4).flat_map(|q| [(q, maxes[q as usize] - 2), (q, maxes[q as usize] - 1)]).collect();
    let mut got = positions(&last);
    got.sort();
    assert_eq!(got, want);
    let (from3, _) = read(&["-e", "-p", "1", "-o", "3"]);
    assert_eq!(positions(&from3), (3..maxes[1]).map(|o| (1, o)).collect::<Vec<_>>(), "queue 1 only, from 3");
    assert_eq!(read(&["-e", "-o", "end"]).0, "");
    // -o @TIME: what was stored after it (here: nothing, then everything).
    let future = (std::time::SystemTime::now() + Duration::from_secs(60))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    assert_eq!(read(&["-e", "-o", &format!("@{future}")]).0, "");
    assert_eq!(positions(&read(&["-e", "-o", "@1970-01-01T00:00:00Z"]).0).len(), 40);
    // Tags filter; a count stops early.
    let (a, _) = read(&["-e", "-T", "TagA"]);
    assert_eq!(a.lines().count(), 20);
    assert!(a.lines().all(|l| l.split(' ').nth(2) == Some("TagA")), "{a}");
    assert_eq!(read(&["-c", "7"]).0.lines().count(), 7, "a count ends a reader without -e");
    // Without -e or -c it reads on until Ctrl-C, then says how many and exits 0.
    let mut child = bin()
        .args(["consume", "-n", ns, "-t", "T", "-f", "%p %o\\n"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    for _ in 0..40 {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "40 lines before Ctrl-C");
    }
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "Ctrl-C is a clean exit: {}", text(&o.stderr));
    assert!(text(&o.stderr).contains("read 40 message(s)"), "{}", text(&o.stderr));
    // Nothing joined a group, nothing was committed.
    assert!(s.with(|w, _| w.brokers[0].members("rmqcat_reader").is_empty()));
    assert!((0..4).all(|q| s.committed_offset(0, "rmqcat_reader", "T", q).is_none()));
    // Flags of the other mode, bad offsets and queues: one line, exit 2.
    one_line_error(&run(&["consume", "-n", ns, "-t", "T", "-o", "middle"]), 2, "expected beginning, end");
    one_line_error(&run(&["consume", "-n", ns, "-t", "T", "-o", "@noon"]), 2, "RFC 3339");
    one_line_error(&run(&["consume", "-n", ns, "-t", "T", "-p", "9"]), 2, "has queues [0, 1, 2, 3]");
    one_line_error(
        &run(&["consume", "-n", ns, "-t", "T", "-g", "G", "-o", "5"]),
        2,
        "-o reads without a group",
    );
    one_line_error(&run(&["consume", "-n", ns, "-t", "T", "--from", "first"]), 2, "--from needs a group");
}

#[test]
fn a_config_file_holds_the_cluster_and_java_knobs_and_flags_win_over_it() {
    let s = sim(&[("T", 2)]);
    let ns = s.name_server();
    let dir = std::env::temp_dir().join(format!("rmqcat-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("team.toml");
    let write = |text: &str| std::fs::write(&file, text).unwrap();
    let cfg = file.to_str().unwrap();
    write(&format!("namesrvAddr = \"{ns}\"\nmessageModel = \"BROADCASTING\"\npullBatchSize = 8\n"));
    let o = run(&["produce", "--config", cfg, "-t", "T", "--count", "20"]);
    assert!(o.status.success(), "the file's name server: {}", text(&o.stderr));
    let o = bin()
        .args(["consume", "--config", cfg, "-g", "GF", "-t", "T", "--from", "first", "-c", "20"])
        .env("HOME", &dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).lines().count(), 20);
    assert!((0..2).all(|q| s.committed_offset(0, "GF", "T", q).is_none()), "the file's messageModel applied");
    // A flag wins over the file: -n over an unreachable namesrvAddr.
    write("namesrvAddr = \"127.0.0.1:1\"\n");
    let o = run(&["route", "--config", cfg, "-n", ns, "-t", "T"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Bad files: one line naming the file and the problem, exit 2, before anything connects.
    write("pullBatchSise = 8\n");
    one_line_error(&run(&["route", "--config", cfg, "-t", "T"]), 2, "unknown key \"pullBatchSise\"");
    write(&format!("namesrvAddr = \"{ns}\"\npullBatchSize = 0\n"));
    one_line_error(
        &run(&["consume", "--config", cfg, "-g", "G", "-t", "T"]),
        2,
        "invalid pullBatchSize = 0: allowed 1..=1024 (set by --config or -X)",
    );
    write("namesrvAddr = \n");
    one_line_error(&run(&["route", "--config", cfg, "-t", "T"]), 2, "team.toml");
    one_line_error(&run(&["route", "--config", "/nonexistent.toml", "-t", "T"]), 2, "/nonexistent.toml");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctrl_c_stops_with_what_was_printed_committed() {
    let s = sim(&[("T", 2)]);
    let ns = s.name_server().to_owned();
    let o = run(&["produce", "-n", &ns, "-t", "T", "--count", "40"]);
    assert!(o.status.success());
    let mut child = bin()
        .args(["consume", "-n", &ns, "-g", "G", "-t", "T", "--from", "first", "-f", "%q %o\\n"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < 40 && Instant::now() < deadline {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push(line);
    }
    assert_eq!(seen.len(), 40, "all 40 printed");
    let killed = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "Ctrl-C is a clean exit");
    let committed: i64 = (0..2).filter_map(|q| s.committed_offset(0, "G", "T", q)).sum();
    assert_eq!(committed, 40, "offsets committed on the way out");
}

/// `GET path` on `addr`: the status line and the body.
fn http_get(addr: &str, path: &str) -> (String, String) {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

#[test]
fn prometheus_serves_the_consumers_figures_while_it_runs() {
    let s = sim(&[("T", 2)]);
    let ns = s.name_server().to_owned();
    let o = run(&["produce", "-n", &ns, "-t", "T", "--count", "30"]);
    assert!(o.status.success());
    let mut child = bin()
        .args(["consume", "-n", &ns, "-g", "G", "-t", "T", "--from", "first", "-f", "%o\n"])
        .args(["--prometheus", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The address it bound, from its first stderr line.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let addr = first
        .trim()
        .strip_prefix("rmqcat: metrics for Prometheus at http://")
        .unwrap()
        .trim_end_matches("/metrics")
        .to_owned();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..30 {
        out.read_line(&mut String::new()).unwrap();
    }
    let labels = "topic=\"T\",consumer_group=\"G\"";
    let consumed = format!("rocketmq_consume_messages_total{{{labels},client_id=");
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        let (status, body) = http_get(&addr, "/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK");
        // The gauges are sampled every second; the counter is counted as listeners end.
        let done = body.lines().any(|l| l.starts_with(&consumed) && l.ends_with(" 30"))
            && body.lines().any(|l| l.starts_with("rocketmq_consumer_lag_messages{") && l.ends_with(" 0"));
        if done || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let line = |prefix: &str| body.lines().find(|l| l.starts_with(prefix)).map(str::to_owned);
    let total = line(&consumed).unwrap_or_else(|| panic!("no consume counter in:\n{body}"));
    assert!(total.contains("invocation_status=\"success\"") && total.ends_with(" 30"), "{total}");
    let bucket = line("rocketmq_process_time_bucket{").unwrap_or_else(|| panic!("no histogram in:\n{body}"));
    assert!(bucket.contains(labels), "{bucket}");
    let count = line("rocketmq_process_time_count{").unwrap();
    assert!(count.ends_with(" 30"), "{count}");
    for gauge in [
        "rocketmq_consumer_cached_messages{",
        "rocketmq_consumer_cached_bytes{",
        "rocketmq_consumer_lag_messages{",
    ] {
        let g = line(gauge).unwrap_or_else(|| panic!("no {gauge} in:\n{body}"));
        assert!(g.contains("topic=\"T\"") && g.ends_with(" 0"), "{g}");
    }
    assert_eq!(http_get(&addr, "/").0, "HTTP/1.1 404 Not Found");
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    one_line_error(
        &run(&["consume", "-n", &ns, "-t", "T", "--prometheus", "127.0.0.1:0"]),
        2,
        "--prometheus needs a group",
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let o = run(&["consume", "-n", &ns, "-g", "G", "-t", "T", "--prometheus", &taken, "-c", "1"]);
    one_line_error(&o, 1, "cannot listen there");
}

#[test]
fn a_trace_topic_that_does_not_exist_is_reported_and_consumption_goes_on() {
    let s = sim(&[("T", 2)]);
    let ns = s.name_server().to_owned();
    let o = run(&["produce", "-n", &ns, "-t", "T", "--count", "10"]);
    assert!(o.status.success());
    let o = run(&[
        "consume",
        "-n",
        &ns,
        "-g",
        "G",
        "-t",
        "T",
        "--from",
        "first",
        "-c",
        "10",
        "--trace",
        "NoSuchTrace",
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(text(&o.stdout).lines().count(), 10, "{err}");
    assert!(err.contains("message trace not sent") && err.contains("NoSuchTrace"), "{err}");
    let committed: i64 = (0..2).filter_map(|q| s.committed_offset(0, "G", "T", q)).sum();
    assert_eq!(committed, 10);
}

/// The `lost` and `duplicates` figures of a demo summary.
fn summary(err: &str, field: &str) -> u64 {
    err.lines()
        .find_map(|l| l.trim().strip_prefix(field))
        .and_then(|v| v.trim().replace(',', "").parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {err}"))
}

#[test]
fn demo_runs_without_a_broker() {
    let o = run(&["demo", "--count", "3000", "--queues", "4"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("embedded simulator"), "{err}");
    assert_eq!(summary(&err, "lost"), 0, "{err}");
    assert_eq!(summary(&err, "duplicates"), 0, "{err}");
    assert!(err.contains("latency    p50"), "{err}");
    let o = run(&["demo", "-q", "--count", "100"]);
    assert!(o.status.success() && o.stderr.is_empty(), "quiet: {}", text(&o.stderr));
}

/// A pipe whose reader is already gone: every write to it fails with a broken pipe.
#[cfg(unix)]
fn closed_pipe() -> Stdio {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: `pipe` fills both descriptors on success; each is owned exactly once below.
    let (reader, writer) = unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0, "pipe");
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    };
    drop(reader);
    writer.into()
}

#[cfg(unix)]
#[test]
fn a_closed_stdout_or_stderr_ends_quietly_never_in_a_panic_or_an_abort() {
    let hex = data("pull_found_three.hex");
    let hex = hex.to_str().unwrap();
    // `rmqcat … | head -1`: stdout closes under it; what it would print has nowhere to go.
    let o = bin().args(["decode", "--hex", hex]).stdout(closed_pipe()).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "stderr: {}", text(&o.stderr));
    assert!(o.stderr.is_empty(), "nothing to report: {}", text(&o.stderr));
    // Progress and summary lines on a closed stderr, stdout closed too.
    let o =
        bin().args(["demo", "--count", "200"]).stdout(closed_pipe()).stderr(closed_pipe()).status().unwrap();
    assert_eq!(o.code(), Some(0), "{o:?}");
    // A usage error keeps its exit status when it cannot be printed.
    let o = bin().args(["consume", "--bogus"]).stderr(closed_pipe()).status().unwrap();
    assert_eq!(o.code(), Some(2), "{o:?}");
    let o = bin().args(["decode", "--hex", "/nonexistent"]).stderr(closed_pipe()).status().unwrap();
    assert_eq!(o.code(), Some(1), "{o:?}");
}

#[test]
fn against_the_real_broker() {
    let Some(ns) = real_name_server() else { return };
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let (topic, group) = (format!("rmqcat_cli_{stamp}"), format!("rmqcat_cli_g_{stamp}"));
    let lines: String = (1..=30).map(|i| format!("real-{i}\n")).collect();
    let o = run_with_stdin(
        &["produce", "-n", &ns, "-t", &topic, "--create", "4", "-T", "TagA"],
        lines.as_bytes(),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(&[
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
        "30",
        "-f",
        "%q %o %s\\n",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let p = positions(&out);
    assert_eq!(p.len(), 30);
    assert!(in_order_per_queue(&p));
    let bodies: BTreeSet<&str> = out.lines().map(|l| l.split(' ').nth(2).unwrap()).collect();
    assert_eq!(bodies.len(), 30);
    let o = run(&["route", "-n", &ns, "-t", &topic]);
    assert!(text(&o.stdout).contains("4 read / 4 write queues"), "{}", text(&o.stdout));
    // Back to the first (the group is offline): the same thirty again.
    let o = run(&["group", "reset", "-n", &ns, "-g", &group, "-t", &topic, "--to", "first"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(&["consume", "-n", &ns, "-g", &group, "-t", &topic, "-c", "30", "-f", "%q %o %s\\n"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let again: BTreeSet<String> =
        text(&o.stdout).lines().map(|l| l.split(' ').nth(2).unwrap().to_owned()).collect();
    assert_eq!(again, bodies.iter().map(|b| b.to_string()).collect(), "the same thirty");
    // Without -t the broker reports every topic it holds the group's offsets for.
    let o = run(&["group", "-n", &ns, "-g", &group]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let table = text(&o.stdout);
    assert!(table.contains(&topic) && table.contains("total lag: 0"), "{table}");
    // SQL92: the broker checks the expression at start, as Java's start() has it checked; a bad
    // one is a usage error before the group exists anywhere, a good one filters.
    let bad_group = format!("{group}_badsql");
    for bad in ["a >", "color = 'red' AND", "a > > 5"] {
        let o = run(&["consume", "-n", &ns, "-g", &bad_group, "-t", &topic, "--sql", bad, "-c", "1"]);
        one_line_error(&o, 2, &format!("invalid --sql expression {bad:?}"));
    }
    let o = run(&["group", "-n", &ns, "-g", &bad_group]);
    assert!(
        !o.status.success() && !text(&o.stdout).contains(&topic),
        "nothing committed: {}",
        text(&o.stdout)
    );
    let lines: String = (1..=5).map(|i| format!("sql-{i}\n")).collect();
    let o = run_with_stdin(&["produce", "-n", &ns, "-t", &topic, "-p", "a=7"], lines.as_bytes());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let sql_group = format!("{group}_sql");
    let args = ["consume", "-n", &ns, "-g", &sql_group, "-t", &topic, "--sql", "a > 5", "--from", "first"];
    let o = run(&[&args[..], &["-c", "5", "-f", "%s\\n"]].concat());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let got: BTreeSet<String> = text(&o.stdout).lines().map(str::to_owned).collect();
    assert_eq!(got, (1..=5).map(|i| format!("sql-{i}")).collect(), "only a > 5, of 35 stored");
    // Without a group: the whole topic to its end, by plain pulls.
    let o = run(&["consume", "-n", &ns, "-t", &topic, "-e", "-f", "%p %o\\n"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let p = positions(&text(&o.stdout));
    assert_eq!(p.len(), 35);
    assert!(in_order_per_queue(&p));
    let o = run(&["demo", "-n", &ns, "--count", "2000"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(summary(&err, "lost"), 0, "{err}");
}

#[test]
fn a_namespace_wraps_what_travels_and_not_what_is_shown() {
    let Some(ns) = real_name_server() else { return };
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let (space, topic, group) =
        (format!("nsp{stamp}"), format!("rmqcat_ns_{stamp}"), format!("rmqcat_ns_g_{stamp}"));
    let lines: String = (1..=5).map(|i| format!("ns-{i}\n")).collect();
    let o = run_with_stdin(
        &["produce", "-n", &ns, "--namespace", &space, "-t", &topic, "--create", "2"],
        lines.as_bytes(),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    // On the wire the topic is NS%topic; without the namespace the bare name does not exist.
    let wire = format!("{space}%{topic}");
    assert!(run(&["route", "-n", &ns, "-t", &wire]).status.success());
    assert_eq!(run(&["route", "-n", &ns, "-t", &topic]).status.code(), Some(1));
    let o = run(&[
        "consume",
        "-n",
        &ns,
        "--namespace",
        &space,
        "-g",
        &group,
        "-t",
        &topic,
        "--from",
        "first",
        "-c",
        "5",
        "-f",
        "%t %s\\n",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let consumed = format!("{out}{}", text(&o.stderr));
    assert_eq!(out.lines().count(), 5, "{out}");
    assert!(
        out.lines().all(|l| l.starts_with(&format!("{topic} ns-"))),
        "the listener sees the bare topic: {out}"
    );
    // The group's progress is under the wrapped group, found with the same flag.
    let o = run(&["group", "-n", &ns, "--namespace", &space, "-g", &group, "-t", &topic]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("total lag: 0"),
        "{}\nthe consumer printed:\n{consumed}",
        text(&o.stdout)
    );
}

/// `bench` through every adapter (and the raw-pull ceiling): every message counted once, and
/// every figure measured, not left at zero — context switches included, which are counted per
/// thread and so must be read while the consumer's threads still run. Latency is reported
/// where it was asked for (every other adapter) and only there.
fn bench_every_adapter(ns: &str, topic: &str, count: usize) {
    for (i, adapter) in ["raw", "tokio", "blocking", "async-std", "smol"].into_iter().enumerate() {
        let n = count.to_string();
        let latency = i % 2 == 0;
        let mut args =
            vec!["bench", "-n", ns, "-t", topic, "-c", &n, "--adapter", adapter, "--json", "--limit", "120"];
        if latency {
            args.push("--latency");
        }
        let o = run(&args);
        assert!(o.status.success(), "{adapter}: {}", text(&o.stderr));
        let out = text(&o.stdout);
        let v = Value::parse(out.trim_end().as_bytes()).unwrap_or_else(|e| panic!("{adapter}: {e}: {out}"));
        let num =
            |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or_else(|| panic!("{adapter}: {k} in {out}"));
        assert_eq!(num("count"), count as f64, "{adapter}: {out}");
        for k in [
            "ms",
            "first_ms",
            "msg_per_s",
            "mb_per_s",
            "cpu_s_per_million",
            "peak_rss_kib",
            "context_switches",
        ] {
            assert!(num(k) > 0.0, "{adapter}: {k} in {out}");
        }
        // Start-up is a part of the whole run.
        assert!(num("first_ms") <= num("ms") + 1.0, "{adapter}: {out}");
        if latency {
            assert!(num("p99_ms") >= num("p50_ms"), "{adapter}: {out}");
        } else {
            assert!(v.get("p50_ms").is_none() && v.get("p99_ms").is_none(), "{adapter}: {out}");
        }
    }
}

#[test]
fn bench_measures_every_adapter_against_the_simulator() {
    let s = sim(&[("B", 4)]);
    let o = run(&["produce", "-n", s.name_server(), "-t", "B", "--count", "2000", "--size", "100"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    bench_every_adapter(s.name_server(), "B", 2000);
}

#[test]
fn bench_measures_every_adapter_against_the_real_broker() {
    let Some(ns) = real_name_server() else { return };
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let topic = format!("rmqcat_bench_{stamp}");
    let o = run(&["produce", "-n", &ns, "-t", &topic, "--create", "4", "--count", "2000", "--size", "100"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    bench_every_adapter(&ns, &topic, 2000);
}

#[test]
fn group_mode_switches_a_group_to_pop_and_consume_follows() {
    let Some(ns) = real_name_server() else { return };
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let (topic, group) = (format!("rmqcat_pop_{stamp}"), format!("rmqcat_pop_g_{stamp}"));
    let lines: String = (1..=20).map(|i| format!("pop-{i}\n")).collect();
    let o = run_with_stdin(&["produce", "-n", &ns, "-t", &topic, "--create", "2"], lines.as_bytes());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(&["group", "mode", "-n", &ns, "-g", &group, "-t", &topic, "pop"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(&format!("group {group} on {topic} is now POP")), "{}", text(&o.stdout));
    let o = run(&[
        "consume", "-n", &ns, "-g", &group, "-t", &topic, "--from", "first", "-c", "20", "-f", "%q %s\\n",
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("by POP") && err.contains("acked"), "{err}");
    // Popped from both queues, each message once.
    let out = text(&o.stdout);
    let bodies: BTreeSet<&str> = out.lines().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!((bodies.len(), out.lines().count()), (20, 20), "{out}");
    let queues: BTreeSet<&str> = out.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(queues, BTreeSet::from(["0", "1"]), "{out}");
    // Back to PULL; a retry topic is refused before anything is sent.
    let o = run(&["group", "mode", "-n", &ns, "-g", &group, "-t", &topic, "pull"]);
    assert!(text(&o.stdout).contains("is now PULL"), "{}", text(&o.stdout));
    let o = run(&["group", "mode", "-n", &ns, "-g", &group, "-t", &format!("%RETRY%{group}"), "pop"]);
    one_line_error(&o, 2, "a retry topic follows its group's topic");
}
