//! Deterministic simulator (feature `sim`): fake name server and brokers, a network with faults,
//! and real [`Consumer`](crate::Consumer)s driven through their public API — all on virtual time
//! from a seed. Test support, public so that users can test their own listeners with it.
//!
//! ```text
//!   Consumer ──Transmit──▶ Net (latency, jitter, FIFO per connection) ──▶ SimBroker / SimNameServer
//!      ▲                                                                        │
//!      └──Frame◀── faults: drop / duplicate / delay, resets, restarts ◀─────────┘
//!   Dispatch ──▶ listener (verdict + how long it takes) ──▶ ConsumeResult at now + took
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

pub use broker::{BROKER_VERSION, ConnId, Outgoing, SimBroker, SimBrokerConfig};
pub use name_server::SimNameServer;
pub use ops::{SimOp, run_ops};
pub use rng::SimRng;
pub use world::{Consumed, Fault, Faults, Listener, Produced, Sim, SimBuilder, Verdict};
