//! What the real-process tests share: the binary, and the real broker when one runs.
#![allow(dead_code, clippy::disallowed_methods)] // each test file uses its own part; real sockets

use std::process::Command;

/// The rmqcat binary, with no name server from the environment.
pub(crate) fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rmqcat"));
    c.env_remove("NAMESRV_ADDR");
    c
}

/// The real broker's name server, or `None` (skipped) unless RMQ_REQUIRE_BROKER=1.
pub(crate) fn real_name_server() -> Option<String> {
    match std::env::var("NAMESRV_ADDR") {
        Ok(ns) if std::net::TcpStream::connect(&ns).is_ok() => Some(ns),
        _ => {
            assert!(
                std::env::var("RMQ_REQUIRE_BROKER").as_deref() != Ok("1"),
                "RMQ_REQUIRE_BROKER=1 but no broker"
            );
            eprintln!("note: no real broker (NAMESRV_ADDR); skipping");
            None
        }
    }
}
