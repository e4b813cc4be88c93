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
        let _ = write!(self.out, "{i}");
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
    out.push('"');
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
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
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

    #[test]
    fn object_keys_become_json_strings() {
        let v = Value::parse(br#"{{"queueId":1}:5}"#).unwrap();
        assert_eq!(v.to_string(), r#"{"{\"queueId\":1}":5}"#);
    }
}
