//! `rmqcat`: kcat for Apache RocketMQ, on the tokio adapter.
//!
//! Consume and produce from a terminal, decode captured remoting frames, look at a topic's route
//! and a group's progress, or run a self-contained demo on the embedded simulator. Exit codes:
//! 0 done, 1 a runtime failure (unreachable server, missing topic, bad bytes, lost messages),
//! 2 a usage error. Errors are one line on stderr; progress goes to stderr too (`-q` silences it).

/// A line on stderr that never panics: with stderr closed (`rmqcat … 2>&1 >file | head -2`)
/// `eprintln!` would panic, and the panic's own report would abort the process.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// A line on stdout; a closed stdout (`rmqcat route … | head -1`) ends rmqcat quietly with exit
/// 0, as kcat does. (`consume` handles its own stdout: it commits what was printed first.)
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout_line(format_args!($($arg)*))
    };
}

mod admin;
mod bench;
mod config_file;
mod consume;
mod decode;
mod demo;
mod format;
mod mode;
mod produce;
mod progress;
mod prometheus;
mod read;
mod reset;
mod time;
mod trace_log;

use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

use rocketmq_push_core::Credentials;
use rocketmq_push_io::{Tls, Transport};

use clap::{Parser, Subcommand};

/// How long to wait for a server's answer in the tools' own requests.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Parser)]
#[command(
    name = "rmqcat",
    version,
    about = "kcat for Apache RocketMQ: consume, produce, decode frames, inspect routes and groups",
    after_help = "Examples:
  rmqcat demo                                   no broker needed: the embedded simulator
  rmqcat consume -n 127.0.0.1:9876 -g G -t T -c 10
  seq 5 | rmqcat produce -n 127.0.0.1:9876 -t T
  rmqcat decode --hex tests/data/pull_found_three.hex
  rmqcat route -t T
  rmqcat group -g G

The name server defaults to $NAMESRV_ADDR; ACL credentials to $ROCKETMQ_ACCESS_KEY and
$ROCKETMQ_SECRET_KEY (and $ROCKETMQ_SECURITY_TOKEN); TLS to $ROCKETMQ_TLS / $ROCKETMQ_TLS_CA.
--config FILE reads them from TOML instead (namesrvAddr, namespace, accessKey, secretKey,
securityToken, tls, tlsCa, tlsInsecure), with any of Java's consumer knobs by name
(pullBatchSize = 64); flags win over the file, the file over the environment."
)]
struct Cli {
    /// No progress or summaries on stderr (errors are still printed).
    #[arg(short, long, global = true)]
    quiet: bool,
    /// ACL access key: every request is signed as Java's AclClientRPCHook signs it (default
    /// $ROCKETMQ_ACCESS_KEY).
    #[arg(long, global = true, value_name = "KEY")]
    access_key: Option<String>,
    /// ACL secret key (default $ROCKETMQ_SECRET_KEY; the environment keeps it out of `ps`).
    #[arg(long, global = true, value_name = "SECRET")]
    secret_key: Option<String>,
    /// Namespace (Java's `setNamespace`): topics and groups travel as NS%name; you name them
    /// without it (default $ROCKETMQ_NAMESPACE).
    #[arg(long, global = true, value_name = "NS")]
    namespace: Option<String>,
    /// TLS to the name server and brokers, trusting the system's root certificates (default
    /// $ROCKETMQ_TLS: 1 = system roots, insecure = any certificate).
    #[arg(long, global = true)]
    tls: bool,
    /// TLS, trusting the CA certificates in this PEM file (Java's tls.client.trustCertPath;
    /// default $ROCKETMQ_TLS_CA).
    #[arg(long, global = true, value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,
    /// TLS, accepting any certificate (Java's test mode, for self-signed test brokers): encrypted
    /// but not authenticated.
    #[arg(long, global = true)]
    tls_insecure: bool,
    /// A TOML file of cluster settings (namesrvAddr, namespace, accessKey, secretKey, tls, tlsCa,
    /// tlsInsecure) and Java consumer knobs by name; flags win over it, it over the environment.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    Consume(consume::Opts),
    Produce(produce::Opts),
    Decode(decode::Opts),
    Route(admin::RouteOpts),
    Group(admin::GroupOpts),
    Demo(demo::Opts),
    Bench(bench::Opts),
}

