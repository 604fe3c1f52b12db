//! `kvlint proxy`: a local HTTP proxy between an agent and its engine that passes every
//! request and response through unchanged (streams as they arrive) and, beside the forwarding
//! path, groups the requests into sessions, checks each turn against the one before with the
//! pipeline `kvlint check` runs, counts prompt tokens computed and served from cache as the
//! upstream reports them, and records each session as `{request, response}` lines.
//!
//! - [`forward`]: the forwarding path (hyper on tokio, http and https upstreams, one or
//!   several) and the copy it hands over;
//! - [`analysis`]: sessions, checks, predictions and records, on a thread of their own;
//! - [`metrics`]: the counters, served in the Prometheus text format.

mod analysis;
mod forward;
mod metrics;
mod redact;
mod replicas;
mod tls;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::HeaderMap;
use hyper::service::service_fn;
use hyper::{Request, Response, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kvlint_protocol::EngineName;
use thiserror::Error;
use tokio::net::TcpListener;

use analysis::{Analysis, EngineProbe, ReplicaSource};

use forward::{Forwarder, Upstream};
use metrics::Metrics;

/// Exchanges waiting for the analysis; past this many the forwarding path stops copying
/// (counted in `kvlint_proxy_not_analysed_total`) rather than grow without bound.
const ANALYSIS_QUEUE: usize = 1024;

/// One request and its response, as the analysis gets them.
pub(crate) struct Exchange {
    /// The `--upstream` that answered.
    pub(crate) upstream: Arc<str>,
    /// When the proxy received the request.
    pub(crate) received: std::time::Instant,
    /// The same, by the clock: written into the record.
    pub(crate) received_at: std::time::SystemTime,
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) request_headers: HeaderMap,
    pub(crate) request: Bytes,
    pub(crate) status: u16,
    pub(crate) response_headers: HeaderMap,
    /// The response body (or its first `max_copy` bytes).
    pub(crate) response: Vec<u8>,
    /// Whether the response ended normally (not cut by the client or the upstream).
    pub(crate) complete: bool,
    /// The replica behind the gateway that served it, when read off the replicas' metrics.
    pub(crate) replica: Option<String>,
}

impl Exchange {
    /// Whether the request is a prompt (chat completions, responses, messages).
    pub(crate) fn is_prompt(&self) -> bool {
        self.method == "POST" && kvlint_protocol::endpoint::is_prompt_path(&self.path)
    }
}

/// What the proxy is started with.
pub struct Settings {
    pub listen: SocketAddr,
    /// The upstreams' base URLs (`http(s)://host:port`, optionally with a path prefix).
    pub upstreams: Vec<String>,
    /// How requests are spread over several upstreams.
    pub balance: Balance,
    /// A PEM file of certificate authorities trusted for https upstreams, beside the usual
    /// roots.
    pub upstream_ca: Option<PathBuf>,
    /// Replicas behind a gateway whose metrics tell which one served a request.
    pub replica_metrics: Vec<String>,
    /// Where the engine is asked for its tokens and settings (`--engine-api`).
    pub engine_api: Option<String>,
    pub record: Option<PathBuf>,
    /// Record placeholders of the same length and shape instead of the conversation's text.
    pub redact: bool,
    pub metrics: Option<SocketAddr>,
    pub max_body: usize,
    /// The engine behind the upstream; detected from its endpoints when `None`.
    pub engine_kind: Option<EngineName>,
    /// The response header a gateway names the serving replica in.
    pub replica_header: String,
    /// Predict what the upstream serves from cache (self-hosted engines are asked for their
    /// tokens).
    pub predict: bool,
    /// Seconds between the summary lines printed for a person watching; `None`: none.
    pub summary_every: Option<u64>,
}

/// How the proxy spreads requests over several `--upstream`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Balance {
    /// The request's routing key (the SDK's routing header, `prompt_cache_key`, a user id)
    /// picks the upstream by rendezvous hashing, so a session stays where its prefix is
    /// cached; a request without one goes round-robin.
    RoutingKey,
    /// One upstream after the other, whatever the request.
    RoundRobin,
}

#[derive(Debug, Error, miette::Diagnostic)]
pub enum ProxyError {
    #[error("--upstream `{url}`: {reason}")]
    #[diagnostic(
        code(kvlint::proxy::upstream),
        help("an http:// or https:// base URL, e.g. http://127.0.0.1:8080")
    )]
    Upstream { url: String, reason: String },
    #[error("--upstream-ca {path}: {reason}")]
    #[diagnostic(
        code(kvlint::proxy::upstream_ca),
        help("a PEM file of one or more certificates (-----BEGIN CERTIFICATE-----)")
    )]
    UpstreamCa { path: String, reason: String },
    #[error("setting up TLS: {0}")]
    #[diagnostic(code(kvlint::proxy::tls))]
    Tls(String),
    #[error("{what} {address}: {source}")]
    #[diagnostic(code(kvlint::proxy::io))]
    Io {
        what: &'static str,
        address: String,
        source: std::io::Error,
    },
}

fn io_error(
    what: &'static str,
    address: impl ToString,
) -> impl FnOnce(std::io::Error) -> ProxyError {
    move |source| ProxyError::Io {
        what,
        address: address.to_string(),
        source,
    }
}

