//! ACL request signing, as Java's `AclClientRPCHook` does it (PROTOCOL.md §14.3): every request
//! carries `AccessKey` (and `SecurityToken` when there is one) and a `Signature`, the Base64 of an
//! HMAC-SHA1 keyed with the secret key over the values of all ext fields in key order, then the
//! body. The broker recomputes it from the fields it received, so signing what is sent, after
//! everything else was added, is what makes it match. Replies to broker requests are not signed
//! (Java's hook does nothing after a response either).

use std::fmt;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha1::Sha1;

use crate::protocol::{ExtFields, RemotingCommand};

/// The ext field naming the access key.
pub const ACCESS_KEY: &str = "AccessKey";
/// The ext field holding the security token (temporary credentials).
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// The ext field holding the signature.
pub const SIGNATURE: &str = "Signature";

/// An access key and its secret (Java's `SessionCredentials`). The secret and the token never
/// appear in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    access_key: String,
    secret_key: String,
    security_token: Option<String>,
}

impl Credentials {
    /// `accessKey` and `secretKey`.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Self { access_key: access_key.into(), secret_key: secret_key.into(), security_token: None }
    }

    /// With `securityToken` (temporary credentials); an empty token is none.
    #[must_use]
    pub fn with_security_token(mut self, token: impl Into<String>) -> Self {
        self.security_token = Some(token.into()).filter(|t: &String| !t.is_empty());
        self
    }

    /// The access key (not secret: it travels in every request).
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// Add `AccessKey`, `SecurityToken` and `Signature` to a request.
    pub fn sign(&self, cmd: &mut RemotingCommand) {
        cmd.ext_fields.insert(ACCESS_KEY, self.access_key.as_str());
        if let Some(t) = &self.security_token {
            cmd.ext_fields.insert(SECURITY_TOKEN, t.as_str());
        }
        let signature = signature(&cmd.ext_fields, &cmd.body, &self.secret_key);
        cmd.ext_fields.insert(SIGNATURE, signature);
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field("security_token", &self.security_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The signature of `fields` (without any `Signature` already there) and `body` under `secret`.
pub fn signature(fields: &ExtFields, body: &[u8], secret: &str) -> String {
    let mut sorted: Vec<(&str, &str)> = fields.iter().filter(|(k, _)| *k != SIGNATURE).collect();
    // Java's TreeMap<String, …> orders by UTF-16 code units (the same as bytes for the ASCII names
    // every header uses).
    sorted.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    // HMAC takes a key of any length: this cannot fail.
    let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(secret.as_bytes()) else { return String::new() };
    for (_, v) in sorted {
        mac.update(v.as_bytes());
    }
    mac.update(body);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RequestCode;

    #[test]
    fn the_secret_is_never_shown() {
        let c = Credentials::new("ak-1", "very-secret-sk").with_security_token("tok-secret");
        let shown = format!("{c:?} {c:#?}");
        assert!(shown.contains("ak-1"));
        assert!(!shown.contains("very-secret-sk") && !shown.contains("tok-secret"), "{shown}");
    }

    #[test]
    fn signing_adds_the_fields_and_covers_body_and_order() {
        let c = Credentials::new("ak", "sk");
        let mut a = RemotingCommand::request(RequestCode::PullMessage);
        a.ext_fields.insert("topic", "T");
        a.ext_fields.insert("queueId", "1");
        let mut b = RemotingCommand::request(RequestCode::PullMessage);
        b.ext_fields.insert("queueId", "1");
        b.ext_fields.insert("topic", "T");
        c.sign(&mut a);
        c.sign(&mut b);
        assert_eq!(a.ext_fields.get(ACCESS_KEY), Some("ak"));
        assert_eq!(a.ext_fields.get(SECURITY_TOKEN), None);
        assert_eq!(
            a.ext_fields.get(SIGNATURE),
            b.ext_fields.get(SIGNATURE),
            "insertion order does not matter"
        );
        let mut d =
            RemotingCommand::request(RequestCode::PullMessage).with_body(bytes::Bytes::from_static(b"x"));
        d.ext_fields.insert("topic", "T");
        d.ext_fields.insert("queueId", "1");
        c.sign(&mut d);
        assert_ne!(a.ext_fields.get(SIGNATURE), d.ext_fields.get(SIGNATURE), "the body counts");
        // Signing again (a resent request) replaces the signature rather than signing it.
        let first = a.ext_fields.get(SIGNATURE).map(str::to_owned);
        c.sign(&mut a);
        assert_eq!(a.ext_fields.get(SIGNATURE).map(str::to_owned), first);
    }
}