/// Why a command failed: usage (exit 2) or at run time (exit 1).
#[derive(Debug)]
pub(crate) enum Failure {
    Usage(String),
    Runtime(String),
}

pub(crate) type Outcome = Result<ExitCode, Failure>;

static CREDENTIALS: OnceLock<Option<Credentials>> = OnceLock::new();
static FILE: OnceLock<config_file::ConfigFile> = OnceLock::new();
static NAMESPACE: OnceLock<Option<String>> = OnceLock::new();
static TLS: OnceLock<Option<Tls>> = OnceLock::new();

/// TLS for every connection, if asked for.
pub(crate) fn tls() -> Option<Tls> {
    TLS.get().cloned().flatten()
}

/// Plain TCP or TLS, for the blocking clients.
pub(crate) fn transport() -> Transport {
    Transport::with_tls(tls())
}

/// `--tls`, `--tls-ca`, `--tls-insecure`, else the environment.
fn tls_from(cli: &Cli) -> Result<Option<Tls>, String> {
    let t = match (cli.tls, &cli.tls_ca, cli.tls_insecure) {
        (_, Some(_), true) => return Err("--tls-ca and --tls-insecure exclude each other".into()),
        (_, Some(ca), false) => Tls::ca_file(ca).map(Some),
        (_, None, true) => Ok(Some(Tls::insecure())),
        (true, None, false) => Tls::system_roots().map(Some),
        (false, None, false) => Tls::from_env(),
    };
    // Broker addresses come from routes as IP addresses: the chain is checked, not the name,
    // as Java does.
    t.map(|t| t.map(Tls::without_host_name_check)).map_err(|e| e.to_string())
}

/// The namespace, if any.
pub(crate) fn namespace() -> Option<String> {
    NAMESPACE.get().cloned().flatten()
}

/// A topic or group as it travels on the wire (with the namespace, if any).
pub(crate) fn wire_name(name: &str) -> String {
    rocketmq_push_core::namespace::Namespace::new(namespace()).wrap(name)
}

/// The ACL credentials every request is signed with, if any.
pub(crate) fn credentials() -> Option<Credentials> {
    CREDENTIALS.get().cloned().flatten()
}

/// See `out!`.
pub(crate) fn stdout_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if o.write_fmt(line).and_then(|()| o.write_all(b"\n")).is_err() {
        std::process::exit(0);
    }
}

/// Set once Ctrl-C arrives, for the blocking loops (the group consumer awaits it itself). The
/// first call installs the handler, on a thread of its own.
pub(crate) fn interrupted() -> &'static std::sync::atomic::AtomicBool {
    use std::sync::atomic::{AtomicBool, Ordering};
    static FLAG: AtomicBool = AtomicBool::new(false);
    static WATCH: std::sync::Once = std::sync::Once::new();
    WATCH.call_once(|| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
        if let Ok(rt) = rt {
            let (ready_tx, ready) = std::sync::mpsc::channel();
            let spawned = std::thread::Builder::new().name("ctrl-c".into()).spawn(move || {
                rt.block_on(async {
                    let signal = tokio::signal::ctrl_c();
                    tokio::pin!(signal);
                    // Poll once so the handler is in place before the caller goes on.
                    let _ = poll_once(&mut signal).await;
                    let _ = ready_tx.send(());
                    if signal.await.is_ok() {
                        FLAG.store(true, Ordering::SeqCst);
                    }
                })
            });
            if spawned.is_ok() {
                let _ = ready.recv_timeout(Duration::from_secs(1));
            }
        }
    });
    &FLAG
}

/// Poll `f` once, without waiting: `Some` if it is ready.
async fn poll_once<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut *f).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

