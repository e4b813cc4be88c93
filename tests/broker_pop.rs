//! POP (RocketMQ 5) against the real broker at the wire level: assignment, pop, ack, batch ack,
//! change of invisible time, revive, orderly pop. Each test uses its own topic and group and one
//! [`PopGroup`] for the requests; with `RMQ_CAPTURE=1` the first also writes golden frames in
//! `tests/data/`. On 4.9.x the first checks the refusals and the others return at once.
#![allow(clippy::disallowed_methods)] // real sockets and clocks: this is the I/O side of the tests

mod common;

use std::time::{Duration, Instant};

use common::ops::*;
use common::*;
use rocketmq_push_core::MessageQueue;
use rocketmq_push_core::message::{DecodeOptions, Message, MessageExt, keys};
use rocketmq_push_core::protocol::body::{
    BatchAck, BatchAckMessageRequestBody, JsonBody, MessageModel, MessageRequestMode,
    QueryAssignmentRequestBody, QueryAssignmentResponseBody, SetMessageRequestModeRequestBody,
};
use rocketmq_push_core::protocol::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    GetMaxOffsetRequestHeader, OffsetResponseHeader, PopMessageRequestHeader, PopMessageResponseHeader,
};
use rocketmq_push_core::protocol::receipt::{POP_ORDER_REVIVE_QUEUE, PopReceipt, RetryFlag, attach_receipts};
use rocketmq_push_core::protocol::{RemotingCommand, RequestCode, ResponseCode};

/// A topic and a consumer group on the test broker, and the POP requests the tests send for it.
struct PopGroup {
    topic: String,
    group: String,
    broker_name: String,
}

/// What one POP_MESSAGE asks for; [`Pop::default`] is what the Java client sends but for the
/// hold (2 s) and `bornTime` 0 (the broker holds by its own clock). `born_time` [`NOW`] is the
/// clock at each send, as the client sets it.
#[derive(Clone, Copy)]
struct Pop {
    max: i32,
    invisible_ms: i64,
    poll_ms: i64,
    born_time: i64,
    order: bool,
}

/// `bornTime` taken when the pop is sent.
const NOW: i64 = -1;

impl Default for Pop {
    fn default() -> Self {
        Self { max: 32, invisible_ms: 60_000, poll_ms: 2_000, born_time: 0, order: false }
    }
}

/// A POP_MESSAGE answer: its code and header, the messages with the receipts made from it.
struct Popped {
    code: i32,
    header: PopMessageResponseHeader,
    msgs: Vec<(MessageExt, PopReceipt)>,
}

impl Popped {
    fn bodies(&self) -> Vec<String> {
        self.msgs.iter().map(|(m, _)| String::from_utf8_lossy(&m.body).into_owned()).collect()
    }
}

impl PopGroup {
    /// Makes a topic of `queues` queues and a group (registered by a heartbeat as `client_id`),
    /// not switched to POP yet.
    fn new(env: &BrokerEnv, b: &mut Conn, name: &str, queues: i32, client_id: &str) -> Self {
        let (topic, group) = (unique(&format!("wire_{name}")), unique(&format!("g_{name}")));
        create_topic(b, &topic, queues);
        heartbeat(b, client_id, &group, &[&topic]);
        let mut ns = Conn::connect(&env.namesrv);
        let broker_name = route(&mut ns, &topic).1.subscribe_queues(&topic)[0].broker_name.to_string();
        Self { topic, group, broker_name }
    }

    /// A new group switched to POP (`setConsumeMode`, as mqadmin does it).
    fn popping(env: &BrokerEnv, b: &mut Conn, name: &str, queues: i32) -> Self {
        let g = Self::new(env, b, name, queues, &format!("{name}-client@1"));
        let r = g.set_mode(b, MessageRequestMode::Pop);
        assert_eq!(r.code, 0, "{}", r.remark_str());
        g
    }

