//! Test support: a small blocking remoting client over `std::net`, and the real-broker
//! environment (`NAMESRV_ADDR`, `BROKER_ADDR`, started by `scripts/rocketmq.sh`).
//!
//! Tests that need a broker call [`broker_env`]; without one they are skipped with a note, unless
//! `RMQ_REQUIRE_BROKER=1` (CI sets it), which turns a missing broker into a failure.
#![allow(dead_code, unreachable_pub, clippy::disallowed_methods)] // test support does real I/O and reads the clock

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use rocketmq_push_core::codec::{RemotingCodec, encode_to_bytes};
use rocketmq_push_core::protocol::{RemotingCommand, SerializeType};

/// Addresses of the running name server and broker.
#[derive(Clone, Debug)]
pub struct BrokerEnv {
    pub namesrv: String,
    pub broker: String,
}

/// The real broker, or `None` (test skipped) when none is configured.
pub fn broker_env() -> Option<BrokerEnv> {
    let namesrv = std::env::var("NAMESRV_ADDR").ok();
    let broker = std::env::var("BROKER_ADDR").ok();
    match (namesrv, broker) {
        (Some(namesrv), Some(broker)) if TcpStream::connect(&broker).is_ok() => {
            Some(BrokerEnv { namesrv, broker })
        }
        _ => {
            if std::env::var("RMQ_REQUIRE_BROKER").as_deref() == Ok("1") {
                panic!(
                    "RMQ_REQUIRE_BROKER=1 but no broker at NAMESRV_ADDR / BROKER_ADDR: run scripts/rocketmq.sh start"
                );
            }
            eprintln!("note: no real broker (set NAMESRV_ADDR and BROKER_ADDR); skipping");
            None
        }
    }
}

/// The 4.9.x broker (4.9.7: the 4.9.8 server jars are not on Maven Central).
pub fn is_v4() -> bool {
    std::env::var("RMQ_SERVER_VERSION").is_ok_and(|v| v.starts_with("4."))
}

/// A name unique to this run: tests on one broker never share topics or groups.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}_{}_{}", std::process::id(), nanos % 1_000_000_000_000)
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// One remoting connection. Requests the broker sends us are collected in `inbox`.
pub struct Conn {
    stream: TcpStream,
    buf: BytesMut,
    codec: RemotingCodec,
    next_opaque: i32,
    pub serialize: SerializeType,
    pub inbox: Vec<RemotingCommand>,
    inbox_raw: Vec<Vec<u8>>,
    /// Raw bytes of the request last returned by [`Conn::wait_request`].
    pub last_request_raw: Vec<u8>,
    /// Raw bytes of every frame read, when capturing goldens.
    pub raw_frames: Vec<Vec<u8>>,
}

