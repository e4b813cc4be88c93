//! `rmqcat`: kcat for Apache RocketMQ, on the tokio adapter.
//!
//! Consume and produce from a terminal, decode captured remoting frames, look at a topic's route
//! and a group's progress, or run a self-contained demo on the embedded simulator. Exit codes:
//! 0 done, 1 a runtime failure (unreachable server, missing topic, bad bytes, lost messages),
//! 2 a usage error. Errors are one line on stderr; progress goes to stderr too (`-q` silences it).

mod admin;
mod consume;
mod decode;
mod demo;
mod format;
mod produce;
mod progress;

use std::process::ExitCode;
use std::time::Duration;

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
  rmqcat decode --hex tests/data/pull_found_small.hex
  rmqcat route -t T
  rmqcat group -g G

The name server defaults to $NAMESRV_ADDR."
)]
struct Cli {
    /// No progress or summaries on stderr (errors are still printed).
    #[arg(short, long, global = true)]
    quiet: bool,
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
}

/// Why a command failed: usage (exit 2) or at run time (exit 1).
#[derive(Debug)]
pub(crate) enum Failure {
    Usage(String),
    Runtime(String),
}

pub(crate) type Outcome = Result<ExitCode, Failure>;

/// `-n`, else `$NAMESRV_ADDR`.
pub(crate) fn name_server(flag: Option<String>) -> Result<String, Failure> {
    flag.or_else(|| std::env::var("NAMESRV_ADDR").ok())
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| Failure::Usage("no name server: pass -n HOST:PORT or set NAMESRV_ADDR".to_owned()))
}

fn main() -> ExitCode {
    // A panic is a bug, but the user still gets one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("rmqcat: internal error (please report): {info}");
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
            eprintln!("rmqcat: {line} (see --help)");
            return ExitCode::from(2);
        }
    };
    let quiet = cli.quiet;
    let outcome = match cli.cmd {
        Cmd::Consume(o) => consume::run(o, quiet),
        Cmd::Produce(o) => produce::run(o, quiet),
        Cmd::Decode(o) => decode::run(o),
        Cmd::Route(o) => admin::route(o),
        Cmd::Group(o) => admin::group(o),
        Cmd::Demo(o) => demo::run(o, quiet),
    };
    match outcome {
        Ok(code) => code,
        Err(Failure::Usage(m)) => {
            eprintln!("rmqcat: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(m)) => {
            eprintln!("rmqcat: error: {m}");
            ExitCode::from(1)
        }
    }
}
