//! Where outgoing frames are finished.

use std::sync::Arc;

use bytes::BytesMut;

use super::Credentials;
use super::encode_frame;
use crate::protocol::RemotingCommand;

/// Turns every frame this client sends — requests from the [`Driver`](crate::Driver), the
/// simulator's consumers and the blocking tools, and replies to broker requests — into bytes.
/// It is the one place a per-frame step belongs: with [`Credentials`], every request is signed
/// here, after everything else was put in it.
#[derive(Clone, Debug, Default)]
pub struct Outbound {
    credentials: Option<Arc<Credentials>>,
}

impl Outbound {
    /// Frames as they are, with no per-frame step.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sign every request with `credentials` (ACL); `None` leaves frames as they are.
    #[must_use]
    pub fn with_credentials(mut self, credentials: Option<Credentials>) -> Self {
        self.credentials = credentials.map(Arc::new);
        self
    }

    /// Finish `cmd` and append it to `dst` as one frame.
    pub fn finish(&self, cmd: &RemotingCommand, dst: &mut BytesMut) {
        match &self.credentials {
            Some(c) if !cmd.is_response() => {
                let mut signed = cmd.clone();
                c.sign(&mut signed);
                encode_frame(&signed, dst);
            }
            _ => encode_frame(cmd, dst),
        }
    }

    /// [`finish`](Self::finish) into a buffer of its own.
    pub fn finish_to_bytes(&self, cmd: &RemotingCommand) -> bytes::Bytes {
        let mut b = BytesMut::with_capacity(128 + cmd.body.len());
        self.finish(cmd, &mut b);
        b.freeze()
    }
}