impl Conn {
    pub fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_nodelay(true).unwrap();
        Self {
            stream,
            buf: BytesMut::with_capacity(64 * 1024),
            codec: RemotingCodec::new(),
            next_opaque: 1,
            serialize: SerializeType::Json,
            inbox: Vec::new(),
            inbox_raw: Vec::new(),
            last_request_raw: Vec::new(),
            raw_frames: Vec::new(),
        }
    }

    fn send(&mut self, cmd: &RemotingCommand) {
        self.stream.write_all(&encode_to_bytes(cmd)).unwrap();
    }

    /// Send a request and wait for its response (skipping and keeping broker-initiated requests).
    pub fn call(&mut self, cmd: RemotingCommand, timeout: Duration) -> RemotingCommand {
        let opaque = self.next_opaque;
        self.next_opaque += 1;
        let cmd = cmd.with_opaque(opaque).with_serialize_type(self.serialize);
        self.send(&cmd);
        let deadline = Instant::now() + timeout;
        loop {
            let frame = self
                .read_frame(deadline)
                .unwrap_or_else(|| panic!("no response to code {} in {timeout:?}", cmd.code));
            if frame.is_response() && frame.opaque == opaque {
                return frame;
            }
            if !frame.is_response() {
                self.inbox.push(frame);
                self.inbox_raw.push(self.last_raw());
            }
        }
    }

    /// Send a oneway request.
    pub fn oneway(&mut self, cmd: RemotingCommand) {
        let opaque = self.next_opaque;
        self.next_opaque += 1;
        let cmd = cmd.with_opaque(opaque).with_serialize_type(self.serialize).oneway();
        self.send(&cmd);
    }

    /// Answer a broker-initiated request.
    pub fn reply(&mut self, response: RemotingCommand) {
        self.send(&response);
    }

    /// Wait for a broker-initiated request with `code`.
    pub fn wait_request(&mut self, code: i32, timeout: Duration) -> Option<RemotingCommand> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.inbox.iter().position(|c| c.code == code) {
                self.last_request_raw = self.inbox_raw.remove(i);
                return Some(self.inbox.remove(i));
            }
            let frame = self.read_frame(deadline)?;
            if !frame.is_response() {
                self.inbox.push(frame);
                self.inbox_raw.push(self.last_raw());
            }
        }
    }

    /// The next frame, or `None` at the deadline.
    pub fn read_frame(&mut self, deadline: Instant) -> Option<RemotingCommand> {
        loop {
            let before = self.buf.clone();
            if let Some(cmd) = self.codec.decode(&mut self.buf).expect("broker frame decodes") {
                let used = before.len() - self.buf.len();
                self.raw_frames.push(before[..used].to_vec());
                return Some(cmd);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            self.stream.set_read_timeout(Some(left.max(Duration::from_millis(1)))).unwrap();
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("connection closed by peer"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    return None;
                }
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    /// Raw bytes of the last frame read.
    pub fn last_raw(&self) -> Vec<u8> {
        self.raw_frames.last().cloned().unwrap_or_default()
    }
}

/// `tests/data/<name>`.
pub fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("data").join(name)
}

/// Save a golden frame as hex (with a description line) when `RMQ_CAPTURE=1` (or a comma list of
/// names); `RMQ_CAPTURE_SUFFIX` is appended to the name (e.g. `_v4` for the 4.9 broker).
pub fn capture(name: &str, description: &str, frame: &[u8]) {
    let wanted = std::env::var("RMQ_CAPTURE").unwrap_or_default();
    if wanted != "1" && !wanted.split(',').any(|w| w == name) {
        return;
    }
    let suffix = std::env::var("RMQ_CAPTURE_SUFFIX").unwrap_or_default();
    let name = &format!("{name}{suffix}");
    let description = &format!(
        "{description} ({})",
        std::env::var("RMQ_SERVER_VERSION").unwrap_or_else(|_| "5.3.3".into())
    );
    let mut text = format!("# {description}\n");
    for chunk in frame.chunks(32) {
        for b in chunk {
            text.push_str(&format!("{b:02x}"));
        }
        text.push('\n');
    }
    std::fs::create_dir_all(data_path("")).unwrap();
    std::fs::write(data_path(&format!("{name}.hex")), text).unwrap();
}

/// Read a golden frame written by [`capture`].
pub fn load_golden(name: &str) -> Vec<u8> {
    let text = std::fs::read_to_string(data_path(&format!("{name}.hex")))
        .unwrap_or_else(|e| panic!("tests/data/{name}.hex: {e}"));
    let hex: String = text.lines().filter(|l| !l.starts_with('#')).collect();
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

pub mod ops {
    //! Protocol operations used by several real-broker tests.
    use super::*;
    use rocketmq_push_core::MessageQueue;
    use rocketmq_push_core::message::{DecodeOptions, Message, MessageExt, decode_messages};
    use rocketmq_push_core::producer::{SendCompression, SendResult, send_message_request, send_result};
    use rocketmq_push_core::protocol::body::{
        ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, SubscriptionData,
        TopicRouteData,
    };
    use rocketmq_push_core::protocol::header::{
        CreateTopicRequestHeader, GetRouteInfoRequestHeader, PullMessageRequestHeader,
        PullMessageResponseHeader,
    };
    use rocketmq_push_core::protocol::{ExpressionType, JsonBody, RequestCode, ResponseCode};

    pub const T: Duration = Duration::from_secs(10);

    /// UPDATE_AND_CREATE_TOPIC with `queues` read and write queues.
    pub fn create_topic(broker: &mut Conn, topic: &str, queues: i32) -> RemotingCommand {
        let r = broker.call(
            RemotingCommand::request(RequestCode::UpdateAndCreateTopic)
                .with_header(&CreateTopicRequestHeader::new(topic, queues)),
            T,
        );
        assert_eq!(r.code, 0, "create topic {topic}: {:?}", r.remark);
        r
    }

    /// GET_ROUTEINFO_BY_TOPIC.
    pub fn route(namesrv: &mut Conn, topic: &str) -> (RemotingCommand, TopicRouteData) {
        let r = namesrv.call(
            RemotingCommand::request(RequestCode::GetRouteInfoByTopic).with_header(
                &GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: None },
            ),
            T,
        );
        assert_eq!(r.code, 0, "route {topic}: {:?}", r.remark);
        let data = TopicRouteData::decode(&r.body).expect("route body decodes");
        (r, data)
    }

    /// SEND_MESSAGE_V2 to one queue.
    pub fn send(broker: &mut Conn, msg: &Message, q: &MessageQueue, compress: bool) -> SendResult {
        let cmd = send_message_request(
            "rmq_rust_wire_producer",
            msg,
            q,
            now_ms(),
            compress.then(SendCompression::default),
        );
        let r = broker.call(cmd, T);
        send_result(&r, &q.broker_name).unwrap_or_else(|e| panic!("send to {q:?}: {e}"))
    }

    /// A pull request header as the push consumer sends it.
    pub fn pull_header(
        group: &str,
        q: &MessageQueue,
        offset: i64,
        sys_flag: i32,
        suspend_ms: i64,
    ) -> PullMessageRequestHeader {
        PullMessageRequestHeader {
            consumer_group: group.into(),
            topic: q.topic.to_string(),
            queue_id: q.queue_id,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag,
            commit_offset: 0,
            suspend_timeout_millis: suspend_ms,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: Some(ExpressionType::Tag),
            max_msg_bytes: None,
            bname: Some(q.broker_name.to_string()),
        }
    }

    /// One PULL_MESSAGE with the subscription flag (no heartbeat needed).
    pub fn pull(
        broker: &mut Conn,
        group: &str,
        q: &MessageQueue,
        offset: i64,
    ) -> (RemotingCommand, PullMessageResponseHeader, Vec<MessageExt>) {
        let h = pull_header(group, q, offset, 0x4, 0);
        let r = broker.call(RemotingCommand::request(RequestCode::PullMessage).with_header(&h), T);
        let header: PullMessageResponseHeader =
            r.header().unwrap_or_else(|e| panic!("pull header ({}): {e}", r.code));
        let msgs = if r.code == ResponseCode::Success as i32 {
            decode_messages(&r.body, &DecodeOptions::default()).expect("pull body decodes")
        } else {
            Vec::new()
        };
        (r, header, msgs)
    }

    /// Pull from `offset` until at least `n` messages arrived or the deadline passes.
    pub fn pull_n(
        broker: &mut Conn,
        group: &str,
        q: &MessageQueue,
        mut offset: i64,
        n: usize,
        within: Duration,
    ) -> Vec<MessageExt> {
        let deadline = Instant::now() + within;
        let mut got = Vec::new();
        while got.len() < n && Instant::now() < deadline {
            let (_r, h, msgs) = pull(broker, group, q, offset);
            if msgs.is_empty() {
                std::thread::sleep(Duration::from_millis(200));
            }
            offset = h.next_begin_offset.max(offset);
            got.extend(msgs);
        }
        got
    }

    /// A push consumer's heartbeat for `group` subscribed to `topics` with `*`.
    pub fn heartbeat_body(client_id: &str, group: &str, topics: &[&str]) -> HeartbeatData {
        HeartbeatData {
            client_id: client_id.into(),
            producer_data_set: vec![],
            consumer_data_set: vec![ConsumerData {
                group_name: group.into(),
                consume_type: ConsumeType::ConsumePassively,
                message_model: MessageModel::Clustering,
                consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
                subscription_data_set: topics
                    .iter()
                    .map(|t| SubscriptionData::build(t, "*", ExpressionType::Tag, 1))
                    .collect(),
                unit_mode: false,
            }],
            heartbeat_fingerprint: 0,
            without_sub: false,
        }
    }

    /// HEART_BEAT.
    pub fn heartbeat(broker: &mut Conn, client_id: &str, group: &str, topics: &[&str]) -> RemotingCommand {
        let r = broker.call(
            RemotingCommand::request(RequestCode::HeartBeat)
                .with_body(heartbeat_body(client_id, group, topics).encode()),
            T,
        );
        assert_eq!(r.code, 0, "heartbeat: {:?}", r.remark);
        r
    }
}

/// Standard base64 (the manifest's body encoding).
pub fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("bad base64 {c}"),
    };
    let clean: Vec<u8> = s.bytes().filter(|c| *c != b'=').collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let v: Vec<u32> = chunk.iter().map(|c| u32::from(val(*c))).collect();
        let n = v.iter().enumerate().fold(0u32, |acc, (i, x)| acc | (x << (18 - 6 * i)));
        out.push((n >> 16) as u8);
        if v.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if v.len() > 3 {
            out.push(n as u8);
        }
    }
    out
}

