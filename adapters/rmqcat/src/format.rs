//! Output of consumed messages: `-f` format strings in kcat's spirit, and `--json` lines.

use base64::Engine;
use rocketmq_push_core::MessageExt;
use rocketmq_push_core::json::JsonWriter;
use rocketmq_push_core::message::keys;

/// The format when neither `-f` nor `--json` is given: the body and a newline.
pub(crate) const DEFAULT: &str = "%s\\n";

/// Placeholders, for error messages and `--help`.
pub(crate) const PLACEHOLDERS: &str = "%s body, %S body size, %R body size as a 4-byte big-endian integer, \
     %k keys, %K keys' size (-1 without keys), %T born timestamp (ms), %h user properties (k=v,…), \
     %t topic, %p queue id, %o offset (these as kcat); RocketMQ's own: %g tag, %i msg id, \
     %r reconsume times, %q queue id (as %p); %% a percent sign; \\n \\r \\t \\\\ \\xXX escapes";

#[derive(Debug, PartialEq, Eq)]
enum Piece {
    Lit(Vec<u8>),
    Topic,
    Queue,
    Offset,
    MsgId,
    Keys,
    KeysSize,
    Tags,
    Body,
    BodySize,
    BodySizeBinary,
    BornTimestamp,
    Reconsume,
    Properties,
}

/// A parsed `-f` format.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Format(Vec<Piece>);

impl Format {
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut lit = Vec::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '%' => {
                    let p = match chars.next() {
                        Some('%') => {
                            lit.push(b'%');
                            continue;
                        }
                        Some('t') => Piece::Topic,
                        Some('p' | 'q') => Piece::Queue,
                        Some('o') => Piece::Offset,
                        Some('i') => Piece::MsgId,
                        Some('k') => Piece::Keys,
                        Some('K') => Piece::KeysSize,
                        Some('g') => Piece::Tags,
                        Some('T') => Piece::BornTimestamp,
                        Some('s') => Piece::Body,
                        Some('S') => Piece::BodySize,
                        Some('R') => Piece::BodySizeBinary,
                        Some('r') => Piece::Reconsume,
                        Some('h') => Piece::Properties,
                        Some(other) => {
                            return Err(format!(
                                "unknown placeholder %{other} in format {s:?}; known: {PLACEHOLDERS}"
                            ));
                        }
                        None => {
                            return Err(format!(
                                "format {s:?} ends with a lone %; write %% for a percent sign"
                            ));
                        }
                    };
                    if !lit.is_empty() {
                        pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                    }
                    pieces.push(p);
                }
                // Shells make a literal newline awkward to type: accept the escapes.
                '\\' => match chars.next() {
                    Some('n') => lit.push(b'\n'),
                    Some('r') => lit.push(b'\r'),
                    Some('t') => lit.push(b'\t'),
                    Some('\\') => lit.push(b'\\'),
                    // \xXX: a byte in hex, as kcat.
                    Some('x') => {
                        let hex: String =
                            std::iter::from_fn(|| chars.next_if(char::is_ascii_hexdigit)).take(2).collect();
                        match u8::from_str_radix(&hex, 16) {
                            Ok(b) => lit.push(b),
                            Err(_) => return Err(format!("format {s:?}: \\x needs one or two hex digits")),
                        }
                    }
                    Some(other) => {
                        lit.push(b'\\');
                        let mut buf = [0; 4];
                        lit.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                    }
                    None => lit.push(b'\\'),
                },
                c => {
                    let mut buf = [0; 4];
                    lit.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        if !lit.is_empty() {
            pieces.push(Piece::Lit(lit));
        }
        Ok(Self(pieces))
    }

