//! `LanguageCode` and `SerializeType`.

use std::fmt;

/// The sender's language (`LanguageCode.java`). A byte in the binary header, a name in JSON.
///
/// A newtype rather than an enum: brokers may send codes this crate does not know, and a frame
/// must survive decode → encode → decode unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct LanguageCode(pub u8);

const NAMES: [&str; 14] = [
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS",
    "RUST", "NODE_JS",
];

impl LanguageCode {
    /// JAVA (0): brokers and the Java client.
    pub const JAVA: Self = Self(0);
    /// OTHER (7).
    pub const OTHER: Self = Self(7);
    /// GO (9).
    pub const GO: Self = Self(9);
    /// RUST (12), known to brokers from 4.9.4; older ones store `null` and carry on.
    pub const RUST: Self = Self(12);

    /// The Java enum name, if the code is known.
    pub fn name(self) -> Option<&'static str> {
        NAMES.get(usize::from(self.0)).copied()
    }

    /// Parse a Java enum name, case-insensitively as fastjson does.
    pub fn from_name(name: &str) -> Option<Self> {
        NAMES.iter().position(|n| n.eq_ignore_ascii_case(name)).map(|i| Self(i as u8))
    }
}

impl fmt::Display for LanguageCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "LANGUAGE({})", self.0),
        }
    }
}

/// Header encoding of a frame: the top byte of the second length word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum SerializeType {
    /// 0: the header is fastjson text. What Java and Go clients send, and what 5.x brokers answer in.
    #[default]
    Json,
    /// 1: the compact binary header (`RocketMQSerializable`).
    RocketMq,
}

impl SerializeType {
    /// The type byte on the wire.
    pub fn code(self) -> u8 {
        match self {
            Self::Json => 0,
            Self::RocketMq => 1,
        }
    }

    /// From the type byte; other values are invalid (Java closes the channel).
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Json),
            1 => Some(Self::RocketMq),
            _ => None,
        }
    }

    /// The Java enum name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Json => "JSON",
            Self::RocketMq => "ROCKETMQ",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_case_insensitively() {
        assert_eq!(LanguageCode::from_name("rust"), Some(LanguageCode::RUST));
        assert_eq!(LanguageCode::from_name("GO"), Some(LanguageCode::GO));
        assert_eq!(LanguageCode::from_name("NODE_JS").map(|l| l.0), Some(13));
        assert_eq!(LanguageCode::from_name("FOO"), None);
        assert_eq!(LanguageCode(200).name(), None);
        assert_eq!(LanguageCode::RUST.to_string(), "RUST");
    }
}
