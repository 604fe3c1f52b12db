//! The forwarding path: each request passes to the upstream unchanged and its response back to
//! the client as it arrives, frame by frame; a copy of both goes to the analysis when the
//! response ends. Nothing on this path waits for the analysis.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use kvlint_protocol::key::Carried;
use serde_json::Value;

use super::metrics::Metrics;
use super::{Balance, Exchange};

type UpstreamClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One `--upstream`.
pub(super) struct Upstream {
    /// Its scheme and authority, and the path its base URL starts with.
    pub(super) uri: Uri,
    /// Its URL as given (no trailing slash): its name in metrics and logs.
    pub(super) label: Arc<str>,
}

/// What the forwarding path shares between connections.
pub(super) struct Forwarder {
    /// For http upstreams: a connection per request.
    pub(super) plain: UpstreamClient,
    /// For https upstreams: connections kept alive.
    pub(super) tls: UpstreamClient,
    pub(super) upstreams: Vec<Upstream>,
    pub(super) balance: Balance,
    /// The next upstream in round-robin order.
    pub(super) next: AtomicUsize,
    pub(super) max_body: usize,
    /// Copies of exchanges for the analysis; full means the analysis is behind, and the
    /// exchange is counted as not analysed rather than the client kept waiting.
    pub(super) analysis: SyncSender<Exchange>,
    pub(super) metrics: Arc<Metrics>,
    /// Bytes of a response body kept for the analysis; a longer one is analysed as cut.
    pub(super) max_copy: usize,
}

type ProxyBody = UnsyncBoxBody<Bytes, hyper::Error>;

/// Hop-by-hop headers (RFC 9110, section 7.6.1): they concern one connection, not the message.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let mut kept = headers.clone();
    for name in HOP_BY_HOP {
        kept.remove(name);
    }
    kept.remove(hyper::header::HOST);
    kept
}

impl Forwarder {
    pub(super) async fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
    ) -> Result<Response<ProxyBody>, Infallible> {
        let (received, received_at) = (std::time::Instant::now(), std::time::SystemTime::now());
        let (parts, body) = request.into_parts();
        let body = match Limited::new(body, self.max_body).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(error) => {
                let too_large = error
                    .downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some();
                let (status, message) = if too_large {
                    (
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("request body over {} bytes", self.max_body),
                    )
                } else {
                    (
                        StatusCode::BAD_REQUEST,
                        format!("reading the request body: {error}"),
                    )
                };
                return Ok(error_response(status, &message));
            }
        };
        let headers = end_to_end(&parts.headers);
        // The upstreams in the order to try: the next is tried only when the connection to
        // one could not be made (the request never left), never after it was sent.
        let mut failures = Vec::new();
        let mut answered = None;
        for upstream in self.order(&parts.headers, &body) {
            let uri = match upstream_uri(&upstream.uri, &parts.uri) {
                Ok(uri) => uri,
                Err(message) => return Ok(error_response(StatusCode::BAD_REQUEST, &message)),
            };
            let mut upstream_request = Request::new(Full::new(body.clone()));
            *upstream_request.method_mut() = parts.method.clone();
            *upstream_request.uri_mut() = uri;
            *upstream_request.headers_mut() = headers.clone();
            let client = if upstream.uri.scheme_str() == Some("https") {
                &self.tls
            } else {
                &self.plain
            };
            match client.request(upstream_request).await {
                Ok(response) => {
                    answered = Some((upstream, response));
                    break;
                }
                Err(error) => {
                    self.metrics.upstream_error(&upstream.label);
                    failures.push(format!("upstream {}: {}", upstream.label, chain(&error)));
                    if !error.is_connect() {
                        break;
                    }
                }
            }
        }
        let Some((upstream, response)) = answered else {
            return Ok(error_response(
                StatusCode::BAD_GATEWAY,
                &failures.join("; "),
            ));
        };
        let (mut response_parts, response_body) = response.into_parts();
        response_parts.headers = end_to_end(&response_parts.headers);
        let exchange = Exchange {
            upstream: Arc::clone(&upstream.label),
            received,
            received_at,
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            request_headers: parts.headers,
            request: body,
            status: response_parts.status.as_u16(),
            response_headers: response_parts.headers.clone(),
            response: Vec::new(),
            complete: false,
            replica: None,
        };
        let tee = TeeBody {
            inner: response_body,
            exchange: Some(exchange),
            analysis: self.analysis.clone(),
            metrics: Arc::clone(&self.metrics),
            max_copy: self.max_copy,
        };
        Ok(Response::from_parts(response_parts, tee.boxed_unsync()))
    }

    /// The upstreams in the order a request tries them: with one, that one; by routing key,
    /// highest rendezvous hash first (a session keeps its upstream while the others come and
    /// go); else round-robin.
    fn order(&self, headers: &HeaderMap, body: &Bytes) -> Vec<&Upstream> {
        let count = self.upstreams.len();
        let key = (count > 1 && self.balance == Balance::RoutingKey)
            .then(|| routing_key(headers, body))
            .flatten();
        if let Some(key) = key {
            let mut ranked: Vec<(blake3::Hash, &Upstream)> = self
                .upstreams
                .iter()
                .map(|upstream| {
                    let mut hasher = blake3::Hasher::new();
                    hasher.update(key.as_bytes());
                    hasher.update(&[0]);
                    hasher.update(upstream.label.as_bytes());
                    (hasher.finalize(), upstream)
                })
                .collect();
            ranked.sort_by(|left, right| right.0.as_bytes().cmp(left.0.as_bytes()));
            return ranked.into_iter().map(|(_, upstream)| upstream).collect();
        }
        let first = self.next.fetch_add(1, Ordering::Relaxed);
        (0..count)
            .map(|offset| &self.upstreams[(first + offset) % count])
            .collect()
    }
}

