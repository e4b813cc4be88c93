//! Message ids: the broker's offset id and the producer's `UNIQ_KEY` (PROTOCOL.md §9.6).

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Offset message id: uppercase hex of store IP, port (i32) and commit-log offset (i64).
pub fn offset_msg_id(store_host: SocketAddr, commit_log_offset: i64) -> String {
    let mut s = String::with_capacity(56);
    match store_host.ip() {
        IpAddr::V4(ip) => ip.octets().iter().for_each(|b| push_hex(&mut s, *b)),
        IpAddr::V6(ip) => ip.octets().iter().for_each(|b| push_hex(&mut s, *b)),
    }
    i32::from(store_host.port()).to_be_bytes().iter().for_each(|b| push_hex(&mut s, *b));
    commit_log_offset.to_be_bytes().iter().for_each(|b| push_hex(&mut s, *b));
    s
}

/// Parse an offset message id back into (store host, commit-log offset). 32 hex chars = IPv4,
/// 56 = IPv6.
pub fn parse_offset_msg_id(id: &str) -> Option<(SocketAddr, i64)> {
    let bytes = hex_decode(id)?;
    let (ip, rest): (IpAddr, &[u8]) = match bytes.len() {
        16 => {
            let o: [u8; 4] = bytes[..4].try_into().ok()?;
            (Ipv4Addr::from(o).into(), &bytes[4..])
        }
        28 => {
            let o: [u8; 16] = bytes[..16].try_into().ok()?;
            (Ipv6Addr::from(o).into(), &bytes[16..])
        }
        _ => return None,
    };
    let port = i32::from_be_bytes(rest[..4].try_into().ok()?);
    let offset = i64::from_be_bytes(rest[4..12].try_into().ok()?);
    Some((SocketAddr::new(ip, u16::try_from(port).ok()?), offset))
}

fn push_hex(s: &mut String, b: u8) {
    let _ = write!(s, "{b:02X}");
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || !s.is_ascii() {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

/// Generates `UNIQ_KEY`s the way Java's `MessageClientIDSetter` lays them out: a fixed per-process
/// prefix (IP, pid, a per-instance number) then a time and a counter.
///
/// Sans-IO: the caller supplies the IP, pid and instance number, and the time with each call.
#[derive(Clone, Debug)]
pub struct UniqIdGenerator {
    prefix: String,
    counter: u16,
}

impl UniqIdGenerator {
    /// A generator for this process.
    pub fn new(ip: Ipv4Addr, pid: u32, instance: u32) -> Self {
        let mut prefix = String::with_capacity(32);
        ip.octets().iter().for_each(|b| push_hex(&mut prefix, *b));
        ((pid & 0xFFFF) as u16).to_be_bytes().iter().for_each(|b| push_hex(&mut prefix, *b));
        instance.to_be_bytes().iter().for_each(|b| push_hex(&mut prefix, *b));
        Self { prefix, counter: 0 }
    }

    /// The next id; `millis` is the time since the start of the month in Java (any monotonic
    /// millisecond count works: ids stay unique through the counter).
    pub fn next_id(&mut self, millis: u64) -> String {
        let mut s = String::with_capacity(32);
        s.push_str(&self.prefix);
        ((millis & 0xFFFF_FFFF) as u32).to_be_bytes().iter().for_each(|b| push_hex(&mut s, *b));
        self.counter = self.counter.wrapping_add(1);
        self.counter.to_be_bytes().iter().for_each(|b| push_hex(&mut s, *b));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_id_round_trip() {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let id = offset_msg_id(host, 0x1234);
        assert_eq!(id, "7F00000100002A9F0000000000001234");
        assert_eq!(parse_offset_msg_id(&id), Some((host, 0x1234)));
        let v6: SocketAddr = "[::1]:10911".parse().unwrap();
        let id6 = offset_msg_id(v6, 7);
        assert_eq!(id6.len(), 56);
        assert_eq!(parse_offset_msg_id(&id6), Some((v6, 7)));
        assert_eq!(parse_offset_msg_id("XYZ"), None);
        assert_eq!(parse_offset_msg_id("00"), None);
    }

    #[test]
    fn uniq_ids_are_32_hex_and_distinct() {
        let mut g = UniqIdGenerator::new(Ipv4Addr::new(10, 0, 0, 1), 77, 5);
        let a = g.next_id(1000);
        let b = g.next_id(1000);
        assert_eq!(a.len(), 32);
        assert!(a.starts_with("0A000001004D00000005"));
        assert_ne!(a, b);
    }
}