/// Compare messages decoded by us with the Java client's view of the same messages
/// (`scripts/java-producer.sh` manifest lines), field by field.
pub fn assert_matches_java_manifest(manifest: &str, got: &[rocketmq_push_core::MessageExt]) {
    use rocketmq_push_core::json::Value;
    let lines: Vec<Value> = manifest
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Value::parse(l.as_bytes()).unwrap())
        .collect();
    assert_eq!(got.len(), lines.len(), "message count");
    for (m, line) in got.iter().zip(&lines) {
        let j = line.get("javaView").expect("javaView");
        let i64_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_i64).unwrap_or_else(|| panic!("{k}"));
        let what = line.get("kind").and_then(Value::as_str).unwrap_or("?");
        assert_eq!(m.queue_offset, i64_of(line, "queueOffset"), "{what}: queueOffset");
        assert_eq!(m.queue_id as i64, i64_of(j, "queueId"), "{what}: queueId");
        assert_eq!(m.commit_log_offset, i64_of(j, "commitLogOffset"), "{what}: commitLogOffset");
        assert_eq!(m.store_size as i64, i64_of(j, "storeSize"), "{what}: storeSize");
        assert_eq!(m.sys_flag as i64, i64_of(j, "sysFlag"), "{what}: sysFlag after decompression");
        assert_eq!(m.body_crc as i64, i64_of(j, "bodyCRC"), "{what}: bodyCRC");
        assert_eq!(m.flag as i64, i64_of(j, "flag"), "{what}: flag");
        assert_eq!(m.reconsume_times as i64, i64_of(j, "reconsumeTimes"), "{what}: reconsumeTimes");
        assert_eq!(m.born_timestamp, i64_of(j, "bornTimestamp"), "{what}: bornTimestamp");
        assert_eq!(m.store_timestamp, i64_of(j, "storeTimestamp"), "{what}: storeTimestamp");
        assert_eq!(m.born_host.to_string(), j.get("bornHost").unwrap().as_str().unwrap(), "{what}: bornHost");
        assert_eq!(
            m.store_host.to_string(),
            j.get("storeHost").unwrap().as_str().unwrap(),
            "{what}: storeHost"
        );
        assert_eq!(m.offset_msg_id(), j.get("offsetMsgId").unwrap().as_str().unwrap(), "{what}: offsetMsgId");
        assert_eq!(m.msg_id(), line.get("consumerMsgId").unwrap().as_str().unwrap(), "{what}: msgId");
        assert_eq!(m.msg_id(), j.get("msgId").unwrap().as_str().unwrap(), "{what}: msgId (Java view)");
        let body = base64_decode(line.get("bodyBase64").unwrap().as_str().unwrap());
        assert_eq!(m.body.len(), body.len(), "{what}: body length");
        assert!(m.body == body, "{what}: body bytes");
        let mut ours: Vec<(String, String)> =
            m.properties.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        ours.sort();
        ours.dedup_by(|a, b| a.0 == b.0);
        let mut java: Vec<(String, String)> = j
            .get("properties")
            .unwrap()
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.as_str().unwrap().to_owned(), v.as_str().unwrap().to_owned()))
            .collect();
        java.sort();
        // Java keeps the last of duplicated keys; compare key sets and our last-wins lookups.
        let ours_keys: Vec<&String> = ours.iter().map(|(k, _)| k).collect();
        let java_keys: Vec<&String> = java.iter().map(|(k, _)| k).collect();
        assert_eq!(ours_keys, java_keys, "{what}: property keys");
        for (k, v) in &java {
            assert_eq!(m.property(k), Some(v.as_str()), "{what}: property {k}");
        }
        if let Some(tags) = line.get("tags").and_then(Value::as_str) {
            assert_eq!(m.tags(), Some(tags), "{what}: tags");
        }
    }
}
