//! Message trace as Java's consumer writes it (`enableMsgTrace`, `customizedTraceTopic`): a
//! SubBefore record per message when a listener starts, a SubAfter when it ends, in Java's
//! `TraceDataEncoder` text format, sent to `RMQ_SYS_TRACE_TOPIC` (or the customized topic) with
//! the messages' ids and keys as the trace message's keys, so `mqadmin queryMsgTraceById`
//! shows our consumption next to the producer's Pub record.
//!
//! The hook only formats and queues (a bounded queue: when the sender falls behind, records are
//! dropped and counted, never waited for); a thread of its own batches them (up to 128,000
//! bytes a message, as Java) and sends them with the blocking producer. A trace topic that does
//! not exist or refuses writes is logged, at most once every ten seconds; consumption goes on.

use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketmq_push_core::message::{Message, UniqIdGenerator, keys};
use rocketmq_push_core::{ConsumeStatus, Credentials};

use crate::{ConsumeHook, HookContext, HookOutcome, Producer, Transport};

/// Java's default trace topic.
pub const DEFAULT_TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

const CONTENT: char = '\u{1}';
const FIELD: char = '\u{2}';
/// Java's `AsyncTraceDispatcher.maxMsgSize`.
const MAX_TRACE_MESSAGE: usize = 128_000;
/// Records waiting for the sender at most.
const QUEUE: usize = 20_000;
/// How long the sender gathers records before a send (Java polls every 100 ms).
const GATHER: Duration = Duration::from_millis(100);
/// How long a consumer's end waits for the last records to go out.
const FLUSH: Duration = Duration::from_secs(3);

/// One formatted record and the keys it is found by.
struct Record {
    data: String,
    keys: Vec<String>,
}

/// Where the sender sends.
pub(crate) struct TraceTarget {
    pub(crate) name_server: String,
    pub(crate) topic: String,
    pub(crate) credentials: Option<Credentials>,
    pub(crate) transport: Transport,
}

/// The consume hook that writes trace records.
pub(crate) struct TraceHook {
    queue: SyncSender<Record>,
    /// Per batch in a listener: the SubBefore's request id and time (Java keeps them in the
    /// consume context).
    open: Mutex<std::collections::HashMap<u64, (String, i64)>>,
    ids: Mutex<UniqIdGenerator>,
    dropped: Arc<std::sync::atomic::AtomicU64>,
    /// Ends when the hook is dropped (the sender then drains and stops).
    done: Mutex<Option<Receiver<()>>>,
}

impl TraceHook {
    pub(crate) fn start(target: TraceTarget, ids: UniqIdGenerator) -> std::io::Result<Self> {
        let (queue, records) = std::sync::mpsc::sync_channel(QUEUE);
        let (finished, done) = std::sync::mpsc::sync_channel(1);
        let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
        std::thread::Builder::new().name("rmq-trace".into()).spawn(move || {
            send_loop(&target, &records);
            let _ = finished.send(());
        })?;
        Ok(Self {
            queue,
            open: Mutex::default(),
            ids: Mutex::new(ids),
            dropped,
            done: Mutex::new(Some(done)),
        })
    }

    fn push(&self, record: Record) {
        if let Err(TrySendError::Full(_)) = self.queue.try_send(record) {
            let n = self.dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if n % 10_000 == 0 {
                tracing::warn!(dropped = n + 1, "message trace falls behind: records dropped");
            }
        }
    }
}

impl Drop for TraceHook {
    fn drop(&mut self) {
        // Close the queue by replacing our sender, then give the last records a moment.
        let (closed, _) = std::sync::mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.queue, closed));
        if let Some(done) = self.done.get_mut().ok().and_then(Option::take) {
            let _ = done.recv_timeout(FLUSH);
        }
    }
}

fn wall_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Java appends a null String as `null`.
fn or_null(s: Option<&str>) -> &str {
    s.unwrap_or("null")
}

