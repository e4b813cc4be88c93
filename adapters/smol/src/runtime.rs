//! The run loop's runtime calls, on smol: its reactor and sockets (`rocketmq-push-io`'s
//! `AsyncNet`), tasks on smol's global executor.

use std::future::Future;
use std::io;

use rocketmq_push_io::StartError;
use rocketmq_push_io::run::async_net::{AsyncNet, Spawn};

/// smol's global executor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Global;

impl Spawn for Global {
    fn spawn(&self, _name: &'static str, task: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        smol::spawn(task).detach();
        Ok(())
    }
}

pub(crate) fn current() -> Result<AsyncNet<Global>, StartError> {
    Ok(AsyncNet(Global))
}
