//! Figures for a metrics backend, through the [`metrics`] facade (the Rust ecosystem's `log` for
//! metrics: free without a recorder, exporters for Prometheus, StatsD and OpenTelemetry exist;
//! OpenTelemetry's own SDK would pull a runtime and an API that still moves). Off unless the
//! builder's `.metrics()` asks for them.
//!
//! The names, labels and units are in the crate docs (`## Metrics`).

use std::collections::HashMap;
use std::sync::Mutex;

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};
use rocketmq_push_core::QueueSnapshot;

use crate::{ConsumeHook, HookContext, HookOutcome};

/// Per (topic, success): the counter and the histogram.
type Consumed = HashMap<(String, bool), (Counter, Histogram)>;

/// The consume figures: a consume hook.
pub(crate) struct ConsumeMetrics {
    group: String,
    client_id: String,
    // Handles are registered once per label set: a call then costs an atomic add.
    handles: Mutex<Consumed>,
}

impl ConsumeMetrics {
    pub(crate) fn new(group: &str, client_id: &str) -> Self {
        Self { group: group.to_owned(), client_id: client_id.to_owned(), handles: Mutex::default() }
    }
}

impl ConsumeHook for ConsumeMetrics {
    fn after(&self, ctx: &HookContext<'_>, outcome: &HookOutcome<'_>) {
        let Some(first) = ctx.messages.first() else { return };
        let success = outcome.success();
        let mut handles = self.handles.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (count, time) = handles.entry((first.topic.to_string(), success)).or_insert_with(|| {
            let labels = [
                ("topic", first.topic.to_string()),
                ("consumer_group", self.group.clone()),
                ("client_id", self.client_id.clone()),
                ("invocation_status", if success { "success" } else { "failure" }.to_owned()),
            ];
            (
                counter!("rocketmq_consume_messages_total", &labels),
                histogram!("rocketmq_process_time", &labels),
            )
        });
        count.increment(ctx.messages.len() as u64);
        time.record(outcome.elapsed.as_secs_f64() * 1000.0);
    }
}

/// The held-queue figures, sampled from the consumer's snapshot.
pub(crate) struct QueueMetrics {
    group: String,
    client_id: String,
    /// Per topic: cached messages, cached bytes, lag.
    gauges: HashMap<String, [Gauge; 3]>,
}

impl QueueMetrics {
    pub(crate) fn new(group: &str, client_id: &str) -> Self {
        Self { group: group.to_owned(), client_id: client_id.to_owned(), gauges: HashMap::new() }
    }

    /// Publish per-topic sums of `queues`; a topic no longer held reads zero.
    pub(crate) fn sample(&mut self, queues: &[QueueSnapshot]) {
        let mut sums: HashMap<&str, [f64; 3]> = HashMap::new();
        for q in queues {
            let s = sums.entry(&q.queue.topic).or_default();
            s[0] += q.cached_count as f64;
            s[1] += q.cached_bytes as f64;
            s[2] += q.lag().unwrap_or(0) as f64;
        }
        for (topic, g) in &self.gauges {
            if !sums.contains_key(topic.as_str()) {
                g.iter().for_each(|g| g.set(0.0));
            }
        }
        for (topic, s) in sums {
            let g = self.gauges.entry(topic.to_owned()).or_insert_with(|| {
                let labels = [
                    ("topic", topic.to_owned()),
                    ("consumer_group", self.group.clone()),
                    ("client_id", self.client_id.clone()),
                ];
                [
                    gauge!("rocketmq_consumer_cached_messages", &labels),
                    gauge!("rocketmq_consumer_cached_bytes", &labels),
                    gauge!("rocketmq_consumer_lag_messages", &labels),
                ]
            });
            for (g, v) in g.iter().zip(s) {
                g.set(v);
            }
        }
    }
}