impl ConsumeHook for TraceHook {
    fn before(&self, ctx: &HookContext<'_>) {
        let now = wall_ms();
        let request_id =
            self.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).next_id(now as u64);
        let mut data = String::new();
        let mut found_by = Vec::new();
        for m in ctx.messages.iter().filter(|m| m.property(keys::TRACE_ON) != Some("false")) {
            let region = m.property(keys::MSG_REGION).unwrap_or("DefaultRegion");
            let id = m.msg_id();
            let keys = m.property(keys::KEYS);
            for f in [
                "SubBefore",
                &now.to_string(),
                region,
                ctx.group,
                &request_id,
                &id,
                &m.reconsume_times.to_string(),
            ] {
                data.push_str(f);
                data.push(CONTENT);
            }
            data.push_str(or_null(keys));
            data.push(FIELD);
            found_by.push(id.into_owned());
            found_by.extend(
                keys.into_iter().flat_map(|k| k.split(' ')).filter(|k| !k.is_empty()).map(str::to_owned),
            );
        }
        if data.is_empty() {
            return;
        }
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(ctx.batch.0, (request_id, now));
        self.push(Record { data, keys: found_by });
    }

    fn after(&self, ctx: &HookContext<'_>, outcome: &HookOutcome<'_>) {
        let Some((request_id, _)) =
            self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&ctx.batch.0)
        else {
            return;
        };
        let now = wall_ms();
        let cost = (outcome.elapsed.as_millis() / ctx.messages.len().max(1) as u128) as i64;
        let success = outcome.success();
        // Java's ConsumeReturnType: SUCCESS 0, EXCEPTION 2 (a panic or an Err), FAILED 4.
        let code = match (outcome.failure, outcome.result.status) {
            (Some(_), _) => 2,
            (None, ConsumeStatus::Success) => 0,
            _ => 4,
        };
        let mut data = String::new();
        let mut found_by = Vec::new();
        for m in ctx.messages.iter().filter(|m| m.property(keys::TRACE_ON) != Some("false")) {
            let id = m.msg_id();
            let keys = m.property(keys::KEYS);
            for f in [
                "SubAfter",
                &request_id,
                &id,
                &cost.to_string(),
                if success { "true" } else { "false" },
                or_null(keys),
                &code.to_string(),
                &now.to_string(),
            ] {
                data.push_str(f);
                data.push(CONTENT);
            }
            data.push_str(ctx.group);
            data.push(FIELD);
            found_by.push(id.into_owned());
            found_by.extend(
                keys.into_iter().flat_map(|k| k.split(' ')).filter(|k| !k.is_empty()).map(str::to_owned),
            );
        }
        self.push(Record { data, keys: found_by });
    }
}

/// Gather records for [`GATHER`], send them in messages of at most [`MAX_TRACE_MESSAGE`] bytes;
/// until the queue closes, then send what is left.
fn send_loop(target: &TraceTarget, records: &Receiver<Record>) {
    let mut producer = Producer::new(&target.name_server, Duration::from_secs(3))
        .with_credentials(target.credentials.clone())
        .with_transport(target.transport.clone());
    // Trace bodies are small text; Java's trace producer does not compress them either.
    producer.compression = None;
    let mut last_error: Option<Instant> = None;
    let mut open = true;
    while open {
        let mut batch = Vec::new();
        match records.recv() {
            Ok(r) => batch.push(r),
            Err(_) => break,
        }
        let until = Instant::now() + GATHER;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match records.recv_timeout(left) {
                Ok(r) => batch.push(r),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        for (body, keys) in messages(batch) {
            let msg = Message::new(target.topic.as_str(), body).with_property(keys::KEYS, &keys.join(" "));
            if let Err(e) = producer.send(msg) {
                if last_error.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    last_error = Some(Instant::now());
                    tracing::warn!(topic = %target.topic, error = %e, "message trace not sent");
                }
            }
        }
    }
}

/// Records joined into trace message bodies of at most [`MAX_TRACE_MESSAGE`] bytes (one record
/// larger than that goes alone), each with the keys of its records.
fn messages(batch: Vec<Record>) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for r in batch {
        match out.last_mut() {
            Some((body, keys)) if body.len() + r.data.len() <= MAX_TRACE_MESSAGE => {
                body.push_str(&r.data);
                keys.extend(r.keys);
            }
            _ => out.push((r.data, r.keys)),
        }
    }
    for (_, keys) in &mut out {
        keys.sort();
        keys.dedup();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_packed_up_to_the_size_java_allows() {
        let r = |n: usize, k: &str| Record { data: "x".repeat(n), keys: vec![k.to_owned(), "shared".into()] };
        let out = messages(vec![r(100, "a"), r(200, "b"), r(MAX_TRACE_MESSAGE, "c"), r(10, "d")]);
        let shape: Vec<(usize, Vec<String>)> = out.into_iter().map(|(b, k)| (b.len(), k)).collect();
        let keys = |k: &[&str]| k.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            shape,
            vec![
                (300, keys(&["a", "b", "shared"])),
                (MAX_TRACE_MESSAGE, keys(&["c", "shared"])),
                (10, keys(&["d", "shared"]))
            ]
        );
    }
}
