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
                      (the Grafana dashboard docs/grafana-kvlint-proxy.json reads those);
                      or --upstream http://replica-1:8080 --upstream http://replica-2:8080
  during development: kvlint proxy --upstream https://api.openai.com --summary-every 10
                      (or https://api.anthropic.com, or a local engine)")]
pub struct Args {
    /// Where the proxy listens (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,
    /// The engine, gateway or API to forward to: an http:// or https:// base URL. Given
    /// several times, the proxy spreads requests over them (see --balance).
    #[arg(long, value_name = "URL", required = true)]
    pub upstream: Vec<String>,
    /// How requests are spread over several upstreams.
    #[arg(long, value_enum, default_value = "routing-key")]
    pub balance: proxy::Balance,
    /// A PEM file of certificate authorities to trust for https upstreams, beside the usual
    /// roots (an engine or gateway with a certificate of its own).
    #[arg(long, value_name = "PEM")]
    pub upstream_ca: Option<PathBuf>,
    /// A replica behind the gateway (its base URL; repeat for each): which one served a
    /// request is read off their metrics when the gateway sends no --replica-header.
    #[arg(long, value_name = "URL")]
    pub replica_metrics: Vec<String>,
    /// Where the proxy asks the engine for its tokens and settings (`/apply-template`,
    /// `/tokenize`, `/metrics`, `/slots`): one replica's base URL. Default: the first
    /// --replica-metrics, else the upstream. Behind a balancing gateway, give one (or
    /// --replica-metrics): the proxy's own requests then do not pass through the gateway and
    /// shift its balancing.
    #[arg(long, value_name = "URL")]
    pub engine_api: Option<String>,
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
    #[arg(long, value_parser = super::engine_name(&super::SERVER_KINDS))]
    pub engine_kind: Option<kvlint_protocol::EngineName>,
    /// The response header a gateway names the replica that served a request in (nginx:
    /// `add_header X-Kvlint-Replica $upstream_addr always;`).
    #[arg(long, default_value = "x-kvlint-replica", value_name = "NAME")]
    pub replica_header: String,
    /// Do not ask the engine for its tokens to predict what it serves from cache (three small
    /// requests per turn, beside the forwarding path: the prompt's template and tokens, the
    /// answer's tokens): counts, findings and records only.
    #[arg(long)]
    pub no_prediction: bool,
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
        upstreams: args.upstream,
        balance: args.balance,
        upstream_ca: args.upstream_ca,
        replica_metrics: args.replica_metrics,
        engine_api: args.engine_api,
        record: args.record,
        redact: args.redact,
        metrics: args.metrics,
        max_body: args.max_body.saturating_mul(1 << 20),
        engine_kind: args.engine_kind,
        replica_header: args.replica_header,
        predict: !args.no_prediction,
        summary_every: args.summary_every,
    })?;
    Ok(Outcome {
        output: String::new(),
        exit_code: 0,
    })
}
