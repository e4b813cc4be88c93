//! Fuzz entry points, shared by `fuzz/` (cargo-fuzz) and `tests/regressions.rs` (stable replay of
//! every seed and minimised crash). Each function panics only when an invariant is broken: a
//! decoder must never panic, and whatever it accepts must survive encode → decode unchanged.
//!
//! Not part of the API; hidden from the docs.

use bytes::{Bytes, BytesMut};

use crate::codec::{FrameReader, RemotingCodec, decode_frame_body, encode_to_bytes};
use crate::message::{DecodeOptions, MessageExt, decode_messages as decode_records, encode_stored};
use crate::protocol::body::{
    BatchAckMessageRequestBody, CheckClientRequestBody, ConsumeMessageDirectlyResult, ConsumeStatsBody,
    ConsumerRunningInfo, GetConsumerListByGroupResponseBody, GetConsumerStatusBody, HeartbeatData,
    LockBatchRequestBody, LockBatchResponseBody, QueryAssignmentRequestBody, QueryAssignmentResponseBody,
    ResetOffsetBody, SetMessageRequestModeRequestBody, TopicRouteData,
};
use crate::protocol::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader, PopMessageResponseHeader,
};
use crate::protocol::header::{
    ConsumeMessageDirectlyResultRequestHeader, ConsumerSendMsgBackRequestHeader,
    GetConsumerRunningInfoRequestHeader, OffsetResponseHeader, PullMessageRequestHeader,
    PullMessageResponseHeader, ResetOffsetRequestHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
};
use crate::protocol::receipt::{PopReceipt, attach_receipts_each};
use crate::protocol::{CommandHeader, JsonBody, RemotingCommand, SerializeType};

/// The wire cannot tell an empty binary remark from none; compare commands modulo that.
fn normalised(mut c: RemotingCommand) -> RemotingCommand {
    if c.serialize_type == SerializeType::RocketMq && c.remark.as_deref() == Some("") {
        c.remark = None;
    }
    c
}

fn read_every_header(cmd: &RemotingCommand) {
    // Typed headers must fail with an error, never a panic, whatever the ext fields hold.
    let ext = &cmd.ext_fields;
    let _ = PullMessageRequestHeader::read_from(ext);
    let _ = PullMessageResponseHeader::read_from(ext);
    let _ = OffsetResponseHeader::read_from(ext);
    let _ = SendMessageRequestHeaderV2::read_from(ext);
    let _ = SendMessageResponseHeader::read_from(ext);
    let _ = ConsumerSendMsgBackRequestHeader::read_from(ext);
    let _ = ResetOffsetRequestHeader::read_from(ext);
    let _ = GetConsumerRunningInfoRequestHeader::read_from(ext);
    let _ = ConsumeMessageDirectlyResultRequestHeader::read_from(ext);
    let _ = PopMessageRequestHeader::read_from(ext);
    let _ = AckMessageRequestHeader::read_from(ext);
    let _ = ChangeInvisibleTimeRequestHeader::read_from(ext);
    let _ = ChangeInvisibleTimeResponseHeader::read_from(ext);
    // Any value may be a receipt: what parses must print back to itself. Or an orderly pop's
    // counts: never negative.
    for (_, v) in ext.iter() {
        if let Ok(r) = PopReceipt::parse(v) {
            assert_eq!(PopReceipt::parse(&r.to_string()), Ok(r), "receipt round trip");
        }
        if let Ok(c) = crate::protocol::order_count::OrderCounts::parse(v) {
            assert!(c.count(0, 0) >= 0 && c.count(1, 1) >= 0);
        }
    }
}

/// A pop answer: whatever receipts it yields cover every message, each for that message.
fn pop_answer(cmd: &RemotingCommand) {
    let Ok(header) = PopMessageResponseHeader::read_from(&cmd.ext_fields) else { return };
    let opts = DecodeOptions { decompress: true, max_body_size: 1 << 20 };
    let Ok(mut msgs) = decode_records(&cmd.body, &opts) else { return };
    let receipts = attach_receipts_each(&mut msgs, &header, "broker-a", "T");
    assert_eq!(receipts.len(), msgs.len(), "one result per message");
    for (m, r) in msgs.iter().zip(&receipts) {
        if let Ok(r) = r {
            assert_eq!(m.properties.get(crate::message::keys::POP_CK), Some(r.to_string().as_str()));
        }
    }
}

