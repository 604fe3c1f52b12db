//! `kvlint proxy`: record sessions and count prompt tokens computed and served from cache,
//! live, between an agent and its engine.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::Outcome;
use crate::proxy::{self, Settings};

#[derive(Debug, clap::Args)]
#[command(after_help = "Uses:
  record for CI:      kvlint proxy --upstream http://127.0.0.1:8080 --record sessions/
                      then point the agent's base URL at the proxy and `kvlint check sessions/`
  watch a fleet:      kvlint proxy --upstream http://gateway:8000 --metrics 127.0.0.1:9464
                      (the Grafana dashboard docs/grafana-kvlint-proxy.json reads those)
  during development: kvlint proxy --upstream http://127.0.0.1:8080 --summary-every 10")]
pub struct Args {
    /// Where the proxy listens (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,
    /// The engine or gateway to forward to: an http:// base URL.
    #[arg(long, value_name = "URL")]
    pub upstream: String,
    /// Write each session as `{request, response}` lines (what `kvlint check` reads) into
    /// this folder. Headers, and so API keys, are never written.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Record placeholders of the same length and shape instead of the conversation's text
    /// (structure, roles, tool names and ids kept: the record checks like the session did).
    #[arg(long, requires = "record")]
    pub redact: bool,
    /// Serve the counters in the Prometheus text format at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// The engine behind the upstream (for its tokens and cache model); detected from its
    /// endpoints when not given.
    #[arg(long, value_enum)]
    pub engine_kind: Option<crate::probe::EngineKind>,
    /// The response header a gateway names the replica that served a request in (nginx:
    /// `add_header X-Kvlint-Replica $upstream_addr always;`).
    #[arg(long, default_value = "x-kvlint-replica", value_name = "NAME")]
    pub replica_header: String,
    /// Print a summary line (requests, prompt tokens, served from cache, predicted, lost)
    /// every SECS seconds, for a person watching.
    #[arg(long, value_name = "SECS")]
    pub summary_every: Option<u64>,
    /// The largest request body forwarded, in MiB.
    #[arg(long, default_value = "64", value_name = "MIB")]
    pub max_body: usize,
}

pub fn run(args: Args) -> miette::Result<Outcome> {
    proxy::serve(Settings {
        listen: args.listen,
        upstream: args.upstream,
        record: args.record,
        redact: args.redact,
        metrics: args.metrics,
        max_body: args.max_body.saturating_mul(1 << 20),
        engine_kind: args.engine_kind,
        replica_header: args.replica_header,
        summary_every: args.summary_every,
    })?;
    Ok(Outcome {
        output: String::new(),
        exit_code: 0,
    })
}
