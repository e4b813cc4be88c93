//! Live progress on stderr: a bar (when the total is known) and the current rate, redrawn in
//! place on a terminal; nothing when stderr is not a terminal or with `-q`.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub(crate) struct Progress {
    label: &'static str,
    total: Option<u64>,
    live: bool,
    started: Instant,
    last: Option<(Instant, u64)>,
    rate: f64,
    lag: Option<i64>,
}

impl Progress {
    pub(crate) fn new(label: &'static str, total: Option<u64>, quiet: bool) -> Self {
        Self {
            label,
            total,
            live: !quiet && std::io::stderr().is_terminal(),
            started: Instant::now(),
            last: None,
            rate: 0.0,
            lag: None,
        }
    }

    /// True if the line is drawn (a terminal, not `-q`).
    pub(crate) fn is_live(&self) -> bool {
        self.live
    }

    /// Show this lag (messages stored and not committed) from the next redraw on.
    pub(crate) fn set_lag(&mut self, lag: Option<i64>) {
        self.lag = lag;
    }

    /// `done` so far; redrawn at most every 100 ms.
    pub(crate) fn update(&mut self, done: u64) {
        let now = Instant::now();
        if let Some((at, n)) = self.last {
            let dt = now - at;
            if dt < Duration::from_millis(100) {
                return;
            }
            // The rate over the last interval, smoothed.
            let current = (done.saturating_sub(n)) as f64 / dt.as_secs_f64();
            self.rate = if self.rate == 0.0 { current } else { 0.7 * self.rate + 0.3 * current };
        }
        self.last = Some((now, done));
        if !self.live {
            return;
        }
        let mut line = format!("\r{} ", self.label);
        if let Some(total) = self.total.filter(|t| *t > 0) {
            let width = 30;
            let filled = ((done.min(total) * width) / total) as usize;
            line.push('[');
            line.push_str(&"#".repeat(filled));
            line.push_str(&"-".repeat(width as usize - filled));
            line.push_str(&format!("] {}/{}", thousands(done), thousands(total)));
        } else {
            line.push_str(&thousands(done));
        }
        line.push_str(&format!("  {} msg/s", thousands(self.rate as u64)));
        if let Some(lag) = self.lag {
            line.push_str(&format!("  lag {}", thousands(lag.max(0) as u64)));
        }
        line.push_str("\x1b[K");
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
        let _ = err.flush();
    }

    /// Clear the line.
    pub(crate) fn finish(&mut self) {
        if self.live && self.last.is_some() {
            {
                use std::io::Write as _;
                let _ = std::io::stderr().write_all(b"\r\x1b[K");
            };
        }
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// `n` per second over `d`.
pub(crate) fn per_sec(n: u64, d: Duration) -> u64 {
    let s = d.as_secs_f64();
    if s > 0.0 { (n as f64 / s) as u64 } else { 0 }
}

/// `1234567` → `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(per_sec(500, Duration::from_millis(250)), 2000);
        assert_eq!(per_sec(5, Duration::ZERO), 0);
    }
}
