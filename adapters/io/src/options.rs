//! The builder part every adapter shares: configuration, client id, local offsets, event hook.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketmq_push_core::{
    BatchId, ClientId, Command, ConfigError, ConsumeFromWhere, ConsumeMode, ConsumeResult, Consumer,
    ConsumerConfig, ConsumerConfigBuilder, Credentials, Driver, Event, MessageModel, MessageQueue,
};

use crate::{OffsetFile, Repeats, client_id, log_event, stable_client_id};

/// How long repeats of one cause are grouped in the log.
pub const LOG_WINDOW: Duration = Duration::from_secs(10);

/// Called with every event (after it is logged).
pub type EventHook = Arc<dyn Fn(&Event) + Send + Sync>;

/// Why a consumer could not start. More causes may come: match with a wildcard arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A setting is invalid; the message names the Java knob and the allowed range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The local offset file (broadcasting) could not be read.
    #[error("local offset file: {0}")]
    OffsetFile(#[source] std::io::Error),
    /// No listener was given.
    #[error("no listener: call .listener(...) before .start()")]
    NoListener,
    /// The runtime refused (e.g. no thread could be spawned, or no tokio runtime is running).
    #[error("runtime: {0}")]
    Runtime(String),
    /// TLS was asked for (by `.tls(…)` or `ROCKETMQ_TLS`/`ROCKETMQ_TLS_CA`) and cannot be set
    /// up: an unreadable CA file, or a build without the `tls` feature.
    #[error("{0}")]
    Tls(String),
}

/// Settings common to every adapter's builder.
#[derive(Clone)]
pub struct ConsumerOptions {
    builder: ConsumerConfigBuilder,
    name_server: Option<String>,
    offset_file: Option<PathBuf>,
    on_event: Option<EventHook>,
    hooks: Vec<Arc<dyn crate::ConsumeHook>>,
    metrics: bool,
    /// Message trace: the topic (Java's `enableMsgTrace` / `customizedTraceTopic`).
    trace: Option<String>,
    client_id: Option<ClientId>,
    #[cfg(feature = "tls")]
    tls: Option<crate::Tls>,
}

impl std::fmt::Debug for ConsumerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerOptions")
            .field("builder", &self.builder)
            .field("name_server", &self.name_server)
            .finish_non_exhaustive()
    }
}

/// What [`ConsumerOptions::prepare`] hands an adapter.
pub struct Prepared {
    /// The core, ready to run.
    pub driver: Driver,
    /// Where broadcasting offsets go.
    pub offset_file: Option<OffsetFile>,
    /// The application's event hook.
    pub on_event: Option<EventHook>,
    /// Listener concurrency (`consumeThreadMin`).
    pub consume_threads: usize,
    /// Repeats of one cause in the log, grouped per 10 s.
    pub repeats: Repeats,
    /// Plain TCP or TLS.
    pub transport: crate::Transport,
    /// The application's consume hooks, and the batches between their calls.
    pub(crate) hooks: crate::hook::Hooks,
    /// With `.metrics()`: the held queues' gauges, sampled every second by the loop.
    pub(crate) queue_metrics: Option<crate::telemetry::QueueMetrics>,
}

impl Prepared {
    /// Broadcasting: store the local offsets (a failure is logged; the next persist retries).
    pub fn persist(&self, offsets: &[(MessageQueue, i64)]) {
        if let Some(f) = &self.offset_file {
            if let Err(e) = f.store(offsets) {
                tracing::error!(path = %f.path().display(), error = %e, "cannot store local offsets");
            }
        }
    }

    /// An event: to the log (repeats of one cause grouped), then to the application's hook
    /// (every one).
    pub fn event(&mut self, e: &Event, now: Instant) {
        match self.repeats.note(e, now) {
            Some(0) => log_event(e),
            Some(n) => {
                log_event(e);
                tracing::warn!(repeats = n, "… and {n} more like it since the last report");
            }
            None => {}
        }
        if let Some(hook) = &self.on_event {
            hook(e);
        }
    }

