//! ACL signing parity with Java: `tests/data/acl_java.txt` holds requests signed by the Java
//! client's own `AclClientRPCHook` (scripts/java-acl-golden.sh); signing the same requests here
//! must give the same ext fields, `AccessKey`, `SecurityToken` and `Signature` included, byte for
//! byte.

use bytes::Bytes;
use rocketmq_push_core::Credentials;
use rocketmq_push_core::codec::acl::{ACCESS_KEY, SECURITY_TOKEN, SIGNATURE};
use rocketmq_push_core::protocol::{RemotingCommand, RequestCode};

const DATA: &str = "tests/data/acl_java.txt";

fn unhex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn text(s: &str) -> String {
    String::from_utf8(unhex(s)).expect("UTF-8")
}

#[test]
fn our_signatures_equal_javas() {
    let data = std::fs::read_to_string(DATA).expect("tests/data/acl_java.txt (scripts/java-acl-golden.sh)");
    let mut n = 0;
    for line in data.lines().filter(|l| !l.is_empty()) {
        let mut parts = line.split(' ');
        let (secret, body, fields) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
        let java: Vec<(String, String)> = fields
            .split(',')
            .map(|kv| {
                let (k, v) = kv.split_once('=').expect("name=value");
                (text(k), text(v))
            })
            .collect();
        let field = |name: &str| java.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let mut creds = Credentials::new(field(ACCESS_KEY).expect("AccessKey"), text(secret));
        if let Some(t) = field(SECURITY_TOKEN) {
            creds = creds.with_security_token(t);
        }
        let mut cmd = RemotingCommand::request(RequestCode::PullMessage).with_body(Bytes::from(unhex(body)));
        // The request as it was before the hook: Java's fields in reverse order, so the order of
        // insertion cannot be what makes them match.
        for (k, v) in
            java.iter().rev().filter(|(k, _)| ![ACCESS_KEY, SECURITY_TOKEN, SIGNATURE].contains(&k.as_str()))
        {
            cmd.ext_fields.insert(k.as_str(), v.as_str());
        }
        creds.sign(&mut cmd);
        let mut ours: Vec<(String, String)> =
            cmd.ext_fields.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        ours.sort();
        let mut want = java.clone();
        want.sort();
        assert_eq!(ours, want, "line {}: {line}", n + 1);
        n += 1;
    }
    assert!(n >= 4, "only {n} requests in {DATA}");
}
