//! Every example printed by `rmqcat --help` and `rmqcat SUBCOMMAND --help` is run, as a user
//! would paste it, against the simulator on loopback TCP: none may name a missing file, a flag
//! that does not exist, or end in an error.
#![allow(clippy::disallowed_methods)] // real processes, sockets and clocks
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rocketmq_push_core::sim::SimBrokerConfig;
use rocketmq_push_io::sim_server::SimServer;

const SUBCOMMANDS: [&str; 9] =
    ["", "consume", "produce", "decode", "route", "group", "group reset", "demo", "bench"];

fn help(sub: &str) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rmqcat"));
    c.args(sub.split_whitespace());
    let o = c.arg("--help").output().unwrap();
    assert!(o.status.success(), "rmqcat {sub} --help");
    String::from_utf8(o.stdout).unwrap()
}

/// The example command lines of one help text: the indented lines after `Examples:` that run
/// rmqcat, without the explanation after two or more spaces.
fn examples(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Examples:"))
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with("  "))
        .map(|l| l.trim_start().split("  ").next().unwrap_or_default().trim().to_owned())
        .filter(|c| c.starts_with("rmqcat ") || c.contains("| rmqcat "))
        .collect()
}

/// Examples show counts a user would run; the test runs the same flags on fewer messages.
fn scaled(cmd: &str, ns: &str) -> String {
    let mut words: Vec<String> = cmd.replace("127.0.0.1:9876", ns).split(' ').map(str::to_owned).collect();
    for w in &mut words {
        if let Ok(n) = w.parse::<u64>() {
            if n >= 10_000 {
                *w = (n / 100).to_string();
            }
        }
    }
    words.join(" ")
}

/// A scratch directory for the examples' files: `tests/data` as in the repository, a raw capture
/// and a text file of lines.
fn workdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rmqcat-help-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
    std::os::unix::fs::symlink(data.canonicalize().unwrap(), dir.join("tests/data")).unwrap();
    let hex = std::fs::read_to_string(data.join("pull_found_three.hex")).unwrap();
    let digits: String =
        hex.lines().filter(|l| !l.starts_with('#')).flat_map(|l| l.split_whitespace()).collect();
    let raw: Vec<u8> =
        (0..digits.len()).step_by(2).map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap()).collect();
    std::fs::write(dir.join("capture.bin"), raw).unwrap();
    std::fs::write(dir.join("lines.txt"), "one\ntwo\nthree\n").unwrap();
    dir
}

fn spawn(cmd: &str, dir: &Path, ns: &str) -> Child {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_rmqcat")).parent().unwrap().to_owned();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    // `exec` when rmqcat is the whole command: its pid is the child's, for Ctrl-C.
    let line = if cmd.starts_with("rmqcat ") { format!("exec {cmd}") } else { cmd.to_owned() };
    Command::new("sh")
        .args(["-c", &line])
        .current_dir(dir)
        .env("PATH", path)
        .env("NAMESRV_ADDR", ns)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn every_help_example_runs_against_the_simulator() {
    // TBW102: what a broker with autoCreateTopicEnable offers, for `produce --create`.
    let topics = [
        ("T", 4),
        ("TopicA", 4),
        ("Bench", 8),
        ("%RETRY%my_group", 1),
        ("TBW102", 8),
        ("RMQ_SYS_TRACE_TOPIC", 1),
    ];
    let s = SimServer::start(&[("broker-a", &topics)], SimBrokerConfig::default()).unwrap();
    let ns = s.name_server().to_owned();
    let dir = workdir();
    let mut ran = Vec::new();
    for sub in SUBCOMMANDS {
        for example in examples(&help(sub)) {
            let cmd = scaled(&example, &ns);
            if ran.contains(&cmd) {
                continue;
            }
            let mut child = spawn(&cmd, &dir, &ns);
            // A consumer runs until COUNT messages or Ctrl-C; everything else ends by itself.
            let consumer = cmd.starts_with("rmqcat consume ");
            let limit = Duration::from_secs(if consumer { 3 } else { 120 });
            let started = Instant::now();
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if started.elapsed() > limit {
                    assert!(consumer, "`{cmd}` did not end within {limit:?}");
                    let pid = child.id().to_string();
                    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
                    break child.wait().unwrap();
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            assert_eq!(status.code(), Some(0), "`{example}` (run as `{cmd}`): {err}");
            assert!(!err.contains("error"), "`{example}` reported an error: {err}");
            ran.push(cmd);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    // The extraction itself: every subcommand's help has at least one example, and they all ran.
    assert!(ran.len() >= 25, "examples found: {ran:#?}");
    assert!(ran.iter().any(|c| c.contains("tests/data/")), "the decode example of a checked-in file ran");
}