    /// With `.metrics()`: publish the held queues' gauges now.
    pub(crate) fn sample_metrics(&mut self) {
        if let Some(m) = &mut self.queue_metrics {
            m.sample(&self.driver.consumer().queue_snapshots());
        }
    }

    /// One line per cause whose repeats were held back and whose interval ended.
    pub fn flush_log(&mut self, now: Instant) {
        for (cause, n) in self.repeats.due(now) {
            tracing::warn!(%cause, repeats = n, "{n} more times in the last {LOG_WINDOW:?}: {cause}");
        }
    }

    /// A listener finished `batch`; `failed` says why it failed (a panic or an `Err`), already
    /// turned into RECONSUME_LATER.
    pub fn consumed(&mut self, batch: BatchId, result: ConsumeResult, failed: Option<String>, now: Instant) {
        self.hooks.finished(batch, &result, failed.as_deref(), now);
        if let Some(why) = failed {
            tracing::error!(%batch, %why, "listener failed: reconsume later");
        }
        if let Err(e) = self.driver.consumed(batch, result, now) {
            refused(batch, e);
        }
    }

    /// As [`consumed`](Self::consumed) for each of `finished`, in order, fed to the driver
    /// together (cheaper per result); `finished` is left empty.
    pub(crate) fn consumed_all(
        &mut self,
        finished: &mut Vec<(BatchId, ConsumeResult, Option<String>)>,
        now: Instant,
    ) {
        // Without hooks, only failures need a look here.
        let hooks = self.hooks.any();
        for (batch, result, failed) in finished.iter().filter(|f| hooks || f.2.is_some()) {
            self.hooks.finished(*batch, result, failed.as_deref(), now);
            if let Some(why) = failed {
                tracing::error!(%batch, %why, "listener failed: reconsume later");
            }
        }
        self.driver.consumed_all(finished.drain(..).map(|(batch, result, _)| (batch, result)), now, refused);
    }

    /// An application command (suspend, resume, subscribe, shutdown, …); a refusal is logged.
    pub fn command(&mut self, c: Command, now: Instant) {
        let _ = self.checked_command(c, now);
    }

    /// As [`command`](Self::command), and the refusal is also returned.
    pub fn checked_command(
        &mut self,
        c: Command,
        now: Instant,
    ) -> Result<(), rocketmq_push_core::UsageError> {
        let r = self.driver.command(c, now);
        if let Err(e) = &r {
            tracing::warn!(error = %e, "command refused");
        }
        r
    }
}

/// A result the driver refused (an unknown batch: answered already, or taken back).
fn refused(batch: BatchId, e: rocketmq_push_core::UsageError) {
    tracing::warn!(%batch, error = %e, "consume result refused");
}

