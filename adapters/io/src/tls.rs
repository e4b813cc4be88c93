//! TLS to name servers and brokers (feature `tls`): rustls driven over plain bytes, so that the
//! run loop (every runtime) and the blocking [`Client`](crate::Client) share one implementation.
//!
//! What to trust is the user's choice, as with Java's `tls.client.*` settings: the system's roots,
//! a CA file, or — Java's test mode (`tls.test.mode.enable`) — any certificate at all. Broker
//! addresses come from routes as IP addresses, and Java checks no host name; certificates issued
//! for names only are accepted with [`Tls::without_host_name_check`], which still checks the chain.

use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

/// A TLS failure, by cause. Carried inside the `io::Error` of a failed connect or a closed link
/// (find it with [`TlsError::of`]); its text names the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The server's certificate did not verify (unknown issuer, expired, wrong name, …).
    #[error("TLS: the server's certificate was refused: {0}")]
    Certificate(String),
    /// The server answered the handshake with something that is not TLS: most likely a plain
    /// (non-TLS) port.
    #[error("TLS: the server does not speak TLS on this port ({0}); is TLS enabled on it?")]
    NotTls(String),
    /// The server closed the connection during the handshake: most likely a plain port that
    /// dropped the client hello, or a server refusing our TLS versions.
    #[error("TLS: the server closed the connection during the handshake; is TLS enabled on this port?")]
    ClosedInHandshake,
    /// The server sent an alert (e.g. it wants a client certificate).
    #[error("TLS: the server refused the handshake: {0}")]
    Alert(String),
    /// Any other TLS protocol failure.
    #[error("TLS: {0}")]
    Protocol(String),
    /// The CA file could not be read or holds no certificate.
    #[error("TLS CA file {path}: {reason}")]
    CaFile {
        /// The file.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The host part of the address is not a valid server name.
    #[error("TLS: {0:?} is not a valid server name")]
    ServerName(String),
}

impl TlsError {
    /// The TLS cause of an I/O error, if it has one.
    pub fn of(e: &io::Error) -> Option<&Self> {
        e.get_ref()?.downcast_ref::<Self>()
    }

    fn from_rustls(e: rustls::Error) -> Self {
        match e {
            rustls::Error::InvalidCertificate(c) => Self::Certificate(format!("{c:?}")),
            rustls::Error::InvalidMessage(m) => Self::NotTls(format!("{m:?}")),
            rustls::Error::AlertReceived(a) => Self::Alert(format!("{a:?}")),
            other => Self::Protocol(other.to_string()),
        }
    }

    fn into_io(self) -> io::Error {
        let kind = match self {
            Self::ClosedInHandshake => io::ErrorKind::ConnectionAborted,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, self)
    }
}

/// How to connect with TLS: what to trust. Cheap to clone.
#[derive(Clone)]
pub struct Tls {
    config: Arc<ClientConfig>,
    verifier: Arc<dyn ServerCertVerifier>,
    what: &'static str,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tls({})", self.what)
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn config(verifier: Arc<dyn ServerCertVerifier>) -> Arc<ClientConfig> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions");
    Arc::new(builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth())
}

impl Tls {
    /// Trust the system's root certificates (as a browser would).
    pub fn system_roots() -> Result<Self, TlsError> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            let reason =
                found.errors.first().map_or_else(|| "no certificates found".to_owned(), ToString::to_string);
            return Err(TlsError::CaFile { path: "(system roots)".into(), reason });
        }
        Self::with_roots(roots, "system roots")
    }

    /// Trust the CA certificates in a PEM file (Java's `tls.client.trustCertPath`).
    pub fn ca_file(path: impl AsRef<Path>) -> Result<Self, TlsError> {
        let path = path.as_ref();
        let fail = |reason: String| TlsError::CaFile { path: path.display().to_string(), reason };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| fail(e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| fail(e.to_string()))?;
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(fail("no usable certificate in it".into()));
        }
        Self::with_roots(roots, "CA file")
    }

    fn with_verifier(verifier: Arc<dyn ServerCertVerifier>, what: &'static str) -> Self {
        Self { config: config(verifier.clone()), verifier, what }
    }

    fn with_roots(roots: RootCertStore, what: &'static str) -> Result<Self, TlsError> {
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| TlsError::Protocol(e.to_string()))?;
        Ok(Self::with_verifier(verifier, what))
    }

    /// Accept any certificate without checking it: Java's test mode (`tls.test.mode.enable`),
    /// for self-signed test brokers. The connection is encrypted but not authenticated.
    pub fn insecure() -> Self {
        let algorithms = provider().signature_verification_algorithms;
        Self::with_verifier(Arc::new(AnyCertificate(algorithms)), "any certificate")
    }

    /// Check the chain but not the host name, as Java does: brokers are reached at the IP
    /// address their route gives, which certificates issued for names do not list.
    pub fn without_host_name_check(self) -> Self {
        Self::with_verifier(Arc::new(AnyName(self.verifier)), self.what)
    }

    /// From the environment: `ROCKETMQ_TLS` = `1`/`true` (system roots), `insecure` (any
    /// certificate), or unset/`0`/`false` (no TLS); `ROCKETMQ_TLS_CA` = a CA file (implies TLS).
    /// `Ok(None)` when TLS is off.
    pub fn from_env() -> Result<Option<Self>, TlsError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        if let Some(ca) = var("ROCKETMQ_TLS_CA") {
            return Self::ca_file(ca).map(Some);
        }
        match var("ROCKETMQ_TLS").as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("0" | "false" | "off") => Ok(None),
            Some("insecure") => Ok(Some(Self::insecure())),
            Some(_) => Self::system_roots().map(Some),
        }
    }

    /// A session for a connection to `addr` (`host:port`).
    pub(crate) fn session(&self, addr: &str) -> io::Result<Session> {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| TlsError::ServerName(host.to_owned()).into_io())?;
        let conn = ClientConnection::new(self.config.clone(), name)
            .map_err(|e| TlsError::from_rustls(e).into_io())?;
        Ok(Session(Arc::new(Mutex::new(conn))))
    }
}

