//! The pipeline, assembled once: every command, the SDK's guard, the tests and the benchmarks
//! call [`check_session`] or [`check_pair`] (or [`visit_turns`], the turn loop under
//! `check_session`).
//!
//! session → render → tokens → turn diff → rules → diagnostics; with an engine, each turn's
//! cache view → predicted cache use, the session's audit and the breakpoint audit.

use std::ops::Range;

use kvlint_core::cache::{Engine, Opening, SessionCacheView, TurnCachePrediction, audit_reported};
use kvlint_core::diff::{RenderedRequest, TurnDiff, diff_turns};
use kvlint_core::session::{SessionFile, Turn};
use kvlint_protocol::engine::EngineName;
use kvlint_protocol::format::BodyFormat;
use kvlint_render::render::{Rendered, Renderer};
use kvlint_render::tokenize::Tokenizer;
use kvlint_request::diagnostic::Diagnostic;
use kvlint_request::error::InputError;
use kvlint_request::locate::Locator;
use kvlint_request::path::PartPath;
use kvlint_request::request::Request;
use rayon::prelude::*;

use crate::rules::{InstructionsUncached, JsonReserialized};
use crate::thinking::{Account, replayed_reasoning, replayed_thinking};
use crate::{RuleInput, TurnPair, diagnose};

/// The fewest turns worth a thread of their own: each range renders one turn more (the one
/// before it), to diff its first turn against.
const MIN_TURNS_PER_RANGE: usize = 8;

/// A session checked: each turn's diff against the one before, the findings in turn order,
/// and, with an engine, what it serves from cache.
#[derive(Debug)]
pub struct SessionCheck {
    pub turns: Vec<TurnDiff>,
    pub findings: Vec<Diagnostic>,
    /// With an engine: each turn's predicted cache use.
    pub predictions: Option<Vec<TurnCachePrediction>>,
    /// With a hosted API's engine: what the session's first request leaves in the cache and
    /// could read there, for the audit of a recording's sessions together
    /// ([`kvlint_core::cache::audit_cold_starts`]).
    pub opening: Option<Opening>,
}

impl SessionCheck {
    pub fn prompt_tokens(&self) -> usize {
        self.turns.iter().map(|turn| turn.prompt_tokens).sum()
    }

    pub fn reused_tokens(&self) -> usize {
        self.turns.iter().map(|turn| turn.reused_tokens).sum()
    }
}

/// Checks a recorded session: renders its turns, diffs each against the one before, names
/// every break, and with `engine` predicts its cache use and audits its breakpoints.
///
/// Where it pays ([`turns_pay_for_threads`]), the turns are split into one contiguous range
/// per thread, checked in parallel; inside a range each turn is rendered knowing the one
/// before (parts sent again reuse its tokens) in the place of the one before that, so at most
/// three renderings are held at a time. Results are joined in turn order.
pub fn check_session(
    session: &SessionFile,
    renderer: &Renderer,
    engine: Option<&Engine>,
) -> Result<SessionCheck, InputError> {
    check_session_on(session, renderer, engine, Account::Unknown)
}

/// [`check_session`] on an Anthropic `account` whose creation date is known: the prefix check
/// of returned thinking blocks (`thinking-prefix-check`) follows it.
pub fn check_session_on(
    session: &SessionFile,
    renderer: &Renderer,
    engine: Option<&Engine>,
    account: Account,
) -> Result<SessionCheck, InputError> {
    check(session, renderer, engine, Audits::All, account)
}

/// Checks a session as [`check_session`] does without an engine, and audits the whole session
/// (KV503–KV505) under `provider`: the hosted API the input itself shows (its URLs' host, its
/// request format) when no engine was chosen. No predicted cache use, no breakpoint or usage
/// audit: those follow an engine the user names.
pub fn check_session_under_implied_provider(
    session: &SessionFile,
    renderer: &Renderer,
    provider: &Engine,
    account: Account,
) -> Result<SessionCheck, InputError> {
    check(
        session,
        renderer,
        Some(provider),
        Audits::SessionOnly,
        account,
    )
}

