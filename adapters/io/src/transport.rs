//! How a connection is carried: plain TCP, or TLS when the `tls` feature is built and the user
//! asked for it. The run loop and the blocking client ask for a [`Session`] per connection and
//! see the same calls either way; without the feature a session cannot exist.

use std::io;

/// What a connection is wrapped in. The default is plain TCP.
#[derive(Clone, Debug, Default)]
pub struct Transport {
    #[cfg(feature = "tls")]
    tls: Option<crate::Tls>,
}

impl Transport {
    /// TLS with `tls`, or plain TCP with `None`.
    #[cfg(feature = "tls")]
    pub fn with_tls(tls: Option<crate::Tls>) -> Self {
        Self { tls }
    }

    /// True when connections use TLS.
    pub fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// The TLS session for a new connection to `addr`, or `None` for plain TCP.
    pub(crate) fn session(&self, addr: &str) -> io::Result<Option<Session>> {
        #[cfg(feature = "tls")]
        return self.tls.as_ref().map(|t| t.session(addr)).transpose();
        #[cfg(not(feature = "tls"))]
        {
            let _ = addr;
            Ok(None)
        }
    }
}

#[cfg(feature = "tls")]
pub(crate) use crate::tls::Session;

/// What [`Session::feed`] found besides the plain bytes.
#[cfg(not(feature = "tls"))]
pub(crate) struct Fed {
    /// The server closed the TLS session (close_notify).
    pub closed: bool,
    /// TLS has records of its own to send (an alert, a key update).
    pub wants_write: bool,
}

/// Without TLS built in there are no sessions.
#[cfg(not(feature = "tls"))]
pub(crate) enum Session {}

#[cfg(not(feature = "tls"))]
#[allow(clippy::unused_self)]
impl Session {
    pub(crate) fn is_handshaking(&self) -> bool {
        match *self {}
    }
    pub(crate) fn outgoing(&self, _: &mut Vec<u8>) -> io::Result<()> {
        match *self {}
    }
    pub(crate) fn encrypt(&self, _: &[u8], _: &mut Vec<u8>) -> io::Result<()> {
        match *self {}
    }
    pub(crate) fn feed(&self, _: &[u8], _: &mut Vec<u8>) -> io::Result<Fed> {
        match *self {}
    }
    pub(crate) fn closed_in_handshake() -> io::Error {
        io::Error::from(io::ErrorKind::ConnectionAborted)
    }
}

#[cfg(not(feature = "tls"))]
impl Clone for Session {
    fn clone(&self) -> Self {
        match *self {}
    }
}
