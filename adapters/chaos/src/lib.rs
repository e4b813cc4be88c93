//! Test-only tools for the chaos suite: a TCP fault proxy in front of a real name server and its
//! brokers; the consumer under test as a process of its own (`src/bin/chaos_consumer.rs`), so
//! it can be killed and its memory measured; a real cluster of its own to kill (`cluster`); a
//! steady producer (`load`).
#![allow(clippy::disallowed_methods, missing_docs)] // test code: real clocks and sockets

pub mod cluster;
pub mod load;
pub mod process;
pub mod proxy;