/// The hosted API a session was sent to as its input shows it, when neither an engine nor a
/// chat template was given: `kvlint check` and the SDKs' `check` run the session audit
/// (KV503–KV505) under it, nothing else.
#[derive(Clone, Debug)]
pub struct ImpliedProvider {
    pub api: EngineName,
    /// What showed it: `the request URL's host api.openai.com`, `the request format`.
    pub implied_by: String,
    /// Its cache model.
    pub engine: Engine,
}

impl ImpliedProvider {
    /// The provider `session` shows. A recording's URLs decide when they name a host (a host
    /// no hosted API serves from, such as a self-hosted engine's, implies none); otherwise an
    /// Anthropic Messages body implies Anthropic. An OpenAI-format body implies nothing: vLLM,
    /// SGLang and llama.cpp serve it too.
    pub fn of(session: &SessionFile) -> Option<Self> {
        let host = session
            .origin
            .as_ref()
            .and_then(|origin| origin.host.as_deref());
        let (api, implied_by) = match host {
            Some(host) => (
                kvlint_protocol::endpoint::hosted_api(host)?,
                format!("the request URL's host {host}"),
            ),
            None if !session.is_empty()
                && session
                    .formats()
                    .all(|format| format == BodyFormat::AnthropicMessages) =>
            {
                (EngineName::Anthropic, "the request format".to_owned())
            }
            None => return None,
        };
        let engine = api.as_str().parse().ok()?;
        Some(Self {
            api,
            implied_by,
            engine,
        })
    }
}

/// `kvlint check` on a session as the SDKs' `check(bodies)` runs it: provider mode, no engine
/// named, the session audit under the provider the bodies imply ([`ImpliedProvider`]).
pub fn check_sent_session(session: &SessionFile) -> Result<SessionCheck, InputError> {
    let renderer = Renderer::provider();
    match ImpliedProvider::of(session) {
        Some(implied) => check_session_under_implied_provider(
            session,
            &renderer,
            &implied.engine,
            Account::Unknown,
        ),
        None => check_session(session, &renderer, None),
    }
}

/// What an engine's cache model is asked about a session.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Audits {
    /// Predicted cache use, the session, breakpoint and reported-usage audits.
    All,
    /// The session audit alone.
    SessionOnly,
}

fn check(
    session: &SessionFile,
    renderer: &Renderer,
    engine: Option<&Engine>,
    audits: Audits,
    account: Account,
) -> Result<SessionCheck, InputError> {
    let range_count = if turns_pay_for_threads(session, renderer) {
        rayon::current_num_threads()
            .min(session.len() / MIN_TURNS_PER_RANGE)
            .max(1)
    } else {
        1
    };
    // Each text encoded once, in parallel: otherwise each range would encode again the head
    // of the session that its first turn resends. One range encodes each text as it meets it.
    if range_count > 1 && renderer.encodes_part_texts_whole() {
        session.part_texts.par_iter().for_each(|text| {
            renderer.tokenizer().encode_piece(text);
        });
    }
    let check = |range| check_range(session, range, renderer, engine, account);
    let checked: Vec<Result<RangeCheck, InputError>> = match range_count {
        // On this thread: the memory reading the file freed is reused.
        1 => vec![check(0..session.len())],
        _ => balanced_ranges(session, range_count)
            .into_par_iter()
            .map(check)
            .collect(),
    };
    let mut turns = Vec::with_capacity(session.len());
    let mut findings = Vec::new();
    let mut cache_view = engine.map(|_| SessionCacheView::new(renderer));
    for range in checked {
        // In turn order: the error reported is the first turn's, whatever finished first.
        let range = range?;
        turns.extend(range.turns);
        findings.extend(range.findings);
        if let (Some(view), Some(later)) = (&mut cache_view, range.cache_view) {
            view.append(later);
        }
    }
    let mut opening = None;
    let predictions = engine.zip(cache_view).and_then(|(engine, view)| {
        let first_body = session
            .locate(0, &PartPath::root(), 0)
            .map(|start| session.span(start, start + 1));
        for issue in view.audit_session(engine) {
            findings.extend(diagnose(&RuleInput::Session {
                issue: &issue,
                span: first_body,
            }));
        }
        if audits == Audits::SessionOnly {
            findings.sort_by_key(|finding| finding.turn);
            return None;
        }
        let predictions = view.predict(engine);
        for issue in view.audit_breakpoints(engine, &predictions) {
            let span = session
                .locate(issue.turn, &issue.block, 0)
                .map(|start| session.span(start, start + 1));
            findings.extend(diagnose(&RuleInput::Breakpoint {
                issue: &issue,
                span,
            }));
        }
        if let Some(issue) = view.audit_idle(engine, &predictions) {
            let span = session
                .locate(issue.turn, &PartPath::root(), 0)
                .map(|start| session.span(start, start + 1));
            findings.extend(diagnose(&RuleInput::Idle {
                issue: &issue,
                span,
            }));
        }
        for issue in audit_reported(&predictions) {
            let span = session
                .locate(issue.turn, &PartPath::root(), 0)
                .map(|start| session.span(start, start + 1));
            findings.extend(diagnose(&RuleInput::Reported {
                issue: &issue,
                span,
            }));
        }
        findings.sort_by_key(|finding| finding.turn);
        opening = view.opening(engine);
        Some(predictions)
    });
    if session
        .origin
        .as_ref()
        .is_some_and(|origin| origin.reconstructed)
    {
        // Rebuilt bodies are serialized by kvlint: their bytes say nothing of the ones sent.
        findings.retain(|finding| finding.rule != JsonReserialized::META.name);
    }
    Ok(SessionCheck {
        turns,
        findings,
        predictions,
        opening,
    })
}