    /// Append `m` as this format says. Bodies are written as they are, like kcat does.
    pub(crate) fn write(&self, out: &mut Vec<u8>, m: &MessageExt) {
        use std::io::Write;
        for p in &self.0 {
            let _ = match p {
                Piece::Lit(b) => out.write_all(b),
                Piece::Topic => out.write_all(m.topic.as_bytes()),
                Piece::Queue => write!(out, "{}", m.queue_id),
                Piece::Offset => write!(out, "{}", m.queue_offset),
                Piece::MsgId => out.write_all(m.msg_id().as_bytes()),
                Piece::Keys => out.write_all(m.keys().collect::<Vec<_>>().join(" ").as_bytes()),
                Piece::KeysSize => match m.property(keys::KEYS) {
                    Some(_) => write!(out, "{}", m.keys().collect::<Vec<_>>().join(" ").len()),
                    None => out.write_all(b"-1"),
                },
                Piece::Tags => out.write_all(m.tags().unwrap_or("").as_bytes()),
                Piece::Body => out.write_all(&m.body),
                Piece::BodySize => write!(out, "{}", m.body.len()),
                Piece::BodySizeBinary => {
                    out.write_all(&i32::try_from(m.body.len()).unwrap_or(i32::MAX).to_be_bytes())
                }
                Piece::BornTimestamp => write!(out, "{}", m.born_timestamp),
                Piece::Reconsume => write!(out, "{}", m.reconsume_times),
                Piece::Properties => {
                    let pairs: Vec<String> = m.properties.user().map(|(k, v)| format!("{k}={v}")).collect();
                    out.write_all(pairs.join(",").as_bytes())
                }
            };
        }
    }
}

/// One output line for `m`: `format`'s, or the JSON object (`--json`, `None`).
pub(crate) fn render(format: Option<&Format>, m: &MessageExt, out: &mut Vec<u8>) {
    match format {
        Some(f) => f.write(out, m),
        None => {
            let mut w = JsonWriter::new();
            message_json(&mut w, m);
            out.extend_from_slice(w.finish().as_bytes());
            out.push(b'\n');
        }
    }
}

/// One message as a JSON object: the body as UTF-8 text, or base64 with `"bodyBase64":true`.
pub(crate) fn message_json(w: &mut JsonWriter, m: &MessageExt) {
    w.begin_object()
        .field_str("topic", &m.topic)
        .field_int("queueId", i64::from(m.queue_id))
        .field_int("queueOffset", m.queue_offset)
        .field_str("msgId", &m.msg_id())
        .field_str("offsetMsgId", &m.offset_msg_id())
        .field_opt_str("tags", m.tags())
        .key("keys")
        .begin_array();
    for k in m.keys() {
        w.string(k);
    }
    w.end_array()
        .field_int("reconsumeTimes", i64::from(m.reconsume_times))
        .field_int("bornTimestamp", m.born_timestamp)
        .field_str("bornHost", &m.born_host.to_string())
        .field_int("storeTimestamp", m.store_timestamp)
        .field_str("storeHost", &m.store_host.to_string())
        .field_int("commitLogOffset", m.commit_log_offset)
        .field_int("preparedTransactionOffset", m.prepared_transaction_offset)
        .field_int("flag", i64::from(m.flag))
        .field_int("sysFlag", i64::from(m.sys_flag))
        .field_int("bodyCRC", i64::from(m.body_crc))
        .field_int("storeSize", i64::from(m.store_size))
        .key("properties")
        .begin_object();
    // One key per name, the last value winning, as Java's MessageExt.getProperties().
    for (k, v) in m.properties.distinct() {
        w.field_str(k, v);
    }
    w.end_object().field_int("bodySize", m.body.len() as i64);
    body_json(w, &m.body);
    w.end_object();
}

