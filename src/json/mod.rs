//! A small JSON reader that accepts what fastjson writes, and a writer for what fastjson reads.
//!
//! Why hand-written rather than serde_json plus a pre-pass: fastjson bodies are not JSON. Map keys
//! may be bare integers (`{0:"127.0.0.1:10911"}`) or whole objects
//! (`{{"brokerName":"b","queueId":0,"topic":"t"}:100}`), and the parser side also allows unquoted
//! names, single quotes and stray commas (PROTOCOL.md §7). A pre-pass would have to re-tokenise
//! all of that anyway to quote object keys; a 400-line reader that keeps any value as a key is both
//! simpler and safe to fuzz. Output is strict JSON, which fastjson accepts.
//!
//! Bounds: nesting is limited to [`MAX_DEPTH`]; every allocation is proportional to input consumed.

mod write;

use std::fmt;

pub use write::JsonWriter;
pub(crate) use write::push_int;

/// Deepest nesting the reader accepts; real bodies nest at most 5 levels.
pub const MAX_DEPTH: usize = 64;

/// A parsed JSON (or fastjson) value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// Any other number.
    Float(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Self>),
    /// An object; keys are values because fastjson writes non-string keys bare.
    Object(Vec<(Self, Self)>),
}

/// Where and why JSON could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("JSON at byte {offset}: {what}")]
pub struct JsonError {
    /// Byte offset in the input.
    pub offset: usize,
    /// What was wrong.
    pub what: &'static str,
}

impl Value {
    /// Parse one value; trailing white space is allowed, anything else after it is an error.
    pub fn parse(input: &[u8]) -> Result<Self, JsonError> {
        let mut r = Reader { s: input, pos: 0 };
        let v = r.value(0)?;
        r.ws();
        if r.pos != input.len() {
            return Err(r.err("trailing characters after the value"));
        }
        Ok(v)
    }

    /// Field of an object, by string key (fastjson keys are case-sensitive).
    pub fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Self::Object(entries) => entries.iter().find_map(|(k, v)| match k {
                Self::String(s) if s == key => Some(v),
                _ => None,
            }),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// An integer: a JSON integer, an integral float, or a string holding one (BrowserCompatible
    /// output quotes longs beyond ±2^53).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            Self::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(*f as i64),
            Self::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// A float.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Int(i) => Some(*i as f64),
            Self::Float(f) => Some(*f),
            Self::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// A boolean (also `"true"` / `"false"` strings).
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            Self::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
            Self::String(s) if s.eq_ignore_ascii_case("false") => Some(false),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Self]> {
        match self {
            Self::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The entries, if this is an object.
    pub fn as_object(&self) -> Option<&[(Self, Self)]> {
        match self {
            Self::Object(o) => Some(o),
            _ => None,
        }
    }

    /// A short name of the variant, for errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Bool(_) => "a boolean",
            Self::Int(_) | Self::Float(_) => "a number",
            Self::String(_) => "a string",
            Self::Array(_) => "an array",
            Self::Object(_) => "an object",
        }
    }
}

impl fmt::Display for Value {
    /// Strict JSON; object keys that are not strings are written as JSON strings of their JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut w = JsonWriter::new();
        w.value(self);
        f.write_str(&w.finish())
    }
}

/// An object read one entry at a time, for a caller that puts each field where it belongs
/// instead of building a tree first (the JSON header of every frame). Accepts exactly what
/// [`Value::parse`] accepts.
pub(crate) struct ObjectEntries<'a> {
    r: Reader<'a>,
    first: bool,
}

impl<'a> ObjectEntries<'a> {
    /// The object `input` holds; `Ok(None)` if it holds another valid value.
    pub(crate) fn of(input: &'a [u8]) -> Result<Option<Self>, JsonError> {
        let mut r = Reader { s: input, pos: 0 };
        r.ws();
        if r.peek() != Some(b'{') {
            Value::parse(input)?;
            return Ok(None);
        }
        r.pos += 1;
        Ok(Some(Self { r, first: true }))
    }

    /// The next key, or None after the closing `}`; each key's value must be read next.
    pub(crate) fn key(&mut self) -> Result<Option<Value>, JsonError> {
        let key = self.r.next_key(0, self.first)?;
        self.first = false;
        Ok(key)
    }

    /// The value of the key just read.
    pub(crate) fn value(&mut self) -> Result<Value, JsonError> {
        self.r.value(1)
    }

    /// The value of the key just read: if it is an object, its entries go to `f` one at a
    /// time and None is returned; any other value is returned as it is.
    pub(crate) fn object_value(
        &mut self,
        mut f: impl FnMut(Value, Value),
    ) -> Result<Option<Value>, JsonError> {
        self.r.ws();
        if self.r.peek() != Some(b'{') {
            return self.value().map(Some);
        }
        self.r.pos += 1;
        let mut first = true;
        while let Some(k) = self.r.next_key(1, first)? {
            first = false;
            let v = self.r.value(2)?;
            f(k, v);
        }
        Ok(None)
    }

