//! Deterministic simulator (feature `sim`): fake name server and brokers, a network with faults,
//! and real [`Consumer`](crate::Consumer)s inside [`Driver`](crate::Driver)s, driven the way the
//! adapters drive them — all on virtual time from a seed. Test support, public so that users can
//! test their own listeners with it.
//!
//! ```text
//!   Driver ──Connect──▶ connected or refused after a hop (broker down, Faults::refuse_connects)
//!   Driver ──Write(bytes)──▶ Net (latency, jitter, FIFO per connection) ──▶ SimBroker / SimNameServer
//!      ▲                                                                        │
//!      └──received(bytes, in pieces when reads are split)◀── drop / duplicate / delay, resets ◀──┘
//!   Consume(batch) ──▶ listener (verdict + how long it takes) ──▶ consumed(batch) at now + took
//! ```
//!
//! Time is `t0 + virtual elapsed` and moves only when [`Sim::step`] jumps to the earliest pending
//! event: a delivery, a consumer or broker deadline, a listener finishing, a scheduled fault.
//! After every step the invariants are checked (see `sim/invariants.rs`); a violation panics with
//! the seed.

pub mod broker;
mod invariants;
pub mod name_server;
mod ops;
mod rng;
mod world;

pub use broker::{
    BROKER_VERSION, ConnId, Outgoing, PopState, PopStats, SimBroker, SimBrokerConfig, pop_retry_topic,
};
pub use name_server::SimNameServer;
pub use ops::{SimOp, run_ops};
pub use rng::SimRng;
pub use world::{Consumed, Fault, Faults, Listener, Produced, Sim, SimBuilder, Verdict};
