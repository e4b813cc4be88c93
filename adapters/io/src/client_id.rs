//! The client id of this process.

use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs, UdpSocket};
use std::time::{SystemTime, UNIX_EPOCH};

use rocketmq_push_core::ClientId;

/// The local address this host uses to reach `name_server`: what the broker sees. A UDP
/// "connect" only asks the routing table; nothing is sent. Loopback when nothing better is found.
fn local_ip(name_server: Option<&str>) -> IpAddr {
    let target = name_server.and_then(|a| a.to_socket_addrs().ok()?.next());
    let probe = || -> Option<IpAddr> {
        let target = target?;
        let bind = if target.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
        let s = UdpSocket::bind(bind).ok()?;
        s.connect(target).ok()?;
        Some(s.local_addr().ok()?.ip())
    };
    probe().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// Java's default for a clustering consumer: `ip@pid#nanos`, unique per process (two live
/// clients with one id break rebalancing).
pub fn client_id(name_servers: &[String]) -> ClientId {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    ClientId::for_process(local_ip(name_servers.first().map(String::as_str)), std::process::id(), nanos)
}

/// Java's id for a broadcasting consumer, which keeps instance name `DEFAULT`: stable across
/// restarts, so the local offset file is found again.
pub fn stable_client_id(name_servers: &[String]) -> ClientId {
    ClientId::new(local_ip(name_servers.first().map(String::as_str)), "DEFAULT", None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_name_server_gives_loopback_ip() {
        let id = client_id(&["127.0.0.1:9876".into()]);
        assert!(id.as_str().starts_with("127.0.0.1@"), "{id}");
        assert!(id.as_str().contains('#'));
        assert_ne!(client_id(&["127.0.0.1:9876".into()]), id, "unique per call");
        assert_eq!(stable_client_id(&[]).as_str(), "127.0.0.1@DEFAULT");
    }
}