    /// After the closing `}`: nothing but white space may follow.
    pub(crate) fn finish(mut self) -> Result<(), JsonError> {
        self.r.ws();
        if self.r.pos != self.r.s.len() {
            return Err(self.r.err("trailing characters after the value"));
        }
        Ok(())
    }
}

struct Reader<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn err(&self, what: &'static str) -> JsonError {
        JsonError { offset: self.pos, what }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r' | 0x0c) = self.peek() {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        self.ws();
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(q @ (b'"' | b'\'')) => self.string(q).map(Value::String),
            Some(b'-' | b'+' | b'0'..=b'9' | b'.') => self.number(),
            Some(b) if is_ident_start(b) => {
                let start = self.pos;
                match self.ident() {
                    "null" => Ok(Value::Null),
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    _ => Err(JsonError { offset: start, what: "unknown bare word" }),
                }
            }
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    fn ident(&mut self) -> &str {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if is_ident_start(b) || b.is_ascii_digit() {
                self.pos += 1;
            } else {
                break;
            }
        }
        // Identifier bytes are ASCII, so this is valid UTF-8.
        std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("")
    }

    /// Skip fastjson's "arbitrary commas"; returns true if any were skipped.
    fn commas(&mut self) -> bool {
        let mut any = false;
        loop {
            self.ws();
            if self.peek() == Some(b',') {
                self.pos += 1;
                any = true;
            } else {
                return any;
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.pos += 1; // '{'
        let mut entries = Vec::new();
        while let Some(key) = self.next_key(depth, entries.is_empty())? {
            let value = self.value(depth + 1)?;
            entries.push((key, value));
        }
        Ok(Value::Object(entries))
    }

    /// Inside an object (after its `{`, `first`, or after an entry's value): the next key and
    /// its `:`, or None once the closing `}` is consumed.
    fn next_key(&mut self, depth: usize, first: bool) -> Result<Option<Value>, JsonError> {
        // After `{`, leading commas; after a value, the separating ones.
        let comma = self.commas();
        self.ws();
        match self.peek() {
            Some(b'}') => {
                self.pos += 1;
                return Ok(None);
            }
            None => return Err(self.err("unterminated object")),
            _ if first || comma => {}
            _ => return Err(self.err("expected ',' or '}' in an object")),
        }
        let key = match self.peek() {
            // fastjson AllowUnQuotedFieldNames: a bare name is a string key.
            Some(b) if is_ident_start(b) => {
                let w = self.ident();
                match w {
                    "null" => Value::Null,
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    _ => Value::String(w.to_owned()),
                }
            }
            // Any value may be a key: `{0:"addr"}`, `{{"topic":..}:100}`.
            _ => self.value(depth + 1)?,
        };
        self.ws();
        if self.peek() != Some(b':') {
            return Err(self.err("expected ':' after an object key"));
        }
        self.pos += 1;
        Ok(Some(key))
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.commas();
        loop {
            self.ws();
            match self.peek() {
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                None => return Err(self.err("unterminated array")),
                _ => {}
            }
            items.push(self.value(depth + 1)?);
            let comma = self.commas();
            self.ws();
            match self.peek() {
                Some(b']') => {}
                _ if comma => {}
                None => return Err(self.err("unterminated array")),
                _ => return Err(self.err("expected ',' or ']' in an array")),
            }
        }
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        while let Some(b'-' | b'+' | b'0'..=b'9' | b'.' | b'e' | b'E') = self.peek() {
            self.pos += 1;
        }
        // fastjson may suffix longs with L, floats with F/D when writing with WriteClassName.
        if let Some(b'L' | b'l' | b'F' | b'f' | b'D' | b'd') = self.peek() {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
        let text = text.trim_end_matches(['L', 'l', 'F', 'f', 'D', 'd']);
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::Int(i));
        }
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Value::Float(f)),
            _ => Err(JsonError { offset: start, what: "invalid number" }),
        }
    }

    fn string(&mut self, quote: u8) -> Result<String, JsonError> {
        self.pos += 1;
        // Most strings hold no escape: up to the first quote or backslash, copied at once.
        let rest = &self.s[self.pos..];
        let plain = rest.iter().position(|&b| b == quote || b == b'\\').unwrap_or(rest.len());
        if rest.get(plain) == Some(&quote) {
            self.pos += plain + 1;
            return Ok(match std::str::from_utf8(&rest[..plain]) {
                Ok(s) => s.to_owned(),
                Err(_) => String::from_utf8_lossy(&rest[..plain]).into_owned(),
            });
        }
        let mut out: Vec<u8> = Vec::with_capacity(plain + 16);
        out.extend_from_slice(&rest[..plain]);
        self.pos += plain;
        loop {
            let Some(b) = self.peek() else {
                return Err(self.err("unterminated string"));
            };
            self.pos += 1;
            match b {
                _ if b == quote => break,
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.err("unterminated escape"));
                    };
                    self.pos += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\'' => '\'',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return Err(JsonError { offset: self.pos - 1, what: "invalid escape" }),
                    };
                    let mut buf = [0; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                _ => out.push(b),
            }
        }
        // fastjson writes UTF-8; anything else is kept readable rather than rejected.
        Ok(match String::from_utf8(out) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self.s.get(self.pos..self.pos + 4).ok_or_else(|| self.err("short \\u escape"))?;
        let mut v = 0u32;
        for d in digits {
            let x = (*d as char).to_digit(16).ok_or_else(|| self.err("invalid \\u escape"))?;
            v = v * 16 + x;
        }
        self.pos += 4;
        Ok(v)
    }

    /// `\uXXXX`, joining surrogate pairs; a lone surrogate becomes U+FFFD (Rust strings cannot
    /// hold one; Java's can).
    fn unicode_escape(&mut self) -> Result<char, JsonError> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) && self.s.get(self.pos..self.pos + 2) == Some(b"\\u") {
            let save = self.pos;
            self.pos += 2;
            let lo = self.hex4()?;
            if (0xDC00..0xE000).contains(&lo) {
                let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                return Ok(char::from_u32(c).unwrap_or('\u{FFFD}'));
            }
            self.pos = save;
        }
        Ok(char::from_u32(hi).unwrap_or('\u{FFFD}'))
    }
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Value {
        Value::parse(s.as_bytes()).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn integer_keys_and_object_keys() {
        let v = p(r#"{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.2:10911"}}"#);
        let addrs = v.get("brokerAddrs").unwrap().as_object().unwrap();
        assert_eq!(addrs[0].0, Value::Int(0));
        assert_eq!(addrs[1].1.as_str(), Some("127.0.0.2:10911"));

        let v = p(
            r#"{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:200,{"brokerName":"b","queueId":0,"topic":"T"}:100}}"#,
        );
        let t = v.get("offsetTable").unwrap().as_object().unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].0.get("queueId"), Some(&Value::Int(1)));
        assert_eq!(t[1].1.as_i64(), Some(100));
    }

    #[test]
    fn fastjson_leniency() {
        assert_eq!(p("{a:1,,'b':'x',}").get("b").unwrap().as_str(), Some("x"));
        assert_eq!(p("[,1,,2,]"), Value::Array(vec![Value::Int(1), Value::Int(2)]));
        assert_eq!(p("12L"), Value::Int(12));
        assert_eq!(p(r#""9007199254740993""#).as_i64(), Some(9_007_199_254_740_993));
        assert_eq!(p("1.5").as_f64(), Some(1.5));
    }

    #[test]
    fn strings_with_and_without_escapes_read_alike() {
        // Plain (copied at once), an escape after a plain run, the other quote inside, bad UTF-8.
        assert_eq!(p(r#"["abc","ab\"c",'a"b',"a\\",""]"#).to_string(), r#"["abc","ab\"c","a\"b","a\\",""]"#);
        assert_eq!(Value::parse(b"\"a\xffb\"").unwrap().as_str(), Some("a\u{fffd}b"));
        assert_eq!(Value::parse(b"\"a\\n\xff\"").unwrap().as_str(), Some("a\n\u{fffd}"));
        for bad in [&b"\"abc"[..], b"\"ab\\", b"'ab\""] {
            assert!(Value::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn escapes_and_unicode() {
        assert_eq!(p(r#""\u4e2d\u6587 \ud83d\ude00 \n\u000B""#).as_str(), Some("中文 😀 \n\u{b}"));
        assert_eq!(p(r#""\ud83d""#).as_str(), Some("\u{FFFD}"), "lone surrogate");
        assert_eq!(p("\"中文\"").as_str(), Some("中文"));
    }

    #[test]
    fn errors_name_offset() {
        for bad in ["{", "[1 2]", "{\"a\" 1}", "\"abc", "tru", "{\"a\":}", "1 2", "\"\\x\"", "-", ""] {
            let e = Value::parse(bad.as_bytes()).unwrap_err();
            assert!(e.offset <= bad.len(), "{bad}: {e}");
        }
        let deep = "[".repeat(MAX_DEPTH + 2);
        assert_eq!(Value::parse(deep.as_bytes()).unwrap_err().what, "nesting too deep");
    }
}
