//! `kvlint proxy`: a local HTTP proxy between an agent and its engine that passes every
//! request and response through unchanged (streams as they arrive) and, beside the forwarding
//! path, groups the requests into sessions, checks each turn against the one before with the
//! pipeline `kvlint check` runs, counts prompt tokens computed and served from cache as the
//! upstream reports them, and records each session as `{request, response}` lines.
//!
//! - [`forward`]: the forwarding path (hyper on tokio) and the copy it hands over;
//! - [`analysis`]: sessions, checks and records, on a thread of their own;
//! - [`metrics`]: the counters, served in the Prometheus text format.

mod analysis;
mod forward;
mod metrics;
mod redact;

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
use thiserror::Error;
use tokio::net::TcpListener;

use analysis::{Analysis, EngineProbe};

use crate::probe::EngineKind;
use forward::Forwarder;
use metrics::Metrics;

/// Exchanges waiting for the analysis; past this many the forwarding path stops copying
/// (counted in `kvlint_proxy_not_analysed_total`) rather than grow without bound.
const ANALYSIS_QUEUE: usize = 1024;

/// One request and its response, as the analysis gets them.
pub(crate) struct Exchange {
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
}

/// What the proxy is started with.
pub struct Settings {
    pub listen: SocketAddr,
    /// The upstream's base URL (`http://host:port`, optionally with a path prefix).
    pub upstream: String,
    pub record: Option<PathBuf>,
    /// Record placeholders of the same length and shape instead of the conversation's text.
    pub redact: bool,
    pub metrics: Option<SocketAddr>,
    pub max_body: usize,
    /// The engine behind the upstream; detected from its endpoints when `None`.
    pub engine_kind: Option<EngineKind>,
    /// The response header a gateway names the serving replica in.
    pub replica_header: String,
    /// Seconds between the summary lines printed for a person watching; `None`: none.
    pub summary_every: Option<u64>,
}

#[derive(Debug, Error, miette::Diagnostic)]
pub enum ProxyError {
    #[error("--upstream `{url}`: {reason}")]
    #[diagnostic(
        code(kvlint::proxy::upstream),
        help("an http:// base URL, e.g. http://127.0.0.1:8080")
    )]
    Upstream { url: String, reason: String },
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
    let upstream: Uri =
        settings
            .upstream
            .parse()
            .map_err(|error: hyper::http::uri::InvalidUri| ProxyError::Upstream {
                url: settings.upstream.clone(),
                reason: error.to_string(),
            })?;
    if upstream.scheme_str() != Some("http") || upstream.authority().is_none() {
        return Err(ProxyError::Upstream {
            url: settings.upstream.clone(),
            reason: "only http:// upstreams are supported".into(),
        });
    }
    if let Some(folder) = &settings.record {
        std::fs::create_dir_all(folder).map_err(io_error("creating", folder.display()))?;
    }
    let metrics = Arc::new(Metrics::new(settings.upstream.clone()));
    let (sender, receiver) = std::sync::mpsc::sync_channel(ANALYSIS_QUEUE);
    let analysis = Analysis::new(
        Arc::clone(&metrics),
        settings.record.clone(),
        settings.redact,
        EngineProbe {
            url: settings.upstream.clone(),
            kind: settings.engine_kind,
        },
        settings.replica_header.clone(),
    );
    let analysing = std::thread::spawn(move || analysis.run(receiver));
    if let Some(seconds) = settings.summary_every.filter(|seconds| *seconds > 0) {
        let metrics = Arc::clone(&metrics);
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(seconds));
                eprintln!("{}", metrics.summary());
            }
        });
    }
    let forwarder = Arc::new(Forwarder {
        // A fresh connection per request: an engine may close a kept-alive connection as the
        // next request is sent on it (llama-server's HTTP server does, after a stream or a
        // few requests), which would fail a request the engine never saw. On loopback, or to a
        // gateway nearby, a connection costs less than the latency target.
        client: Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build_http(),
        upstream,
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
            settings.listen, settings.upstream
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