/// Whether a session's turns are worth splitting across threads: when each turn costs about
/// its prompt's length. An engine's template renders every turn in full. In provider mode a
/// turn that reuses the one before costs only what it adds, and a whole session takes a few
/// milliseconds on one thread, less than a second thread costs (waking it, a range's first
/// turn rendered again, encodings made in another thread's memory): 200 turns of 80k tokens
/// took longer on two threads than on one. Unless turns past the parsed-turn budget are
/// parsed again from the file's text, which costs their length: then ranges pay again.
/// Sessions are still checked in parallel with each other (`kvlint check`'s files).
fn turns_pay_for_threads(session: &SessionFile, renderer: &Renderer) -> bool {
    !renderer.encodes_part_texts_whole() || session.kept_turns() < session.len()
}

/// Splits the turns into `count` contiguous ranges of about equal work: rendering a turn costs
/// about its text's length, and later turns are longer.
fn balanced_ranges(session: &SessionFile, count: usize) -> Vec<Range<usize>> {
    let weights: Vec<usize> = (0..session.len())
        .map(|index| session.prompt_bytes(index) + 1)
        .collect();
    let total: usize = weights.iter().sum();
    let mut ranges = Vec::with_capacity(count);
    let (mut start, mut done) = (0, 0);
    for (index, weight) in weights.iter().enumerate() {
        done += weight;
        // Close a range once its share of the total is reached (the last takes the rest).
        if ranges.len() + 1 < count && done * count >= total * (ranges.len() + 1) {
            ranges.push(start..index + 1);
            start = index + 1;
        }
    }
    ranges.push(start..weights.len());
    ranges.retain(|range| !range.is_empty());
    ranges
}

/// The check of a contiguous range of a session's turns.
#[derive(Default)]
struct RangeCheck {
    turns: Vec<TurnDiff>,
    findings: Vec<Diagnostic>,
    cache_view: Option<SessionCacheView>,
}

