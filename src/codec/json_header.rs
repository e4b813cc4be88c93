//! JSON header (serialize type 0): the fastjson form of the `RemotingCommand` bean.

use bytes::{BufMut, BytesMut};

use super::DecodeError;
use crate::json::{JsonWriter, ObjectEntries, Value};
use crate::protocol::{ExtFields, LanguageCode, RemotingCommand, SerializeType};

/// Decode a JSON header. Unknown keys are ignored and missing ones take Java's defaults
/// (`language` JAVA, numbers 0), as fastjson does on the broker. Fields go straight into the
/// command as they are read (no tree of the whole header first).
pub(super) fn decode(header: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let Some(mut entries) = ObjectEntries::of(header)? else {
        return Err(DecodeError::JsonHeaderField { field: "(header)", what: "is not a JSON object" });
    };
    let mut cmd = missing_every_field();
    // A field of the wrong type is reported once the whole header has been read: a syntax
    // error anywhere in it comes first, as when the header was parsed whole before its fields.
    let mut wrong_field = None;
    while let Some(k) = entries.key()? {
        let Value::String(key) = k else {
            entries.value()?;
            continue;
        };
        match read_field(&mut cmd, &key, &mut entries) {
            Ok(()) => {}
            Err(e @ DecodeError::JsonHeaderField { .. }) => {
                wrong_field.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    entries.finish()?;
    match wrong_field {
        Some(e) => Err(e),
        None => Ok(cmd),
    }
}

/// A header with no fields, as fastjson reads one: `language` JAVA, numbers 0.
fn missing_every_field() -> RemotingCommand {
    RemotingCommand {
        code: 0,
        language: LanguageCode::JAVA,
        version: 0,
        opaque: 0,
        flag: 0,
        remark: None,
        ext_fields: ExtFields::new(),
        body: bytes::Bytes::new(),
        serialize_type: SerializeType::Json,
    }
}

/// Read the value of `key` into `cmd` (unknown keys: read and dropped).
fn read_field(
    cmd: &mut RemotingCommand,
    key: &str,
    entries: &mut ObjectEntries<'_>,
) -> Result<(), DecodeError> {
    match key {
        "code" => cmd.code = int(&entries.value()?, "code")?,
        "version" => cmd.version = int(&entries.value()?, "version")?,
        "opaque" => cmd.opaque = int(&entries.value()?, "opaque")?,
        "flag" => cmd.flag = int(&entries.value()?, "flag")?,
        "language" => {
            cmd.language = match entries.value()? {
                Value::String(s) => LanguageCode::from_name(&s).unwrap_or(LanguageCode::OTHER),
                // fastjson takes a number as the enum ordinal; ordinals equal the codes.
                Value::Int(i) => LanguageCode(u8::try_from(i).unwrap_or(LanguageCode::OTHER.0)),
                Value::Null => LanguageCode::JAVA,
                _ => return Err(DecodeError::JsonHeaderField { field: "language", what: "is not a name" }),
            }
        }
        "remark" => {
            cmd.remark = match entries.value()? {
                Value::String(s) => Some(s),
                Value::Null => None,
                other => Some(other.to_string()),
            }
        }
        "extFields" => {
            // A repeated key: the last one wins, as for every other field.
            let mut ext = ExtFields::with_capacity(8);
            let other = entries.object_value(|fk, fv| {
                let fk = match fk {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                match fv {
                    // fastjson drops null map values on write; treat a stray one as absent.
                    Value::Null => {}
                    Value::String(s) => ext.insert(fk, s),
                    // fastjson turns non-string values into strings.
                    other => ext.insert(fk, other.to_string()),
                }
            })?;
            match other {
                None => cmd.ext_fields = ext,
                Some(Value::Null) => {}
                Some(_) => {
                    return Err(DecodeError::JsonHeaderField {
                        field: "extFields",
                        what: "is not an object",
                    });
                }
            }
        }
        _ => {
            entries.value()?;
        }
    }
    Ok(())
}

fn int(v: &Value, field: &'static str) -> Result<i32, DecodeError> {
    match v {
        Value::Null => Ok(0),
        _ => v
            .as_i64()
            .and_then(|i| i32::try_from(i).ok())
            .ok_or(DecodeError::JsonHeaderField { field, what: "is not a 32-bit integer" }),
    }
}

/// Encode in fastjson's property order (alphabetical), omitting a null remark and empty ext fields.
pub(super) fn encode(cmd: &RemotingCommand, dst: &mut BytesMut) {
    // Room for a pull request's header, the most frequent one, without growing.
    let mut w = JsonWriter::with_capacity(512);
    w.begin_object().field_int("code", cmd.code.into());
    if !cmd.ext_fields.is_empty() {
        w.key("extFields").begin_object();
        for (k, v) in cmd.ext_fields.iter() {
            w.field_str(k, v);
        }
        w.end_object();
    }
    w.field_int("flag", cmd.flag.into());
    match cmd.language.name() {
        Some(name) => w.field_str("language", name),
        None => w.field_int("language", cmd.language.0.into()),
    };
    w.field_int("opaque", cmd.opaque.into());
    w.field_opt_str("remark", cmd.remark.as_deref());
    w.field_str("serializeTypeCurrentRPC", "JSON").field_int("version", cmd.version.into()).end_object();
    dst.put_slice(w.finish().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header read through a whole tree first, as `decode` did before it streamed: the
    /// reference the streaming decoder must agree with.
    fn decode_via_tree(header: &[u8]) -> Result<RemotingCommand, DecodeError> {
        let Value::Object(entries) = Value::parse(header)? else {
            return Err(DecodeError::JsonHeaderField { field: "(header)", what: "is not a JSON object" });
        };
        let mut cmd = missing_every_field();
        for (k, val) in entries {
            let Value::String(key) = k else { continue };
            match key.as_str() {
                "code" => cmd.code = int(&val, "code")?,
                "version" => cmd.version = int(&val, "version")?,
                "opaque" => cmd.opaque = int(&val, "opaque")?,
                "flag" => cmd.flag = int(&val, "flag")?,
                "language" => {
                    cmd.language = match &val {
                        Value::String(s) => LanguageCode::from_name(s).unwrap_or(LanguageCode::OTHER),
                        Value::Int(i) => LanguageCode(u8::try_from(*i).unwrap_or(LanguageCode::OTHER.0)),
                        Value::Null => LanguageCode::JAVA,
                        _ => {
                            return Err(DecodeError::JsonHeaderField {
                                field: "language",
                                what: "is not a name",
                            });
                        }
                    }
                }
                "remark" => {
                    cmd.remark = match val {
                        Value::String(s) => Some(s),
                        Value::Null => None,
                        other => Some(other.to_string()),
                    }
                }
                "extFields" => match val {
                    Value::Object(fields) => {
                        cmd.ext_fields = ExtFields::new();
                        for (fk, fv) in fields {
                            let fk = match fk {
                                Value::String(s) => s,
                                other => other.to_string(),
                            };
                            match fv {
                                Value::Null => {}
                                Value::String(s) => cmd.ext_fields.insert(fk, s),
                                other => cmd.ext_fields.insert(fk, other.to_string()),
                            }
                        }
                    }
                    Value::Null => {}
                    _ => {
                        return Err(DecodeError::JsonHeaderField {
                            field: "extFields",
                            what: "is not an object",
                        });
                    }
                },
                _ => {}
            }
        }
        Ok(cmd)
    }

    /// Header-shaped text with fastjson's leniencies, repeated and misplaced keys, wrong types
    /// and broken syntax.
    fn header_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let scalar = prop_oneof![
            Just("0".to_owned()),
            Just("-7".to_owned()),
            Just("12L".to_owned()),
            Just("null".to_owned()),
            Just("\"12\"".to_owned()),
            Just("99999999999".to_owned()),
            Just("1.5".to_owned()),
            Just("12L".to_owned()),
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("\"JAVA\"".to_owned()),
            Just("'GO'".to_owned()),
            Just("\"a\\\"b\\u00e9\"".to_owned()),
            Just("\"12\"".to_owned()),
            Just("[1,,2]".to_owned()),
            Just("{}".to_owned()),
        ];
        let key = prop_oneof![
            1 => Just("\"code\"".to_owned()),
            1 => Just("\"opaque\"".to_owned()),
            1 => Just("\"flag\"".to_owned()),
            1 => Just("\"version\"".to_owned()),
            1 => Just("\"language\"".to_owned()),
            1 => Just("\"remark\"".to_owned()),
            1 => Just("\"extFields\"".to_owned()),
            1 => Just("\"other\"".to_owned()),
            1 => Just("code".to_owned()),
            1 => Just("'remark'".to_owned()),
            1 => Just("7".to_owned()),
            1 => Just("null".to_owned()),
        ];
        let ext_entry = (prop_oneof![Just("\"k\""), Just("\"k2\""), Just("3"), Just("bare")], scalar.clone())
            .prop_map(|(k, v)| format!("{k}:{v}"));
        let ext = proptest::collection::vec(ext_entry, 0..5).prop_map(|e| format!("{{{}}}", e.join(",")));
        let ext_value = prop_oneof![5 => ext, 1 => scalar.clone()];
        let entry = prop_oneof![
            2 => (key, scalar).prop_map(|(k, v)| format!("{k}:{v}")),
            1 => ext_value.prop_map(|v| format!("\"extFields\":{v}")),
        ];
        let sep = prop_oneof![8 => Just(","), 1 => Just(",,"), 1 => Just(" , "), 1 => Just("")];
        let body = proptest::collection::vec((entry, sep), 0..6)
            .prop_map(|es| es.into_iter().map(|(e, s)| format!("{e}{s}")).collect::<String>());
        let tail = prop_oneof![8 => Just(""), 1 => Just(" \n"), 1 => Just("x"), 1 => Just("}")];
        let cut = proptest::option::weighted(0.1, 0usize..80);
        (body, tail, cut).prop_map(|(b, t, cut)| {
            let mut s = format!("{{{b}}}{t}");
            if let Some(c) = cut {
                s.truncate(c.min(s.len()));
            }
            s
        })
    }

    #[test]
    fn the_generated_headers_are_mostly_read() {
        use proptest::strategy::{Strategy, ValueTree};
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let texts: Vec<String> =
            (0..1000).map(|_| header_text().new_tree(&mut runner).unwrap().current()).collect();
        let read: Vec<RemotingCommand> = texts.iter().filter_map(|t| decode(t.as_bytes()).ok()).collect();
        let with_ext = read.iter().filter(|c| !c.ext_fields.is_empty()).count();
        assert!(read.len() > 200 && with_ext > 100, "{} read, {with_ext} with ext fields", read.len());
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(2000))]
        #[test]
        /// The same command, or the same error (syntax first, with its offset; else the first
        /// field of the wrong type).
        fn streaming_agrees_with_the_tree(text in header_text()) {
            let streamed = format!("{:?}", decode(text.as_bytes()));
            proptest::prop_assert_eq!(streamed, format!("{:?}", decode_via_tree(text.as_bytes())), "{}", text);
        }
    }

    #[test]
    fn decodes_java_and_go_headers() {
        let java = br#"{"code":0,"flag":1,"language":"JAVA","opaque":0,"remark":"FOUND","serializeTypeCurrentRPC":"JSON","version":0}"#;
        let c = decode(java).unwrap();
        assert_eq!((c.code, c.flag, c.remark.as_deref()), (0, 1, Some("FOUND")));
        assert!(c.ext_fields.is_empty());

        let go = br#"{"code":11,"language":"GO","version":317,"opaque":5,"flag":0,"remark":"","extFields":{"a":"1","n":2,"nul":null}}"#;
        let c = decode(go).unwrap();
        assert_eq!(c.language, LanguageCode::GO);
        assert_eq!(c.remark.as_deref(), Some(""));
        assert_eq!(c.ext_fields.get("n"), Some("2"));
        assert_eq!(c.ext_fields.get("nul"), None);

        let c = decode(br#"{"language":9,"code":"12"}"#).unwrap();
        assert_eq!((c.language, c.code), (LanguageCode::GO, 12));
        let c = decode(br#"{"language":"martian"}"#).unwrap();
        assert_eq!(c.language, LanguageCode::OTHER);
    }

    #[test]
    fn rejects_wrong_types() {
        assert!(matches!(decode(b"[1]"), Err(DecodeError::JsonHeaderField { .. })));
        assert!(matches!(
            decode(br#"{"code":"x"}"#),
            Err(DecodeError::JsonHeaderField { field: "code", .. })
        ));
        assert!(matches!(decode(br#"{"code":99999999999}"#), Err(DecodeError::JsonHeaderField { .. })));
        assert!(matches!(decode(br#"{"extFields":[]}"#), Err(DecodeError::JsonHeaderField { .. })));
        assert!(matches!(decode(b"{"), Err(DecodeError::JsonHeader(_))));
    }
}
