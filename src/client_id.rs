//! Client id: `clientIP@instanceName[@unitName]` (`ClientConfig.buildMQClientId`).
//!
//! Brokers key rebalancing and order locks by this id: two live clients with the same id break
//! rebalancing. Java makes a default instance name unique per process as `<pid>#<nanoTime>`;
//! the core cannot read either, so the adapter passes them in ([`ClientId::for_process`]).

use std::fmt;
use std::net::IpAddr;

/// A client id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(String);

impl ClientId {
    /// `ip@instance`, plus `@unit` when a unit name is given.
    pub fn new(ip: IpAddr, instance_name: &str, unit_name: Option<&str>) -> Self {
        let ip = match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        };
        let mut id = format!("{ip}@{instance_name}");
        if let Some(unit) = unit_name.filter(|u| !u.is_empty()) {
            id.push('@');
            id.push_str(unit);
        }
        Self(id)
    }

    /// Java's default for a clustering consumer: instance `DEFAULT` becomes `<pid>#<nanos>`.
    pub fn for_process(ip: IpAddr, pid: u32, nanos: u64) -> Self {
        Self::new(ip, &format!("{pid}#{nanos}"), None)
    }

    /// Use an arbitrary string as the id (tests, the simulator).
    pub fn from_raw(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_format() {
        let ip: IpAddr = "192.168.1.10".parse().unwrap();
        assert_eq!(
            ClientId::for_process(ip, 12345, 987_654_321_012).as_str(),
            "192.168.1.10@12345#987654321012"
        );
        assert_eq!(ClientId::new(ip, "DEFAULT", Some("u1")).as_str(), "192.168.1.10@DEFAULT@u1");
        assert_eq!(ClientId::new("::1".parse().unwrap(), "x", None).as_str(), "[::1]@x");
    }
}