impl ConsumerOptions {
    /// Options for `group`.
    pub fn new(group: impl Into<String>) -> Self {
        Self {
            builder: ConsumerConfig::builder(group),
            name_server: None,
            offset_file: None,
            on_event: None,
            hooks: Vec::new(),
            metrics: false,
            trace: None,
            client_id: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// `namesrvAddr` (`;`-separated); default: the `NAMESRV_ADDR` environment variable.
    pub fn name_server(mut self, addr: impl Into<String>) -> Self {
        self.name_server = Some(addr.into());
        self
    }

    /// Subscribe to `topic` with a TAG expression (`*`, `a || b`).
    pub fn subscribe(mut self, topic: impl Into<String>, expression: impl Into<String>) -> Self {
        self.builder = self.builder.subscribe(topic, expression);
        self
    }

    /// Subscribe to `topic` with an SQL92 expression.
    pub fn subscribe_sql(mut self, topic: impl Into<String>, expression: impl Into<String>) -> Self {
        self.builder = self.builder.subscribe_sql(topic, expression);
        self
    }

    /// CLUSTERING (default) or BROADCASTING.
    pub fn message_model(mut self, m: MessageModel) -> Self {
        self.builder = self.builder.message_model(m);
        self
    }

    /// Where queues with no offset start.
    pub fn consume_from_where(mut self, w: ConsumeFromWhere) -> Self {
        self.builder = self.builder.consume_from_where(w);
        self
    }

    /// For CONSUME_FROM_TIMESTAMP: milliseconds since the epoch.
    pub fn consume_timestamp_ms(mut self, ms: i64) -> Self {
        self.builder = self.builder.consume_timestamp_ms(ms);
        self
    }

    /// Any other knob of the core's [`ConsumerConfigBuilder`] (Java names, Java defaults).
    pub fn configure(mut self, f: impl FnOnce(ConsumerConfigBuilder) -> ConsumerConfigBuilder) -> Self {
        self.builder = f(self.builder);
        self
    }

    /// Broadcasting: keep local offsets in this file (default
    /// `~/.rocketmq_offsets/<client id>/<group>/offsets.json`, as Java).
    pub fn offset_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.offset_file = Some(path.into());
        self
    }

    /// Called with every event, after it is logged.
    pub fn on_event(mut self, f: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.on_event = Some(Arc::new(f));
        self
    }

    /// Run `hook` around every listener call (Java's `registerConsumeMessageHook`); hooks run in
    /// the order registered.
    pub fn hook(mut self, hook: impl crate::ConsumeHook) -> Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// Publish the consumer's figures through the `metrics` facade (the crate docs' `Metrics`
    /// table); install a recorder (a Prometheus exporter, say) to read them.
    pub fn metrics(mut self) -> Self {
        self.metrics = true;
        self
    }

    /// Java's `enableMsgTrace` (default off): SubBefore/SubAfter records of every consumed
    /// message to `RMQ_SYS_TRACE_TOPIC`, or to `topic` (Java's `customizedTraceTopic`), in
    /// Java's format, so `mqadmin queryMsgTraceById` shows them. The topic must exist (brokers
    /// create `RMQ_SYS_TRACE_TOPIC` with `traceTopicEnable=true`); a failing trace is logged and
    /// never holds consumption up.
    pub fn enable_msg_trace(mut self, topic: Option<String>) -> Self {
        self.trace =
            Some(topic.filter(|t| !t.is_empty()).unwrap_or_else(|| crate::DEFAULT_TRACE_TOPIC.to_owned()));
        self
    }

    /// Use this client id instead of `ip@pid#nanos`.
    pub fn client_id(mut self, id: ClientId) -> Self {
        self.client_id = Some(id);
        self
    }

    /// Orderly consumption (`MessageListenerOrderly`), whatever the listener's shape.
    pub fn orderly(mut self) -> Self {
        self.builder = self.builder.consume_mode(ConsumeMode::Orderly);
        self
    }

    /// ACL credentials: every request is signed (Java's `AclClientRPCHook`). Without this call,
    /// `ROCKETMQ_ACCESS_KEY` and `ROCKETMQ_SECRET_KEY` (and `ROCKETMQ_SECURITY_TOKEN`) are used
    /// when set.
    pub fn credentials(mut self, c: Credentials) -> Self {
        self.builder = self.builder.credentials(c);
        self
    }

    /// TLS to name servers and brokers. Without this call, `ROCKETMQ_TLS` (`1`: system roots,
    /// `insecure`: any certificate) and `ROCKETMQ_TLS_CA` (a CA file) decide; unset, plain TCP.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: crate::Tls) -> Self {
        self.tls = Some(tls);
        self
    }

