//! `rmqcat` against a name server and broker with TLS (`RMQ_TLS=enforcing|permissive
//! scripts/rocketmq.sh start`: Java's `tls.server.mode`, a test CA made by the script). Skipped
//! unless the running cluster says so (`RMQ_TLS` and `RMQ_TLS_CA` from `scripts/rocketmq.sh
//! env`); scripts/test.sh runs it in both modes (and with ACL on as well).
#![allow(clippy::disallowed_methods)] // real processes

use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

struct Cluster {
    ns: String,
    mode: String,
    ca: String,
}

fn tls_cluster() -> Option<Cluster> {
    let mode = std::env::var("RMQ_TLS").ok().filter(|m| m != "off");
    let (Some(mode), Ok(ca), Ok(ns)) = (mode, std::env::var("RMQ_TLS_CA"), std::env::var("NAMESRV_ADDR"))
    else {
        eprintln!(
            "skipped: no TLS cluster (RMQ_TLS=enforcing scripts/rocketmq.sh start; eval \"$(scripts/rocketmq.sh env)\")"
        );
        return None;
    };
    Some(Cluster { ns, mode, ca })
}

/// rmqcat with nothing TLS-related from the environment but what `tls` says. ACL credentials
/// (the admin's, when the cluster enforces ACL too) stay.
fn rmqcat(c: &Cluster, tls: &[&str], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rmqcat"));
    cmd.env("NAMESRV_ADDR", &c.ns).env_remove("ROCKETMQ_TLS").env_remove("ROCKETMQ_TLS_CA");
    if std::env::var("RMQ_ACL").as_deref() == Ok("1") {
        cmd.env("ROCKETMQ_ACCESS_KEY", "RocketMQ").env("ROCKETMQ_SECRET_KEY", "12345678");
    }
    cmd.args(tls).args(args).output().expect("rmqcat runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn every_subcommand_works_over_tls_and_a_wrong_setup_says_why() {
    let Some(c) = tls_cluster() else { return };
    let stamp = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis();
    let (topic, group) = (format!("tls_{stamp}"), format!("tls_g_{stamp}"));
    let ca = ["--tls-ca", c.ca.as_str()];

    // Produce, consume (the tokio adapter's run loop), route and group, verified against the CA.
    let o = rmqcat(&c, &ca, &["produce", "-t", &topic, "--create", "4", "--count", "20"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = rmqcat(&c, &ca, &["consume", "-t", &topic, "-g", &group, "--from", "first", "--count", "20"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 20, "{}", text(&o));
    let o = rmqcat(&c, &ca, &["route", "-t", &topic]);
    assert!(o.status.success() && text(&o).contains("broker-a"), "{}", text(&o));
    let o = rmqcat(&c, &ca, &["group", "-g", &group, "-t", &topic]);
    assert!(o.status.success() && text(&o).contains("total lag: 0"), "{}", text(&o));

    // The same through the environment, and with Java's test mode (any certificate).
    let o = Command::new(env!("CARGO_BIN_EXE_rmqcat"))
        .env("NAMESRV_ADDR", &c.ns)
        .env("ROCKETMQ_TLS_CA", &c.ca)
        .args(["route", "-t", &topic])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = rmqcat(&c, &["--tls-insecure"], &["route", "-t", &topic]);
    assert!(o.status.success(), "{}", text(&o));

    // A certificate that does not verify (the system roots do not hold the test CA): refused,
    // and the error says it was the certificate.
    let o = rmqcat(&c, &["--tls"], &["route", "-t", &topic]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("certificate was refused") && text(&o).contains("UnknownIssuer"),
        "{}",
        text(&o)
    );
    // An unreadable CA file is a usage error naming the file.
    let o = rmqcat(&c, &["--tls-ca", "/nonexistent/ca.pem"], &["route", "-t", &topic]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("/nonexistent/ca.pem"), "{}", text(&o));

    // Plain: refused by name where TLS is enforced, served where it is permissive.
    let o = rmqcat(&c, &[], &["route", "-t", &topic]);
    if c.mode == "enforcing" {
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("a TLS-only port"), "{}", text(&o));
    } else {
        assert!(o.status.success(), "{}", text(&o));
    }
}
