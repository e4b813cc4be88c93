//! The application's end of a running consumer.

use async_channel::{Receiver, Sender};
use rocketmq_push_core::{Command, UsageError};

use super::msg::{Msg, Snapshot};

/// What an adapter's `PushConsumer` holds: a way to send commands and to learn that the
/// consumer has terminated.
#[derive(Debug)]
pub struct Handle {
    inbox: Sender<Msg>,
    done: Receiver<()>,
}

impl Handle {
    pub(super) fn new(inbox: Sender<Msg>, done: Receiver<()>) -> Self {
        Self { inbox, done }
    }

    /// Send a command (suspend, resume, subscribe, shutdown, …); refusals are logged.
    pub fn command(&self, c: Command) {
        let _ = self.inbox.try_send(Msg::Command(c));
    }

    /// Send a command and wait for the consumer's verdict on it: `Ok` once it took effect (or
    /// began to: a seek's broker lookups answer later, as events), the refusal otherwise.
    pub async fn checked_command(&self, c: Command) -> Result<(), UsageError> {
        let (tx, rx) = async_channel::bounded(1);
        self.inbox.try_send(Msg::Checked(c, tx)).map_err(|_| UsageError::Terminated)?;
        rx.recv().await.unwrap_or(Err(UsageError::Terminated))
    }

    /// What the consumer holds and has counted now; None once it terminated.
    pub async fn snapshot(&self) -> Option<Snapshot> {
        let (tx, rx) = async_channel::bounded(1);
        self.inbox.try_send(Msg::Snapshot(tx)).ok()?;
        rx.recv().await.ok()
    }

    /// Ask for a graceful shutdown and wait until it finished.
    pub async fn shutdown(&self) {
        self.command(Command::Shutdown);
        self.terminated().await;
    }

    /// What every adapter's `PushConsumer` does when dropped without `shutdown`: ask for the same
    /// graceful shutdown and return at once. The shutdown goes on in the background (the
    /// consumer's own thread, or a task on the runtime it was started on) and completes — in-flight
    /// batches finish, offsets are committed, the client unregisters — as long as the process and
    /// that runtime live; a process that exits first leaves the last offsets uncommitted, and their
    /// messages are delivered again (at least once, never lost).
    pub fn shutdown_in_background(&self) {
        if !self.is_terminated() {
            self.command(Command::Shutdown);
        }
    }

    /// Wait until the consumer terminated (its owner task ended).
    pub async fn terminated(&self) {
        // Never sent on: it closes when the owner task drops its end.
        let _ = self.done.recv().await;
    }

    /// True once the consumer terminated.
    pub fn is_terminated(&self) -> bool {
        self.done.is_closed()
    }
}