    fn transport(&self) -> Result<crate::Transport, StartError> {
        #[cfg(feature = "tls")]
        {
            let tls = match &self.tls {
                Some(t) => Some(t.clone()),
                None => crate::Tls::from_env().map_err(|e| StartError::Tls(e.to_string()))?,
            };
            Ok(crate::Transport::with_tls(tls))
        }
        #[cfg(not(feature = "tls"))]
        {
            let asked =
                |k: &str| std::env::var(k).is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false" | "off"));
            if asked("ROCKETMQ_TLS") || asked("ROCKETMQ_TLS_CA") {
                return Err(StartError::Tls(
                    "ROCKETMQ_TLS / ROCKETMQ_TLS_CA is set, but this build has no TLS (the `tls` feature)"
                        .into(),
                ));
            }
            Ok(crate::Transport::default())
        }
    }

    /// Validate, pick the client id, read local offsets, and build the core.
    pub fn prepare(self) -> Result<Prepared, StartError> {
        let transport = self.transport()?;
        let name_server = self.name_server.or_else(|| std::env::var("NAMESRV_ADDR").ok()).unwrap_or_default();
        let mut builder = self.builder;
        let mut first = builder.clone().name_server(name_server.clone()).build()?;
        if first.credentials().is_none() {
            if let Some(c) = credentials_from_env() {
                builder = builder.credentials(c);
                first = builder.clone().name_server(name_server.clone()).build()?;
            }
        }
        let broadcasting = first.message_model() == MessageModel::Broadcasting;
        let id = self.client_id.unwrap_or_else(|| {
            if broadcasting {
                stable_client_id(&first.name_servers())
            } else {
                client_id(&first.name_servers())
            }
        });
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        // The blocking producer of the trace talks to one name server.
        let name_server_for_trace =
            name_server.split(';').map(str::trim).find(|s| !s.is_empty()).unwrap_or_default().to_owned();
        let cfg = builder.name_server(name_server).client_id(id.clone()).start_wall_ms(wall).build()?;
        let offset_file = broadcasting.then(|| match self.offset_file {
            Some(p) => OffsetFile::new(p),
            None => OffsetFile::default_for(id.as_str(), &cfg.consumer_group()),
        });
        let restored = match &offset_file {
            Some(f) => f.load().map_err(StartError::OffsetFile)?,
            None => Vec::new(),
        };
        let consume_threads = cfg.consume_thread_min();
        let group = cfg.consumer_group();
        let mut hooks = self.hooks;
        let queue_metrics = self.metrics.then(|| {
            hooks.insert(0, Arc::new(crate::telemetry::ConsumeMetrics::new(&group, id.as_str())));
            crate::telemetry::QueueMetrics::new(&group, id.as_str())
        });
        if let Some(topic) = self.trace {
            let target = crate::trace::TraceTarget {
                name_server: name_server_for_trace,
                topic,
                credentials: cfg.credentials(),
                transport: transport.clone(),
            };
            let ids = crate::client::id_generator(&target.name_server);
            let hook = crate::trace::TraceHook::start(target, ids)
                .map_err(|e| StartError::Runtime(format!("message trace thread: {e}")))?;
            hooks.push(Arc::new(hook));
        }
        let hooks = crate::hook::Hooks::new(hooks, group);
        let mut driver = Driver::new(Consumer::new(cfg, Instant::now()));
        driver.restore_local_offsets(restored);
        Ok(Prepared {
            driver,
            offset_file,
            on_event: self.on_event,
            consume_threads,
            repeats: Repeats::new(LOG_WINDOW),
            transport,
            hooks,
            queue_metrics,
        })
    }
}

/// Credentials from `ROCKETMQ_ACCESS_KEY`, `ROCKETMQ_SECRET_KEY` and `ROCKETMQ_SECURITY_TOKEN`,
/// when the first two are set and not empty.
pub fn credentials_from_env() -> Option<Credentials> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let c = Credentials::new(var("ROCKETMQ_ACCESS_KEY")?, var("ROCKETMQ_SECRET_KEY")?);
    Some(match var("ROCKETMQ_SECURITY_TOKEN") {
        Some(t) => c.with_security_token(t),
        None => c,
    })
}