/// Java's test mode: every certificate is accepted; signatures are still checked, so the
/// session keys belong to whoever holds the presented certificate.
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// The chain is checked by `.0`; a certificate valid in every way but the name is accepted.
#[derive(Debug)]
struct AnyName(Arc<dyn ServerCertVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// What [`Session::feed`] found besides the plain bytes.
pub(crate) struct Fed {
    /// The server closed the TLS session (close_notify).
    pub closed: bool,
    /// TLS has records of its own to send (an alert, a key update).
    pub wants_write: bool,
}

/// One connection's TLS state, shared by its reader and its writer. Each call holds the lock
/// only for in-memory work, never across I/O.
#[derive(Clone)]
pub(crate) struct Session(Arc<Mutex<ClientConnection>>);

impl Session {
    fn conn(&self) -> std::sync::MutexGuard<'_, ClientConnection> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The error for a server that hung up mid-handshake.
    pub(crate) fn closed_in_handshake() -> io::Error {
        TlsError::ClosedInHandshake.into_io()
    }

    /// Still handshaking.
    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn().is_handshaking()
    }

    /// Append the records TLS wants sent (handshake, alerts) to `out`.
    pub(crate) fn outgoing(&self, out: &mut Vec<u8>) -> io::Result<()> {
        let mut conn = self.conn();
        while conn.wants_write() {
            conn.write_tls(out)?;
        }
        Ok(())
    }

    /// Encrypt `plain` into records appended to `out` (with anything else TLS has to send).
    pub(crate) fn encrypt(&self, plain: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let mut conn = self.conn();
        if !plain.is_empty() {
            conn.writer().write_all(plain)?;
        }
        while conn.wants_write() {
            conn.write_tls(out)?;
        }
        Ok(())
    }

    /// Take in `cipher` as read from the socket, appending what it decrypts to `plain`.
    pub(crate) fn feed(&self, mut cipher: &[u8], plain: &mut Vec<u8>) -> io::Result<Fed> {
        let mut conn = self.conn();
        let mut closed = false;
        while !cipher.is_empty() {
            let took = conn.read_tls(&mut cipher)?;
            let state = conn.process_new_packets().map_err(|e| TlsError::from_rustls(e).into_io())?;
            let ready = state.plaintext_bytes_to_read();
            if ready > 0 {
                let at = plain.len();
                plain.resize(at + ready, 0);
                conn.reader().read_exact(&mut plain[at..])?;
            }
            closed |= state.peer_has_closed();
            if took == 0 {
                break;
            }
        }
        Ok(Fed { closed, wants_write: conn.wants_write() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_answer_to_the_client_hello_is_named_as_such() {
        let s = Tls::insecure().session("127.0.0.1:10911").unwrap();
        let mut hello = Vec::new();
        s.outgoing(&mut hello).unwrap();
        assert_eq!(hello[0], 0x16, "a handshake record");
        // What a plain RocketMQ server would send: a frame (length, header length, JSON).
        let frame = b"\x00\x00\x00\x20\x00\x00\x00\x1c{\"code\":0,\"flag\":1,\"opaque\":1}";
        let err = s.feed(frame, &mut Vec::new()).err().expect("refused");
        assert!(matches!(TlsError::of(&err), Some(TlsError::NotTls(_))), "{err}");
        assert!(err.to_string().contains("does not speak TLS"), "{err}");
    }

    #[test]
    fn server_names_are_taken_from_the_address() {
        for addr in ["127.0.0.1:10911", "broker-a.example:10911", "[::1]:9876"] {
            Tls::insecure().session(addr).unwrap();
        }
        let err = Tls::insecure().session("bad name!:1").err().unwrap();
        assert!(matches!(TlsError::of(&err), Some(TlsError::ServerName(_))), "{err}");
    }

    #[test]
    fn a_missing_or_empty_ca_file_is_a_clear_error() {
        let err = Tls::ca_file("/nonexistent/ca.pem").unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
        let dir = std::env::temp_dir().join(format!("rmq-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        assert!(matches!(Tls::ca_file(&empty), Err(TlsError::CaFile { .. })));
        let _ = std::fs::remove_dir_all(dir);
    }
}
