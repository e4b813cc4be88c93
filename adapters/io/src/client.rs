//! A small blocking remoting client: one connection, one request at a time. For tools (`rmqcat`
//! produce, route, group) and tests; consumers use the core and an adapter instead.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use rocketmq_push_core::codec::{Credentials, DecodeError, Outbound, RemotingCodec};
use rocketmq_push_core::message::MessageDecodeError;
use rocketmq_push_core::message::{Message, MessageQueue, UniqIdGenerator, keys};
use rocketmq_push_core::producer::{
    SendCompression, SendError, SendResult, send_message_request, send_result,
};
use rocketmq_push_core::protocol::body::{
    BodyError, CheckClientRequestBody, ConsumeStatsBody, GetConsumerListByGroupResponseBody, JsonBody,
    MessageModel, MessageQueueAssignment, MessageRequestMode, OffsetWrapper, QueryAssignmentRequestBody,
    QueryAssignmentResponseBody, SetMessageRequestModeRequestBody, SubscriptionData, TopicRouteData,
};
use rocketmq_push_core::protocol::header::{
    CreateTopicRequestHeader, GetConsumeStatsRequestHeader, GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, GetRouteInfoRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, ResetOffsetRequestHeader, SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use rocketmq_push_core::protocol::{Code, HeaderError, RemotingCommand, RequestCode, ResponseCode};

use crate::transport::{Session, Transport};

/// What went wrong talking to a server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Could not connect, read or write.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The server sent bytes that are not a frame.
    #[error("bad frame: {0}")]
    Decode(#[source] DecodeError),
    /// No answer in time.
    #[error("no answer in time")]
    Timeout,
    /// The server closed the connection.
    #[error("connection closed by the server")]
    Closed,
    /// The server closed the connection without answering anything: what a TLS-only port does
    /// to a plain client.
    #[error("connection closed by the server before it answered anything (a TLS-only port? enable TLS)")]
    ClosedUnanswered,
    /// An error answer.
    #[error("error {code}: {remark}")]
    Broker {
        /// Response code.
        code: Code<ResponseCode>,
        /// Remark.
        remark: String,
    },
    /// An answer with an unreadable header.
    #[error("{0}")]
    Header(#[from] HeaderError),
    /// An answer with an unreadable body.
    #[error("{0}")]
    Body(#[from] BodyError),
    /// A pull answer whose messages do not decode.
    #[error("{0}")]
    Messages(#[from] MessageDecodeError),
}

impl ClientError {
    /// An error answer with `code`.
    pub fn broker(code: impl Into<Code<ResponseCode>>, remark: impl Into<String>) -> Self {
        Self::Broker { code: code.into(), remark: remark.into() }
    }

    /// True when this is an error answer with `code`.
    pub fn is_code(&self, code: ResponseCode) -> bool {
        matches!(self, Self::Broker { code: c, .. } if *c == code)
    }
}

/// One blocking connection to a name server or broker.
pub struct Client {
    addr: String,
    stream: TcpStream,
    /// TLS on `stream`, when the transport asked for it.
    tls: Option<Session>,
    /// What one read takes from the socket.
    chunk: Vec<u8>,
    /// Anything arrived.
    answered: bool,
    buf: BytesMut,
    codec: RemotingCodec,
    outbound: Outbound,
    next_opaque: i32,
    timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("addr", &self.addr).finish_non_exhaustive()
    }
}

fn ok(cmd: RemotingCommand) -> Result<RemotingCommand, ClientError> {
    if cmd.code == ResponseCode::Success as i32 {
        Ok(cmd)
    } else {
        Err(ClientError::broker(Code::from_i32(cmd.code), cmd.remark_str()))
    }
}

impl Client {
    /// Connect to `addr` (`host:port`) within `timeout`; requests also time out after it.
    pub fn connect(addr: &str, timeout: Duration) -> Result<Self, ClientError> {
        Self::connect_with(addr, timeout, &Transport::default())
    }

    /// [`connect`](Self::connect) over `transport` (plain TCP or TLS; the TLS handshake is
    /// part of the connect and shares its timeout).
    pub fn connect_with(addr: &str, timeout: Duration, transport: &Transport) -> Result<Self, ClientError> {
        let sock = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("cannot resolve {addr}")))?;
        let stream = TcpStream::connect_timeout(&sock, timeout)?;
        stream.set_nodelay(true)?;
        let mut client = Self {
            addr: addr.to_owned(),
            stream,
            tls: transport.session(addr)?,
            chunk: vec![0; 64 * 1024],
            answered: false,
            buf: BytesMut::with_capacity(64 * 1024),
            codec: RemotingCodec::new(),
            outbound: Outbound::new(),
            next_opaque: 1,
            timeout,
        };
        client.handshake()?;
        Ok(client)
    }

    fn handshake(&mut self) -> Result<(), ClientError> {
        let Some(session) = self.tls.clone() else { return Ok(()) };
        let deadline = Instant::now() + self.timeout;
        let mut out = Vec::new();
        let mut early = Vec::new();
        loop {
            out.clear();
            session.outgoing(&mut out)?;
            self.stream.write_all(&out)?;
            if !session.is_handshaking() {
                self.buf.extend_from_slice(&early);
                return Ok(());
            }
            match self.read_some(deadline)? {
                Some(n) => session.feed(&self.chunk[..n], &mut early)?,
                None => return Err(Session::closed_in_handshake().into()),
            };
        }
    }
    /// Sign every request with `credentials` (ACL); `None` sends them unsigned.
    #[must_use]
    pub fn with_credentials(mut self, credentials: Option<Credentials>) -> Self {
        self.outbound = Outbound::new().with_credentials(credentials);
        self
    }

    /// The address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Send `cmd` and wait for its answer (requests the server sends meanwhile are ignored).
    pub fn call(&mut self, cmd: RemotingCommand) -> Result<RemotingCommand, ClientError> {
        let opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1).max(1);
        let frame = self.outbound.finish_to_bytes(&cmd.with_opaque(opaque));
        self.write(&frame)?;
        let deadline = Instant::now() + self.timeout;
        loop {
            let frame = self.read_frame(deadline)?;
            if frame.is_response() && frame.opaque == opaque {
                return Ok(frame);
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &self.tls {
            None => self.stream.write_all(bytes),
            Some(session) => {
                let mut sealed = Vec::with_capacity(bytes.len() + 64);
                session.encrypt(bytes, &mut sealed)?;
                self.stream.write_all(&sealed)
            }
        }
    }

    /// One read from the socket into `chunk` before `deadline`; `None` at end of stream.
    fn read_some(&mut self, deadline: Instant) -> Result<Option<usize>, ClientError> {
        loop {
            let left = deadline.checked_duration_since(Instant::now()).ok_or(ClientError::Timeout)?;
            self.stream.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
            return match self.stream.read(&mut self.chunk) {
                Ok(0) => Ok(None),
                Ok(n) => Ok(Some(n)),
                // A signal arrived while waiting (a tool's Ctrl-C handler): not a failure.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    Err(ClientError::Timeout)
                }
                Err(e) => Err(e.into()),
            };
        }
    }

    fn read_frame(&mut self, deadline: Instant) -> Result<RemotingCommand, ClientError> {
        loop {
            if let Some(cmd) = self.codec.decode(&mut self.buf).map_err(ClientError::Decode)? {
                return Ok(cmd);
            }
            let closed = if self.answered { ClientError::Closed } else { ClientError::ClosedUnanswered };
            let n = self.read_some(deadline)?.ok_or(closed)?;
            self.answered = true;
            let Some(session) = self.tls.clone() else {
                self.buf.extend_from_slice(&self.chunk[..n]);
                continue;
            };
            let mut plain = Vec::new();
            let fed = session.feed(&self.chunk[..n], &mut plain)?;
            self.buf.extend_from_slice(&plain);
            if fed.wants_write {
                self.write(&[])?;
            }
            if fed.closed && plain.is_empty() {
                return Err(ClientError::Closed);
            }
        }
    }

    /// A topic's route (ask a name server).
    pub fn route(&mut self, topic: &str) -> Result<TopicRouteData, ClientError> {
        let header = GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: None };
        let r =
            ok(self.call(RemotingCommand::request(RequestCode::GetRouteInfoByTopic).with_header(&header))?)?;
        Ok(TopicRouteData::decode(&r.body)?)
    }

    /// Create or update `topic` with `queues` read and write queues (ask a broker).
    pub fn create_topic(&mut self, topic: &str, queues: i32) -> Result<(), ClientError> {
        let cmd = RemotingCommand::request(RequestCode::UpdateAndCreateTopic)
            .with_header(&CreateTopicRequestHeader::new(topic, queues));
        ok(self.call(cmd)?).map(drop)
    }

    /// CHECK_CLIENT_CONFIG: whether the broker accepts `subscription`'s filter (Java's
    /// `checkClientInBroker`, run by `start()` for every SQL92 subscription). A refusal is a
    /// [`ClientError`] carrying the broker's code and remark.
    pub fn check_client_config(
        &mut self,
        client_id: &str,
        group: &str,
        subscription: &SubscriptionData,
    ) -> Result<(), ClientError> {
        let body = CheckClientRequestBody {
            client_id: client_id.to_owned(),
            group: group.to_owned(),
            subscription_data: subscription.clone(),
        };
        let cmd = RemotingCommand::request(RequestCode::CheckClientConfig).with_body(body.encode());
        ok(self.call(cmd)?).map(drop)
    }

    /// A group's committed offset of `queue` (`None`: no offset stored).
    pub fn query_offset(&mut self, group: &str, queue: &MessageQueue) -> Result<Option<i64>, ClientError> {
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: group.to_owned(),
            topic: queue.topic.to_string(),
            queue_id: queue.queue_id,
            set_zero_if_not_found: Some(false),
            bname: Some(queue.broker_name.to_string()),
        };
        let r = self.call(RemotingCommand::request(RequestCode::QueryConsumerOffset).with_header(&header))?;
        if r.code == ResponseCode::QueryNotFound as i32 {
            return Ok(None);
        }
        let h: OffsetResponseHeader = ok(r)?.header()?;
        Ok(Some(h.offset))
    }

    /// Commit `offset` for `group` on `queue` (the broker must know the group: a member has
    /// heartbeated it at least once, or it was created).
    pub fn update_offset(
        &mut self,
        group: &str,
        queue: &MessageQueue,
        offset: i64,
    ) -> Result<(), ClientError> {
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: group.to_owned(),
            topic: queue.topic.to_string(),
            queue_id: queue.queue_id,
            commit_offset: offset,
            bname: Some(queue.broker_name.to_string()),
        };
        ok(self.call(RemotingCommand::request(RequestCode::UpdateConsumerOffset).with_header(&header))?)
            .map(drop)
    }

    /// A queue's max offset.
    pub fn max_offset(&mut self, queue: &MessageQueue) -> Result<i64, ClientError> {
        Ok(self.max_offset_answer(queue)?.header::<OffsetResponseHeader>()?.offset)
    }

    fn max_offset_answer(&mut self, queue: &MessageQueue) -> Result<RemotingCommand, ClientError> {
        let header = GetMaxOffsetRequestHeader {
            topic: queue.topic.to_string(),
            queue_id: queue.queue_id,
            committed: Some(true),
            bname: Some(queue.broker_name.to_string()),
        };
        ok(self.call(RemotingCommand::request(RequestCode::GetMaxOffset).with_header(&header))?)
    }

    /// The version a broker states in its answers (an `MQVersion.Version` ordinal: 413 is
    /// 5.0.0), from a GET_MAX_OFFSET of `queue`.
    pub fn broker_version(&mut self, queue: &MessageQueue) -> Result<i32, ClientError> {
        Ok(self.max_offset_answer(queue)?.version)
    }

    /// INVOKE_BROKER_TO_RESET_OFFSET: the broker resets `header.group`'s offsets of
    /// `header.topic` and answers the offsets it reset to. A 5.x broker does it itself (one queue
    /// with `queue_id` and `offset`, or every queue by `timestamp`; −1 is the max offset); a 4.9
    /// broker searches by time and tells the group's online consumers (CONSUMER_NOT_ONLINE when
    /// there are none).
    pub fn reset_offset(
        &mut self,
        header: &ResetOffsetRequestHeader,
    ) -> Result<Vec<(MessageQueue, i64)>, ClientError> {
        let r = ok(
            self.call(RemotingCommand::request(RequestCode::InvokeBrokerToResetOffset).with_header(header))?
        )?;
        if r.body.is_empty() {
            return Ok(Vec::new());
        }
        Ok(rocketmq_push_core::protocol::body::ResetOffsetBody::decode(&r.body)?.offset_table)
    }

    /// A queue's min offset (the first still stored).
    pub fn min_offset(&mut self, queue: &MessageQueue) -> Result<i64, ClientError> {
        let header = GetMinOffsetRequestHeader {
            topic: queue.topic.to_string(),
            queue_id: queue.queue_id,
            bname: Some(queue.broker_name.to_string()),
        };
        let r = ok(self.call(RemotingCommand::request(RequestCode::GetMinOffset).with_header(&header))?)?;
        Ok(r.header::<OffsetResponseHeader>()?.offset)
    }

    /// The offset of the first message of `queue` stored at or after `timestamp` (ms since the
    /// epoch); the max offset when none is.
    pub fn search_offset(&mut self, queue: &MessageQueue, timestamp: i64) -> Result<i64, ClientError> {
        let header = SearchOffsetRequestHeader {
            topic: queue.topic.to_string(),
            queue_id: queue.queue_id,
            timestamp,
            boundary_type: None,
            bname: Some(queue.broker_name.to_string()),
        };
        let cmd = RemotingCommand::request(RequestCode::SearchOffsetByTimestamp).with_header(&header);
        Ok(ok(self.call(cmd)?)?.header::<OffsetResponseHeader>()?.offset)
    }

    /// A group's live consumers.
    pub fn consumer_list(&mut self, group: &str) -> Result<Vec<String>, ClientError> {
        let header = GetConsumerListByGroupRequestHeader { consumer_group: group.to_owned() };
        let r =
            self.call(RemotingCommand::request(RequestCode::GetConsumerListByGroup).with_header(&header))?;
        if r.code == ResponseCode::SystemError as i32 {
            return Ok(Vec::new());
        }
        let r = ok(r)?;
        Ok(GetConsumerListByGroupResponseBody::decode(&r.body)?.consumer_id_list)
    }

    /// SET_MESSAGE_REQUEST_MODE: switch `group` on `topic` to PULL or POP on this broker, as
    /// `mqadmin setConsumeMode` does (the setting is per broker). `pop_share_queue_num` 0 lets
    /// every POP client pop from every queue.
    pub fn set_message_request_mode(
        &mut self,
        topic: &str,
        group: &str,
        mode: MessageRequestMode,
        pop_share_queue_num: i32,
    ) -> Result<(), ClientError> {
        let body = SetMessageRequestModeRequestBody {
            topic: topic.to_owned(),
            consumer_group: group.to_owned(),
            mode,
            pop_share_queue_num,
        };
        let cmd = RemotingCommand::request(RequestCode::SetMessageRequestMode).with_body(body.encode());
        ok(self.call(cmd)?).map(drop)
    }

    /// QUERY_ASSIGNMENT: the queues this broker assigns `client_id` of `group` on `topic`, and
    /// how to read each (`None`: the broker does not know the client or the strategy).
    pub fn query_assignment(
        &mut self,
        topic: &str,
        group: &str,
        client_id: &str,
        strategy_name: &str,
    ) -> Result<Option<Vec<MessageQueueAssignment>>, ClientError> {
        let body = QueryAssignmentRequestBody {
            topic: topic.to_owned(),
            consumer_group: group.to_owned(),
            client_id: client_id.to_owned(),
            strategy_name: strategy_name.to_owned(),
            message_model: MessageModel::Clustering,
        };
        let cmd = RemotingCommand::request(RequestCode::QueryAssignment).with_body(body.encode());
        let r = ok(self.call(cmd)?)?;
        Ok(QueryAssignmentResponseBody::decode(&r.body)?.message_queue_assignments)
    }

    /// A group's progress per queue on this broker (GET_CONSUME_STATS): of `topic`, or of every
    /// topic the broker holds the group's offsets for.
    pub fn consume_stats(
        &mut self,
        group: &str,
        topic: Option<&str>,
    ) -> Result<Vec<(MessageQueue, OffsetWrapper)>, ClientError> {
        let header = GetConsumeStatsRequestHeader {
            consumer_group: group.to_owned(),
            topic: topic.map(str::to_owned),
        };
        let r = ok(self.call(RemotingCommand::request(RequestCode::GetConsumeStats).with_header(&header))?)?;
        Ok(ConsumeStatsBody::decode(&r.body)?.offset_table)
    }

    /// One pull (no long poll) from `offset`: the messages found, and the next offset. An error
    /// answer other than the pull statuses (not found, retry, offset moved) is an error.
    pub fn pull(
        &mut self,
        group: &str,
        queue: &MessageQueue,
        offset: i64,
    ) -> Result<(Vec<rocketmq_push_core::MessageExt>, i64), ClientError> {
        use rocketmq_push_core::message::{DecodeOptions, decode_messages};
        use rocketmq_push_core::protocol::ExpressionType;
        use rocketmq_push_core::protocol::header::{PullMessageRequestHeader, PullMessageResponseHeader};
        let header = PullMessageRequestHeader {
            consumer_group: group.to_owned(),
            topic: queue.topic.to_string(),
            queue_id: queue.queue_id,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: rocketmq_push_core::protocol::PullSysFlag::SUBSCRIPTION,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: Some(ExpressionType::Tag),
            max_msg_bytes: None,
            bname: Some(queue.broker_name.to_string()),
        };
        let r = self.call(RemotingCommand::request(RequestCode::PullMessage).with_header(&header))?;
        // Nothing found, retry, offset moved: no messages, and where to go on. Anything else
        // (no permission, no such group) is an error, not an empty queue.
        let pull_status =
            [ResponseCode::PullNotFound, ResponseCode::PullRetryImmediately, ResponseCode::PullOffsetMoved];
        if r.code != ResponseCode::Success as i32 {
            if !pull_status.iter().any(|c| *c as i32 == r.code) {
                return Err(ClientError::broker(Code::from_i32(r.code), r.remark_str()));
            }
            let h: PullMessageResponseHeader = r.header()?;
            return Ok((Vec::new(), h.next_begin_offset));
        }
        let h: PullMessageResponseHeader = r.header()?;
        let msgs = decode_messages(&r.body, &DecodeOptions::default())?;
        Ok((msgs, h.next_begin_offset))
    }

    /// SEND_MESSAGE_V2 to `queue`.
    pub fn send(
        &mut self,
        msg: &Message,
        queue: &MessageQueue,
        compression: Option<SendCompression>,
    ) -> Result<SendResult, ClientError> {
        let born = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let r = self.call(send_message_request("rmq_push_producer", msg, queue, born, compression))?;
        let mut result = send_result(&r, &queue.broker_name).map_err(|e| match e {
            SendError::Broker { code, remark } => ClientError::broker(Code::from_i32(code), remark),
            SendError::Header(h) => ClientError::Header(h),
            other => ClientError::broker(Code::from_i32(r.code), other.to_string()),
        })?;
        result.queue = queue.clone();
        Ok(result)
    }
}

