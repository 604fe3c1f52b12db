//! The runtime guard: `kvlint check` on each pair of turns, as the requests are sent.

use std::collections::BTreeMap;

use kvlint_core::diff::RenderedRequest;
use kvlint_render::render::{Rendered, Renderer};
use kvlint_request::diagnostic::{Diagnostic, Severity};
use kvlint_request::error::InputError;
use kvlint_request::locate::Unplaced;
use kvlint_request::path::PartPath;
use kvlint_request::request::{Request, SharedParts};
use kvlint_rules::thinking::Account as AnthropicAccount;
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

use crate::usage::ReportedUsage;

/// What [`Guard::observe`] does with a break that recomputes cached content (an error
/// finding).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GuardMode {
    /// Return every finding; the application logs or exports them.
    #[default]
    Warn,
    /// Refuse the request: [`GuardError::Breaks`]. The refused request is not recorded, so
    /// the next one is compared with the last accepted turn.
    Error,
}

/// Counters an application can export as metrics, summed over the observed turns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GuardCounters {
    /// Requests observed, refused ones included.
    pub turns: usize,
    /// Requests refused in [`GuardMode::Error`].
    pub refused_turns: usize,
    pub prompt_tokens: usize,
    /// Leading tokens each turn shares with the turn before it: what a cache serves.
    pub reused_tokens: usize,
    /// Tokens the previous turn had cached that are sent again and must be recomputed
    /// (error findings).
    pub recomputed_tokens: usize,
    /// Tokens of per-turn tails the next turn drops, by design (info findings).
    pub dropped_tokens: usize,
    /// Error and warning findings by rule name (`volatile-timestamp`, `history-rewrite`, …):
    /// breaks and likely mistakes. Costs by design (info findings, such as the per-turn tail
    /// each turn drops) are counted apart: [`Guard::costs_by_rule`].
    pub breaks_by_rule: BTreeMap<String, usize>,
    /// Turns announced with [`Guard::expect_break`] that do not extend the turn before (a
    /// finding of any severity: a compaction down to one message drops all it had cached,
    /// and recomputes none of it): announced compactions.
    pub expected_breaks: usize,
}

/// A request the guard could not check, or refused.
#[derive(Debug, Error, miette::Diagnostic)]
pub enum GuardError {
    /// The body is not a request of a format kvlint reads.
    #[error("turn {turn}: {}{message}", place(.part))]
    #[diagnostic(code(kvlint_sdk::body))]
    Body {
        turn: usize,
        part: PartPath,
        message: String,
    },
    /// The renderer failed (a chat template raised an error).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Input(#[from] InputError),
    /// [`GuardMode::Error`]: the request recomputes content the cache held.
    #[error("turn {turn}: {} cache break(s) recompute cached tokens; first: {}", .diagnostics.len(), .diagnostics.first().map_or("", |first| first.message.as_str()))]
    #[diagnostic(
        code(kvlint_sdk::cache_break),
        help(
            "assemble turns with `Conversation`, or announce a compaction with `Guard::expect_break`"
        )
    )]
    Breaks {
        turn: usize,
        /// Every finding of the turn, errors and infos.
        diagnostics: Vec<Diagnostic>,
    },
}

/// What [`Guard::observe`] found in one request: the findings `kvlint check` reports for the
/// pair of turns, read as a slice of [`Diagnostic`] (`len`, `iter`, `[0]`).
///
/// A clean turn of a well-assembled loop has no error and no warning, but usually one info
/// finding: the previous turn's volatile tail (the turn tier), which this turn drops by
/// design. That is its cost, in tokens: [`Observation::costs`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Observation {
    diagnostics: Vec<Diagnostic>,
    #[serde(skip)]
    prompt_tokens: usize,
    #[serde(skip)]
    reused_tokens: usize,
}

impl Observation {
    /// No error and no warning: the turn keeps what the cache held (infos are costs by design).
    pub fn is_clean(&self) -> bool {
        self.diagnostics
            .iter()
            .all(|diagnostic| diagnostic.severity == Severity::Info)
    }

    /// The breaks: content the cache held, sent again and recomputed.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.of_severity(Severity::Error)
    }

    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.of_severity(Severity::Warning)
    }

    /// What the recommended placement costs: the previous turn's per-turn tail, dropped by
    /// this turn (info findings, each with its `tokens_lost`).
    pub fn costs(&self) -> impl Iterator<Item = &Diagnostic> {
        self.of_severity(Severity::Info)
    }

    /// Tokens the previous turn had cached that this turn does not reuse, errors and costs
    /// together.
    pub fn tokens_lost(&self) -> usize {
        self.diagnostics
            .iter()
            .map(|diagnostic| diagnostic.tokens_lost)
            .sum()
    }

    /// The turn's prompt, in the renderer's tokens.
    pub fn prompt_tokens(&self) -> usize {
        self.prompt_tokens
    }

    /// Leading tokens the turn shares with the turn before it: what a prefix cache can serve
    /// (0 for a first turn). [`GuardCounters::reused_tokens`] sums them.
    pub fn reused_tokens(&self) -> usize {
        self.reused_tokens
    }

    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.diagnostics
    }

    fn of_severity(&self, severity: Severity) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics
            .iter()
            .filter(move |diagnostic| diagnostic.severity == severity)
    }
}