/// Forward [`ConsumerOptions`]' setters from an adapter's builder (a field named `options`), so
/// the three adapters' builders read the same without repeating the code.
#[macro_export]
macro_rules! forward_options {
    () => {
        /// ACL credentials (`accessKey`, `secretKey`): every request is signed as Java's
        /// `AclClientRPCHook` signs it. Default: `ROCKETMQ_ACCESS_KEY` / `ROCKETMQ_SECRET_KEY`
        /// (and `ROCKETMQ_SECURITY_TOKEN`) when set, else none.
        pub fn credentials(mut self, access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
            self.options = self.options.credentials($crate::__core::Credentials::new(access_key, secret_key));
            self
        }

        /// TLS to name servers and brokers (feature `tls`): `Tls::system_roots()`,
        /// `Tls::ca_file(path)` or, for self-signed test brokers, `Tls::insecure()` (Java's
        /// `setUseTLS(true)` with `tls.test.mode.enable`). Default: `ROCKETMQ_TLS` /
        /// `ROCKETMQ_TLS_CA` when set, else plain TCP.
        #[cfg(feature = "tls")]
        pub fn tls(mut self, tls: $crate::Tls) -> Self {
            self.options = self.options.tls(tls);
            self
        }

        /// `namespace` (Java's `setNamespace`): topics, groups and retry topics travel as
        /// `namespace%name`; the listener sees plain names. Default none.
        pub fn namespace(mut self, ns: impl Into<String>) -> Self {
            let ns = ns.into();
            self.options = self.options.configure(|b| b.namespace(ns));
            self
        }

        /// `namesrvAddr` (`;`-separated); default: the `NAMESRV_ADDR` environment variable.
        pub fn name_server(mut self, addr: impl Into<String>) -> Self {
            self.options = self.options.name_server(addr);
            self
        }
        /// Subscribe to `topic` with a TAG expression (`*`, `a || b`).
        pub fn subscribe(mut self, topic: impl Into<String>, expression: impl Into<String>) -> Self {
            self.options = self.options.subscribe(topic, expression);
            self
        }
        /// Subscribe to `topic` with an SQL92 expression.
        pub fn subscribe_sql(mut self, topic: impl Into<String>, expression: impl Into<String>) -> Self {
            self.options = self.options.subscribe_sql(topic, expression);
            self
        }
        /// CLUSTERING (default) or BROADCASTING.
        pub fn message_model(mut self, m: $crate::__core::MessageModel) -> Self {
            self.options = self.options.message_model(m);
            self
        }
        /// Where queues with no offset start (`consumeFromWhere`).
        pub fn consume_from_where(mut self, w: $crate::__core::ConsumeFromWhere) -> Self {
            self.options = self.options.consume_from_where(w);
            self
        }
        /// For CONSUME_FROM_TIMESTAMP: milliseconds since the epoch.
        pub fn consume_timestamp_ms(mut self, ms: i64) -> Self {
            self.options = self.options.consume_timestamp_ms(ms);
            self
        }
        /// Any other knob (Java names and defaults), e.g. `.configure(|c| c.pull_batch_size(64))`.
        pub fn configure(
            mut self,
            f: impl FnOnce($crate::__core::ConsumerConfigBuilder) -> $crate::__core::ConsumerConfigBuilder,
        ) -> Self {
            self.options = self.options.configure(f);
            self
        }
        /// Broadcasting: keep local offsets in this file.
        pub fn offset_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
            self.options = self.options.offset_file(path);
            self
        }
        /// Called with every event, after it is logged.
        pub fn on_event(mut self, f: impl Fn(&$crate::__core::Event) + Send + Sync + 'static) -> Self {
            self.options = self.options.on_event(f);
            self
        }
        /// Run `hook` around every listener call (Java's `registerConsumeMessageHook`): `before`
        /// when user code starts on a batch, `after` with its result and time. Hooks run on the
        /// consumer's task in the order registered; keep them quick. A panicking hook is logged
        /// and consumption goes on.
        pub fn hook(mut self, hook: impl $crate::ConsumeHook) -> Self {
            self.options = self.options.hook(hook);
            self
        }
        /// Publish the consumer's figures (process time, messages consumed, cached messages and
        /// bytes, lag) through the `metrics` facade, named as the RocketMQ 5 clients name them;
        /// install a recorder to read them. Off by default.
        pub fn metrics(mut self) -> Self {
            self.options = self.options.metrics();
            self
        }
        /// Java's `enableMsgTrace` (default off) and `customizedTraceTopic` (`None`:
        /// `RMQ_SYS_TRACE_TOPIC`): SubBefore/SubAfter records of every consumed message in
        /// Java's format, which `mqadmin queryMsgTraceById` shows next to the producer's. The
        /// topic must exist; a failing trace is logged and never holds consumption up.
        pub fn enable_msg_trace(mut self, topic: Option<String>) -> Self {
            self.options = self.options.enable_msg_trace(topic);
            self
        }
        /// Use this client id instead of `ip@pid#nanos`.
        pub fn client_id(mut self, id: $crate::__core::ClientId) -> Self {
            self.options = self.options.client_id(id);
            self
        }
        /// Consume orderly (`MessageListenerOrderly`) with whichever listener is set: one batch
        /// per queue at a time, in offset order, under a broker lock. Answer
        /// `SuspendCurrentQueueAMoment` to retry a batch after the context's suspend time.
        pub fn orderly(mut self) -> Self {
            self.options = self.options.orderly();
            self
        }
    };
}

