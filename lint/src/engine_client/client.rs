//! The HTTP side of a probe: JSON posts with the API key from the environment, a bounded
//! retry on rate limits, and transport errors said in words a user can act on.

use std::time::Duration;

use serde_json::Value;

use super::credentials::{Api, Credentials, shown_url};

/// A problem talking to the engine, said per turn.
#[derive(Debug)]
pub(crate) struct Failure(pub(crate) String);

/// The HTTP side of a probe.
pub struct Client {
    agent: ureq::Agent,
    /// The engine's URL without a trailing slash.
    base: String,
    credentials: Credentials,
    api: Api,
}

/// Attempts for a 429 answer with `retry-after`, and the longest wait honoured.
const RATE_LIMIT_ATTEMPTS: usize = 3;
const LONGEST_RETRY_AFTER: Duration = Duration::from_secs(10);

impl Client {
    pub fn new(base: &str, timeout: Duration) -> Self {
        Self::trusting(base, timeout, &[])
    }

    /// A client that trusts, for an https engine, only the certificate authorities given
    /// (DER), when any are: the engine's own (`kvlint proxy --upstream-ca`).
    pub fn trusting(base: &str, timeout: Duration, authorities: &[&[u8]]) -> Self {
        let mut config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false);
        if !authorities.is_empty() {
            let roots: Vec<ureq::tls::Certificate<'static>> = authorities
                .iter()
                .map(|der| ureq::tls::Certificate::from_der(der).to_owned())
                .collect();
            config = config.tls_config(
                ureq::tls::TlsConfig::builder()
                    .root_certs(ureq::tls::RootCerts::new_with_certs(&roots))
                    .build(),
            );
        }
        let agent = config.build().into();
        Self {
            agent,
            base: base.trim_end_matches('/').to_owned(),
            // Keys come only from the environment and are never printed or written.
            credentials: Credentials::from_environment(),
            api: Api::default(),
        }
    }

    /// The client for `api`: it authenticates with that API's key and header only.
    pub fn for_api(mut self, api: Api) -> Self {
        self.api = api;
        self
    }

    /// The engine's URL as reports show it (userinfo masked).
    pub fn shown_url(&self) -> String {
        shown_url(&self.base)
    }

    pub(crate) fn post(&self, path: &str, body: &Value) -> Result<Value, Failure> {
        self.post_with(path, body, &[])
    }

    pub(crate) fn post_with(
        &self,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> Result<Value, Failure> {
        for attempt in 1..=RATE_LIMIT_ATTEMPTS {
            let mut request = self.agent.post(&format!("{}{path}", self.base));
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            if let Some((name, value)) = self.credentials.header(self.api) {
                request = request.header(name, &value);
            }
            let mut response = request
                .send_json(body)
                .map_err(|error| self.failure(&describe_transport(&error)))?;
            let status = response.status().as_u16();
            if status == 429 && attempt < RATE_LIMIT_ATTEMPTS {
                let wait = response
                    .headers()
                    .get("retry-after")
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| value.trim().parse::<u64>().ok())
                    .map_or(Duration::from_secs(1), Duration::from_secs)
                    .min(LONGEST_RETRY_AFTER);
                std::thread::sleep(wait);
                continue;
            }
            let text = response.body_mut().read_to_string().map_err(|error| {
                self.failure(&format!(
                    "{path}: the response body could not be read: {error}"
                ))
            })?;
            if !(200..300).contains(&status) {
                let excerpt: String = text.chars().take(200).collect();
                return Err(self.failure(&format!("{path}: HTTP {status}: {excerpt}")));
            }
            return serde_json::from_str(&text).map_err(|error| {
                self.failure(&format!("{path}: malformed JSON in the response: {error}"))
            });
        }
        Err(Failure(format!(
            "{path}: still rate limited (HTTP 429) after {RATE_LIMIT_ATTEMPTS} attempts"
        )))
    }

    /// A failure said without any credential or the URL's userinfo.
    fn failure(&self, message: &str) -> Failure {
        let mut message = self.credentials.redact(message);
        if self.base != self.shown_url() {
            message = message.replace(&self.base, &self.shown_url());
        }
        Failure(message)
    }

    /// The body of a GET that answered 200; anything else is `None`, because the endpoints
    /// read this way are optional facts about the engine.
    pub(crate) fn get_text(&self, path: &str) -> Option<String> {
        let mut response = self
            .agent
            .get(&format!("{}{path}", self.base))
            .call()
            .ok()?;
        if response.status().as_u16() != 200 {
            return None;
        }
        response.body_mut().read_to_string().ok()
    }
}

fn describe_transport(error: &ureq::Error) -> String {
    match error {
        ureq::Error::Timeout(_) => "the engine did not answer in time".to_owned(),
        ureq::Error::ConnectionFailed | ureq::Error::Io(_) => {
            format!("cannot reach the engine: {error}")
        }
        other => format!("request failed: {other}"),
    }
}
