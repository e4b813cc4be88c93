//! JSON header (serialize type 0): the fastjson form of the `RemotingCommand` bean.

use bytes::{BufMut, BytesMut};

use super::DecodeError;
use crate::json::{JsonWriter, Value};
use crate::protocol::{ExtFields, LanguageCode, RemotingCommand, SerializeType};

/// Decode a JSON header. Unknown keys are ignored and missing ones take Java's defaults
/// (`language` JAVA, numbers 0), as fastjson does on the broker.
pub(super) fn decode(header: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let v = Value::parse(header)?;
    let Value::Object(entries) = v else {
        return Err(DecodeError::JsonHeaderField { field: "(header)", what: "is not a JSON object" });
    };
    let mut cmd = RemotingCommand {
        code: 0,
        language: LanguageCode::JAVA,
        version: 0,
        opaque: 0,
        flag: 0,
        remark: None,
        ext_fields: ExtFields::new(),
        body: bytes::Bytes::new(),
        serialize_type: SerializeType::Json,
    };
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
                    // fastjson takes a number as the enum ordinal; ordinals equal the codes.
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
                    cmd.ext_fields = ExtFields::with_capacity(fields.len());
                    for (fk, fv) in fields {
                        let fk = match fk {
                            Value::String(s) => s,
                            other => other.to_string(),
                        };
                        match fv {
                            // fastjson drops null map values on write; treat a stray one as absent.
                            Value::Null => {}
                            Value::String(s) => cmd.ext_fields.insert(fk, s),
                            // fastjson turns non-string values into strings.
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
