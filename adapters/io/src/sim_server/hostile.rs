//! What a hostile name server or broker sends instead of the simulator's answers.

use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};
use rocketmq_push_core::RemotingCommand;
use rocketmq_push_core::codec::encode_to_bytes;
use rocketmq_push_core::message::sys_flag::{INNER_BATCH_FLAG, NEED_UNWRAP_FLAG};
use rocketmq_push_core::message::{
    CompressionType, DEFAULT_MAX_BODY_SIZE, MessageExt, compress, decode_messages, encode_batch_entry,
    encode_stored,
};
use rocketmq_push_core::protocol::LanguageCode;
use rocketmq_push_core::protocol::body::{JsonBody, TopicRouteData};

use super::{Hostility, Target, World};

/// Replace a FOUND pull answer's body as `h` says.
pub(super) fn mangle_pull(h: Hostility, answer: &mut RemotingCommand) {
    match h {
        Hostility::ZlibBombs => answer.body = zlib_bombs().clone(),
        Hostility::InnerBatchBombs => answer.body = inner_batch_bomb().clone(),
        Hostility::AbsurdOffsets => {
            // The first record again, claiming an offset no queue reaches.
            let Ok(msgs) = decode_messages(&answer.body, &Default::default()) else { return };
            let Some(first) = msgs.first() else { return };
            let mut forged = first.clone();
            forged.queue_offset = 1 << 62;
            let mut body = BytesMut::from(&answer.body[..]);
            encode_stored(&forged, &mut body);
            answer.body = body.freeze();
        }
        _ => {}
    }
}

/// Replace a route answer's body as `h` says.
pub(super) fn mangle_route(h: Hostility, answer: &mut RemotingCommand) {
    if h != Hostility::AbsurdRoutes {
        return;
    }
    let Ok(mut route) = TopicRouteData::decode(&answer.body) else { return };
    for q in &mut route.queue_datas {
        q.read_queue_nums = i32::MAX;
        q.write_queue_nums = i32::MAX;
    }
    answer.body = route.encode();
}

/// The start of a frame that declares 16 MiB, and only 100 bytes of it.
pub(super) fn partial_frame() -> Bytes {
    let mut b = vec![0u8; 100];
    b[..4].copy_from_slice(&((16 << 20) - 4i32).to_be_bytes());
    Bytes::from(b)
}

/// 2,000 requests with a code no client knows, answers expected, to every broker connection.
pub(super) fn flood(w: &mut World) {
    let mut bytes = BytesMut::new();
    for i in 0..2000 {
        let mut cmd = RemotingCommand::raw_request(9999);
        cmd.opaque = 1_000_000 + i;
        cmd.language = LanguageCode::JAVA;
        bytes.extend_from_slice(&encode_to_bytes(&cmd));
    }
    let bytes = bytes.freeze();
    for (target, s) in w.conns.values_mut() {
        if matches!(target, Target::Broker(_)) {
            let _ = std::io::Write::write_all(s, &bytes);
        }
    }
}

/// 48 records, each a zlib stream inflating to one byte under the 32 MiB body cap.
fn zlib_bombs() -> &'static Bytes {
    static BODY: OnceLock<Bytes> = OnceLock::new();
    BODY.get_or_init(|| {
        let plain = vec![b'x'; DEFAULT_MAX_BODY_SIZE - 1];
        let packed = Bytes::from(compress(CompressionType::Zlib, &plain));
        let mut body = BytesMut::new();
        for i in 0..48 {
            let mut m = MessageExt::new("T", packed.clone());
            m.sys_flag = CompressionType::Zlib.sys_flag_bits();
            m.queue_offset = i;
            encode_stored(&m, &mut body);
        }
        body.freeze()
    })
}

/// One inner-batch record whose zlib body inflates to 32 MiB of one-byte entries.
fn inner_batch_bomb() -> &'static Bytes {
    static BODY: OnceLock<Bytes> = OnceLock::new();
    BODY.get_or_init(|| {
        let mut entries = BytesMut::new();
        while entries.len() + 23 < DEFAULT_MAX_BODY_SIZE {
            encode_batch_entry(0, b"x", b"", &mut entries);
        }
        let mut m = MessageExt::new("T", Bytes::from(compress(CompressionType::Zlib, &entries)));
        m.sys_flag = CompressionType::Zlib.sys_flag_bits() | INNER_BATCH_FLAG | NEED_UNWRAP_FLAG;
        let mut body = BytesMut::new();
        encode_stored(&m, &mut body);
        body.freeze()
    })
}
