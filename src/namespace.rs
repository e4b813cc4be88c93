//! Namespaces (`NamespaceUtil`): resources travel as `namespace%name`, retry and dead-letter
//! topics as `%RETRY%namespace%group`; delivered messages carry the plain name.

use crate::producer::{DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX};

/// A namespace, or none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Namespace(Option<String>);

const SYSTEM_PREFIXES: &[&str] = &["rmq_sys_", "RMQ_SYS_", "SCHEDULE_TOPIC_XXXX", "TBW102", "BenchmarkTest"];

impl Namespace {
    /// `ns`; an empty or absent one is none.
    pub fn new(ns: Option<String>) -> Self {
        Self(ns.filter(|n| !n.is_empty()))
    }

    /// The wire name of a topic or group.
    pub fn wrap(&self, resource: &str) -> String {
        let Some(ns) = &self.0 else { return resource.to_owned() };
        if resource.is_empty() || SYSTEM_PREFIXES.iter().any(|p| resource.starts_with(p)) {
            return resource.to_owned();
        }
        for prefix in [RETRY_TOPIC_PREFIX, DLQ_TOPIC_PREFIX] {
            if let Some(rest) = resource.strip_prefix(prefix) {
                return format!("{prefix}{}", self.wrap(rest));
            }
        }
        if resource.starts_with(&format!("{ns}%")) {
            return resource.to_owned();
        }
        format!("{ns}%{resource}")
    }

    /// The name a user sees.
    pub fn unwrap<'a>(&self, resource: &'a str) -> &'a str {
        match &self.0 {
            Some(ns) => {
                resource.strip_prefix(ns.as_str()).and_then(|r| r.strip_prefix('%')).unwrap_or(resource)
            }
            None => resource,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_rules() {
        let ns = Namespace::new(Some("ns1".into()));
        assert_eq!(ns.wrap("T"), "ns1%T");
        assert_eq!(ns.wrap("ns1%T"), "ns1%T");
        assert_eq!(ns.wrap("%RETRY%g"), "%RETRY%ns1%g");
        assert_eq!(ns.wrap("%DLQ%g"), "%DLQ%ns1%g");
        assert_eq!(ns.wrap("TBW102"), "TBW102");
        assert_eq!(ns.unwrap("ns1%T"), "T");
        assert_eq!(ns.unwrap("other%T"), "other%T");
        let none = Namespace::new(None);
        assert_eq!(none.wrap("T"), "T");
        assert_eq!(none.unwrap("T"), "T");
    }
}
