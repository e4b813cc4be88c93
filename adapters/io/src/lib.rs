//! # rocketmq-push-io
//!
//! What every rocketmq-push adapter needs and the sans-IO core may not do, written once:
//!
//! - [`client_id`]: this process's client id, as Java builds it (`ip@pid#nanos`);
//! - [`OffsetFile`]: broadcasting's local offsets, in Java's `offsets.json` format, replaced
//!   atomically (a crash mid-write leaves the previous file);
//! - [`guarded`]: run a listener, turning a panic or an `Err` into RECONSUME_LATER;
//! - [`log_event`]: what each core [`Event`](rocketmq_push_core::Event) means for a log;
//! - [`run`]: the one run loop, generic over a small [`Runtime`](run::Runtime) trait that each
//!   adapter implements (spawn, timer, TCP), and the public surface the async adapters share;
//! - [`ConsumerOptions`]: the builder part all adapters share (config, offset file, event hook,
//!   [`ConsumeHook`]s around every listener call);
//! - [`Client`]: a small blocking remoting client for tools and tests (produce, routes, offsets);
//! - [`Transport`]: plain TCP, or TLS (feature `tls`: `Tls`, rustls) for the run loop and the
//!   blocking client alike — the handshake is part of the connect;
//! - `sim_server` (feature `sim-server`): the simulator's fake name server and brokers served on
//!   loopback TCP in real time.
//!
//! ## Metrics
//!
//! With the builder's `.metrics()`, every adapter publishes through the `metrics` facade.
//! Names and labels are the RocketMQ 5 clients' where one exists:
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `rocketmq_process_time` | histogram, milliseconds a listener call took | topic, consumer_group, client_id, invocation_status |
//! | `rocketmq_consumer_cached_messages` | gauge, messages held in process queues | topic, consumer_group, client_id |
//! | `rocketmq_consumer_cached_bytes` | gauge, their body bytes | topic, consumer_group, client_id |
//! | `rocketmq_consume_messages_total` | counter, messages a listener finished (no 5.x client counterpart) | topic, consumer_group, client_id, invocation_status |
//! | `rocketmq_consumer_lag_messages` | gauge, stored and not committed, from the pull answers (the broker's metric of that name, seen from this client) | topic, consumer_group, client_id |
//!
//! `invocation_status` is `success` or `failure` (RECONSUME_LATER, an `Err`, a panic, a
//! suspend). A message retried carries its original topic.
//!
//! Every listener call (async or blocking) runs in a `consume` span with the topic, broker,
//! queue id, batch id and message count, so a `tracing` subscriber shows which queue a log line
//! of user code belongs to.

pub mod api;
mod client;
mod client_id;
mod hook;
mod listener;
mod log;
mod offset_file;
mod options;
pub mod run;
#[cfg(feature = "sim-server")]
pub mod sim_server;
mod telemetry;
#[cfg(feature = "tls")]
mod tls;
mod trace;
mod transport;

pub use client::{Client, ClientError, Producer};
pub use client_id::{client_id, stable_client_id};
pub use hook::{ConsumeHook, HookContext, HookOutcome};
pub(crate) use listener::settled;
pub use listener::{
    AsyncListener, CallSlot, ListenerOutput, SyncListener, async_listener, guarded, sync_listener,
};
pub use log::{Repeats, cause, log_event};
pub use offset_file::OffsetFile;
pub use options::{
    __core, ConsumerOptions, EventHook, LOG_WINDOW, Prepared, StartError, credentials_from_env,
};
#[cfg(feature = "tls")]
pub use tls::{Tls, TlsError};
pub use trace::DEFAULT_TRACE_TOPIC;
pub use transport::Transport;

/// The span a listener call runs in (async and blocking listeners alike), so a subscriber shows
/// which queue and batch a log line belongs to: `consume{topic queue_id batch messages}`. A
/// disabled span costs a cached check.
pub(crate) fn batch_span(batch: &rocketmq_push_core::Batch) -> tracing::Span {
    tracing::info_span!(
        "consume",
        topic = %batch.queue.topic,
        broker = %batch.queue.broker_name,
        queue_id = batch.queue.queue_id,
        batch = batch.id.0,
        messages = batch.messages.len()
    )
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    /// Records each new span's name and fields, and which span is entered around each event.
    #[derive(Clone, Default)]
    struct Spans(Arc<Mutex<Vec<String>>>);

    struct Fields(String);
    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }

    impl Subscriber for Spans {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, span: &Attributes<'_>) -> Id {
            let mut f = Fields(span.metadata().name().to_owned());
            span.record(&mut f);
            let mut v = self.0.lock().unwrap();
            v.push(f.0);
            Id::from_u64(v.len() as u64)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, id: &Id) {
            self.0.lock().unwrap().push(format!("enter {}", id.into_u64()));
        }
        fn exit(&self, _: &Id) {}
    }

    #[test]
    fn a_listener_call_runs_in_a_span_naming_its_queue_and_batch() {
        let spans = Spans::default();
        let batch = rocketmq_push_core::Batch {
            id: rocketmq_push_core::BatchId(7),
            queue: rocketmq_push_core::MessageQueue::new("T", "broker-a", 3).into(),
            messages: rocketmq_push_core::Messages::from_vec(vec![]),
            kind: rocketmq_push_core::BatchKind::Concurrent,
        };
        tracing::subscriber::with_default(spans.clone(), || {
            crate::batch_span(&batch).in_scope(|| {});
        });
        assert_eq!(
            *spans.0.lock().unwrap(),
            [
                "consume topic=T broker=broker-a queue_id=3 batch=7 messages=0".to_owned(),
                "enter 1".to_owned()
            ]
        );
    }
}