/// Write `bytes` to stdout and flush; false when stdout is closed.
pub(crate) fn stdout_bytes(bytes: &[u8]) -> bool {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    o.write_all(bytes).and_then(|()| o.flush()).is_ok()
}

/// The `--config` file's settings (empty without one).
pub(crate) fn config_file() -> &'static config_file::ConfigFile {
    FILE.get_or_init(Default::default)
}

/// `-n`, else the `--config` file's namesrvAddr, else `$NAMESRV_ADDR`.
pub(crate) fn name_server(flag: Option<String>) -> Result<String, Failure> {
    flag.or_else(|| config_file().name_server.clone())
        .or_else(|| std::env::var("NAMESRV_ADDR").ok())
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| Failure::Usage("no name server: pass -n HOST:PORT or set NAMESRV_ADDR".to_owned()))
}

fn main() -> ExitCode {
    // A panic is a bug, but the user still gets one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        say!("rmqcat: internal error (please report): {info}");
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            // --help, --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // One line: clap's message without the usage block.
            let text = e.to_string();
            let head = text.split("\n\n").next().unwrap_or(&text);
            let line = head.split_whitespace().collect::<Vec<_>>().join(" ");
            let line = line.strip_prefix("error: ").unwrap_or(&line);
            say!("rmqcat: {line} (see --help)");
            return ExitCode::from(2);
        }
    };
    let quiet = cli.quiet;
    let mut cli = cli;
    let mut file_keys = false;
    if let Some(path) = &cli.config {
        let file = match config_file::ConfigFile::load(path) {
            Ok(f) => f,
            Err(e) => {
                say!("rmqcat: {e}");
                return ExitCode::from(2);
            }
        };
        // The file fills what no flag set; the environment comes after both.
        let tls_flags = cli.tls || cli.tls_ca.is_some() || cli.tls_insecure;
        if !tls_flags {
            (cli.tls, cli.tls_ca, cli.tls_insecure) = (file.tls, file.tls_ca.clone(), file.tls_insecure);
        }
        if cli.access_key.is_none() && cli.secret_key.is_none() && file.access_key.is_some() {
            (cli.access_key, cli.secret_key) = (file.access_key.clone(), file.secret_key.clone());
            file_keys = true;
        }
        cli.namespace = cli.namespace.or_else(|| file.namespace.clone());
        let _ = FILE.set(file);
    }
    match tls_from(&cli) {
        Ok(t) => {
            let _ = TLS.set(t);
        }
        Err(e) => {
            say!("rmqcat: {e}");
            return ExitCode::from(2);
        }
    }
    let creds = match (cli.access_key, cli.secret_key) {
        (Some(ak), Some(sk)) => {
            let c = Credentials::new(ak, sk);
            // The file's token goes with the file's keys only.
            Some(match config_file().security_token.clone().filter(|_| file_keys) {
                Some(t) => c.with_security_token(t),
                None => c,
            })
        }
        (None, None) => rocketmq_push_io::credentials_from_env(),
        _ => {
            say!("rmqcat: --access-key and --secret-key go together (see --help)");
            return ExitCode::from(2);
        }
    };
    let _ = CREDENTIALS.set(creds);
    let ns = cli.namespace.or_else(|| std::env::var("ROCKETMQ_NAMESPACE").ok()).filter(|n| !n.is_empty());
    let _ = NAMESPACE.set(ns);
    let outcome = match cli.cmd {
        Cmd::Consume(o) => consume::run(o, quiet),
        Cmd::Produce(o) => produce::run(o, quiet),
        Cmd::Decode(o) => decode::run(o),
        Cmd::Route(o) => admin::route(o),
        Cmd::Group(o) => admin::group(o),
        Cmd::Demo(o) => demo::run(o, quiet),
        Cmd::Bench(o) => bench::run(o),
    };
    match outcome {
        Ok(code) => code,
        Err(Failure::Usage(m)) => {
            say!("rmqcat: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(m)) => {
            say!("rmqcat: error: {m}");
            ExitCode::from(1)
        }
    }
}
