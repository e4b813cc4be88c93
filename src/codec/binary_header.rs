//! ROCKETMQ binary header (serialize type 1, `RocketMQSerializable`).
//!
//! ```text
//! code i16 | language u8 | version i16 | opaque i32 | flag i32 | remark_len i32 | remark
//! | ext_len i32 | (key_len i16, key, val_len i32, val)*
//! ```

use bytes::{BufMut, BytesMut};

use super::DecodeError;
use crate::protocol::{ExtFields, LanguageCode, RemotingCommand, SerializeType};

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn err(&self, what: &'static str) -> DecodeError {
        DecodeError::BinaryHeader { offset: self.pos, what }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&[u8], DecodeError> {
        if self.b.len() - self.pos < n {
            return Err(self.err(what));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn i16(&mut self, what: &'static str) -> Result<i16, DecodeError> {
        let s = self.take(2, what)?;
        Ok(i16::from_be_bytes([s[0], s[1]]))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        let s = self.take(4, what)?;
        Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    /// A length that must fit in what is left (checked before anything is allocated).
    fn len(&mut self, raw: i64, limit: usize, what: &'static str) -> Result<usize, DecodeError> {
        usize::try_from(raw).ok().filter(|n| *n <= limit - self.pos).ok_or_else(|| self.err(what))
    }

    fn string(&mut self, n: usize, what: &'static str) -> Result<String, DecodeError> {
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }
}

pub(super) fn decode(header: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let mut r = Reader { b: header, pos: 0 };
    let code = r.i16("truncated code")?;
    let language = r.take(1, "truncated language")?[0];
    let version = r.i16("truncated version")?;
    let opaque = r.i32("truncated opaque")?;
    let flag = r.i32("truncated flag")?;
    let remark_len = r.i32("truncated remark length")?;
    let remark_len = r.len(remark_len.into(), header.len(), "remark length out of range")?;
    // 4.9.4+ decodes a zero length as null.
    let remark = if remark_len == 0 { None } else { Some(r.string(remark_len, "truncated remark")?) };
    let ext_len = r.i32("truncated ext length")?;
    let ext_len = r.len(ext_len.into(), header.len(), "ext fields length out of range")?;
    let ext_end = r.pos + ext_len;
    let mut ext = ExtFields::new();
    while r.pos < ext_end {
        let key_len = r.i16("truncated ext key length")?;
        let key_len = r.len(key_len.into(), ext_end, "ext key length out of range")?;
        let key = r.string(key_len, "truncated ext key")?;
        let val_len = r.i32("truncated ext value length")?;
        let val_len = r.len(val_len.into(), ext_end, "ext value length out of range")?;
        let val = r.string(val_len, "truncated ext value")?;
        ext.insert(key, val);
    }
    if r.pos != ext_end {
        return Err(r.err("ext entry overruns the ext section"));
    }
    // Bytes after the ext section are ignored, as Java ignores them.
    Ok(RemotingCommand {
        code: code.into(),
        language: LanguageCode(language),
        version: version.into(),
        opaque,
        flag,
        remark,
        ext_fields: ext,
        body: bytes::Bytes::new(),
        serialize_type: SerializeType::RocketMq,
    })
}

pub(super) fn encode(cmd: &RemotingCommand, dst: &mut BytesMut) {
    // Java writes `(short) code` and `(short) version`: the same truncation.
    dst.put_i16(cmd.code as i16);
    dst.put_u8(cmd.language.0);
    dst.put_i16(cmd.version as i16);
    dst.put_i32(cmd.opaque);
    dst.put_i32(cmd.flag);
    let remark = cmd.remark.as_deref().unwrap_or("");
    dst.put_i32(remark.len() as i32);
    dst.put_slice(remark.as_bytes());
    let ext_len: usize = cmd.ext_fields.iter().map(|(k, v)| 2 + k.len() + 4 + v.len()).sum();
    dst.put_i32(ext_len as i32);
    for (k, v) in cmd.ext_fields.iter() {
        dst.put_i16(k.len() as i16);
        dst.put_slice(k.as_bytes());
        dst.put_i32(v.len() as i32);
        dst.put_slice(v.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_lengths_beyond_the_header() {
        let mut h = BytesMut::new();
        h.put_i16(11);
        h.put_u8(0);
        h.put_i16(1);
        h.put_i32(1);
        h.put_i32(0);
        h.put_i32(i32::MAX); // remark length
        assert_eq!(
            decode(&h),
            Err(DecodeError::BinaryHeader { offset: 17, what: "remark length out of range" })
        );

        let mut h2 = BytesMut::from(&h[..13]);
        h2.put_i32(0);
        h2.put_i32(10); // ext len 10 but nothing follows
        assert_eq!(
            decode(&h2),
            Err(DecodeError::BinaryHeader { offset: 21, what: "ext fields length out of range" })
        );

        let mut h3 = BytesMut::from(&h[..13]);
        h3.put_i32(0);
        h3.put_i32(8);
        h3.put_i16(1);
        h3.put_slice(b"k");
        h3.put_i32(5); // value longer than the ext section
        h3.put_u8(b'v');
        assert_eq!(
            decode(&h3),
            Err(DecodeError::BinaryHeader { offset: 28, what: "ext value length out of range" })
        );
    }

    #[test]
    fn empty_values_decode_as_empty() {
        let mut c = RemotingCommand::raw_request(11);
        c.ext_fields.insert("k", "");
        c.remark = Some(String::new());
        let mut b = BytesMut::new();
        encode(&c, &mut b);
        let d = decode(&b).unwrap();
        assert_eq!(d.ext_fields.get("k"), Some(""));
        assert_eq!(d.remark, None, "an empty remark is null on the wire");
    }
}
