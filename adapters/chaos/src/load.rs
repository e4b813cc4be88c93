//! A steady producer on a thread of its own: messages with known keys at a fixed rate, each
//! counted as produced only once a broker stored it (a failed send is retried, on another queue).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rocketmq_push_core::message::{Message, keys};
use rocketmq_push_io::Producer;

/// A running producer.
#[derive(Debug)]
pub struct Load {
    stop: Arc<AtomicBool>,
    produced: Arc<Mutex<BTreeSet<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl Load {
    /// Produce to `topic` through the name server `ns`, `per_second` messages a second, keys
    /// `prefix-N`, until [`stop`](Self::stop).
    pub fn start(ns: &str, topic: &str, prefix: &str, per_second: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let produced = Arc::new(Mutex::new(BTreeSet::new()));
        let (s, p) = (stop.clone(), produced.clone());
        let (ns, topic, prefix) = (ns.to_owned(), topic.to_owned(), prefix.to_owned());
        let thread = std::thread::spawn(move || {
            let mut producer = Producer::new(&ns, Duration::from_secs(3));
            let gap = Duration::from_secs(1) / per_second.max(1);
            let started = Instant::now();
            let mut n: u64 = 0;
            while !s.load(Ordering::SeqCst) {
                let key = format!("{prefix}-{n}");
                let msg =
                    Message::new(topic.as_str(), format!("chaos {n}")).with_property(keys::UNIQ_KEY, &key);
                match producer.send(msg) {
                    Ok(_) => {
                        p.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key);
                        n += 1;
                    }
                    // A broker is down: retry the same key a little later (likely elsewhere).
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
                let due = started + gap * u32::try_from(n).unwrap_or(u32::MAX);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
        });
        Self { stop, produced, thread: Some(thread) }
    }

    /// Keys stored so far.
    pub fn produced(&self) -> BTreeSet<String> {
        self.produced.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Stop producing; the keys stored.
    pub fn stop(mut self) -> BTreeSet<String> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.produced()
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}
