//! The remoting protocol: commands, codes, typed headers and JSON bodies. No state, no I/O.

pub mod body;
mod code;
mod command;
pub mod ext;
pub mod header;
mod language;
pub mod order_count;
pub mod receipt;

pub use body::{BodyError, JsonBody};
pub use code::{Code, NamedCode, RequestCode, ResponseCode};
pub use command::{CLIENT_VERSION, FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand};
pub use ext::{CommandHeader, ExtFields, HeaderError};
pub use header::{ExpressionType, PullSysFlag};
pub use language::{LanguageCode, SerializeType};
