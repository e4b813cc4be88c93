//! `rmqcat decode`: captured remoting frames → one JSON object per frame.

use std::io::Read;
use std::process::ExitCode;

use bytes::BytesMut;
use clap::Args;
use rocketmq_push_core::codec::RemotingCodec;
use rocketmq_push_core::json::{JsonWriter, Value};
use rocketmq_push_core::message::{DecodeOptions, decode_messages};
use rocketmq_push_core::protocol::{PullSysFlag, RemotingCommand, RequestCode, ResponseCode};

use crate::format::{body_json, message_json};
use crate::{Failure, Outcome};

/// Decode captured remoting frames and print each as a JSON line: header, named codes and
/// flags, every message of a pull body, JSON bodies as JSON.
#[derive(Args)]
#[command(after_help = "Examples:
  rmqcat decode capture.bin                 raw frames, as read off the socket
  rmqcat decode --hex tests/data/pull_found_three.hex
  xxd -p capture.bin | rmqcat decode --hex -

Bad bytes stop the decoding with the frame number, the byte offset and what is wrong (exit 1).")]
pub(crate) struct Opts {
    /// The input is hex text (whitespace ignored; lines starting with # are comments).
    #[arg(long)]
    hex: bool,
    /// File to read, or - for stdin.
    #[arg(value_name = "FILE|-")]
    file: String,
}

