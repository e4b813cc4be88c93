//! Writes gathered over one pass of the owner loop and handed to each link's writer together:
//! the pulls that one read's answers ask for leave in one system call, not one each (on loopback
//! a send also pays for the peer's receive, so this is most of what a pull costs us to ask).

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use rocketmq_push_core::LinkId;

use super::msg::LinkWriter;

/// Frames gathered this pass are joined while their total stays under this; a larger write
/// (a big send-back) goes as it is, in order, rather than being copied.
const JOIN_UP_TO: usize = 256 * 1024;

/// What the driver asked to write this pass, per link, in order. A link's list is kept (empty)
/// between passes, so gathering allocates nothing once warm.
#[derive(Default)]
pub(super) struct Outgoing {
    pending: Vec<(LinkId, Vec<Bytes>)>,
}

impl Outgoing {
    pub(super) fn push(&mut self, link: LinkId, bytes: Bytes) {
        match self.pending.iter_mut().find(|(l, _)| *l == link) {
            Some((_, frames)) => frames.push(bytes),
            None => self.pending.push((link, vec![bytes])),
        }
    }

    /// Hand all that was gathered to the writers. Returns the links whose peer did not take what
    /// was queued before (the caller closes them).
    pub(super) fn flush(&mut self, links: &HashMap<LinkId, LinkWriter>) -> Vec<LinkId> {
        let mut stalled = Vec::new();
        // Lists of links gone are dropped here.
        self.pending.retain(|(link, _)| links.contains_key(link));
        for (link, frames) in &mut self.pending {
            if !frames.is_empty() && links.get(link).is_some_and(|w| !send(w, frames)) {
                stalled.push(*link);
            }
        }
        stalled
    }

    /// Hand over what was gathered for `link` only (it is about to close; its writer still sends
    /// what it was given before it ends).
    pub(super) fn flush_link(&mut self, link: LinkId, links: &HashMap<LinkId, LinkWriter>) {
        if let Some(at) = self.pending.iter().position(|(l, _)| *l == link) {
            let (_, mut frames) = self.pending.swap_remove(at);
            if let Some(w) = links.get(&link) {
                send(w, &mut frames);
            }
        }
    }
}

/// One write for the lot where it is small, else one per frame; false if the writer's queue is
/// full. Leaves `frames` empty.
fn send(w: &LinkWriter, frames: &mut Vec<Bytes>) -> bool {
    let total: usize = frames.iter().map(Bytes::len).sum();
    if frames.len() == 1 || total > JOIN_UP_TO {
        // Past a full queue the rest is dropped: the link closes as stalled.
        return frames.drain(..).all(|f| w.write(f));
    }
    let mut joined = BytesMut::with_capacity(total);
    for f in frames.drain(..) {
        joined.extend_from_slice(&f);
    }
    w.write(joined.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::msg::MAX_QUEUED_WRITES;

    fn link(id: u64) -> (LinkId, LinkWriter, async_channel::Receiver<Bytes>) {
        let (writes, queued) = async_channel::unbounded();
        let (stop, _) = async_channel::bounded(1);
        (LinkId(id), LinkWriter::new(writes, None, stop), queued)
    }

    fn taken(rx: &async_channel::Receiver<Bytes>) -> Vec<Bytes> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[test]
    fn a_pass_leaves_as_one_write_per_link_in_order() {
        let ((a, wa, ra), (b, wb, rb)) = (link(1), link(2));
        let links = HashMap::from([(a, wa), (b, wb)]);
        let mut out = Outgoing::default();
        for (l, f) in [(a, "a1"), (b, "b1"), (a, "a2"), (a, "a3")] {
            out.push(l, Bytes::from_static(f.as_bytes()));
        }
        assert!(out.flush(&links).is_empty());
        assert_eq!(
            (taken(&ra), taken(&rb)),
            (vec![Bytes::from_static(b"a1a2a3")], vec![Bytes::from_static(b"b1")])
        );
        // Nothing gathered, nothing written; a link that closes takes only its own.
        assert!(out.flush(&links).is_empty() && ra.is_empty());
        out.push(a, Bytes::from_static(b"x"));
        out.push(b, Bytes::from_static(b"y"));
        out.flush_link(b, &links);
        assert_eq!((ra.len(), taken(&rb)), (0, vec![Bytes::from_static(b"y")]));
        out.flush(&links);
        assert_eq!(taken(&ra), [Bytes::from_static(b"x")]);
    }

    #[test]
    fn a_big_frame_is_not_copied_and_order_holds() {
        let (a, wa, ra) = link(1);
        let links = HashMap::from([(a, wa)]);
        let mut out = Outgoing::default();
        let big = Bytes::from(vec![7u8; JOIN_UP_TO]);
        out.push(a, Bytes::from_static(b"before"));
        out.push(a, big.clone());
        out.push(a, Bytes::from_static(b"after"));
        out.flush(&links);
        let got = taken(&ra);
        assert_eq!(got, [Bytes::from_static(b"before"), big.clone(), Bytes::from_static(b"after")]);
        assert_eq!(got[1].as_ptr(), big.as_ptr(), "sent as it was, not copied");
    }

    #[test]
    fn a_peer_that_does_not_read_is_reported_and_a_gone_link_dropped() {
        let ((a, wa, ra), (b, wb, _rb)) = (link(1), link(2));
        let mut links = HashMap::from([(a, wa), (b, wb)]);
        for _ in 0..MAX_QUEUED_WRITES {
            assert!(links[&a].write(Bytes::new()));
        }
        let mut out = Outgoing::default();
        out.push(a, Bytes::from_static(b"more"));
        out.push(b, Bytes::from_static(b"gone"));
        links.remove(&b);
        assert_eq!(out.flush(&links), [a]);
        assert_eq!(ra.len(), MAX_QUEUED_WRITES, "nothing queued past the limit");
        assert!(out.pending.iter().all(|(l, _)| *l == a), "the gone link's list is dropped");
    }
}
