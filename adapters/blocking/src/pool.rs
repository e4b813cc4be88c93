//! A fixed pool of threads running the listener; results go back to the driver.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;

use rocketmq_push_core::{Batch, ConsumeContext};
use rocketmq_push_io::guarded;

use crate::Listener;
use crate::driver::Msg;

pub(crate) struct Pool {
    jobs: Sender<Batch>,
}

impl Pool {
    pub(crate) fn start(threads: usize, listener: Listener, results: Sender<Msg>) -> std::io::Result<Self> {
        let (jobs, rx) = mpsc::channel::<Batch>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let (rx, listener, results) = (rx.clone(), listener.clone(), results.clone());
            thread::Builder::new()
                .name(format!("rmq-consume-{i}"))
                .spawn(move || work(&rx, &listener, &results))?;
        }
        Ok(Self { jobs })
    }

    pub(crate) fn submit(&self, batch: Batch) {
        let _ = self.jobs.send(batch);
    }
}

fn work(rx: &Mutex<Receiver<Batch>>, listener: &Listener, results: &Sender<Msg>) {
    loop {
        // A poisoned lock only means another worker panicked while waiting, which `guarded`
        // prevents; keep going either way.
        let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(batch) = next else { return };
        let mut ctx = ConsumeContext::for_batch(&batch);
        let (result, panic) = guarded(|| {
            let status = listener(&batch.messages, &mut ctx);
            ctx.result(status)
        });
        if results.send(Msg::Done { batch: batch.id, result, panic }).is_err() {
            return;
        }
    }
}
