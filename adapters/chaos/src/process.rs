//! The consumer under test as a process: start it, read what it consumed, measure it, kill it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running `chaos_consumer`.
#[derive(Debug)]
pub struct ConsumerProcess {
    child: Child,
    /// Where it appends what it consumed.
    pub out: PathBuf,
    /// Its stderr (events).
    pub log: PathBuf,
}

impl ConsumerProcess {
    /// Start `bin` (the `chaos_consumer` binary) for `group` on `topic`; `knobs` as it takes them.
    pub fn spawn(
        bin: &str,
        ns: &str,
        group: &str,
        topic: &str,
        out: &Path,
        knobs: &[&str],
    ) -> io::Result<Self> {
        let log = out.with_extension(format!("{}.log", std::process::id()));
        let stderr = File::options().create(true).append(true).open(&log)?;
        let child = Command::new(bin)
            .args([ns, group, topic])
            .arg(out)
            .args(knobs)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()?;
        Ok(Self { child, out: out.to_owned(), log })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Peak resident memory so far, in KiB (`VmHWM`).
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// kill -9, and reap it.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait up to `limit` for it to exit: how long it took and how it ended
    /// (`None`: still running at the limit, then killed).
    pub fn terminate(mut self, limit: Duration) -> Option<(Duration, ExitStatus)> {
        let started = Instant::now();
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        while started.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some((started.elapsed(), status));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

/// One message as the consumer recorded it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Consumed {
    /// Broker name.
    pub broker: String,
    /// Queue id.
    pub queue: i32,
    /// Queue offset.
    pub offset: i64,
    /// Message id (`UNIQ_KEY`).
    pub key: String,
}

/// Every line of an output file (a partial last line, from a kill -9, is ignored).
pub fn read_consumed(path: &Path) -> Vec<Consumed> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            Some(Consumed {
                broker: f.next()?.to_owned(),
                queue: f.next()?.parse().ok()?,
                offset: f.next()?.parse().ok()?,
                key: f.next()?.to_owned(),
            })
        })
        .collect()
}

/// What a scenario produced against what its consumers recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Messages produced.
    pub produced: usize,
    /// Distinct produced messages consumed at least once.
    pub consumed_unique: usize,
    /// Produced and never consumed.
    pub lost: usize,
    /// Deliveries beyond the first of a message.
    pub duplicates: usize,
}

impl Tally {
    /// Count `consumed` against the `produced` keys.
    pub fn of(produced: &BTreeSet<String>, consumed: &[Consumed]) -> Self {
        let mut times: BTreeMap<&str, usize> = BTreeMap::new();
        for c in consumed.iter().filter(|c| produced.contains(&c.key)) {
            *times.entry(c.key.as_str()).or_default() += 1;
        }
        Self {
            produced: produced.len(),
            consumed_unique: times.len(),
            lost: produced.len() - times.len(),
            duplicates: times.values().map(|n| n - 1).sum(),
        }
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "produced {}, consumed-unique {}, lost {}, duplicates {}",
            self.produced, self.consumed_unique, self.lost, self.duplicates
        )
    }
}

/// Wait until `done`, polling; false at `limit`.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}