/// Frames: decode a byte stream frame by frame; each decoded frame must round-trip. The same
/// stream read in pieces (their size from the first byte) through a [`FrameReader`] gives the
/// same frames and ends the same way.
pub fn decode_frame(data: &[u8]) {
    let codec = RemotingCodec::with_max_frame_size(1 << 20);
    let mut buf = BytesMut::from(data);
    let mut frames = Vec::new();
    let end = loop {
        if frames.len() == 64 {
            return;
        }
        match codec.decode(&mut buf) {
            Ok(Some(cmd)) => {
                read_every_header(&cmd);
                pop_answer(&cmd);
                let bytes = encode_to_bytes(&cmd);
                let mut again = BytesMut::from(&bytes[..]);
                let back = RemotingCodec::new().decode(&mut again).expect("re-encoded frame decodes");
                assert_eq!(back.map(normalised), Some(normalised(cmd.clone())), "frame round trip");
                assert!(again.is_empty(), "re-encoded frame is consumed whole");
                frames.push(normalised(cmd));
            }
            Ok(None) => break Some(buf.len()),
            Err(_) => break None,
        }
    };
    let piece = usize::from(data.first().copied().unwrap_or(0) % 64) + 1;
    let mut reader = FrameReader::new();
    let mut pieced = Vec::new();
    let mut pieced_end = None;
    'read: for chunk in data.chunks(piece) {
        reader.push(Bytes::copy_from_slice(chunk));
        loop {
            match reader.next(&codec) {
                Ok(Some(cmd)) => pieced.push(normalised(cmd)),
                Ok(None) => break,
                Err(_) => {
                    pieced_end = Some(None);
                    break 'read;
                }
            }
        }
    }
    let pieced_end = pieced_end.unwrap_or_else(|| Some(reader.buffered()));
    assert_eq!(pieced, frames, "the same frames, read in pieces of {piece}");
    assert_eq!(pieced_end, end, "the same end, read in pieces of {piece}");
}

/// Headers: the first byte picks the encoding; the rest is a header, parsed as a frame would be.
pub fn decode_header(data: &[u8]) {
    let Some((&ty, header)) = data.split_first() else { return };
    let ty = if ty & 1 == 0 { 0u8 } else { 1u8 };
    let mut frame = Vec::with_capacity(header.len() + 4);
    let len = header.len().min(0x00FF_FFFF) as u32;
    frame.extend_from_slice(&((u32::from(ty) << 24) | len).to_be_bytes());
    frame.extend_from_slice(&header[..len as usize]);
    if let Ok(cmd) = decode_frame_body(Bytes::from(frame)) {
        read_every_header(&cmd);
        let bytes = encode_to_bytes(&cmd);
        let back = decode_frame_body(bytes.slice(4..)).expect("re-encoded header decodes");
        assert_eq!(normalised(back), normalised(cmd), "header round trip");
    }
}

fn encodable(m: &MessageExt) -> bool {
    m.topic.len() <= i16::MAX as usize
        && m.properties.as_bytes().len() <= i16::MAX as usize
        && i32::try_from(m.body.len()).is_ok()
}

/// Pull bodies: records (compressed or not) that decode must re-encode to the same messages.
pub fn decode_messages(data: &[u8]) {
    let opts = DecodeOptions { decompress: true, max_body_size: 1 << 20 };
    let body = Bytes::copy_from_slice(data);
    // A budget from the first bytes: a bounded decode is a prefix of the whole one, and stops
    // within the budget plus one record.
    if let (Some(&m), Some(&k)) = (data.first(), data.get(1)) {
        let budget =
            crate::message::DecodeBudget { messages: usize::from(m % 8), bytes: usize::from(k) * 64 };
        let part = crate::message::decode_messages_within(&body, &opts, budget);
        // Records after the budget stop are not read: the whole may fail where the part did not.
        if let (Ok(d), Ok(whole)) = (part, decode_records(&body, &opts)) {
            assert!(
                d.messages.len() <= whole.len() && d.messages[..] == whole[..d.messages.len()],
                "a prefix"
            );
            assert!(d.truncated || d.messages.len() == whole.len());
        }
    }
    let Ok(msgs) = decode_records(&body, &opts) else { return };
    for m in &msgs {
        // The walk from the end finds what the pairs in order say (the last value wins).
        for (k, v) in m.properties.distinct() {
            assert_eq!(m.properties.get(k), Some(v), "property {k:?}");
        }
    }
    for m in msgs.iter().filter(|m| encodable(m)) {
        let _ = (m.msg_id(), m.tags(), m.keys().count(), m.properties.user().count());
        let mut out = BytesMut::new();
        encode_stored(m, &mut out);
        let back = decode_records(&out.freeze(), &opts).expect("re-encoded record decodes");
        let mut want = m.clone();
        want.store_size = back[0].store_size;
        assert_eq!(back, [want], "record round trip");
    }
}

