//! `RemotingCommand`: one frame of the remoting protocol, decoded.

use bytes::Bytes;

use super::ext::ExtFields;
use super::{LanguageCode, RequestCode, ResponseCode, SerializeType};

/// Flag bit 0: set on responses (`RemotingCommand.markResponseType`).
pub const FLAG_RESPONSE: i32 = 0x1;
/// Flag bit 1: set on oneway requests; the receiver must not answer (`markOnewayRPC`).
pub const FLAG_ONEWAY: i32 = 0x2;

/// The remoting `version` this crate sends: `MQVersion.V5_3_1` (ordinal 475).
///
/// At or above 401 the name server answers routes in standard JSON; at or below 475 a broker that is
/// shutting down does not answer with GO_AWAY (PROTOCOL.md §14.1). We handle GO_AWAY anyway.
pub const CLIENT_VERSION: i32 = 475;

/// A decoded remoting frame: header fields, ext fields and body.
///
/// Both directions use it: requests we send, responses we receive, and the requests a broker sends
/// to its clients. `flag` bit 0 (not the opaque) tells a response from a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemotingCommand {
    /// Request code in a request, response code in a response.
    pub code: i32,
    /// The sender's language.
    pub language: LanguageCode,
    /// The sender's `MQVersion` ordinal.
    pub version: i32,
    /// Request id; a response carries its request's opaque.
    pub opaque: i32,
    /// Flag bits: [`FLAG_RESPONSE`], [`FLAG_ONEWAY`].
    pub flag: i32,
    /// Free text, usually an error message or a store status name.
    pub remark: Option<String>,
    /// Custom header fields, all strings.
    pub ext_fields: ExtFields,
    /// The body; empty means "no body" (the wire cannot tell them apart).
    pub body: Bytes,
    /// The header encoding this frame used, or will use when encoded.
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    /// A request with the given code and no fields; opaque 0 until the sender assigns one.
    pub fn request(code: RequestCode) -> Self {
        Self::raw_request(code as i32)
    }

    /// A request with a numeric code, for codes this crate has no name for.
    pub fn raw_request(code: i32) -> Self {
        Self {
            code,
            language: LanguageCode::RUST,
            version: CLIENT_VERSION,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
            body: Bytes::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// A response to `request` (same opaque, response flag set, same header encoding).
    pub fn response_to(request: &Self, code: ResponseCode) -> Self {
        Self {
            code: code as i32,
            language: LanguageCode::RUST,
            version: CLIENT_VERSION,
            opaque: request.opaque,
            flag: FLAG_RESPONSE,
            remark: None,
            ext_fields: ExtFields::new(),
            body: Bytes::new(),
            serialize_type: request.serialize_type,
        }
    }

    /// Builder-style: set the opaque.
    pub fn with_opaque(mut self, opaque: i32) -> Self {
        self.opaque = opaque;
        self
    }

    /// Builder-style: set the body.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Builder-style: set the remark.
    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    /// Builder-style: write a typed header into the ext fields.
    pub fn with_header<H: super::ext::CommandHeader>(mut self, header: &H) -> Self {
        header.write_to(&mut self.ext_fields);
        self
    }

    /// Builder-style: mark as oneway.
    pub fn oneway(mut self) -> Self {
        self.flag |= FLAG_ONEWAY;
        self
    }

    /// Builder-style: choose the header encoding.
    pub fn with_serialize_type(mut self, ty: SerializeType) -> Self {
        self.serialize_type = ty;
        self
    }

    /// True for responses (flag bit 0).
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// True for oneway requests (flag bit 1).
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// The request code, if this crate knows it.
    pub fn request_code(&self) -> Option<RequestCode> {
        RequestCode::from_i32(self.code)
    }

    /// The response code, if this crate knows it.
    pub fn response_code(&self) -> Option<ResponseCode> {
        ResponseCode::from_i32(self.code)
    }

    /// Decode the ext fields into a typed header.
    pub fn header<H: super::ext::CommandHeader>(&self) -> Result<H, super::ext::HeaderError> {
        H::read_from(&self.ext_fields)
    }

    /// The remark, or "" when there is none.
    pub fn remark_str(&self) -> &str {
        self.remark.as_deref().unwrap_or("")
    }
}