    fn set_mode(&self, b: &mut Conn, mode: MessageRequestMode) -> RemotingCommand {
        let body = SetMessageRequestModeRequestBody {
            topic: self.topic.clone(),
            consumer_group: self.group.clone(),
            mode,
            pop_share_queue_num: 0,
        };
        b.call(RemotingCommand::request(RequestCode::SetMessageRequestMode).with_body(body.encode()), T)
    }

    /// Sends `bodies` to queue `queue_id % queues` in turn, and returns once the broker's consume
    /// queues hold them all: a stored message reaches its consume queue a moment later, and a
    /// pop in between returns only part of what was sent (an orderly one then locks the queue
    /// on that part).
    fn produce(&self, b: &mut Conn, bodies: impl IntoIterator<Item = String>, queues: i32) {
        let mut want: Vec<i64> = (0..queues).map(|q| self.max_offset(b, q)).collect();
        for (i, body) in bodies.into_iter().enumerate() {
            let q = MessageQueue::new(self.topic.as_str(), self.broker_name.as_str(), i as i32 % queues);
            send(b, &Message::new(self.topic.as_str(), body.into_bytes()), &q, false);
            want[i % queues as usize] += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for (q, want) in (0..queues).zip(want) {
            while self.max_offset(b, q) < want {
                assert!(Instant::now() < deadline, "queue {q} never reached offset {want}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// The next offset of the consume queue `queue_id` (0 while it has none).
    fn max_offset(&self, b: &mut Conn, queue_id: i32) -> i64 {
        let header = GetMaxOffsetRequestHeader {
            topic: self.topic.clone(),
            queue_id,
            committed: Some(true),
            bname: Some(self.broker_name.clone()),
        };
        let r = b.call(RemotingCommand::request(RequestCode::GetMaxOffset).with_header(&header), T);
        r.header::<OffsetResponseHeader>().map_or(0, |h| h.offset)
    }

    fn pop_header(&self, p: Pop) -> PopMessageRequestHeader {
        PopMessageRequestHeader {
            consumer_group: self.group.clone(),
            topic: self.topic.clone(),
            queue_id: -1,
            max_msg_nums: p.max,
            invisible_time: p.invisible_ms,
            poll_time: p.poll_ms,
            born_time: if p.born_time == NOW { now_ms() } else { p.born_time },
            init_mode: 0,
            exp_type: None,
            exp: Some("*".into()),
            order: Some(p.order),
            attempt_id: None,
            bname: Some(self.broker_name.clone()),
        }
    }

    fn pop(&self, b: &mut Conn, p: Pop) -> Popped {
        let r = b.call(RemotingCommand::request(RequestCode::PopMessage).with_header(&self.pop_header(p)), T);
        let header: PopMessageResponseHeader = r.header().expect("every pop answer has the header");
        let mut msgs = if r.code == 0 {
            rocketmq_push_core::message::decode_messages(&r.body, &DecodeOptions::default()).unwrap()
        } else {
            Vec::new()
        };
        let receipts = attach_receipts(&mut msgs, &header, &self.broker_name, &self.topic).unwrap();
        Popped { code: r.code, header, msgs: msgs.into_iter().zip(receipts).collect() }
    }

    /// Pops until `n` messages came or `within` passed; the messages sorted by body.
    fn pop_until(&self, b: &mut Conn, p: Pop, n: usize, within: Duration) -> Vec<(MessageExt, PopReceipt)> {
        let mut got = Vec::new();
        let deadline = Instant::now() + within;
        while got.len() < n && Instant::now() < deadline {
            got.extend(self.pop(b, p).msgs);
        }
        got.sort_by(|a, b| a.0.body.cmp(&b.0.body));
        got
    }

    /// ACK_MESSAGE as the consumer sends it: the retry topic for a revived message.
    fn ack(&self, b: &mut Conn, r: &PopReceipt) -> i32 {
        let h = AckMessageRequestHeader {
            consumer_group: self.group.clone(),
            topic: r.retry.real_topic(&self.topic, &self.group),
            queue_id: r.queue_id,
            extra_info: r.to_string(),
            offset: r.queue_offset,
            bname: Some(r.broker_name.clone()),
        };
        b.call(RemotingCommand::request(RequestCode::AckMessage).with_header(&h), T).code
    }

    /// BATCH_ACK_MESSAGE as the consumer builds it: one entry per checkpoint.
    fn batch_ack(&self, b: &mut Conn, receipts: &[&PopReceipt]) -> RemotingCommand {
        let mut acks: Vec<BatchAck> = Vec::new();
        for r in receipts {
            match acks.iter_mut().find(|a| a.same_checkpoint(&self.topic, r)) {
                Some(a) => assert!(a.set(r.queue_offset)),
                None => {
                    let mut a = BatchAck::for_checkpoint(&self.group, &self.topic, r);
                    assert!(a.set(r.queue_offset));
                    acks.push(a);
                }
            }
        }
        let body = BatchAckMessageRequestBody { broker_name: self.broker_name.clone(), acks };
        b.call(RemotingCommand::request(RequestCode::BatchAckMessage).with_body(body.encode()), T)
    }

    fn change_invisible(&self, b: &mut Conn, r: &PopReceipt, invisible_ms: i64) -> RemotingCommand {
        let h = ChangeInvisibleTimeRequestHeader {
            consumer_group: self.group.clone(),
            topic: r.retry.real_topic(&self.topic, &self.group),
            queue_id: r.queue_id,
            extra_info: r.to_string(),
            offset: r.queue_offset,
            invisible_time: invisible_ms,
            bname: Some(r.broker_name.clone()),
        };
        b.call(RemotingCommand::request(RequestCode::ChangeMessageInvisibleTime).with_header(&h), T)
    }
}

/// POP over remoting, as the Java 5.x client speaks it: a group switched to POP is assigned
/// "every queue" (-1) by QUERY_ASSIGNMENT; a pop long-polls and returns receipts; an ack keeps a
/// message from coming back; a change of invisible time and a message nobody acked both come back
/// from the pop retry topic, with the broker's own receipt. 4.9 has none of it and says so.
#[test]
fn pop_mode_assignment_pop_ack_change_invisible_and_revive() {
    let Some(env) = broker_env() else { return };
    let mut b = Conn::connect(&env.broker);
    let g = PopGroup::new(&env, &mut b, "pop", 2, "pop-client@1");
    let assignment = |b: &mut Conn| {
        let body = QueryAssignmentRequestBody {
            topic: g.topic.clone(),
            consumer_group: g.group.clone(),
            client_id: "pop-client@1".into(),
            strategy_name: "AVG".into(),
            message_model: MessageModel::Clustering,
        };
        let r = b.call(RemotingCommand::request(RequestCode::QueryAssignment).with_body(body.encode()), T);
        (r.code, QueryAssignmentResponseBody::decode(&r.body).ok())
    };
    if is_v4() {
        let (code, _) = assignment(&mut b);
        assert_eq!(code, ResponseCode::RequestCodeNotSupported as i32, "4.9 has no QUERY_ASSIGNMENT");
        let pop = RemotingCommand::request(RequestCode::PopMessage);
        assert_eq!(b.call(pop, T).code, ResponseCode::RequestCodeNotSupported as i32);
        return;
    }

    // Never switched: PULL, real queue ids, the client's share (all of them: it is alone).
    let (code, body) = assignment(&mut b);
    assert_eq!(code, 0);
    capture("query_assignment_pull", "QUERY_ASSIGNMENT answer for a group never switched", &b.last_raw());
    let mut pull = body.unwrap().message_queue_assignments.expect("a known group gets an answer");
    pull.sort_by_key(|a| a.message_queue.queue_id);
    assert_eq!(
        pull.iter().map(|a| (a.message_queue.queue_id, a.mode)).collect::<Vec<_>>(),
        [(0, MessageRequestMode::Pull), (1, MessageRequestMode::Pull)]
    );
    let r = g.set_mode(&mut b, MessageRequestMode::Pop);
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let (_, body) = assignment(&mut b);
    capture("query_assignment_pop", "QUERY_ASSIGNMENT answer after setConsumeMode POP", &b.last_raw());
    let pop_assignment = body.unwrap().message_queue_assignments.unwrap();
    assert_eq!(pop_assignment.len(), 1, "{pop_assignment:?}");
    let a = &pop_assignment[0];
    assert_eq!((a.message_queue.queue_id, a.mode), (-1, MessageRequestMode::Pop));
    assert_eq!(&*a.message_queue.broker_name, g.broker_name.as_str());

    g.produce(&mut b, (0..3).map(|i| format!("pop-{i}")), 2);
    // The first pop may find the queues still initialising; a few tries get all three.
    let short = Pop { invisible_ms: 5_000, born_time: NOW, ..Pop::default() };
    let mut first = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while first.len() < 3 && Instant::now() < deadline {
        let popped = g.pop(&mut b, short);
        if popped.code == 0 {
            capture("pop_found", "POP_MESSAGE FOUND with receipts for both queues", &b.last_raw());
        } else {
            assert!(
                [ResponseCode::PollingTimeout as i32, ResponseCode::PullNotFound as i32]
                    .contains(&popped.code),
                "pop answered {}",
                popped.code
            );
            capture("pop_polling_timeout", "POP_MESSAGE after its hold found nothing", &b.last_raw());
        }
        first.extend(popped.msgs);
    }
    let mut bodies: Vec<String> =
        first.iter().map(|(m, _)| String::from_utf8_lossy(&m.body).into_owned()).collect();
    bodies.sort();
    assert_eq!(bodies, ["pop-0", "pop-1", "pop-2"]);
    for (m, r) in &first {
        assert_eq!((r.retry, r.queue_id, r.queue_offset), (RetryFlag::Normal, m.queue_id, m.queue_offset));
        assert_eq!(PopReceipt::parse(m.properties.get(keys::POP_CK).unwrap()).unwrap(), *r);
    }
    let by_body = |name: &str| first.iter().find(|(m, _)| m.body == name.as_bytes()).unwrap().1.clone();
    assert_eq!(g.ack(&mut b, &by_body("pop-0")), 0);
    capture("ack_message_ok", "ACK_MESSAGE answer", &b.last_raw());
    // pop-1 comes back sooner than its pop said; pop-2 is left to expire.
    let r = g.change_invisible(&mut b, &by_body("pop-1"), 1_000);
    assert_eq!(r.code, 0, "{}", r.remark_str());
    capture("change_invisible_time_ok", "CHANGE_MESSAGE_INVISIBLETIME answer", &b.last_raw());
    let changed: ChangeInvisibleTimeResponseHeader = r.header().unwrap();
    assert_eq!(changed.invisible_time, 1_000);

    // Both come back, from the retry topic, with the broker's receipt; pop-0 never does.
    let long = Pop { born_time: NOW, ..Pop::default() };
    let mut again = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while again.len() < 2 && Instant::now() < deadline {
        let popped = g.pop(&mut b, long);
        if !popped.msgs.is_empty() {
            capture(
                "pop_found_revived",
                "POP_MESSAGE FOUND: revived messages with the broker's POP_CK",
                &b.last_raw(),
            );
        }
        again.extend(popped.msgs);
    }
    let mut back: Vec<(String, i32)> = again
        .iter()
        .map(|(m, _)| (String::from_utf8_lossy(&m.body).into_owned(), m.reconsume_times))
        .collect();
    back.sort();
    assert_eq!(back, [("pop-1".to_owned(), 1), ("pop-2".to_owned(), 1)], "revived once each, pop-0 acked");
    for (m, r) in &again {
        assert_eq!(&*m.topic, g.topic.as_str(), "the subscribed topic, as Java shows it");
        assert_eq!(r.retry, RetryFlag::RetryV1, "read from the pop retry topic");
        assert_eq!(g.ack(&mut b, r), 0, "ack of a revived message names the retry topic");
    }
    // An ack with a receipt whose checkpoint has been revived: the broker takes it quietly.
    let stale = g.ack(&mut b, &by_body("pop-2"));
    assert!([0, ResponseCode::NoMessage as i32].contains(&stale), "stale ack answered {stale}");
    let popped = g.pop(&mut b, long);
    assert!(popped.msgs.is_empty(), "nothing left: {} {:?}", popped.code, popped.bodies());
    // bornTime 0: the broker holds the pop by its own clock (a client whose clock is behind
    // the broker's by more than the hold would otherwise be answered at once, every time).
    let sent = Instant::now();
    let popped = g.pop(&mut b, Pop::default());
    assert_eq!(popped.code, ResponseCode::PollingTimeout as i32);
    assert!(
        sent.elapsed() >= Duration::from_millis(1_500),
        "held, not answered at once: {:?}",
        sent.elapsed()
    );
    // A bornTime far behind the broker's clock is answered at once ("timeout too much").
    let sent = Instant::now();
    let popped = g.pop(&mut b, Pop { born_time: now_ms() - 60_000, ..Pop::default() });
    assert_eq!(popped.code, ResponseCode::PollingTimeout as i32);
    assert!(sent.elapsed() < Duration::from_millis(1_000), "answered at once: {:?}", sent.elapsed());
}

/// BATCH_ACK_MESSAGE as the consumer builds it: one entry per checkpoint, a bitset of the acked
/// messages. On 5.3.3 exactly the acked ones stay gone; the rest revive, and a batch ack of
/// revived messages (retry flag 1, the subscribed topic named) keeps them gone too.
#[test]
fn pop_batch_ack_acks_its_bits_for_normal_and_revived_messages() {
    let Some(env) = broker_env() else { return };
    if is_v4() {
        return; // no POP at all: the first test checks the refusal
    }
    let mut b = Conn::connect(&env.broker);
    let g = PopGroup::popping(&env, &mut b, "batch_ack", 1);
    g.produce(&mut b, (0..8).map(|i| format!("b-{i}")), 1);
    let p = Pop { invisible_ms: 5_000, poll_ms: 1_000, ..Pop::default() };
    let names = |got: &[(MessageExt, PopReceipt)]| -> Vec<(String, i32, RetryFlag)> {
        got.iter()
            .map(|(m, r)| (String::from_utf8_lossy(&m.body).into_owned(), m.reconsume_times, r.retry))
            .collect()
    };

    let first = g.pop_until(&mut b, p, 8, Duration::from_secs(20));
    assert_eq!(names(&first), (0..8).map(|i| (format!("b-{i}"), 0, RetryFlag::Normal)).collect::<Vec<_>>());
    let even: Vec<&PopReceipt> = first.iter().step_by(2).map(|m| &m.1).collect();
    let r = g.batch_ack(&mut b, &even);
    assert_eq!((r.code, r.remark_str()), (0, ""));

    let revived = g.pop_until(&mut b, p, 4, Duration::from_secs(60));
    assert_eq!(
        names(&revived),
        [1, 3, 5, 7].map(|i| (format!("b-{i}"), 1, RetryFlag::RetryV1)),
        "exactly the odd ones (not acked) revive"
    );
    let again: Vec<&PopReceipt> = revived.iter().map(|m| &m.1).collect();
    assert_eq!(g.batch_ack(&mut b, &again).code, 0);
    // Their invisible time (5 s) and the revive scan pass: nothing comes back.
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        let back = g.pop(&mut b, p);
        assert!(back.msgs.is_empty(), "acked by BATCH_ACK, yet revived: {:?}", back.bodies());
    }
    // An empty body is NO_MESSAGE.
    let r = g.batch_ack(&mut b, &[]);
    assert_eq!(r.code, ResponseCode::NoMessage as i32, "{}", r.remark_str());
}

/// Orderly POP (`order=true`), which the Java push consumer never sends and ours does with
/// `orderly_pop` (docs/pop.md §0): what the 5.3.3 broker does with it. A pop
/// of a queue locks it for the group until every message it returned is acked (a second pop
/// gets nothing); receipts carry revive queue 999 and the answer an `orderCountInfo`; a change
/// of invisible time brings the same message back from the topic itself (no retry topic), with
/// its attempt counted, and the messages after it with it; a batch ack frees the queue too.
#[test]
fn orderly_pop_locks_the_queue_until_acked_and_redelivers_in_place() {
    let Some(env) = broker_env() else { return };
    if is_v4() {
        return;
    }
    let mut b = Conn::connect(&env.broker);
    let g = PopGroup::popping(&env, &mut b, "order_pop", 1);
    g.produce(&mut b, (0..4).map(|i| format!("o-{i}")), 1);
    let p = Pop { max: 2, invisible_ms: 20_000, poll_ms: 1_000, order: true, ..Pop::default() };
    // Two of the four: the queue is then locked for the group.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut first = g.pop(&mut b, p);
    while first.msgs.is_empty() && Instant::now() < deadline {
        first = g.pop(&mut b, p);
    }
    assert_eq!(first.bodies(), ["o-0", "o-1"]);
    assert_eq!(first.header.revive_qid, POP_ORDER_REVIVE_QUEUE);
    assert!(first.header.order_count_info.is_some(), "{:?}", first.header);
    let receipts: Vec<&PopReceipt> = first.msgs.iter().map(|m| &m.1).collect();
    assert!(receipts.iter().all(|r| r.is_order() && r.retry == RetryFlag::Normal), "{receipts:?}");
    let locked = g.pop(&mut b, p);
    assert!(
        locked.msgs.is_empty(),
        "the queue stays locked while o-0 and o-1 are out: {:?}",
        locked.bodies()
    );
    // o-0 done; o-1 back in a second: it returns from the topic itself, o-2 after it.
    assert_eq!(g.ack(&mut b, receipts[0]), 0);
    let later = receipts[1];
    let r = g.change_invisible(&mut b, later, 1_000);
    assert_eq!(r.code, 0, "{}", r.remark_str());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut again = g.pop(&mut b, p);
    while again.msgs.is_empty() && Instant::now() < deadline {
        again = g.pop(&mut b, p);
    }
    // The attempt is counted per message: "0 qo{queue}%{offset} 1" (5.3.3 answered
    // "0 qo0%1 1;0 0 0"), what Java's client turns into reconsumeTimes.
    let counted = format!("0 qo{}%{} 1", later.queue_id, later.queue_offset);
    let counts = again.header.order_count_info.as_deref();
    assert!(counts.is_some_and(|c| c.split(';').any(|e| e == counted)), "{counts:?}");
    assert_eq!(again.bodies(), ["o-1", "o-2"], "in order, in place");
    assert_eq!(
        (again.msgs[0].1.retry, again.msgs[0].1.queue_offset),
        (RetryFlag::Normal, later.queue_offset)
    );
    // A batch ack of orderly receipts (revive queue 999) frees the queue as single acks do.
    let receipts: Vec<&PopReceipt> = again.msgs.iter().map(|m| &m.1).collect();
    let r = g.batch_ack(&mut b, &receipts);
    assert_eq!((r.code, r.remark_str()), (0, ""));
    assert_eq!(g.pop(&mut b, p).bodies(), ["o-3"]);
}