/// The commands of a running consumer, for an adapter's `PushConsumer` that has a private
/// `fn command(&self, c: Command)` sending them to its driver.
#[macro_export]
macro_rules! consumer_commands {
    () => {
        /// Stop pulling until `resume`; in-flight batches finish.
        pub fn suspend(&self) {
            self.command($crate::__core::Command::Suspend);
        }
        /// Resume pulling.
        pub fn resume(&self) {
            self.command($crate::__core::Command::Resume);
        }
        /// Stop pulling every queue of `topic` (queues assigned later too) until
        /// [`resume_topic`](Self::resume_topic). The answer to a pull already out is set aside
        /// and pulled again on resume, so only what was pulled before the pause still reaches
        /// the listener (batches with it or waiting for it); orderly locks are kept. A topic not
        /// subscribed is refused (logged as a refused command).
        pub fn pause_topic(&self, topic: impl Into<String>) {
            self.command($crate::__core::Command::PauseQueues($crate::__core::QueueSelector::Topic(
                topic.into(),
            )));
        }
        /// Undo [`pause_topic`](Self::pause_topic).
        pub fn resume_topic(&self, topic: impl Into<String>) {
            self.command($crate::__core::Command::ResumeQueues($crate::__core::QueueSelector::Topic(
                topic.into(),
            )));
        }
        /// Stop pulling one queue, as [`pause_topic`](Self::pause_topic) does a topic's. A queue
        /// pulls again once no pause selects it.
        pub fn pause_queue(&self, queue: $crate::__core::MessageQueue) {
            self.command($crate::__core::Command::PauseQueues($crate::__core::QueueSelector::Queue(queue)));
        }
        /// Undo [`pause_queue`](Self::pause_queue).
        pub fn resume_queue(&self, queue: $crate::__core::MessageQueue) {
            self.command($crate::__core::Command::ResumeQueues($crate::__core::QueueSelector::Queue(queue)));
        }
        /// Add or change a TAG subscription.
        pub fn subscribe(&self, topic: impl Into<String>, expression: impl Into<String>) {
            self.command($crate::__core::Command::Subscribe {
                topic: topic.into(),
                expression: expression.into(),
            });
        }
        /// Drop a subscription (its queues are persisted and released).
        pub fn unsubscribe(&self, topic: impl Into<String>) {
            self.command($crate::__core::Command::Unsubscribe { topic: topic.into() });
        }
    };
}

#[doc(hidden)]
pub use rocketmq_push_core as __core;