impl std::ops::Deref for Observation {
    type Target = [Diagnostic];

    fn deref(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
}

impl IntoIterator for Observation {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.diagnostics.into_iter()
    }
}

impl<'a> IntoIterator for &'a Observation {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.diagnostics.iter()
    }
}

/// Where in the body a problem is, before its message; nothing for the body as a whole.
fn place(part: &PartPath) -> String {
    match part.to_string() {
        root if root.is_empty() => root,
        path => format!("`{path}`: "),
    }
}

/// The previous accepted turn: its request and its rendering.
struct ObservedTurn {
    request: Request,
    rendered: Rendered,
}

/// Checks, request by request, that each turn of one session extends the previous one, with
/// the analysis `kvlint check` runs: the same request model, renderer, turn diff and rules.
///
/// One guard per session. Each finding is the diagnostic `kvlint check` reports for the same
/// two turns, without a `span`: the bodies come from no file (the finding's `part` names the
/// place in the body).
///
/// ```
/// use kvlint_sdk::{Guard, GuardMode, Renderer};
/// use serde_json::json;
///
/// let mut guard = Guard::new(Renderer::provider(), GuardMode::Warn);
/// let first = json!({"messages": [{"role": "system", "content": "Now: 10:00:01. Be terse."},
///                                 {"role": "user", "content": "hi"}]});
/// let second = json!({"messages": [{"role": "system", "content": "Now: 10:00:07. Be terse."},
///                                  {"role": "user", "content": "hi"}]});
/// assert!(guard.observe(&first).unwrap().is_clean());
/// let findings = guard.observe(&second).unwrap();
/// assert!(!findings.is_clean());
/// assert_eq!(findings[0].rule, "volatile-timestamp");
/// assert_eq!(guard.counters().breaks_by_rule["volatile-timestamp"], 1);
/// ```
pub struct Guard {
    renderer: Renderer,
    mode: GuardMode,
    previous: Option<ObservedTurn>,
    /// The rendering of the turn before `previous`, whose allocations the next rendering
    /// reuses.
    spare: Option<Rendered>,
    /// The texts of `previous`, which the next turn's parts that repeat them share.
    shared: SharedParts,
    next_turn: usize,
    break_expected: bool,
    counters: GuardCounters,
    costs_by_rule: BTreeMap<String, usize>,
    account: AnthropicAccount,
    reported: ReportedUsage,
}

impl Guard {
    pub fn new(renderer: Renderer, mode: GuardMode) -> Self {
        Self {
            renderer,
            mode,
            previous: None,
            spare: None,
            shared: SharedParts::default(),
            next_turn: 0,
            break_expected: false,
            counters: GuardCounters::default(),
            costs_by_rule: BTreeMap::new(),
            account: AnthropicAccount::default(),
            reported: ReportedUsage::default(),
        }
    }

    /// The guard on the Anthropic `account` the requests are sent from: whether the API
    /// refuses a request whose returned thinking blocks fail their prefix check follows its
    /// creation date (`thinking-prefix-check`). Unset, a new account is assumed.
    pub fn on_anthropic_account(mut self, account: AnthropicAccount) -> Self {
        self.account = account;
        self
    }

    /// Checks the next request body of the session against the previous one and returns the
    /// findings ([`Observation::is_clean`] when it keeps what the cache held).
    pub fn observe(&mut self, body: &Value) -> Result<Observation, GuardError> {
        self.observe_body(body.clone())
    }

    /// [`Guard::observe`] on a body the caller no longer needs (one it just parsed): read
    /// without a copy.
    pub fn observe_body(&mut self, body: Value) -> Result<Observation, GuardError> {
        let observation = self.check_next(body);
        // The texts of the turn kept are shared with the next turn's; the others are freed.
        self.shared.forget_unused();
        observation
    }