pub(crate) fn run(o: Opts) -> Outcome {
    let raw = if o.file == "-" {
        let mut v = Vec::new();
        std::io::stdin().read_to_end(&mut v).map_err(|e| Failure::Runtime(format!("reading stdin: {e}")))?;
        v
    } else {
        std::fs::read(&o.file).map_err(|e| Failure::Runtime(format!("{}: {e}", o.file)))?
    };
    let bytes = if o.hex { parse_hex(&raw).map_err(Failure::Runtime)? } else { raw };
    if bytes.is_empty() {
        return Err(Failure::Runtime("no bytes to decode".to_owned()));
    }
    let codec = RemotingCodec::new();
    let mut buf = BytesMut::from(&bytes[..]);
    let (mut at, mut n) = (0usize, 0usize);
    while !buf.is_empty() {
        let before = buf.len();
        match codec.decode(&mut buf) {
            Ok(Some(cmd)) => {
                n += 1;
                let len = before - buf.len();
                let line = frame_json(n, at, len, &cmd);
                out!("{line}");
                at += len;
            }
            Ok(None) => {
                let declared = bytes.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                let what = match declared {
                    Some(d) => {
                        format!("it declares {d} bytes after its length field, {} are there", before - 4)
                    }
                    None => format!("only {before} bytes, not even a length field"),
                };
                return Err(Failure::Runtime(format!("frame {} at byte {at}: truncated: {what}", n + 1)));
            }
            Err(e) => return Err(Failure::Runtime(format!("frame {} at byte {at}: {e}", n + 1))),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Hex text → bytes: whitespace ignored, `#` comment lines skipped, errors name the line.
fn parse_hex(text: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(text).map_err(|e| format!("hex input is not text: {e}"))?;
    let mut out = Vec::with_capacity(text.len() / 2);
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let digits: Vec<u8> = line.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if digits.len() % 2 != 0 {
            return Err(format!("line {}: an odd number of hex digits", i + 1));
        }
        for pair in digits.chunks(2) {
            let s = std::str::from_utf8(pair).unwrap_or("??");
            let b =
                u8::from_str_radix(s, 16).map_err(|_| format!("line {}: {s:?} is not a hex byte", i + 1))?;
            out.push(b);
        }
    }
    Ok(out)
}

fn frame_json(n: usize, at: usize, len: usize, cmd: &RemotingCommand) -> String {
    let response = cmd.is_response();
    let name = if response {
        ResponseCode::from_i32(cmd.code).map(|c| c.java_name())
    } else {
        RequestCode::from_i32(cmd.code).map(|c| c.java_name())
    };
    let mut w = JsonWriter::new();
    w.begin_object()
        .field_int("frame", n as i64)
        .field_int("at", at as i64)
        .field_int("bytes", len as i64)
        .field_str("kind", if response { "response" } else { "request" })
        .field_bool("oneway", cmd.is_oneway())
        .field_int("code", i64::from(cmd.code))
        .key("name");
    match name {
        Some(n) => w.string(n),
        None => w.raw("null"),
    };
    w.field_int("opaque", i64::from(cmd.opaque))
        .field_int("flag", i64::from(cmd.flag))
        .field_str("language", &cmd.language.to_string())
        .field_int("version", i64::from(cmd.version))
        .field_str("serializeType", cmd.serialize_type.name())
        .field_opt_str("remark", cmd.remark.as_deref())
        .key("extFields")
        .begin_object();
    for (k, v) in cmd.ext_fields.iter() {
        w.field_str(k, v);
    }
    w.end_object();
    if let Some(flag) = cmd.ext_fields.get("sysFlag").filter(|_| cmd.code == RequestCode::PullMessage as i32)
    {
        if let Ok(f) = flag.parse::<i32>() {
            let f = PullSysFlag(f);
            w.key("pullSysFlag")
                .begin_object()
                .field_bool("commitOffset", f.has(PullSysFlag::COMMIT_OFFSET))
                .field_bool("suspend", f.has(PullSysFlag::SUSPEND))
                .field_bool("subscription", f.has(PullSysFlag::SUBSCRIPTION))
                .field_bool("classFilter", f.has(PullSysFlag::CLASS_FILTER))
                .end_object();
        }
    }
    w.field_int("bodyBytes", cmd.body.len() as i64);
    if !cmd.body.is_empty() {
        body(&mut w, cmd);
    }
    w.end_object();
    w.finish()
}

/// The body, typed where the frame says what it holds.
fn body(w: &mut JsonWriter, cmd: &RemotingCommand) {
    let stored_messages = if cmd.is_response() {
        // A pull answer is the only response with a next offset in its header.
        cmd.code == ResponseCode::Success as i32 && cmd.ext_fields.get("nextBeginOffset").is_some()
    } else {
        cmd.code == RequestCode::ConsumeMessageDirectly as i32
    };
    if stored_messages {
        match decode_messages(&cmd.body, &DecodeOptions::default()) {
            Ok(msgs) => {
                w.key("messages").begin_array();
                for m in &msgs {
                    message_json(w, m);
                }
                w.end_array();
            }
            Err(e) => {
                w.field_str("messagesError", &e.to_string());
                body_json(w, &cmd.body);
            }
        }
        return;
    }
    let looks_json = matches!(cmd.body.first(), Some(b'{' | b'['));
    match Value::parse(&cmd.body) {
        Ok(v) if looks_json => {
            w.key("json").value(&v);
        }
        _ => body_json(w, &cmd.body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_text_with_comments_and_errors() {
        assert_eq!(parse_hex(b"# c\n00 0a\nFF\n").unwrap(), [0, 10, 255]);
        assert!(parse_hex(b"0").unwrap_err().contains("line 1: an odd number"));
        assert!(parse_hex(b"# x\nzz").unwrap_err().contains("line 2: \"zz\""));
    }

    #[test]
    fn frames_become_json_with_names() {
        let cmd = RemotingCommand::request(RequestCode::LockBatchMq).with_body(&br#"{"a":1}"#[..]);
        let v = Value::parse(frame_json(1, 0, 10, &cmd).as_bytes()).unwrap();
        assert_eq!(v.get("name").and_then(Value::as_str), Some("LOCK_BATCH_MQ"));
        assert_eq!(v.get("json").and_then(|j| j.get("a")).and_then(Value::as_i64), Some(1));
        let cmd = RemotingCommand::raw_request(9999).with_body(&[0xffu8, 1][..]);
        let v = Value::parse(frame_json(2, 10, 20, &cmd).as_bytes()).unwrap();
        assert!(v.get("name").is_some_and(|n| n.as_str().is_none()), "unknown code: null name");
        assert_eq!(v.get("bodyBase64").and_then(Value::as_bool), Some(true));
    }
}