fn body_round_trip<T: JsonBody + PartialEq + std::fmt::Debug>(data: &[u8]) {
    if let Ok(b) = T::decode(data) {
        let again = T::decode(&b.encode()).expect("re-encoded body decodes");
        assert_eq!(again, b, "{} round trip", T::NAME);
    }
}

/// JSON bodies: the first byte picks the body type.
pub fn decode_json_body(data: &[u8]) {
    let Some((&which, json)) = data.split_first() else { return };
    let _ = crate::json::Value::parse(json).map(|v| v.to_string());
    match which % 15 {
        0 => body_round_trip::<TopicRouteData>(json),
        1 => body_round_trip::<HeartbeatData>(json),
        2 => body_round_trip::<LockBatchRequestBody>(json),
        3 => body_round_trip::<LockBatchResponseBody>(json),
        4 => body_round_trip::<ResetOffsetBody>(json),
        5 => body_round_trip::<GetConsumerStatusBody>(json),
        6 => body_round_trip::<GetConsumerListByGroupResponseBody>(json),
        7 => body_round_trip::<ConsumerRunningInfo>(json),
        8 => body_round_trip::<ConsumeMessageDirectlyResult>(json),
        9 => body_round_trip::<CheckClientRequestBody>(json),
        10 => body_round_trip::<ConsumeStatsBody>(json),
        11 => body_round_trip::<QueryAssignmentResponseBody>(json),
        12 => body_round_trip::<QueryAssignmentRequestBody>(json),
        13 => body_round_trip::<SetMessageRequestModeRequestBody>(json),
        _ => body_round_trip::<BatchAckMessageRequestBody>(json),
    }
}