/// `"body": text`, or `"body": base64, "bodyBase64": true` when the bytes are not UTF-8.
pub(crate) fn body_json(w: &mut JsonWriter, body: &[u8]) {
    match std::str::from_utf8(body) {
        Ok(text) => {
            w.field_str("body", text);
        }
        Err(_) => {
            w.field_str("body", &base64::engine::general_purpose::STANDARD.encode(body))
                .field_bool("bodyBase64", true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg() -> MessageExt {
        let mut m = MessageExt::new("T", &b"hello"[..]);
        m.queue_id = 3;
        m.queue_offset = 42;
        m.reconsume_times = 1;
        m.properties = rocketmq_push_core::message::Properties::from_pairs([
            (keys::TAGS, "TagA"),
            (keys::KEYS, "k1 k2"),
            (keys::UNIQ_KEY, "ID1"),
            ("color", "red"),
        ]);
        m
    }

    #[test]
    fn placeholders_and_escapes() {
        let f = Format::parse("%t/%q@%o %i [%k] %g %s(%S) r%r {%h} 100%%\\n").unwrap();
        let mut m = msg();
        let mut out = Vec::new();
        f.write(&mut out, &m);
        assert_eq!(String::from_utf8(out).unwrap(), "T/3@42 ID1 [k1 k2] TagA hello(5) r1 {color=red} 100%\n");
        // kcat's letters: %p partition (queue), %T timestamp, %K key size, %R binary size.
        m.born_timestamp = 1_700_000_000_123;
        let f = Format::parse("%p|%T|%K|%R|\\x41\\r\\t").unwrap();
        let mut out = Vec::new();
        f.write(&mut out, &m);
        assert_eq!(out, b"3|1700000000123|5|\0\0\0\x05|A\r\t");
        m.properties = m.properties.without(keys::KEYS);
        let mut out = Vec::new();
        Format::parse("%K").unwrap().write(&mut out, &m);
        assert_eq!(out, b"-1", "kcat's -1 for no key");
    }

    #[test]
    fn malformed_formats_say_what_to_fix() {
        let e = Format::parse("%s %z").unwrap_err();
        assert!(e.contains("%z") && e.contains("%t topic"), "{e}");
        assert!(Format::parse("\\xZZ").unwrap_err().contains("hex"));
        assert!(Format::parse("50%").unwrap_err().contains("lone %"));
        assert_eq!(Format::parse("a\\qb").unwrap(), Format(vec![Piece::Lit(b"a\\qb".to_vec())]));
    }

    #[test]
    fn json_carries_every_field_of_a_java_message_ext_and_one_key_per_property() {
        let mut m = msg();
        (m.flag, m.sys_flag, m.body_crc, m.store_size) = (7, 4, -12345, 321);
        (m.prepared_transaction_offset, m.commit_log_offset) = (99, 4096);
        (m.born_timestamp, m.store_timestamp) = (1_700_000_000_000, 1_700_000_000_005);
        // A batch entry: the batch's UNIQ_KEY and WAIT, then the entry's own.
        m.properties = rocketmq_push_core::message::Properties::from_pairs([
            (keys::WAIT, "true"),
            (keys::UNIQ_KEY, "BATCH"),
            (keys::UNIQ_KEY, "ENTRY"),
            (keys::WAIT, "false"),
        ]);
        let mut w = JsonWriter::new();
        message_json(&mut w, &m);
        let text = w.finish();
        assert_eq!(text.matches("\"UNIQ_KEY\"").count(), 1, "{text}");
        assert_eq!(text.matches("\"WAIT\"").count(), 1, "{text}");
        let v = rocketmq_push_core::json::Value::parse(text.as_bytes()).unwrap();
        let int = |k: &str| v.get(k).and_then(|x| x.as_i64()).unwrap_or_else(|| panic!("{k} in {text}"));
        let expect = [
            ("queueId", 3),
            ("queueOffset", 42),
            ("flag", 7),
            ("sysFlag", 4),
            ("bodyCRC", -12345),
            ("storeSize", 321),
            ("bornTimestamp", 1_700_000_000_000),
            ("storeTimestamp", 1_700_000_000_005),
            ("reconsumeTimes", 1),
            ("commitLogOffset", 4096),
            ("preparedTransactionOffset", 99),
        ];
        for (k, want) in expect {
            assert_eq!(int(k), want, "{k}");
        }
        for k in ["bornHost", "storeHost", "msgId", "offsetMsgId", "topic", "body"] {
            assert!(v.get(k).and_then(|x| x.as_str()).is_some(), "{k} in {text}");
        }
        let props = v.get("properties").unwrap();
        assert_eq!(props.get("UNIQ_KEY").and_then(|x| x.as_str()), Some("ENTRY"), "the last wins, as Java");
        assert_eq!(props.get("WAIT").and_then(|x| x.as_str()), Some("false"));
        assert_eq!(v.get("msgId").and_then(|x| x.as_str()), Some("ENTRY"));
    }

    #[test]
    fn json_bodies_are_text_or_flagged_base64() {
        let mut w = JsonWriter::new();
        message_json(&mut w, &msg());
        let text = w.finish();
        let v = rocketmq_push_core::json::Value::parse(text.as_bytes()).unwrap();
        assert_eq!(v.get("body").and_then(|b| b.as_str()), Some("hello"));
        assert!(v.get("bodyBase64").is_none());
        assert_eq!(v.get("properties").and_then(|p| p.get("color")).and_then(|c| c.as_str()), Some("red"));
        let mut m = msg();
        m.body = bytes::Bytes::from_static(&[0xff, 0x00, 0x80]);
        let mut w = JsonWriter::new();
        message_json(&mut w, &m);
        let v = rocketmq_push_core::json::Value::parse(w.finish().as_bytes()).unwrap();
        assert_eq!(v.get("body").and_then(|b| b.as_str()), Some("/wCA"));
        assert_eq!(v.get("bodyBase64").and_then(|b| b.as_bool()), Some(true));
    }
}
