//! Strict JSON output in fastjson's style: no spaces, nulls omitted by the callers.

use std::fmt::Write as _;

use super::Value;

/// Builds one JSON text. Callers write keys and values in order; commas are inserted here.
#[derive(Debug, Default)]
pub struct JsonWriter {
    out: String,
    /// Per open container: has it had an element yet?
    first: Vec<bool>,
    after_key: bool,
}

impl JsonWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer with room for `bytes` of output.
    pub fn with_capacity(bytes: usize) -> Self {
        Self { out: String::with_capacity(bytes), ..Self::default() }
    }

    /// The text written so far.
    pub fn finish(self) -> String {
        self.out
    }

    fn sep(&mut self) {
        if self.after_key {
            self.after_key = false;
            return;
        }
        if let Some(first) = self.first.last_mut() {
            if !*first {
                self.out.push(',');
            }
            *first = false;
        }
    }

    /// `{`.
    pub fn begin_object(&mut self) -> &mut Self {
        self.sep();
        self.out.push('{');
        self.first.push(true);
        self
    }

    /// `}`.
    pub fn end_object(&mut self) -> &mut Self {
        self.first.pop();
        self.out.push('}');
        self
    }

    /// `[`.
    pub fn begin_array(&mut self) -> &mut Self {
        self.sep();
        self.out.push('[');
        self.first.push(true);
        self
    }

    /// `]`.
    pub fn end_array(&mut self) -> &mut Self {
        self.first.pop();
        self.out.push(']');
        self
    }

    /// A string key followed by `:`; the next call writes its value.
    pub fn key(&mut self, k: &str) -> &mut Self {
        self.sep();
        escape_into(&mut self.out, k);
        self.out.push(':');
        self.after_key = true;
        self
    }

    /// A non-string key written bare, fastjson style (`{{"queueId":1}:5}`); `json` must be valid.
    pub fn raw_key(&mut self, json: &str) -> &mut Self {
        self.sep();
        self.out.push_str(json);
        self.out.push(':');
        self.after_key = true;
        self
    }

    /// A string value.
    pub fn string(&mut self, s: &str) -> &mut Self {
        self.sep();
        escape_into(&mut self.out, s);
        self
    }

    /// An integer value.
    pub fn int(&mut self, i: i64) -> &mut Self {
        self.sep();
        push_int(&mut self.out, i);
        self
    }

    /// A float value, written as Java's `Double.toString` would for ordinary values (`1.5`, `0.0`).
    pub fn float(&mut self, f: f64) -> &mut Self {
        self.sep();
        if f.is_finite() {
            if f.fract() == 0.0 && f.abs() < 1e15 {
                let _ = write!(self.out, "{f:.1}");
            } else {
                let _ = write!(self.out, "{f}");
            }
        } else {
            self.out.push_str("0.0");
        }
        self
    }

    /// A boolean value.
    pub fn bool(&mut self, b: bool) -> &mut Self {
        self.sep();
        self.out.push_str(if b { "true" } else { "false" });
        self
    }

    /// `"key":"value"`.
    pub fn field_str(&mut self, k: &str, v: &str) -> &mut Self {
        self.key(k).string(v)
    }

    /// `"key":123`.
    pub fn field_int(&mut self, k: &str, v: i64) -> &mut Self {
        self.key(k).int(v)
    }

    /// `"key":true`.
    pub fn field_bool(&mut self, k: &str, v: bool) -> &mut Self {
        self.key(k).bool(v)
    }

    /// `"key":"value"` when `v` is `Some`; nothing otherwise (fastjson omits nulls).
    pub fn field_opt_str(&mut self, k: &str, v: Option<&str>) -> &mut Self {
        if let Some(v) = v {
            self.field_str(k, v);
        }
        self
    }

    /// Raw JSON written as a value (the caller guarantees it is valid).
    pub fn raw(&mut self, json: &str) -> &mut Self {
        self.sep();
        self.out.push_str(json);
        self
    }

    /// Any [`Value`]. Non-string object keys become JSON strings holding their JSON text, the
    /// standard-JSON form fastjson accepts for object-keyed maps (PROTOCOL.md §7.2).
    pub fn value(&mut self, v: &Value) -> &mut Self {
        match v {
            Value::Null => {
                self.sep();
                self.out.push_str("null");
            }
            Value::Bool(b) => {
                self.bool(*b);
            }
            Value::Int(i) => {
                self.int(*i);
            }
            Value::Float(f) => {
                self.float(*f);
            }
            Value::String(s) => {
                self.string(s);
            }
            Value::Array(items) => {
                self.begin_array();
                for item in items {
                    self.value(item);
                }
                self.end_array();
            }
            Value::Object(entries) => {
                self.begin_object();
                for (k, val) in entries {
                    match k {
                        Value::String(s) => self.key(s),
                        other => self.key(&other.to_string()),
                    };
                    self.value(val);
                }
                self.end_object();
            }
        }
        self
    }
}