/// A running consumer fed arbitrary frames (forged responses with live opaques, broker
/// requests, garbage), disconnects, time, and misuse. Nothing may panic; the consumer's own
/// invariants (bounded cache, commit at or below the watermark) must hold throughout.
#[cfg(feature = "sim")]
pub fn consumer_frames(data: &[u8]) {
    use std::time::Duration;

    use crate::event::{BatchId, ConsumeResult};
    use crate::message::{MessageExt, encode_stored};
    use crate::protocol::{FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode};
    use crate::sim::Sim;

    let mut sim = Sim::builder(7).broker("broker-a", &[("T", 2)]).results_together(true).build();
    sim.skip_broker_commit_check();
    // An odd last byte: the group pops (forged pop answers, receipts, ack answers); with bit 1
    // set too, an orderly consumer pops in order (forged order counts).
    let last = data.last().copied().unwrap_or(0);
    if last & 1 == 1 {
        let mode = crate::protocol::body::MessageRequestMode::Pop;
        sim.broker_mut(0).set_message_request_mode("T", "G", mode, 0);
    }
    sim.produce("T", 6);
    let mut cfg = sim
        .config("G")
        .subscribe("T", "*")
        .consume_from_where(crate::ConsumeFromWhere::ConsumeFromFirstOffset);
    if last & 3 == 3 {
        cfg = cfg.consume_mode(crate::ConsumeMode::Orderly).orderly_pop(true);
    }
    let c = sim.add_consumer(cfg);
    sim.run_for(Duration::from_secs(2));
    const CODES: [i32; 16] = [0, 1, 2, 3, 17, 19, 20, 21, 22, 24, 25, 26, 209, 210, 215, 1500];
    const REQUESTS: [i32; 7] = [40, 220, 221, 307, 309, 39, 9999];
    const KEYS: [&str; 16] = [
        "nextBeginOffset",
        "minOffset",
        "maxOffset",
        "suggestWhichBrokerId",
        "offset",
        "msgId",
        "queueId",
        "queueOffset",
        "consumerGroup",
        "topic",
        "popTime",
        "invisibleTime",
        "reviveQid",
        "startOffsetInfo",
        "msgOffsetInfo",
        "orderCountInfo",
    ];
    let mut d = data;
    let mut take = |n: usize| -> &[u8] {
        let (a, b) = d.split_at(n.min(d.len()));
        d = b;
        a
    };
    for _ in 0..64 {
        let head = take(4);
        let [kind, x, y, z] = match head {
            [a, b, c, e] => [*a, *b, *c, *e],
            _ => break,
        };
        match kind % 6 {
            0 | 1 => {
                let response = kind % 6 == 0;
                let mut cmd = RemotingCommand::raw_request(if response {
                    CODES[usize::from(x) % CODES.len()]
                } else {
                    REQUESTS[usize::from(x) % REQUESTS.len()]
                });
                cmd.opaque = i32::from(y);
                cmd.flag = if response {
                    FLAG_RESPONSE
                } else if z & 1 == 1 {
                    FLAG_ONEWAY
                } else {
                    0
                };
                cmd.language = LanguageCode::JAVA;
                for i in 0..(z % 5) {
                    let v = take(2);
                    let value = match v {
                        [a, b] if a % 3 == 0 => format!("x{b}"),
                        // A pop answer's offset list entry: "{retry} {queueId} {offsets}".
                        [a, b] if a % 5 == 1 => format!("{} {} {}", a % 4, b % 3, b),
                        [a, b] => (i64::from(*a) * 256 + i64::from(*b) - 100).to_string(),
                        _ => String::new(),
                    };
                    cmd.ext_fields.insert(KEYS[usize::from(i * 3 + x) % KEYS.len()], value);
                }
                if z & 0x80 != 0 {
                    let mut body = BytesMut::new();
                    let mut m = MessageExt::new("T", "fuzz");
                    m.queue_offset = i64::from(y);
                    if z & 0x20 != 0 {
                        // A receipt of its own (the broker's, or a producer's forgery).
                        let ck = format!("{} 1700000000000 60000 {} 1 broker-a 0 {y}", x % 4, z % 9);
                        m.properties = m.properties.with(crate::message::keys::POP_CK, &ck);
                    }
                    encode_stored(&m, &mut body);
                    cmd.body = body.freeze();
                } else if z & 0x40 != 0 {
                    let n = usize::from(y);
                    cmd.body = Bytes::copy_from_slice(take(n));
                }
                sim.deliver_from_broker(c, 0, cmd);
            }
            2 => sim.run_for(Duration::from_millis(u64::from(x) * 20)),
            3 => sim.inject(crate::sim::Fault::ResetBroker(0)),
            4 => {
                // Misuse: a result for a batch that was never dispatched changes nothing.
                let now = sim.now();
                if let Some(driver) = sim.driver_mut(c) {
                    let before = driver.consumer().queue_snapshots();
                    let id = BatchId(u64::MAX - u64::from(x));
                    if y & 1 == 0 {
                        let r = driver.consumed(id, ConsumeResult::SUCCESS, now);
                        assert!(r.is_err(), "unknown batch accepted");
                    } else {
                        // The same through the results of a pass, twice over.
                        let mut refused = 0;
                        let results = [(id, ConsumeResult::SUCCESS), (id, ConsumeResult::LATER)];
                        driver.consumed_all(results, now, |_, _| refused += 1);
                        assert_eq!(refused, 2, "unknown batch accepted");
                    }
                    assert_eq!(driver.consumer().queue_snapshots(), before, "misuse changed state");
                }
            }
            _ => {
                // Raw bytes on the broker's connection: the driver frames them (or closes the
                // link on garbage, and the consumer reconnects).
                let n = usize::from(x) + 8;
                let bytes = take(n).to_vec();
                sim.deliver_bytes_from_broker(c, 0, &bytes);
            }
        }
    }
    sim.run_for(Duration::from_secs(40));
}

/// A list of simulator operations (faults, restarts, production) decoded from bytes; the
/// invariants are checked after every step and everything must be consumed once faults heal.
#[cfg(feature = "sim")]
pub fn consumer_ops(data: &[u8]) {
    let seed = data.first().copied().map_or(0, u64::from);
    let ops = crate::sim::SimOp::decode_all(data.get(1..).unwrap_or(&[]));
    if let Err(e) = crate::sim::run_ops(seed, &ops) {
        panic!("{e}\nops: {ops:?}");
    }
}