    fn check_next(&mut self, body: Value) -> Result<Observation, GuardError> {
        let index = self.next_turn;
        let earlier = self.previous.as_ref().map(|previous| &previous.request);
        let request = Request::parse_after(body, &mut self.shared, earlier).map_err(|error| {
            GuardError::Body {
                turn: index,
                part: error.path,
                message: error.message,
            }
        })?;
        // Parts sent again unchanged keep the previous turn's tokens: only what is new is
        // encoded, as `kvlint check` renders a session.
        let rendered = self
            .renderer
            .render_reusing(
                &request,
                self.previous
                    .as_ref()
                    .map(|previous| (&previous.request, &previous.rendered)),
                self.spare.take(),
            )
            .map_err(InputError::from)?;
        let previous = self.previous.as_ref().map(|previous| RenderedRequest {
            request: &previous.request,
            rendered: &previous.rendered,
        });
        let current = RenderedRequest {
            request: &request,
            rendered: &rendered,
        };
        let (diff, diagnostics) = kvlint_rules::check_pair(
            previous,
            current,
            index,
            self.renderer.tokenizer(),
            &Unplaced,
            self.account,
        );
        let breaks = diagnostics
            .iter()
            .any(|diagnostic| diagnostic.severity == Severity::Error);
        let refused = breaks && self.mode == GuardMode::Error && !self.break_expected;
        self.count(
            &diagnostics,
            diff.prompt_tokens,
            diff.reused_tokens,
            refused,
        );
        if refused {
            return Err(GuardError::Breaks {
                turn: index,
                diagnostics,
            });
        }
        self.break_expected = false;
        self.spare = self
            .previous
            .replace(ObservedTurn { request, rendered })
            .map(|previous| previous.rendered);
        self.next_turn += 1;
        Ok(Observation {
            diagnostics,
            prompt_tokens: diff.prompt_tokens,
            reused_tokens: diff.reused_tokens,
        })
    }

    /// The last turn the guard accepted, as it rendered it: what the next body is checked
    /// against (`None` before the first, and after [`Guard::reset`]). For a caller that goes on
    /// from the rendering, such as a cache model's prediction, without rendering it again.
    pub fn last_accepted(&self) -> Option<RenderedRequest<'_>> {
        self.previous.as_ref().map(|previous| RenderedRequest {
            request: &previous.request,
            rendered: &previous.rendered,
        })
    }

    /// Announces that the next request breaks the prefix on purpose (after
    /// `Conversation::compact`): its findings are returned and counted as expected, and
    /// [`GuardMode::Error`] does not refuse it.
    pub fn expect_break(&mut self) {
        self.break_expected = true;
    }

    pub fn counters(&self) -> &GuardCounters {
        &self.counters
    }

    /// Info findings by rule name: costs by design, such as the previous turn's per-turn tail
    /// that the next turn drops (its tokens in [`GuardCounters::dropped_tokens`]), which a
    /// clean session pays once a turn. Not breaks: [`GuardCounters::breaks_by_rule`] counts
    /// those. (Kept beside the counters, not in them: a new field would break code that
    /// builds or destructures [`GuardCounters`].)
    pub fn costs_by_rule(&self) -> &BTreeMap<String, usize> {
        &self.costs_by_rule
    }

    /// Shows the guard the API's response to the last request: the cache usage it reports is
    /// added to [`Guard::reported_usage`]. `false` when it reports none (a streamed chunk
    /// without usage, an error). The guarded clients (Python, npm) call it with each JSON
    /// response.
    pub fn observe_response(&mut self, response: &Value) -> bool {
        self.reported.add(response)
    }

    /// The prompt-cache usage the API reported for the responses shown to the guard, summed;
    /// [`ReportedUsage::otel_attributes`] names it as OpenTelemetry does.
    pub fn reported_usage(&self) -> ReportedUsage {
        self.reported
    }

    pub fn mode(&self) -> GuardMode {
        self.mode
    }

    /// Whether [`Guard::expect_break`] announced a break the guard has not seen yet.
    pub fn is_break_expected(&self) -> bool {
        self.break_expected
    }

    /// Forgets the previous turn: the next request starts a new session.
    pub fn reset(&mut self) {
        self.previous = None;
        self.shared.forget_unused();
        self.next_turn = 0;
        self.break_expected = false;
    }

    fn count(
        &mut self,
        diagnostics: &[Diagnostic],
        prompt_tokens: usize,
        reused_tokens: usize,
        refused: bool,
    ) {
        let counters = &mut self.counters;
        counters.turns += 1;
        counters.refused_turns += usize::from(refused);
        counters.prompt_tokens += prompt_tokens;
        counters.reused_tokens += reused_tokens;
        counters.expected_breaks += usize::from(self.break_expected && !diagnostics.is_empty());
        for diagnostic in diagnostics {
            let by_rule = match diagnostic.severity {
                Severity::Info => &mut self.costs_by_rule,
                _ => &mut counters.breaks_by_rule,
            };
            *by_rule.entry(diagnostic.rule.to_owned()).or_default() += 1;
            if diagnostic.severity == Severity::Error {
                counters.recomputed_tokens += diagnostic.tokens_lost;
            } else {
                counters.dropped_tokens += diagnostic.tokens_lost;
            }
        }
    }
}
