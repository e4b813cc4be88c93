//! A small blocking remoting client: one connection, one request at a time. For tools (`rmqcat`
//! produce, route, group) and tests; consumers use the core and an adapter instead.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use rocketmq_push_core::codec::{DecodeError, Outbound, RemotingCodec};
use rocketmq_push_core::message::MessageDecodeError;
use rocketmq_push_core::message::{Message, MessageQueue, UniqIdGenerator, keys};
use rocketmq_push_core::producer::{
    SendCompression, SendError, SendResult, send_message_request, send_result,
};
use rocketmq_push_core::protocol::body::{
    BodyError, ConsumeStatsBody, GetConsumerListByGroupResponseBody, JsonBody, OffsetWrapper, TopicRouteData,
};
use rocketmq_push_core::protocol::header::{
    CreateTopicRequestHeader, GetConsumeStatsRequestHeader, GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader, GetRouteInfoRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use rocketmq_push_core::protocol::{Code, HeaderError, RemotingCommand, RequestCode, ResponseCode};

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
        let sock = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("cannot resolve {addr}")))?;
        let stream = TcpStream::connect_timeout(&sock, timeout)?;
        stream.set_nodelay(true)?;
        Ok(Self {
            addr: addr.to_owned(),
            stream,
            buf: BytesMut::with_capacity(64 * 1024),
            codec: RemotingCodec::new(),
            outbound: Outbound::new(),
            next_opaque: 1,
            timeout,
        })
    }

    /// The address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Send `cmd` and wait for its answer (requests the server sends meanwhile are ignored).
    pub fn call(&mut self, cmd: RemotingCommand) -> Result<RemotingCommand, ClientError> {
        let opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1).max(1);
        self.stream.write_all(&self.outbound.finish_to_bytes(&cmd.with_opaque(opaque)))?;
        let deadline = Instant::now() + self.timeout;
        loop {
            let frame = self.read_frame(deadline)?;
            if frame.is_response() && frame.opaque == opaque {
                return Ok(frame);
            }
        }
    }

    fn read_frame(&mut self, deadline: Instant) -> Result<RemotingCommand, ClientError> {
        loop {
            if let Some(cmd) = self.codec.decode(&mut self.buf).map_err(ClientError::Decode)? {
                return Ok(cmd);
            }
            let left = deadline.checked_duration_since(Instant::now()).ok_or(ClientError::Timeout)?;
            self.stream.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ClientError::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Err(ClientError::Timeout);
                }
                Err(e) => return Err(e.into()),
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
        let header = GetMaxOffsetRequestHeader {
            topic: queue.topic.to_string(),
            queue_id: queue.queue_id,
            committed: Some(true),
            bname: Some(queue.broker_name.to_string()),
        };
        let r = ok(self.call(RemotingCommand::request(RequestCode::GetMaxOffset).with_header(&header))?)?;
        Ok(r.header::<OffsetResponseHeader>()?.offset)
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

    /// One pull (no long poll) from `offset`: the messages found, and the next offset.
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
        let h: PullMessageResponseHeader = r.header()?;
        if r.code != ResponseCode::Success as i32 {
            return Ok((Vec::new(), h.next_begin_offset));
        }
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
    /// Compress bodies of at least 4 KiB with zlib, as Java's producer does (`None`: never).
    pub compression: Option<SendCompression>,
}

impl Producer {
    /// A producer using `name_server`.
    pub fn new(name_server: &str, timeout: Duration) -> Self {
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
        Self {
            name_server: name_server.to_owned(),
            timeout,
            brokers: BTreeMap::new(),
            routes: BTreeMap::new(),
            next: 0,
            ids: UniqIdGenerator::new(ip, std::process::id(), nanos),
            compression: Some(SendCompression::default()),
        }
    }

    /// The writable queues of `topic` (fetching its route once).
    pub fn queues(&mut self, topic: &str) -> Result<Vec<MessageQueue>, ClientError> {
        if !self.routes.contains_key(topic) {
            let route = Client::connect(&self.name_server, self.timeout)?.route(topic)?;
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
            let c = Client::connect(&addr, self.timeout)?;
            self.brokers.insert(addr.clone(), c);
        }
        let client = self.brokers.get_mut(&addr).expect("inserted above");
        match client.send(&msg, queue, self.compression) {
            Err(e @ (ClientError::Io(_) | ClientError::Closed | ClientError::Timeout)) => {
                // Drop the connection; the next send reconnects.
                self.brokers.remove(&addr);
                Err(e)
            }
            other => other,
        }
    }
}