fn check_range(
    session: &SessionFile,
    range: Range<usize>,
    renderer: &Renderer,
    engine: Option<&Engine>,
    account: Account,
) -> Result<RangeCheck, InputError> {
    let mut checked = RangeCheck {
        cache_view: engine.map(|_| SessionCacheView::new(renderer)),
        ..RangeCheck::default()
    };
    visit_turns(session, range, renderer, account, |checked_turn| {
        let turn = checked_turn.turn;
        if let (Some(view), Some(engine)) = (&mut checked.cache_view, engine) {
            view.push(
                &turn.request,
                checked_turn.rendered,
                turn.response.as_ref(),
                renderer,
            );
            view.push_time(turn.time, engine.cache_ttl(&turn.request));
        }
        checked.findings.extend(checked_turn.findings);
        checked.turns.push(checked_turn.diff);
        Ok::<_, InputError>(())
    })?;
    Ok(checked)
}

/// One turn as the pipeline saw it: rendered knowing the turn before, diffed against it and
/// diagnosed.
pub struct CheckedTurn<'a> {
    pub turn: &'a Turn,
    pub rendered: &'a Rendered,
    /// The turn before's rendering (`None` for a session's first turn).
    pub previous: Option<&'a Rendered>,
    pub diff: TurnDiff,
    /// The pair's findings ([`check_pair`]).
    pub findings: Vec<Diagnostic>,
}

impl CheckedTurn<'_> {
    /// The finding that names the turn's cache break, when it does not extend the turn
    /// before (the first of the pair's findings: every broken pair is named).
    pub fn cache_break(&self) -> Option<&Diagnostic> {
        self.diff
            .first_divergence
            .as_ref()
            .and(self.findings.first())
    }
}

