//! Errors the caller can cause. Faults of peers are never errors: they become events and retries.

use crate::event::BatchId;

/// Misuse of the [`Consumer`](crate::Consumer) API. The call changed nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// The consumer has terminated; it takes no more input.
    #[error("the consumer has terminated")]
    Terminated,
    /// No batch with this id is waiting for a result (never dispatched, or already answered).
    #[error("{0} is not waiting for a result")]
    UnknownBatch(BatchId),
    /// A command that cannot apply now.
    #[error("invalid command: {0}")]
    InvalidCommand(&'static str),
}
