//! The proxy's counters, in the Prometheus text format at `/metrics` (prometheus-client).

use std::sync::atomic::AtomicU64;

use kvlint_core::cache::{ModelFigures, ReportedUsage};
use kvlint_protocol::grouping::RequestKind;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Why a session's reusable prefix was computed again when the serving side lost it (see the
/// analysis); an application's break is counted under its rule's name.
pub(super) const LOST_CAUSES: [&str; 7] = [
    "locality",
    "answer_retokenized",
    "eviction",
    "locality_or_eviction",
    "ttl",
    "below_minimum",
    "unknown",
];

/// Every cause `kvlint_prompt_tokens_lost` counts: the serving side's, then each rule's.
fn all_causes() -> impl Iterator<Item = &'static str> {
    LOST_CAUSES
        .into_iter()
        .chain(kvlint_rules::RULES.iter().map(|rule| rule.meta().name))
}

/// The usage counters under OpenTelemetry's GenAI attribute names, as Prometheus spells them
/// (`.` as `_`; a counter's `_total` added), so that a dashboard built on those names reads
/// the proxy: `gen_ai.usage.input_tokens` ("SHOULD include all types of input tokens,
/// including cached tokens"), `gen_ai.usage.cache_read.input_tokens` and
/// `gen_ai.usage.cache_creation.input_tokens` (open-telemetry/semantic-conventions,
/// `model/gen-ai/registry.yaml`, v1.40.0; read 2026-12-07). Each is summed over the requests,
/// as the upstream reported them.
const OTEL_USAGE: [(&str, &str); 3] = [
    (
        "gen_ai_usage_input_tokens",
        "gen_ai.usage.input_tokens summed: input tokens, cached ones included, as the upstream reported them",
    ),
    (
        "gen_ai_usage_cache_read_input_tokens",
        "gen_ai.usage.cache_read.input_tokens summed: input tokens served from the provider's cache",
    ),
    (
        "gen_ai_usage_cache_creation_input_tokens",
        "gen_ai.usage.cache_creation.input_tokens summed: input tokens written to the provider's cache",
    ),
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Upstream {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Cause {
    upstream: String,
    cause: String,
}

/// A miss the session could have avoided (its previous turn had made the tokens reusable:
/// an application's break, an expiry, another replica, an eviction) or not (tokens sent for
/// the first time, a prompt under the minimum).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Miss {
    upstream: String,
    /// `avoidable` or `unavoidable`.
    kind: String,
}

const MISS_KINDS: [&str; 2] = ["avoidable", "unavoidable"];

/// What a request was to its application ([`RequestKind`]), per upstream.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    upstream: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SignedChange {
    upstream: String,
    change: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SignedOutcome {
    upstream: String,
    /// `refused` or `dropped`.
    outcome: String,
    /// `predicted` (kvlint's prefix check) or `reported` (the API's answer).
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Rule {
    upstream: String,
    rule: String,
}

/// Counters summed over every request the proxy analysed, per upstream.
pub(super) struct Metrics {
    registry: Registry,
    upstreams: Vec<String>,
    requests: Family<Upstream, Counter>,
    request_kinds: Family<Kind, Counter>,
    prompt_tokens_by_kind: Family<Kind, Counter>,
    prompt_tokens: Family<Upstream, Counter>,
    cached_tokens: Family<Upstream, Counter>,
    written_tokens: Family<Upstream, Counter>,
    /// The same usage under OpenTelemetry's GenAI names: input, cache read, cache creation.
    otel_usage: [Family<Upstream, Counter>; 3],
    predicted_cached_tokens: Family<Upstream, Counter>,
    lost_tokens: Family<Cause, Counter>,
    findings: Family<Rule, Counter>,
    missed_tokens: Family<Miss, Counter>,
    missed_dollars: Family<Miss, Counter<f64, AtomicU64>>,
    signed_changes: Family<SignedChange, Counter>,
    signed_outcomes: Family<SignedOutcome, Counter>,
    not_analysed: Counter,
    upstream_errors: Family<Upstream, Counter>,
}

impl Metrics {
    pub(super) fn new(upstreams: &[std::sync::Arc<str>]) -> Self {
        let upstreams: Vec<String> = upstreams.iter().map(|label| label.to_string()).collect();
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
        let written_tokens = Family::<Upstream, Counter>::default();
        registry.register(
            "kvlint_prompt_tokens_cache_written",
            "Prompt tokens the upstream reported as written to its cache (Anthropic's cache_creation_input_tokens, OpenAI's cache_write_tokens)",
            written_tokens.clone(),
        );
        let otel_usage: [Family<Upstream, Counter>; 3] = Default::default();
        for ((name, help), family) in OTEL_USAGE.into_iter().zip(&otel_usage) {
            registry.register(name, help, family.clone());
        }
        let predicted_cached_tokens = Family::<Upstream, Counter>::default();
        registry.register(
            "kvlint_prompt_tokens_predicted_cached",
            "Prompt tokens kvlint predicts the engine serves from cache (its cache model over the engine's own tokens and what each replica was sent)",
            predicted_cached_tokens.clone(),
        );
        let request_kinds = Family::<Kind, Counter>::default();
        registry.register(
            "kvlint_request_kinds",
            "Prompt requests analysed, by what each was to its application as the grouping reads it: main-turn, tool-round-trip, retry, side-call (a summary, a title asked of a session's history), sub-agent (the first request of an agent handed a session's history or named its sub-agent), compaction",
            request_kinds.clone(),
        );
        let prompt_tokens_by_kind = Family::<Kind, Counter>::default();
        registry.register(
            "kvlint_prompt_tokens_by_kind",
            "Prompt tokens the upstream reported, by the request's kind as kvlint_request_kinds: what each kind costs",
            prompt_tokens_by_kind.clone(),
        );
        let lost_tokens = Family::<Cause, Counter>::default();
        registry.register(
            "kvlint_prompt_tokens_lost",
            "Prompt tokens a session's previous turn had made reusable that the upstream computed again, by cause: the application's break, named by the kvlint rule that finds it (volatile-prefix, tool-order, ...: the tokens of the previous prompt after the first changed one); or, on the serving side, locality (another replica served the turn), answer_retokenized (the previous answer's text, sent back, tokenized to other ids than the engine generated), eviction (the same replica, whose cache moved on), locality_or_eviction (the replica is not known: no replica header, no --replica-metrics), ttl (longer than the hosted cache keeps a prefix since the previous turn), below_minimum (a prompt shorter than the API caches), unknown",
            lost_tokens.clone(),
        );
        let findings = Family::<Rule, Counter>::default();
        registry.register(
            "kvlint_findings",
            "Findings of kvlint's analysis on consecutive requests of a session, by rule",
            findings.clone(),
        );
        let missed_tokens = Family::<Miss, Counter>::default();
        registry.register(
            "kvlint_prompt_tokens_missed",
            "Prompt tokens the upstream reported computing rather than reading from its cache, by kind: avoidable (the session's previous turn had made them reusable: the lost tokens, whatever the cause but a prompt under the minimum) or unavoidable (the rest: tokens sent for the first time)",
            missed_tokens.clone(),
        );
        let missed_dollars = Family::<Miss, Counter<f64, AtomicU64>>::default();
        registry.register(
            "kvlint_prompt_missed_dollars",
            "What those missed prompt tokens were billed, in USD at the model's prices (a hosted API's model in kvlint's table; written tokens at the write price, the rest at the input price), by kind as kvlint_prompt_tokens_missed",
            missed_dollars.clone(),
        );
        let signed_changes = Family::<SignedChange, Counter>::default();
        registry.register(
            "kvlint_signed_history_changed",
            "Requests that sent back a thinking block or reasoning item of the previous response otherwise than it was returned, by the first change: altered (another value: text, signature), dropped, moved",
            signed_changes.clone(),
        );
        let signed_outcomes = Family::<SignedOutcome, Counter>::default();
        registry.register(
            "kvlint_signed_history_outcomes",
            "Requests whose signed history the API refuses (a 400 for a thinking block's signature) or drops (input_transformations), as kvlint's prefix check predicts them and as the API reported them",
            signed_outcomes.clone(),
        );
        let not_analysed = Counter::default();
        registry.register(
            "kvlint_proxy_not_analysed",
            "Exchanges forwarded but not analysed: the analysis queue was full",
            not_analysed.clone(),
        );
        let upstream_errors = Family::<Upstream, Counter>::default();
        registry.register(
            "kvlint_proxy_upstream_errors",
            "Requests an upstream could not be reached for, or failed while being sent",
            upstream_errors.clone(),
        );
        // Every series exists from the start, at zero: a dashboard's rates and ratios have
        // something to read before the first loss or finding.
        for upstream in &upstreams {
            let labels = Upstream {
                upstream: upstream.clone(),
            };
            for family in [
                &requests,
                &prompt_tokens,
                &cached_tokens,
                &written_tokens,
                &predicted_cached_tokens,
                &upstream_errors,
            ]
            .into_iter()
            .chain(&otel_usage)
            {
                let _created = family.get_or_create(&labels);
            }
            for cause in all_causes() {
                let _created = lost_tokens.get_or_create(&Cause {
                    upstream: upstream.clone(),
                    cause: cause.to_owned(),
                });
            }
            for kind in RequestKind::ALL {
                let labels = Kind {
                    upstream: upstream.clone(),
                    kind: kind.as_str().to_owned(),
                };
                let _created = request_kinds.get_or_create(&labels);
                let _created = prompt_tokens_by_kind.get_or_create(&labels);
            }
            for kind in MISS_KINDS {
                let labels = Miss {
                    upstream: upstream.clone(),
                    kind: kind.to_owned(),
                };
                let _created = missed_tokens.get_or_create(&labels);
                let _created = missed_dollars.get_or_create(&labels);
            }
            for change in ["altered", "dropped", "moved"] {
                let _created = signed_changes.get_or_create(&SignedChange {
                    upstream: upstream.clone(),
                    change: change.to_owned(),
                });
            }
            for (outcome, source) in [
                ("refused", "predicted"),
                ("refused", "reported"),
                ("dropped", "predicted"),
                ("dropped", "reported"),
            ] {
                let _created = signed_outcomes.get_or_create(&SignedOutcome {
                    upstream: upstream.clone(),
                    outcome: outcome.to_owned(),
                    source: source.to_owned(),
                });
            }
            for rule in kvlint_rules::RULES {
                let _created = findings.get_or_create(&Rule {
                    upstream: upstream.clone(),
                    rule: rule.meta().name.to_owned(),
                });
            }
        }
        Self {
            registry,
            upstreams,
            requests,
            request_kinds,
            prompt_tokens_by_kind,
            prompt_tokens,
            cached_tokens,
            written_tokens,
            otel_usage,
            predicted_cached_tokens,
            lost_tokens,
            findings,
            missed_tokens,
            missed_dollars,
            signed_changes,
            signed_outcomes,
            not_analysed,
            upstream_errors,
        }
    }

    /// A request that sent back the previous response's signed history changed.
    pub(super) fn signed_change(&self, upstream: &str, change: &str) {
        let labels = SignedChange {
            upstream: upstream.to_owned(),
            change: change.to_owned(),
        };
        self.signed_changes.get_or_create(&labels).inc();
    }

    /// A refusal or a drop of a request's signed history, predicted or reported.
    pub(super) fn signed_outcome(&self, upstream: &str, outcome: &str, source: &str) {
        let labels = SignedOutcome {
            upstream: upstream.to_owned(),
            outcome: outcome.to_owned(),
            source: source.to_owned(),
        };
        self.signed_outcomes.get_or_create(&labels).inc();
    }

    pub(super) fn not_analysed(&self) {
        self.not_analysed.inc();
    }

    pub(super) fn upstream_error(&self, upstream: &str) {
        self.upstream_errors.get_or_create(&labels(upstream)).inc();
    }

    /// A request analysed, with the usage its response reported, the prompt tokens it lost
    /// that its session had made reusable (`avoidable`), and its model's prices when known.
    pub(super) fn request(
        &self,
        (upstream, kind): (&str, RequestKind),
        usage: Option<ReportedUsage>,
        avoidable: usize,
        figures: Option<&ModelFigures>,
    ) {
        let labels = labels(upstream);
        self.requests.get_or_create(&labels).inc();
        let kind = Kind {
            upstream: upstream.to_owned(),
            kind: kind.as_str().to_owned(),
        };
        self.request_kinds.get_or_create(&kind).inc();
        let Some(usage) = usage else {
            return;
        };
        if let Some(prompt) = usage.prompt_tokens {
            self.prompt_tokens_by_kind
                .get_or_create(&kind)
                .inc_by(prompt as u64);
        }
        if let Some(prompt) = usage.prompt_tokens {
            self.missed(upstream, prompt, usage, avoidable, figures);
        }
        let [otel_input, otel_read, otel_written] = &self.otel_usage;
        let counted = [
            (usage.prompt_tokens, [&self.prompt_tokens, otel_input]),
            (Some(usage.cached_tokens), [&self.cached_tokens, otel_read]),
            (
                usage.cache_write_tokens,
                [&self.written_tokens, otel_written],
            ),
        ];
        for (tokens, families) in counted {
            if let Some(tokens) = tokens {
                for family in families {
                    family.get_or_create(&labels).inc_by(tokens as u64);
                }
            }
        }
    }

    /// Splits a request's missed prompt tokens into avoidable and unavoidable, in tokens and,
    /// with the model's prices, in dollars.
    fn missed(
        &self,
        upstream: &str,
        prompt: usize,
        usage: ReportedUsage,
        avoidable: usize,
        figures: Option<&ModelFigures>,
    ) {
        let missed = prompt.saturating_sub(usage.cached_tokens);
        let avoidable = avoidable.min(missed);
        let written = usage.cache_write_tokens.unwrap_or(0).min(missed);
        // Billed: the written tokens at the write price, the rest at the input price.
        let billed = figures.map(|figures| {
            (written as f64 * figures.cache_write + (missed - written) as f64 * figures.input)
                / 1_000_000.0
        });
        for (kind, tokens) in MISS_KINDS.into_iter().zip([avoidable, missed - avoidable]) {
            let labels = Miss {
                upstream: upstream.to_owned(),
                kind: kind.to_owned(),
            };
            self.missed_tokens
                .get_or_create(&labels)
                .inc_by(tokens as u64);
            if let Some(billed) = billed.filter(|_| missed > 0) {
                self.missed_dollars
                    .get_or_create(&labels)
                    .inc_by(billed * tokens as f64 / missed as f64);
            }
        }
    }

    pub(super) fn predicted(&self, upstream: &str, tokens: usize) {
        self.predicted_cached_tokens
            .get_or_create(&labels(upstream))
            .inc_by(tokens as u64);
    }

    pub(super) fn lost(&self, upstream: &str, cause: &str, tokens: usize) {
        let labels = Cause {
            upstream: upstream.to_owned(),
            cause: cause.to_owned(),
        };
        self.lost_tokens
            .get_or_create(&labels)
            .inc_by(tokens as u64);
    }

    pub(super) fn finding(&self, upstream: &str, rule: &str) {
        let labels = Rule {
            upstream: upstream.to_owned(),
            rule: rule.to_owned(),
        };
        self.findings.get_or_create(&labels).inc();
    }

    /// One line for a person watching the proxy run, summed over the upstreams.
    pub(super) fn summary(&self) -> String {
        let sum = |family: &Family<Upstream, Counter>| -> u64 {
            self.upstreams
                .iter()
                .map(|upstream| family.get_or_create(&labels(upstream)).get())
                .sum()
        };
        let (prompt, cached) = (sum(&self.prompt_tokens), sum(&self.cached_tokens));
        let lost: u64 = self
            .upstreams
            .iter()
            .flat_map(|upstream| {
                all_causes().map(|cause| Cause {
                    upstream: upstream.clone(),
                    cause: cause.to_owned(),
                })
            })
            .map(|labels| self.lost_tokens.get_or_create(&labels).get())
            .sum();
        let share = if prompt == 0 {
            0.0
        } else {
            100.0 * cached as f64 / prompt as f64
        };
        format!(
            "kvlint proxy: {} requests, {prompt} prompt tokens, {cached} served from cache ({share:.1}%), {} predicted, {lost} lost",
            sum(&self.requests),
            sum(&self.predicted_cached_tokens),
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

fn labels(upstream: &str) -> Upstream {
    Upstream {
        upstream: upstream.to_owned(),
    }
}