/// Message ids as Java's `MessageClientIDSetter` makes them, for this host (the address it
/// reaches `name_server` from) and process.
pub(crate) fn id_generator(name_server: &str) -> UniqIdGenerator {
    let ip = match crate::client_id(&[name_server.to_owned()])
        .as_str()
        .split('@')
        .next()
        .and_then(|s| s.parse().ok())
    {
        Some(std::net::IpAddr::V4(v4)) => v4,
        _ => std::net::Ipv4Addr::LOCALHOST,
    };
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    UniqIdGenerator::new(ip, std::process::id(), nanos)
}

/// A blocking producer: routes from a name server, messages round-robin over the topic's
/// writable queues, one connection per broker, a `UNIQ_KEY` on every message.
#[derive(Debug)]
pub struct Producer {
    name_server: String,
    timeout: Duration,
    brokers: BTreeMap<String, Client>,
    routes: BTreeMap<String, (TopicRouteData, Vec<MessageQueue>)>,
    next: usize,
    ids: UniqIdGenerator,
    credentials: Option<Credentials>,
    transport: Transport,
    /// Compress bodies of at least 4 KiB with zlib, as Java's producer does (`None`: never).
    pub compression: Option<SendCompression>,
}

impl Producer {
    /// A producer using `name_server`.
    pub fn new(name_server: &str, timeout: Duration) -> Self {
        Self {
            name_server: name_server.to_owned(),
            timeout,
            brokers: BTreeMap::new(),
            routes: BTreeMap::new(),
            next: 0,
            ids: id_generator(name_server),
            credentials: None,
            transport: Transport::default(),
            compression: Some(SendCompression::default()),
        }
    }

