//! Where outgoing frames are finished.

use bytes::BytesMut;

use super::encode_frame;
use crate::protocol::RemotingCommand;

/// Turns every frame this client sends — requests from the [`Driver`](crate::Driver), the
/// simulator's consumers and the blocking tools, and replies to broker requests — into bytes.
/// It is the one place a per-frame step (a signature, a namespace rewrite) belongs.
#[derive(Clone, Debug, Default)]
pub struct Outbound {
    _reserved: (),
}

impl Outbound {
    /// Frames as they are, with no per-frame step.
    pub fn new() -> Self {
        Self::default()
    }

    /// Finish `cmd` and append it to `dst` as one frame.
    pub fn finish(&self, cmd: &RemotingCommand, dst: &mut BytesMut) {
        encode_frame(cmd, dst);
    }

    /// [`finish`](Self::finish) into a buffer of its own.
    pub fn finish_to_bytes(&self, cmd: &RemotingCommand) -> bytes::Bytes {
        let mut b = BytesMut::with_capacity(128 + cmd.body.len());
        self.finish(cmd, &mut b);
        b.freeze()
    }
}
