//! `--config FILE`: one TOML file a team shares, holding the cluster settings and any of Java's
//! consumer knobs by their Java names. Flags win over the file, the file over the environment.
//!
//! ```toml
//! namesrvAddr = "10.0.0.1:9876;10.0.0.2:9876"
//! namespace = "prod"
//! accessKey = "rocketmq2"
//! secretKey = "12345678"
//! tlsCa = "/etc/rocketmq/ca.pem"     # or tls = true, or tlsInsecure = true
//! pullBatchSize = 64                 # any DefaultMQPushConsumer knob (rmqcat consume -g)
//! consumeTimeout = 5
//! ```

use std::path::{Path, PathBuf};

use rocketmq_push_core::config::JAVA_KNOBS;

/// The cluster settings a file may hold, by their Java-client names.
const CLUSTER_KEYS: &[&str] =
    &["namesrvAddr", "namespace", "accessKey", "secretKey", "securityToken", "tls", "tlsCa", "tlsInsecure"];

/// What a config file says.
#[derive(Debug, Default)]
pub(crate) struct ConfigFile {
    pub(crate) name_server: Option<String>,
    pub(crate) namespace: Option<String>,
    pub(crate) access_key: Option<String>,
    pub(crate) secret_key: Option<String>,
    pub(crate) security_token: Option<String>,
    pub(crate) tls: bool,
    pub(crate) tls_ca: Option<PathBuf>,
    pub(crate) tls_insecure: bool,
    /// Java consumer knobs, by name, as text for `ConsumerConfigBuilder::set`.
    pub(crate) knobs: Vec<(String, String)>,
}

impl ConfigFile {
    /// Read and check `path`; an error is one line naming the file and what is wrong.
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--config {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("--config {}: {e}", path.display()))
    }

    fn parse(text: &str) -> Result<Self, String> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let before = e.span().and_then(|s| text.get(..s.start)).unwrap_or("");
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            let why = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
            format!("line {line}, column {column}: {why}")
        })?;
        let mut c = Self::default();
        for (key, value) in &table {
            let text = || match value {
                // An empty value is almost always a template left unfilled: say so rather than guess.
                toml::Value::String(s) if s.trim().is_empty() => Err(format!("{key}: empty")),
                toml::Value::String(s) => Ok(s.clone()),
                toml::Value::Integer(i) => Ok(i.to_string()),
                toml::Value::Boolean(b) => Ok(b.to_string()),
                _ => Err(format!("{key}: expected a string, an integer or true/false")),
            };
            let flag = || value.as_bool().ok_or_else(|| format!("{key}: expected true or false"));
            match key.as_str() {
                "namesrvAddr" => c.name_server = Some(text()?),
                "namespace" => c.namespace = Some(text()?),
                "accessKey" => c.access_key = Some(text()?),
                "secretKey" => c.secret_key = Some(text()?),
                "securityToken" => c.security_token = Some(text()?),
                "tls" => c.tls = flag()?,
                "tlsCa" => c.tls_ca = Some(PathBuf::from(text()?)),
                "tlsInsecure" => c.tls_insecure = flag()?,
                k if JAVA_KNOBS.contains(&k) => c.knobs.push((k.to_owned(), text()?)),
                k => {
                    return Err(format!(
                        "unknown key {k:?}; known: {}, and the consumer knobs {}",
                        CLUSTER_KEYS.join(", "),
                        JAVA_KNOBS.join(", ")
                    ));
                }
            }
        }
        if c.access_key.is_some() != c.secret_key.is_some() {
            return Err("accessKey and secretKey go together".to_owned());
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_settings_and_knobs() {
        let c = ConfigFile::parse(
            "namesrvAddr = \"a:1;b:2\"\nnamespace = \"ns\"\naccessKey = \"ak\"\nsecretKey = \"sk\"\n\
             tlsCa = \"/ca.pem\"\npullBatchSize = 64\npostSubscriptionWhenPull = true\nconsumeTimeout = \"5\"\n",
        )
        .unwrap();
        assert_eq!(c.name_server.as_deref(), Some("a:1;b:2"));
        assert_eq!((c.access_key.as_deref(), c.secret_key.as_deref()), (Some("ak"), Some("sk")));
        assert_eq!(c.tls_ca, Some(PathBuf::from("/ca.pem")));
        let knobs: Vec<(&str, &str)> = c.knobs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            knobs,
            [("consumeTimeout", "5"), ("postSubscriptionWhenPull", "true"), ("pullBatchSize", "64")]
        );
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        for (text, what) in [
            ("pullBatchSise = 64", "unknown key \"pullBatchSise\""),
            ("namesrvAddr = [1, 2]", "namesrvAddr: expected a string"),
            ("tls = \"yes\"", "tls: expected true or false"),
            ("namespace = \"\"", "namespace: empty"),
            ("accessKey = \"ak\"", "go together"),
            ("namesrvAddr = ", "line 1, column 15: "),
            ("a = 1\nb = [", "line 2"),
        ] {
            let e = ConfigFile::parse(text).unwrap_err();
            assert!(e.contains(what), "{text}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }
}