    /// Sign every request with `credentials` (ACL).
    #[must_use]
    pub fn with_credentials(mut self, credentials: Option<Credentials>) -> Self {
        self.credentials = credentials;
        self
    }

    /// Connect over `transport` (plain TCP or TLS).
    #[must_use]
    pub fn with_transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// The writable queues of `topic` (fetching its route once).
    pub fn queues(&mut self, topic: &str) -> Result<Vec<MessageQueue>, ClientError> {
        if !self.routes.contains_key(topic) {
            let route = Client::connect_with(&self.name_server, self.timeout, &self.transport)?
                .with_credentials(self.credentials.clone())
                .route(topic)?;
            let queues = route.publish_queues(topic);
            self.routes.insert(topic.to_owned(), (route, queues));
        }
        Ok(self.routes[topic].1.clone())
    }

    /// Send to the next queue of the message's topic.
    pub fn send(&mut self, msg: Message) -> Result<SendResult, ClientError> {
        let queues = self.queues(&msg.topic)?;
        if queues.is_empty() {
            return Err(ClientError::broker(ResponseCode::TopicNotExist, "no writable queue"));
        }
        let q = queues[self.next % queues.len()].clone();
        self.next += 1;
        self.send_to(msg, &q)
    }

    /// Send to a given queue.
    pub fn send_to(&mut self, mut msg: Message, queue: &MessageQueue) -> Result<SendResult, ClientError> {
        if msg.properties.get(keys::UNIQ_KEY).is_none() {
            let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
            let id = self.ids.next_id(ms);
            msg = msg.with_property(keys::UNIQ_KEY, &id);
        }
        let topic = queue.topic.to_string();
        let addr = self
            .routes
            .get(&topic)
            .and_then(|(r, _)| r.broker(&queue.broker_name))
            .and_then(|b| b.master_or_any())
            .ok_or_else(|| {
                ClientError::broker(ResponseCode::TopicNotExist, format!("no route to {}", queue.broker_name))
            })?
            .to_owned();
        if !self.brokers.contains_key(&addr) {
            let c = Client::connect_with(&addr, self.timeout, &self.transport)?
                .with_credentials(self.credentials.clone());
            self.brokers.insert(addr.clone(), c);
        }
        let client = self.brokers.get_mut(&addr).expect("inserted above");
        match client.send(&msg, queue, self.compression) {
            Err(
                e @ (ClientError::Io(_)
                | ClientError::Closed
                | ClientError::ClosedUnanswered
                | ClientError::Timeout),
            ) => {
                // Drop the connection; the next send reconnects.
                self.brokers.remove(&addr);
                Err(e)
            }
            other => other,
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;

    extern "C" fn ignore(_: libc::c_int) {}

    #[test]
    fn a_signal_during_a_read_is_not_a_failure() {
        // A handler installed without SA_RESTART, as a tool's Ctrl-C handler may be: a blocked
        // read returns EINTR when the signal arrives.
        // SAFETY: a zeroed sigaction is valid; the handler does nothing.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore as *const () as usize;
            libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
        }
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        // The server reads the request, then answers nothing for a while and closes.
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let _ = s.read(&mut [0u8; 512]);
            std::thread::sleep(Duration::from_millis(400));
        });
        let (tid_tx, tid) = mpsc::channel();
        let client = std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tid_tx.send(unsafe { libc::pthread_self() }).unwrap();
            let mut c = Client::connect(&addr, Duration::from_secs(5)).unwrap();
            c.route("T")
        });
        let tid = tid.recv().unwrap();
        std::thread::sleep(Duration::from_millis(150));
        // SAFETY: the thread is alive (it is blocked in its read until the server closes).
        assert_eq!(unsafe { libc::pthread_kill(tid, libc::SIGUSR1) }, 0);
        let answer = client.join().unwrap();
        server.join().unwrap();
        assert!(matches!(answer, Err(ClientError::ClosedUnanswered)), "{answer:?}");
    }
}
