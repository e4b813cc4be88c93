//! `--trace` failures on stderr. rmqcat prints the consumer's events itself and installs no
//! log subscriber; the message trace reports on the `tracing` log only, so its warnings (a trace
//! topic missing or refusing writes, records dropped) are picked out and printed here.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Where the trace's warnings come from.
const TARGET: &str = "rocketmq_push_io::trace";

struct TraceWarnings;

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

impl Subscriber for TraceWarnings {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.is_event() && m.target() == TARGET && *m.level() <= Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, e: &Event<'_>) {
        let mut line = Line(String::new());
        e.record(&mut line);
        say!("rmqcat: {}", line.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Print the message trace's warnings from now on (once per process).
pub(crate) fn install() {
    let _ = tracing::subscriber::set_global_default(TraceWarnings);
}
