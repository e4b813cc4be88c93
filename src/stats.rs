//! Counters the consumer keeps; reported in running info and available to applications.

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
}