/// Runs the proxy until the process is interrupted.
pub fn serve(settings: Settings) -> Result<(), ProxyError> {
    let upstreams = settings
        .upstreams
        .iter()
        .map(|url| upstream(url))
        .collect::<Result<Vec<_>, _>>()?;
    if upstreams.is_empty() {
        return Err(ProxyError::Upstream {
            url: String::new(),
            reason: "no upstream given".into(),
        });
    }
    let authorities = match &settings.upstream_ca {
        Some(path) => tls::read_authorities(path)?,
        None => Vec::new(),
    };
    if let Some(folder) = &settings.record {
        std::fs::create_dir_all(folder).map_err(io_error("creating", folder.display()))?;
    }
    let labels: Vec<Arc<str>> = upstreams.iter().map(|up| Arc::clone(&up.label)).collect();
    let metrics = Arc::new(Metrics::new(&labels));
    let (sender, receiver) = std::sync::mpsc::sync_channel(ANALYSIS_QUEUE);
    let replicas = if labels.len() > 1 {
        ReplicaSource::Upstream
    } else if settings.replica_metrics.is_empty() {
        ReplicaSource::Header(settings.replica_header.clone())
    } else {
        ReplicaSource::Metrics(settings.replica_header.clone())
    };
    let analysis = Analysis::new(
        Arc::clone(&metrics),
        settings.record.clone(),
        settings.redact,
        EngineProbe {
            kind: settings.engine_kind,
            authorities: authorities.clone(),
            predict: settings.predict,
            // Behind one gateway, a replica named by --engine-api or --replica-metrics
            // answers the proxy's own requests; several upstreams are each a replica.
            side: settings.engine_api.clone().or_else(|| {
                (labels.len() == 1)
                    .then(|| settings.replica_metrics.first().cloned())
                    .flatten()
            }),
        },
        replicas,
    );
    let analysing = std::thread::spawn(move || analysis.run(receiver));
    // With --replica-metrics, exchanges pass through a stage that reads the replicas'
    // counters the moment each response ends, before the next request can move them.
    let sender = if settings.replica_metrics.is_empty() {
        sender
    } else {
        let (reading, read) = std::sync::mpsc::sync_channel(ANALYSIS_QUEUE);
        let counters = replicas::Counters::new(
            &settings.replica_metrics,
            settings.engine_kind.unwrap_or(EngineName::LlamaCpp),
            &authorities,
        );
        std::thread::spawn(move || counters.run(read, sender));
        reading
    };
    if let Some(seconds) = settings.summary_every.filter(|seconds| *seconds > 0) {
        let metrics = Arc::clone(&metrics);
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(seconds));
                eprintln!("{}", metrics.summary());
            }
        });
    }
    let connector = tls::connector(&authorities)?;
    let forwarder = Arc::new(Forwarder {
        // Plain http (engines, gateways nearby): a fresh connection per request. An engine
        // may close a kept-alive connection as the next request is sent on it (llama-server's
        // HTTP server does, after a stream or a few requests), which would fail a request the
        // engine never saw; on loopback a connection costs less than the latency target.
        plain: Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector.clone()),
        // https (hosted APIs, remote gateways): a TLS handshake per request would cost tens of
        // milliseconds, and these servers keep their connections well: kept for 30 s.
        tls: Client::builder(TokioExecutor::new())
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .build(connector),
        upstreams,
        balance: settings.balance,
        next: std::sync::atomic::AtomicUsize::new(0),
        max_body: settings.max_body,
        analysis: sender,
        metrics: Arc::clone(&metrics),
        max_copy: settings.max_body,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(io_error("starting the runtime for", settings.listen))?;
    let served = runtime.block_on(async {
        let listener = TcpListener::bind(settings.listen)
            .await
            .map_err(io_error("listening on", settings.listen))?;
        eprintln!(
            "kvlint proxy: listening on http://{}, forwarding to {}",
            settings.listen,
            settings.upstreams.join(", ")
        );
        if let Some(address) = settings.metrics {
            eprintln!("kvlint proxy: metrics on http://{address}/metrics");
            let metrics_listener = TcpListener::bind(address)
                .await
                .map_err(io_error("listening on", address))?;
            tokio::spawn(serve_metrics(metrics_listener, Arc::clone(&metrics)));
        }
        tokio::select! {
            () = accept(listener, forwarder) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(())
    });
    // The forwarding side is gone: the analysis finishes its queue and flushes the records.
    drop(runtime);
    let _ = analysing.join();
    served
}

/// An `--upstream` URL read and checked.
fn upstream(url: &str) -> Result<Upstream, ProxyError> {
    let invalid = |reason: String| ProxyError::Upstream {
        url: url.to_owned(),
        reason,
    };
    let uri: Uri = url
        .parse()
        .map_err(|error: hyper::http::uri::InvalidUri| invalid(error.to_string()))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
        return Err(invalid("not an http:// or https:// URL".into()));
    }
    Ok(Upstream {
        label: Arc::from(url.trim_end_matches('/')),
        uri,
    })
}

/// After a failed accept (out of file descriptors, say), a pause before the next: the
/// connections open now close, and the loop does not spin.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(10);

async fn accept(listener: TcpListener, forwarder: Arc<Forwarder>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(ACCEPT_BACKOFF).await;
            continue;
        };
        let forwarder = Arc::clone(&forwarder);
        tokio::spawn(async move {
            let service = service_fn(move |request| Arc::clone(&forwarder).handle(request));
            // A connection that fails (the client went away) ends here; others go on.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn serve_metrics(listener: TcpListener, metrics: Arc<Metrics>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(ACCEPT_BACKOFF).await;
            continue;
        };
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let service = service_fn(move |_request: Request<hyper::body::Incoming>| {
                let text = metrics.encode();
                async move {
                    let mut response = Response::new(Full::new(Bytes::from(text)));
                    response.headers_mut().insert(
                        hyper::header::CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static(
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        ),
                    );
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
