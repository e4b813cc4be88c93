//! `rmqcat consume --prometheus ADDR`: the consumer's figures (see rocketmq-push-io's Metrics
//! table) in Prometheus' text format at `http://ADDR/metrics`, from a small HTTP/1.1 responder
//! on a thread of its own (one scrape at a time is all Prometheus does).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::Failure;

/// The process-time buckets the RocketMQ 5 clients use, in milliseconds.
const PROCESS_TIME_BUCKETS: [f64; 6] = [1.0, 5.0, 10.0, 100.0, 10_000.0, 60_000.0];

/// Install the recorder and serve it on `addr`; the address actually bound (port 0 picks one).
pub(crate) fn serve(addr: &str) -> Result<std::net::SocketAddr, Failure> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| Failure::Runtime(format!("--prometheus {addr}: cannot listen there: {e}")))?;
    let bound = listener.local_addr().map_err(|e| Failure::Runtime(format!("--prometheus {addr}: {e}")))?;
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full("rocketmq_process_time".into()), &PROCESS_TIME_BUCKETS)
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|e| Failure::Runtime(format!("--prometheus: {e}")))?;
    std::thread::Builder::new()
        .name("rmqcat-prometheus".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                answer(conn, &handle);
            }
        })
        .map_err(|e| Failure::Runtime(format!("--prometheus: no thread: {e}")))?;
    Ok(bound)
}

/// One request: `GET /metrics` gets the figures, anything else a 404. A client that sends
/// nothing within a second is dropped.
fn answer(mut conn: TcpStream, handle: &PrometheusHandle) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(5)));
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    // The request line and headers; a body is not expected and not read.
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let line = request.split(|b| *b == b'\r').next().unwrap_or_default();
    let (status, body) = if line.starts_with(b"GET /metrics ") || line == b"GET /metrics" {
        handle.run_upkeep();
        ("200 OK", handle.render())
    } else {
        ("404 Not Found", "try /metrics\n".to_owned())
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes()).and_then(|()| conn.write_all(body.as_bytes()));
}
