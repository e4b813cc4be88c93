//! Frames out of a byte stream that arrives in pieces of any size.
//!
//! A read usually holds several whole frames and the start of one more. The whole ones are
//! decoded where they lie (their bodies, and so the messages in them, are slices of the read);
//! only a frame split across reads is copied, and only as much of the next read as it lacks.

use bytes::{Bytes, BytesMut};

use super::{DecodeError, RemotingCodec};
use crate::protocol::RemotingCommand;

/// One connection's reading side: push what was read, then take frames until `Ok(None)`.
#[derive(Debug, Default)]
pub struct FrameReader {
    /// The frame begun in an earlier piece (never more than one frame).
    partial: BytesMut,
    /// What is left of the last piece pushed.
    piece: Bytes,
}

impl FrameReader {
    /// A reader with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes read. Call [`next`](Self::next) until it returns `Ok(None)` before pushing more;
    /// a piece pushed earlier than that is joined to what is left (a copy).
    pub fn push(&mut self, bytes: Bytes) {
        if self.piece.is_empty() {
            self.piece = bytes;
        } else {
            let mut joined = BytesMut::with_capacity(self.piece.len() + bytes.len());
            joined.extend_from_slice(&self.piece);
            joined.extend_from_slice(&bytes);
            self.piece = joined.freeze();
        }
    }

    /// The next whole frame, `Ok(None)` if the bytes pushed end inside one, or why the stream
    /// is corrupt (the connection should close). Checks the frame size limit before copying
    /// or reserving anything.
    pub fn next(&mut self, codec: &RemotingCodec) -> Result<Option<RemotingCommand>, DecodeError> {
        loop {
            if self.partial.is_empty() {
                if let Some(frame) = codec.decode_bytes(&mut self.piece)? {
                    return Ok(Some(frame));
                }
                // The start of a frame (or nothing): it waits for the rest.
                self.partial.extend_from_slice(&self.piece);
                self.piece.clear();
                return Ok(None);
            }
            match codec.missing(&self.partial)? {
                0 => return codec.decode(&mut self.partial),
                _ if self.piece.is_empty() => return Ok(None),
                lacking => {
                    let take = lacking.min(self.piece.len());
                    self.partial.reserve(lacking);
                    self.partial.extend_from_slice(&self.piece.split_to(take));
                }
            }
        }
    }

    /// Bytes of an incomplete frame held (0 between frames).
    pub fn buffered(&self) -> usize {
        self.partial.len() + self.piece.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RequestCode;

    /// Frames with bodies of assorted sizes (0 to a few KiB), and their bytes end to end.
    fn stream() -> (Vec<(i32, Bytes)>, Bytes) {
        let codec = RemotingCodec::new();
        let mut wire = BytesMut::new();
        let mut sent = Vec::new();
        for i in 0..40i32 {
            let body = Bytes::from(vec![i as u8; (i as usize * 97) % 3000]);
            let cmd =
                RemotingCommand::request(RequestCode::PullMessage).with_opaque(i).with_body(body.clone());
            codec.encode(&cmd, &mut wire);
            sent.push((i, body));
        }
        (sent, wire.freeze())
    }

    fn read_in_pieces(wire: &Bytes, size: impl Fn(usize) -> usize) -> (Vec<(i32, Bytes)>, usize) {
        let codec = RemotingCodec::new();
        let mut r = FrameReader::new();
        let mut got = Vec::new();
        let (mut at, mut n) = (0, 0);
        while at < wire.len() {
            let end = (at + size(n).max(1)).min(wire.len());
            r.push(wire.slice(at..end));
            while let Some(cmd) = r.next(&codec).unwrap() {
                got.push((cmd.opaque, cmd.body));
            }
            at = end;
            n += 1;
        }
        (got, r.buffered())
    }

    #[test]
    fn frames_come_out_whole_and_in_order_however_the_stream_is_cut() {
        let (sent, wire) = stream();
        for size in [1, 2, 3, 4, 5, 7, 64, 1000, 4096, 65536] {
            let (got, left) = read_in_pieces(&wire, |_| size);
            assert_eq!(got, sent, "pieces of {size}");
            assert_eq!(left, 0, "nothing held between frames");
        }
        // Irregular cuts, landing inside length fields, headers and bodies alike.
        let (got, left) = read_in_pieces(&wire, |n| (n * 7919) % 5003);
        assert_eq!((got, left), (sent, 0));
    }

    #[test]
    fn whole_frames_in_a_piece_are_not_copied() {
        let (_, wire) = stream();
        let codec = RemotingCodec::new();
        let mut r = FrameReader::new();
        r.push(wire.clone());
        let range = wire.as_ptr_range();
        let mut n = 0;
        while let Some(cmd) = r.next(&codec).unwrap() {
            if !cmd.body.is_empty() {
                assert!(range.contains(&cmd.body.as_ptr()), "the body is a slice of the read");
            }
            n += 1;
        }
        assert_eq!(n, 40);
    }

    #[test]
    fn a_corrupt_or_oversized_length_fails_before_anything_is_held() {
        let codec = RemotingCodec::with_max_frame_size(1024);
        for (bytes, split) in [(&[0u8, 0, 0, 2, 1, 2][..], 2), (&[0, 0, 0x10, 0, 1, 2, 3][..], 3)] {
            let mut r = FrameReader::new();
            // Cut inside the length field: the first piece waits, the second fails.
            r.push(Bytes::copy_from_slice(&bytes[..split]));
            assert!(r.next(&codec).unwrap().is_none());
            r.push(Bytes::copy_from_slice(&bytes[split..]));
            assert!(r.next(&codec).is_err());
            assert!(r.partial.capacity() < 1024, "nothing reserved for the declared length");
        }
    }

    #[test]
    fn a_piece_pushed_before_draining_is_joined() {
        let (sent, wire) = stream();
        let codec = RemotingCodec::new();
        let mut r = FrameReader::new();
        let mid = wire.len() / 2;
        r.push(wire.slice(..mid));
        r.push(wire.slice(mid..));
        let got: Vec<_> =
            std::iter::from_fn(|| r.next(&codec).unwrap()).map(|c| (c.opaque, c.body)).collect();
        assert_eq!(got, sent);
    }
}
