//! Writes the owner makes itself: what the socket takes at once goes out during the owner's pass,
//! without a hop to the link's writer task. A pull that an answer asks for then leaves before the
//! answer's messages are consumed, and no task is woken for it.
//!
//! Order is kept by one rule: the owner writes directly only while nothing it handed to the
//! writer task is still unwritten. The writer counts each queued write down once it is on the
//! socket (or failed); the owner is the only one that counts up.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A second handle on a link's socket, and the count of writes queued for its writer task.
#[derive(Debug)]
pub(crate) struct Direct {
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
    queued: Arc<AtomicUsize>,
}

/// The writer task's end of the count.
#[derive(Debug)]
pub(crate) struct Queued(Arc<AtomicUsize>);

impl Queued {
    /// One queued write is on the socket, or failed (then the link closes).
    pub(crate) fn done(&self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

impl Direct {
    /// Direct writes through `fd`, a duplicate of the writer's socket.
    #[cfg(unix)]
    pub(crate) fn new(fd: std::os::fd::OwnedFd) -> (Self, Queued) {
        let queued = Arc::new(AtomicUsize::new(0));
        (Self { fd, queued: queued.clone() }, Queued(queued))
    }

    /// Write what the socket takes of `bytes` now, if the writer task has nothing left to write:
    /// how many bytes were taken (0 when the socket is full, the writer busy, or the send failed;
    /// the writer task then writes the rest, and reports a failure).
    pub(crate) fn send(&self, bytes: &[u8]) -> usize {
        if self.queued.load(Ordering::Acquire) != 0 {
            return 0;
        }
        self.send_now(bytes)
    }

    #[cfg(unix)]
    fn send_now(&self, bytes: &[u8]) -> usize {
        use rustix::net::SendFlags;
        // DONTWAIT whatever mode the runtime set on the socket (never wait here);
        // NOSIGNAL: a closed peer is an error for the writer task to report, not a SIGPIPE.
        rustix::net::send(&self.fd, bytes, SendFlags::DONTWAIT | SendFlags::NOSIGNAL).unwrap_or(0)
    }

    #[cfg(not(unix))]
    fn send_now(&self, _bytes: &[u8]) -> usize {
        0
    }

    /// A write is handed to the writer task.
    pub(crate) fn queue(&self) {
        self.queued.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    use super::*;

    fn pair() -> (Direct, Queued, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (theirs, _) = l.accept().unwrap();
        let (d, q) = Direct::new(ours.as_fd().try_clone_to_owned().unwrap());
        (d, q, theirs)
    }

    #[test]
    fn writes_directly_only_while_the_writer_has_nothing_queued() {
        let (d, q, mut theirs) = pair();
        assert_eq!(d.send(b"abc"), 3);
        d.queue();
        assert_eq!(d.send(b"def"), 0, "the writer has a write queued: it goes first");
        q.done();
        assert_eq!(d.send(b"ghi"), 3);
        let mut got = [0u8; 6];
        theirs.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"abcghi");
    }

    #[test]
    fn a_full_socket_takes_part_or_nothing_and_never_blocks() {
        let (d, _q, _theirs) = pair();
        let chunk = vec![0u8; 1 << 20];
        // The peer never reads: the buffers fill and the sends come back short, then empty.
        let mut taken = Vec::new();
        for _ in 0..64 {
            taken.push(d.send(&chunk));
        }
        assert!(taken.iter().any(|n| *n < chunk.len()), "{taken:?}");
        assert_eq!(taken.last(), Some(&0), "{taken:?}");
    }

    #[test]
    fn a_closed_peer_takes_nothing_and_raises_no_signal() {
        let (d, _q, theirs) = pair();
        drop(theirs);
        // The first send may still be taken (the reset comes back with it); later ones fail.
        let sent: Vec<usize> = (0..16).map(|_| d.send(b"x")).collect();
        assert_eq!(sent.last(), Some(&0), "{sent:?}");
    }
}
