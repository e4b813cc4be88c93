//! Windowed rates, computed the way Java's `StatsItem` / `ConsumerStatsManager` compute them, so
//! the figures `mqadmin consumerStatus` prints for us mean what they mean for the Java client.
//!
//! Each figure is a pair of running sums — `value` (messages, or milliseconds) and `times` (how
//! often something was added). Every 10 s a sample of both is taken and the last 7 are kept, so
//! the minute window spans the last 60 s; every 10 min another sample goes to the hour window.
//! A rate is the difference between the window's first and last samples: `tps` = Δvalue per
//! second, `avgpt` = Δvalue / Δtimes. As in Java, the first sample of a window is preceded by a
//! zero one a period earlier, so a rate shows 10 s after the first sampling, not 60 s.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How often the minute window is sampled (`samplingInSeconds`).
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// Minute samples per hour sample (`samplingInMinutes`, every 10 minutes).
pub(crate) const HOUR_SAMPLE_RATIO: u32 = 60;
/// Samples a window keeps (Java's 7: six periods between the first and the last).
const KEPT: usize = 7;

#[derive(Clone, Copy, Debug)]
struct Sample {
    at: Instant,
    times: u64,
    value: u64,
}

/// What a window says: Java's `StatsSnapshot`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Rate {
    /// Δvalue over the window.
    pub(crate) sum: u64,
    /// Δvalue per second.
    pub(crate) tps: f64,
    /// Δvalue per addition (an average time, for RT items).
    pub(crate) avgpt: f64,
}

/// One `StatsItem`: running sums plus its minute and hour windows.
#[derive(Clone, Debug, Default)]
pub(crate) struct Windowed {
    value: u64,
    times: u64,
    minute: VecDeque<Sample>,
    hour: VecDeque<Sample>,
}

impl Windowed {
    /// Add `value` counted as `times` additions (`addValue` / `addRTValue`).
    pub(crate) fn add(&mut self, value: u64, times: u64) {
        self.value = self.value.wrapping_add(value);
        self.times = self.times.wrapping_add(times);
    }

    fn sample(window: &mut VecDeque<Sample>, now: Instant, period: Duration, times: u64, value: u64) {
        if window.is_empty() {
            // Java's leading zero sample; a clock too young for it starts at `now` itself.
            let at = now.checked_sub(period).unwrap_or(now);
            window.push_back(Sample { at, times: 0, value: 0 });
        }
        window.push_back(Sample { at: now, times, value });
        if window.len() > KEPT {
            window.pop_front();
        }
    }

    fn sample_minute(&mut self, now: Instant) {
        Self::sample(&mut self.minute, now, SAMPLE_EVERY, self.times, self.value);
    }

    fn sample_hour(&mut self, now: Instant) {
        Self::sample(&mut self.hour, now, SAMPLE_EVERY * HOUR_SAMPLE_RATIO, self.times, self.value);
    }

    fn rate(window: &VecDeque<Sample>) -> Rate {
        let (Some(first), Some(last)) = (window.front(), window.back()) else { return Rate::default() };
        let sum = last.value.wrapping_sub(first.value);
        let ms = last.at.saturating_duration_since(first.at).as_millis();
        let times = last.times.wrapping_sub(first.times);
        Rate {
            sum,
            tps: if ms == 0 { 0.0 } else { sum as f64 * 1000.0 / ms as f64 },
            avgpt: if times == 0 { 0.0 } else { sum as f64 / times as f64 },
        }
    }

    /// The last minute (`getStatsDataInMinute`).
    pub(crate) fn minute(&self) -> Rate {
        Self::rate(&self.minute)
    }

    /// The last hour (`getStatsDataInHour`).
    pub(crate) fn hour(&self) -> Rate {
        Self::rate(&self.hour)
    }
}

/// The five items Java's `ConsumerStatsManager` keeps per topic and group.
#[derive(Clone, Debug, Default)]
pub(crate) struct TopicWindows {
    /// `PULL_TPS`: messages found per pull answer.
    pub(crate) pull_tps: Windowed,
    /// `PULL_RT`: milliseconds from a pull's request to its answer (long-poll hold included).
    pub(crate) pull_rt: Windowed,
    /// `CONSUME_OK_TPS`.
    pub(crate) consume_ok: Windowed,
    /// `CONSUME_FAILED_TPS`.
    pub(crate) consume_failed: Windowed,
    /// `CONSUME_RT`: milliseconds a batch spent with user code.
    pub(crate) consume_rt: Windowed,
}

impl TopicWindows {
    fn items(&mut self) -> [&mut Windowed; 5] {
        [
            &mut self.pull_tps,
            &mut self.pull_rt,
            &mut self.consume_ok,
            &mut self.consume_failed,
            &mut self.consume_rt,
        ]
    }

