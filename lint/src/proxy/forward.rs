//! The forwarding path: each request passes to the upstream unchanged and its response back to
//! the client as it arrives, frame by frame; a copy of both goes to the analysis when the
//! response ends. Nothing on this path waits for the analysis.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::mpsc::SyncSender;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;

use super::Exchange;
use super::metrics::Metrics;

/// What the forwarding path shares between connections.
pub(super) struct Forwarder {
    pub(super) client: Client<HttpConnector, Full<Bytes>>,
    /// The upstream's scheme and authority, and the path its base URL starts with.
    pub(super) upstream: Uri,
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
        let uri = match self.upstream_uri(&parts.uri) {
            Ok(uri) => uri,
            Err(message) => return Ok(error_response(StatusCode::BAD_REQUEST, &message)),
        };
        let mut upstream_request = Request::new(Full::new(body.clone()));
        *upstream_request.method_mut() = parts.method.clone();
        *upstream_request.uri_mut() = uri;
        *upstream_request.headers_mut() = end_to_end(&parts.headers);
        let response = match self.client.request(upstream_request).await {
            Ok(response) => response,
            Err(error) => {
                self.metrics.upstream_error();
                return Ok(error_response(
                    StatusCode::BAD_GATEWAY,
                    &format!("upstream {}: {error}", self.upstream),
                ));
            }
        };
        let (mut response_parts, response_body) = response.into_parts();
        response_parts.headers = end_to_end(&response_parts.headers);
        let exchange = Exchange {
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            request_headers: parts.headers,
            request: body,
            status: response_parts.status.as_u16(),
            response_headers: response_parts.headers.clone(),
            response: Vec::new(),
            complete: false,
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

    fn upstream_uri(&self, asked: &Uri) -> Result<Uri, String> {
        let base = self.upstream.path().trim_end_matches('/');
        let path_and_query = asked.path_and_query().map_or("/", |path| path.as_str());
        let mut parts = self.upstream.clone().into_parts();
        parts.path_and_query = Some(
            format!("{base}{path_and_query}")
                .parse()
                .map_err(|error| format!("the request's path: {error}"))?,
        );
        Uri::from_parts(parts).map_err(|error| format!("the upstream address: {error}"))
    }
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