/// Write `s` as a JSON string literal (fastjson's escapes, which are standard JSON).
pub(crate) fn escape_into(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    // Runs that need no escape are copied whole; only a byte that may start an escaped character
    // stops the scan (control characters, quote, backslash, DEL, and the lead bytes of U+0080..
    // U+009F and U+2028/U+2029).
    let bytes = s.as_bytes();
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !(b < 0x20 || b == b'"' || b == b'\\' || b == 0x7f || b == 0xc2 || b == 0xe2) {
            i += 1;
            continue;
        }
        // `i` is at a character boundary: every byte tested is ASCII or a lead byte.
        let c = s[i..].chars().next().unwrap_or('\u{fffd}');
        let escape: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\u{8}' => Some("\\b"),
            '\t' => Some("\\t"),
            '\n' => Some("\\n"),
            '\u{c}' => Some("\\f"),
            '\r' => Some("\\r"),
            _ => None,
        };
        let unicode =
            (c as u32) < 0x20 || ('\u{7f}'..='\u{9f}').contains(&c) || c == '\u{2028}' || c == '\u{2029}';
        if escape.is_some() || unicode {
            out.push_str(&s[run..i]);
            match escape {
                Some(e) => out.push_str(e),
                None => {
                    let _ = write!(out, "\\u{:04X}", c as u32);
                }
            }
            run = i + c.len_utf8();
        }
        i += c.len_utf8();
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// Decimal digits of `i`, without the formatting machinery (headers carry a dozen numbers).
pub(crate) fn push_int(out: &mut String, i: i64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    let mut n = i.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if i < 0 {
        out.push('-');
    }
    // Digits only: ASCII.
    out.push_str(std::str::from_utf8(&buf[at..]).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_strict_json_that_reads_back() {
        let mut w = JsonWriter::new();
        w.begin_object()
            .field_str("clientID", "a\"b\\c\n\u{b}\u{7f}中")
            .key("set")
            .begin_array()
            .int(1)
            .int(-2)
            .end_array()
            .field_bool("ok", true)
            .key("f")
            .float(2.0)
            .field_opt_str("none", None)
            .end_object();
        let s = w.finish();
        assert_eq!(s, r#"{"clientID":"a\"b\\c\n\u000B\u007F中","set":[1,-2],"ok":true,"f":2.0}"#);
        let v = Value::parse(s.as_bytes()).unwrap();
        assert_eq!(v.get("clientID").unwrap().as_str(), Some("a\"b\\c\n\u{b}\u{7f}中"));
    }

    /// The escape rules one character at a time, as the scan must apply them.
    fn escaped_char_by_char(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\u{c}' => out.push_str("\\f"),
                '\r' => out.push_str("\\r"),
                c if (c as u32) < 0x20
                    || ('\u{7f}'..='\u{9f}').contains(&c)
                    || c == '\u{2028}'
                    || c == '\u{2029}' =>
                {
                    out.push_str(&format!("\\u{:04X}", c as u32))
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    proptest::proptest! {
        #[test]
        fn the_scan_escapes_as_each_character_would_be(
            s in "[a-z\"\\\\\u{0}-\u{1f}\u{7f}-\u{a0}\u{2027}-\u{202a}\u{20ac}é中😀]{0,40}"
        ) {
            let mut out = String::new();
            escape_into(&mut out, &s);
            proptest::prop_assert_eq!(&out, &escaped_char_by_char(&s));
            let back = Value::parse(out.as_bytes()).unwrap();
            proptest::prop_assert_eq!(back.as_str(), Some(s.as_str()));
        }

        #[test]
        fn integers_are_written_as_display_writes_them(i in proptest::num::i64::ANY) {
            let mut out = String::new();
            push_int(&mut out, i);
            proptest::prop_assert_eq!(out, i.to_string());
        }
    }

    #[test]
    fn integer_edges() {
        for i in [0, -1, 9, 10, -10, i64::MIN, i64::MAX] {
            let mut out = String::new();
            push_int(&mut out, i);
            assert_eq!(out, i.to_string());
        }
    }

    #[test]
    fn object_keys_become_json_strings() {
        let v = Value::parse(br#"{{"queueId":1}:5}"#).unwrap();
        assert_eq!(v.to_string(), r#"{"{\"queueId\":1}":5}"#);
    }
}
