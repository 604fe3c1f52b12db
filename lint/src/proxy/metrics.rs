//! The proxy's counters, in the Prometheus text format at `/metrics` (prometheus-client).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Why a session's reusable prefix was computed again (see the analysis).
pub(super) const LOST_CAUSES: [&str; 3] = ["locality", "eviction", "unknown"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Upstream {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Cause {
    upstream: String,
    cause: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Rule {
    upstream: String,
    rule: String,
}

/// Counters summed over every request the proxy analysed, per upstream.
pub(super) struct Metrics {
    registry: Registry,
    upstream: String,
    requests: Family<Upstream, Counter>,
    prompt_tokens: Family<Upstream, Counter>,
    cached_tokens: Family<Upstream, Counter>,
    predicted_cached_tokens: Family<Upstream, Counter>,
    lost_tokens: Family<Cause, Counter>,
    findings: Family<Rule, Counter>,
    not_analysed: Counter,
    upstream_errors: Counter,
}

impl Metrics {
    pub(super) fn new(upstream: String) -> Self {
        let mut registry = Registry::default();
        let requests = Family::<Upstream, Counter>::default();
        registry.register(
            "kvlint_requests",
            "Prompt requests analysed (chat completions, responses, messages)",
            requests.clone(),
        );
        let prompt_tokens = Family::<Upstream, Counter>::default();
        registry.register(
            "kvlint_prompt_tokens",
            "Prompt tokens, as the upstream reported them",
            prompt_tokens.clone(),
        );
        let cached_tokens = Family::<Upstream, Counter>::default();
        registry.register(
            "kvlint_prompt_tokens_cached",
            "Prompt tokens the upstream reported as served from its cache",
            cached_tokens.clone(),
        );
        let predicted_cached_tokens = Family::<Upstream, Counter>::default();
        registry.register(
            "kvlint_prompt_tokens_predicted_cached",
            "Prompt tokens kvlint predicts the engine serves from cache (its cache model over the engine's own tokens and what each replica was sent)",
            predicted_cached_tokens.clone(),
        );
        let lost_tokens = Family::<Cause, Counter>::default();
        registry.register(
            "kvlint_prompt_tokens_lost",
            "Prompt tokens a session's previous turn had made reusable that the engine computed again, by cause (locality: another replica served the turn; eviction: the replica's cache moved on; unknown)",
            lost_tokens.clone(),
        );
        let findings = Family::<Rule, Counter>::default();
        registry.register(
            "kvlint_findings",
            "Findings of kvlint's analysis on consecutive requests of a session, by rule",
            findings.clone(),
        );
        let not_analysed = Counter::default();
        registry.register(
            "kvlint_proxy_not_analysed",
            "Exchanges forwarded but not analysed: the analysis queue was full",
            not_analysed.clone(),
        );
        let upstream_errors = Counter::default();
        registry.register(
            "kvlint_proxy_upstream_errors",
            "Requests the upstream could not be reached for (answered 502)",
            upstream_errors.clone(),
        );
        // Every series exists from the start, at zero: a dashboard's rates and ratios have
        // something to read before the first loss or finding.
        let labels = Upstream {
            upstream: upstream.clone(),
        };
        for family in [
            &requests,
            &prompt_tokens,
            &cached_tokens,
            &predicted_cached_tokens,
        ] {
            let _created = family.get_or_create(&labels);
        }
        for cause in LOST_CAUSES {
            let _created = lost_tokens.get_or_create(&Cause {
                upstream: upstream.clone(),
                cause: cause.to_owned(),
            });
        }
        for rule in kvlint_rules::RULES {
            let _created = findings.get_or_create(&Rule {
                upstream: upstream.clone(),
                rule: rule.meta().name.to_owned(),
            });
        }
        Self {
            registry,
            upstream,
            requests,
            prompt_tokens,
            cached_tokens,
            predicted_cached_tokens,
            lost_tokens,
            findings,
            not_analysed,
            upstream_errors,
        }
    }

    fn labels(&self) -> Upstream {
        Upstream {
            upstream: self.upstream.clone(),
        }
    }

    pub(super) fn not_analysed(&self) {
        self.not_analysed.inc();
    }

    pub(super) fn upstream_error(&self) {
        self.upstream_errors.inc();
    }

    pub(super) fn request(&self, prompt_tokens: Option<usize>, cached_tokens: Option<usize>) {
        let labels = self.labels();
        self.requests.get_or_create(&labels).inc();
        if let Some(prompt_tokens) = prompt_tokens {
            self.prompt_tokens
                .get_or_create(&labels)
                .inc_by(prompt_tokens as u64);
        }
        if let Some(cached_tokens) = cached_tokens {
            self.cached_tokens
                .get_or_create(&labels)
                .inc_by(cached_tokens as u64);
        }
    }

    pub(super) fn predicted(&self, tokens: usize) {
        self.predicted_cached_tokens
            .get_or_create(&self.labels())
            .inc_by(tokens as u64);
    }

    pub(super) fn lost(&self, cause: &str, tokens: usize) {
        let labels = Cause {
            upstream: self.upstream.clone(),
            cause: cause.to_owned(),
        };
        self.lost_tokens
            .get_or_create(&labels)
            .inc_by(tokens as u64);
    }

    pub(super) fn finding(&self, rule: &str) {
        let labels = Rule {
            upstream: self.upstream.clone(),
            rule: rule.to_owned(),
        };
        self.findings.get_or_create(&labels).inc();
    }

    /// One line for a person watching the proxy run.
    pub(super) fn summary(&self) -> String {
        let labels = self.labels();
        let count = |family: &Family<Upstream, Counter>| family.get_or_create(&labels).get();
        let (prompt, cached) = (count(&self.prompt_tokens), count(&self.cached_tokens));
        let lost: u64 = LOST_CAUSES
            .into_iter()
            .map(|cause| {
                let labels = Cause {
                    upstream: self.upstream.clone(),
                    cause: cause.to_owned(),
                };
                self.lost_tokens.get_or_create(&labels).get()
            })
            .sum();
        let share = if prompt == 0 {
            0.0
        } else {
            100.0 * cached as f64 / prompt as f64
        };
        format!(
            "kvlint proxy: {} requests, {prompt} prompt tokens, {cached} served from cache ({share:.1}%), {} predicted, {lost} lost",
            count(&self.requests),
            count(&self.predicted_cached_tokens),
        )
    }

    /// The text format a Prometheus server scrapes (OpenMetrics).
    pub(super) fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
