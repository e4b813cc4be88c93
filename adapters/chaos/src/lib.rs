//! Test-only tools for the chaos suite: a TCP fault proxy in front of a real name server and its
//! brokers.
#![allow(clippy::disallowed_methods, missing_docs)] // test code: real clocks and sockets

pub mod proxy;