/// The key a request is routed by: its routing key ([`kvlint_protocol::key::ROUTING_KEY`]),
/// from its headers and body.
fn routing_key(headers: &HeaderMap, body: &[u8]) -> Option<String> {
    let body: Option<Value> = serde_json::from_slice(body).ok();
    let headers = header_pairs(headers);
    Carried {
        body: body.as_ref(),
        headers: &headers,
        trace_conversation: None,
    }
    .routing_key()
}

/// A request's headers as name–value pairs (values that are not text left out).
pub(super) fn header_pairs(headers: &HeaderMap) -> Vec<(&str, &str)> {
    headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
        .collect()
}

/// An error with its causes, for the client to read (hyper's own says "client error
/// (Connect)" and keeps the reason, a refused connection or an untrusted certificate, below).
fn chain(error: &dyn std::error::Error) -> String {
    let mut said = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        said.push_str(": ");
        said.push_str(&error.to_string());
        cause = error.source();
    }
    said
}

/// Where a request for `asked` goes on the upstream at `base`.
fn upstream_uri(base: &Uri, asked: &Uri) -> Result<Uri, String> {
    let prefix = base.path().trim_end_matches('/');
    let path_and_query = asked.path_and_query().map_or("/", |path| path.as_str());
    let mut parts = base.clone().into_parts();
    parts.path_and_query = Some(
        format!("{prefix}{path_and_query}")
            .parse()
            .map_err(|error| format!("the request's path: {error}"))?,
    );
    Uri::from_parts(parts).map_err(|error| format!("the upstream address: {error}"))
}

fn error_response(status: StatusCode, message: &str) -> Response<ProxyBody> {
    let body = serde_json::json!({"error": {"message": format!("kvlint proxy: {message}"), "type": "kvlint_proxy"}});
    let mut response = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The upstream's response body, passed on frame by frame while a copy is kept; the copy goes
/// to the analysis when the body ends, or when the client goes away before it does.
struct TeeBody {
    inner: Incoming,
    exchange: Option<Exchange>,
    analysis: SyncSender<Exchange>,
    metrics: Arc<Metrics>,
    max_copy: usize,
}

impl TeeBody {
    fn finish(&mut self, complete: bool) {
        if let Some(mut exchange) = self.exchange.take() {
            exchange.complete = complete;
            if self.analysis.try_send(exchange).is_err() {
                self.metrics.not_analysed();
            }
        }
    }
}

impl Body for TeeBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(context);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let max_copy = self.max_copy;
                    if let Some(exchange) = self.exchange.as_mut()
                        && exchange.response.len() + data.len() <= max_copy
                    {
                        exchange.response.extend_from_slice(data);
                    }
                }
            }
            Poll::Ready(None) => self.finish(true),
            Poll::Ready(Some(Err(_))) => self.finish(false),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for TeeBody {
    fn drop(&mut self) {
        // A body of known length ends without a last poll; any other body dropped before its
        // end was cut (the client went away): what was seen is analysed as cut.
        let ended = self.inner.is_end_stream();
        self.finish(ended);
    }
}

/// Header names the analysis reads.
pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(HeaderName::from_bytes(name.as_bytes()).ok()?)
        .and_then(|value| value.to_str().ok())
}