    /// What `ConsumerStatsManager.consumeStatus` reports for this topic.
    pub(crate) fn report(&self, topic: &str) -> super::TopicStats {
        let consume_rt = match self.consume_rt.minute() {
            // No batch finished this minute: Java falls back to the hour.
            r if r.sum == 0 => self.consume_rt.hour(),
            r => r,
        };
        super::TopicStats {
            topic: topic.to_owned(),
            pull_tps: self.pull_tps.minute().tps,
            pull_rt_ms: self.pull_rt.minute().avgpt,
            consume_ok_tps: self.consume_ok.minute().tps,
            consume_failed_tps: self.consume_failed.minute().tps,
            consume_rt_ms: consume_rt.avgpt,
            consume_failed_last_hour: self.consume_failed.hour().sum,
        }
    }
}

/// Every topic's windows, by a slot number a queue keeps (no lookup by name on the hot path).
#[derive(Debug, Default)]
pub(crate) struct StatsBook {
    topics: Vec<(String, TopicWindows)>,
    samples: u32,
}

impl StatsBook {
    /// The slot of `topic`, added if new.
    pub(crate) fn slot(&mut self, topic: &str) -> usize {
        if let Some(i) = self.topics.iter().position(|(t, _)| t == topic) {
            return i;
        }
        self.topics.push((topic.to_owned(), TopicWindows::default()));
        self.topics.len() - 1
    }

    /// The windows of a slot (a slot never goes away).
    pub(crate) fn at(&mut self, slot: usize) -> Option<&mut TopicWindows> {
        self.topics.get_mut(slot).map(|(_, w)| w)
    }

    /// The windows of `topic`, if anything was ever counted for it.
    pub(crate) fn of(&self, topic: &str) -> Option<&TopicWindows> {
        self.topics.iter().find(|(t, _)| t == topic).map(|(_, w)| w)
    }

    /// Take the 10-second sample of every item (and every 60th time, the 10-minute one).
    pub(crate) fn sample(&mut self, now: Instant) {
        let hour = self.samples % HOUR_SAMPLE_RATIO == 0;
        self.samples = self.samples.wrapping_add(1);
        for (_, w) in &mut self.topics {
            for item in w.items() {
                item.sample_minute(now);
                if hour {
                    item.sample_hour(now);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::disallowed_methods)] // tests pick an arbitrary origin
    fn t0() -> Instant {
        Instant::now() + Duration::from_secs(7200)
    }

    fn at(base: Instant, secs: u64) -> Instant {
        base + Duration::from_secs(secs)
    }

    #[test]
    fn a_rate_shows_after_one_sample_against_the_leading_zero() {
        let t0 = t0();
        let mut w = Windowed::default();
        w.add(500, 5);
        w.sample_minute(at(t0, 10));
        let r = w.minute();
        assert_eq!(r.sum, 500);
        assert!((r.tps - 50.0).abs() < 1e-9, "500 over the 10 s since the zero sample: {r:?}");
        assert!((r.avgpt - 100.0).abs() < 1e-9);
    }

    #[test]
    fn the_minute_window_forgets_what_is_older_than_six_periods() {
        let t0 = t0();
        let mut w = Windowed::default();
        // 100 per 10 s for the first minute, then 10 per 10 s.
        for i in 1..=12u64 {
            w.add(if i <= 6 { 100 } else { 10 }, 1);
            w.sample_minute(at(t0, 10 * i));
        }
        let r = w.minute();
        assert_eq!(r.sum, 60, "only the last six periods count");
        assert!((r.tps - 1.0).abs() < 1e-9, "{r:?}");
        assert!((r.avgpt - 10.0).abs() < 1e-9);
    }

    #[test]
    fn nothing_added_reads_zero_not_nan() {
        let t0 = t0();
        let mut w = Windowed::default();
        assert_eq!(w.minute(), Rate::default());
        w.sample_minute(at(t0, 10));
        w.sample_minute(at(t0, 10));
        let r = w.minute();
        assert_eq!((r.sum, r.tps, r.avgpt), (0, 0.0, 0.0));
    }

    #[test]
    fn consume_rt_falls_back_to_the_hour_and_failures_count_per_hour() {
        let t0 = t0();
        let mut b = StatsBook::default();
        let s = b.slot("T");
        assert_eq!(b.slot("T"), s, "one slot per topic");
        b.at(s).unwrap().consume_rt.add(30, 1);
        b.at(s).unwrap().consume_rt.add(50, 1);
        b.at(s).unwrap().consume_failed.add(3, 1);
        b.sample(at(t0, 0)); // the first sample also feeds the hour window
        for i in 1..=7u64 {
            b.sample(at(t0, 10 * i)); // a quiet minute: the minute window's sum drops to 0
        }
        let r = b.of("T").unwrap().report("T");
        assert_eq!(r.consume_ok_tps, 0.0);
        assert!((r.consume_rt_ms - 40.0).abs() < 1e-9, "the hour's average: {r:?}");
        assert_eq!(r.consume_failed_last_hour, 3);
        assert_eq!(r.consume_failed_tps, 0.0, "none in the last minute");
    }
}