/// The pipeline's turn loop: renders the turns of `range` in order, each reusing the
/// rendering of the one before (the turn before the range is rendered again for the first),
/// checks each against the one before with [`check_pair`] and hands it to `visit`.
/// [`check_session`] runs on it, and so does anything else that needs every turn's rendering
/// (the workload's block-hash trace).
pub fn visit_turns<E: From<InputError>>(
    session: &SessionFile,
    range: Range<usize>,
    renderer: &Renderer,
    account: Account,
    mut visit: impl FnMut(CheckedTurn<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let render = |index: usize,
                  turn: &Turn,
                  previous: Option<(&Request, &Rendered)>,
                  spare: Option<Rendered>| {
        renderer
            .render_reusing(&turn.request, previous, spare)
            .map_err(|source| session.turn_error(index, source))
    };
    // The turn before the range, rendered again: the first turn of the range is diffed with it.
    let mut previous = match range.start.checked_sub(1) {
        Some(before) => {
            let turn = session.turn(before)?;
            let rendered = render(before, &turn, None, None)?;
            Some((turn, rendered))
        }
        None => None,
    };
    let mut spare = None;
    for index in range {
        let turn = session.turn(index)?;
        let hint = previous
            .as_ref()
            .map(|(turn, rendered)| (&turn.request, rendered));
        let rendered = render(index, &turn, hint, spare.take())?;
        let previous_side = hint.map(|(request, rendered)| RenderedRequest { request, rendered });
        let current = RenderedRequest {
            request: &turn.request,
            rendered: &rendered,
        };
        let (diff, findings) = check_turn(
            previous_side,
            current,
            index,
            (renderer.tokenizer(), session, account),
            session.compacted_at(index),
        );
        visit(CheckedTurn {
            turn: &turn,
            rendered: &rendered,
            previous: hint.map(|(_, rendered)| rendered),
            diff,
            findings,
        })?;
        spare = previous
            .replace((turn, rendered))
            .map(|(_, rendered)| rendered);
    }
    Ok(())
}

/// Checks one request against the one before it (`None` for a first turn): the turn diff, and
/// the findings of the pair: the one that names the break when the later request does not
/// extend the earlier, the prefix check of the thinking blocks it sends back when they fail
/// it, and `instructions` its model does not cache (at the session's first such turn).
/// `locator` places the findings in the file the requests came from; `account` is the
/// Anthropic account the prefix check runs on.
pub fn check_pair(
    previous: Option<RenderedRequest<'_>>,
    current: RenderedRequest<'_>,
    index: usize,
    tokenizer: &Tokenizer,
    locator: &dyn Locator,
    account: Account,
) -> (TurnDiff, Vec<Diagnostic>) {
    check_turn(
        previous,
        current,
        index,
        (tokenizer, locator, account),
        false,
    )
}

/// [`check_pair`] for a turn of a session; `compacted`: the grouping read the turn as the
/// session's compaction, which its break is then named as.
fn check_turn(
    previous: Option<RenderedRequest<'_>>,
    current: RenderedRequest<'_>,
    index: usize,
    (tokenizer, locator, account): (&Tokenizer, &dyn Locator, Account),
    compacted: bool,
) -> (TurnDiff, Vec<Diagnostic>) {
    let diff = diff_turns(previous, current, index, tokenizer, locator);
    let place = |path: &PartPath| {
        locator
            .locate(index, path, 0)
            .map(|start| locator.span(start, start + 1))
    };
    let mut findings = Vec::new();
    if let Some(previous) = previous {
        findings.extend(diff.first_divergence.as_ref().and_then(|divergence| {
            let pair = TurnPair {
                index,
                previous: previous.request,
                current: current.request,
                previous_rendered: previous.rendered,
                current_rendered: current.rendered,
                divergence,
            };
            diagnose(&if compacted {
                RuleInput::Compaction(&pair)
            } else {
                RuleInput::TurnPair(&pair)
            })
        }));
        findings.extend(
            replayed_thinking(
                previous.request,
                current.request,
                current.rendered,
                index,
                account,
            )
            .or_else(|| {
                replayed_reasoning(previous.request, current.request, current.rendered, index)
            })
            .and_then(|issue| {
                diagnose(&RuleInput::Thinking {
                    span: place(&issue.block),
                    issue: &issue,
                })
            }),
        );
    }
    let model = current
        .request
        .body
        .get("model")
        .and_then(serde_json::Value::as_str);
    findings.extend(
        InstructionsUncached::uncached_tokens(previous.map(|previous| previous.request), current)
            .zip(model)
            .and_then(|(tokens, model)| {
                diagnose(&RuleInput::UncachedInstructions {
                    turn: index,
                    model,
                    tokens,
                    span: place(&PartPath::root().key("instructions")),
                })
            }),
    );
    (diff, findings)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;

    fn growing_session(turns: usize) -> SessionFile {
        let jsonl = kvlint_fixtures::growing_session_jsonl(turns);
        SessionFile::parse("s.jsonl".into(), Arc::from(jsonl)).unwrap()
    }

    #[test]
    fn ranges_cover_every_turn_in_order_and_balance_work() {
        let session = growing_session(40);
        for count in 1..=4 {
            let ranges = balanced_ranges(&session, count);
            assert_eq!(ranges.len(), count);
            assert_eq!(ranges.first().map(|range| range.start), Some(0));
            assert_eq!(ranges.last().map(|range| range.end), Some(40));
            assert!(ranges.windows(2).all(|pair| pair[0].end == pair[1].start));
        }
        // Later turns are longer: the first half of the work holds more than half the turns.
        let halves = balanced_ranges(&session, 2);
        assert!(halves[0].len() > 20 && halves[0].len() < 35, "{halves:?}");
    }

    #[test]
    fn a_session_checked_in_ranges_equals_one_checked_whole() {
        let session = growing_session(40);
        let renderer = Renderer::provider();
        let reused = |turns: &[TurnDiff]| -> Vec<usize> {
            turns.iter().map(|turn| turn.reused_tokens).collect()
        };
        let engine = Engine::Anthropic { model: None };
        let whole =
            check_range(&session, 0..40, &renderer, Some(&engine), Account::Unknown).unwrap();
        let mut in_ranges = Vec::new();
        for range in balanced_ranges(&session, 3) {
            let range =
                check_range(&session, range, &renderer, Some(&engine), Account::Unknown).unwrap();
            in_ranges.extend(range.turns);
        }
        assert_eq!(reused(&whole.turns), reused(&in_ranges));
        assert!(
            whole
                .turns
                .iter()
                .skip(1)
                .all(|turn| turn.reused_tokens > 0)
        );
        let checked = check_session(&session, &renderer, None).unwrap();
        assert_eq!(reused(&whole.turns), reused(&checked.turns));
    }
}
