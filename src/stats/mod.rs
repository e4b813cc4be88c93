//! What the consumer counts: counters since start ([`Stats`]) and per-topic rates over a window
//! ([`TopicStats`], see `window.rs`). Both are reported in running info and available to
//! applications.

mod window;

pub(crate) use window::{SAMPLE_EVERY, StatsBook};

/// Monotonic counters since start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Messages pulled and accepted (after tag filtering and deduplication).
    pub pulled: u64,
    /// Messages user code finished successfully.
    pub consumed_ok: u64,
    /// Messages user code failed.
    pub consumed_failed: u64,
    /// CONSUMER_SEND_MSG_BACK requests made.
    pub sent_back: u64,
    /// Send-backs re-sent as normal messages to the retry topic.
    pub sent_back_fallback: u64,
    /// Messages consumed again locally because both ways back failed.
    pub local_retries: u64,
    /// Batches that ran past `consumeTimeout`.
    pub consume_timeouts: u64,
    /// Pulls that failed (error answers, timeouts, lost connections, corrupt bodies).
    pub pull_errors: u64,
    /// Pulls postponed by flow control.
    pub flow_control_delays: u64,
    /// POP: messages acked (ACK_MESSAGE, or their BATCH_ACK_MESSAGE, answered SUCCESS).
    pub pop_acks: u64,
    /// POP: BATCH_ACK_MESSAGE requests answered SUCCESS (each acks two or more messages).
    pub pop_batch_acks: u64,
    /// POP: messages made invisible again for a later retry (CHANGE_MESSAGE_INVISIBLETIME
    /// answered SUCCESS).
    pub pop_retries: u64,
    /// POP: acks and invisibility changes that failed (error answers, timeouts, no route); the
    /// broker hands those messages out again after their invisible time.
    pub pop_request_failures: u64,
    /// POP: results that came after their message's invisible time had passed: not acked, the
    /// broker hands the message out again (as Java's `isPopTimeout`).
    pub pop_expired: u64,
}

/// Rates for one topic, as Java's `ConsumerStatsManager.consumeStatus` reports them and
/// `mqadmin consumerStatus` prints them.
///
/// Window: rates are over the last minute, from samples taken every 10 s (the last 7 kept), so
/// a rate first shows up to 10 s after the work; `consume_failed_last_hour` is over the last hour,
/// from samples every 10 minutes. Retry messages count under the group's retry topic
/// (`%RETRY%group`), as in Java.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct TopicStats {
    /// The topic (namespace stripped).
    pub topic: String,
    /// Messages pulled per second (`pullTPS`; answers that found messages).
    pub pull_tps: f64,
    /// Average pull round trip in ms, long-poll hold included (`pullRT`).
    pub pull_rt_ms: f64,
    /// Messages consumed successfully per second (`consumeOKTPS`).
    pub consume_ok_tps: f64,
    /// Messages failed per second (`consumeFailedTPS`).
    pub consume_failed_tps: f64,
    /// Average time a batch spent with user code in ms (`consumeRT`; the last hour's average
    /// when no batch finished in the last minute, as in Java).
    pub consume_rt_ms: f64,
    /// Messages failed in the last hour (`consumeFailedMsgs`). Sampled every 10 minutes, as in
    /// Java, so it trails the failures by up to 10 minutes; [`Stats::consumed_failed`] counts at
    /// once.
    pub consume_failed_last_hour: u64,
}
