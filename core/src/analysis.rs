//! Turn diffs: how much of each turn's prompt the previous turn's cache covers, and where and
//! why the rest diverges.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use crate::cache::{
    BreakpointIssue, CacheTurn, Earlier, Engine, ModelFigures, Prediction, audit_breakpoints,
    generated_text, llamacpp_reuse,
};
use crate::diagnostic::Span;
use crate::error::InputError;
use crate::path::PartPath;
use crate::render::{Rendered, Renderer};
use crate::request::{Part, Request};
use crate::session::{SessionFile, Turn};
use crate::tokenize::Tokens;

/// Tokens shown on each side of a divergence.
const WINDOW_BEFORE: usize = 4;
const WINDOW_AFTER: usize = 8;

/// Where turn i stops being an extension of turn i−1.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// Index of the first token that differs (equal to the reused token count).
    pub token: usize,
    /// The request part of the later turn the first differing byte belongs to.
    pub part: PartPath,
    /// Byte offset of the first differing byte inside that part's text.
    pub byte: usize,
    pub line: usize,
    pub column: usize,
    /// The changed region in the file, when it can be placed.
    #[serde(skip)]
    pub span: Option<Span>,
    /// Decoded tokens around the divergence, previous turn then this turn.
    #[serde(skip)]
    pub previous_window: String,
    #[serde(skip)]
    pub current_window: String,
    /// Byte offset of the first differing byte in the rendered texts (equal in both).
    #[serde(skip)]
    pub rendered_byte: usize,
}

/// The analysis of one turn against the one before it.
#[derive(Clone, Debug, Serialize)]
pub struct TurnDiff {
    pub index: usize,
    pub prompt_tokens: usize,
    pub reused_tokens: usize,
    pub first_divergence: Option<Divergence>,
}

/// A session rendered and diffed turn by turn.
///
/// Turns are rendered one after the other, each against the one before; only the renderings
/// of turns that take part in a broken pair are kept for the rules.
pub struct SessionAnalysis<'a> {
    pub session: &'a SessionFile,
    pub turns: Vec<TurnDiff>,
    /// Renderings kept for broken pairs, by turn index.
    kept: BTreeMap<usize, Arc<Rendered>>,
    /// Each turn's tokens (shared chunks: cheap to keep) and what a cache sees of it.
    tokens: Vec<Tokens>,
    cache_turns: Vec<CacheTurn>,
    /// The tokens each turn's recorded response generated.
    generated: Vec<Vec<u32>>,
    /// Whether prompts end with the generation prompt, so that the next turn's rendering of
    /// the answer can continue right where the generated tokens did (engine mode).
    continues_into_answer: bool,
}

impl<'a> SessionAnalysis<'a> {
    pub fn new(session: &'a SessionFile, renderer: &Renderer) -> Result<Self, InputError> {
        Self::analyze(session, renderer, false)
    }

    /// Like [`SessionAnalysis::new`], also keeping what [`SessionAnalysis::predict_cache`] and
    /// [`SessionAnalysis::audit_breakpoints`] need.
    pub fn with_cache_view(
        session: &'a SessionFile,
        renderer: &Renderer,
    ) -> Result<Self, InputError> {
        Self::analyze(session, renderer, true)
    }

    fn analyze(
        session: &'a SessionFile,
        renderer: &Renderer,
        cache_view: bool,
    ) -> Result<Self, InputError> {
        let mut turns = Vec::with_capacity(session.turns.len());
        let mut kept = BTreeMap::new();
        let mut tokens = Vec::with_capacity(session.turns.len());
        let mut cache_turns = Vec::with_capacity(session.turns.len());
        let mut generated = Vec::with_capacity(session.turns.len());
        let mut previous: Option<Arc<Rendered>> = None;
        for (index, turn) in session.turns.iter().enumerate() {
            let previous_turn = index
                .checked_sub(1)
                .map(|previous| &session.turns[previous].request);
            let hint = previous_turn.zip(previous.as_deref());
            let current = renderer
                .render_after(&turn.request, hint)
                .map_err(|source| InputError::Turn {
                    path: session.path.clone(),
                    line: session.turn_line(turn),
                    turn: index,
                    source: Box::new(source) as Box<dyn miette::Diagnostic + Send + Sync>,
                })?;
            if cache_view {
                let generated_ids = turn
                    .response
                    .as_ref()
                    .and_then(generated_text)
                    .map(|text| renderer.tokenizer().encode_piece(&text).ids.clone())
                    .unwrap_or_default();
                cache_turns.push(CacheTurn::new(&turn.request, &current, generated_ids.len()));
                tokens.push(current.tokens.clone());
                generated.push(generated_ids);
            }
            let current = Arc::new(current);
            let diff = diff_turns(hint, (session, turn, &current), index, renderer);
            if let (Some(_), Some(previous)) = (&diff.first_divergence, &previous) {
                kept.insert(index - 1, Arc::clone(previous));
                kept.insert(index, Arc::clone(&current));
            }
            turns.push(diff);
            previous = Some(current);
        }
        Ok(Self {
            session,
            turns,
            kept,
            tokens,
            cache_turns,
            generated,
            continues_into_answer: renderer.ends_with_generation_prompt(),
        })
    }

    /// The pairs whose later turn does not extend the earlier one.
    pub fn broken_pairs(&self) -> impl Iterator<Item = TurnPair<'_>> {
        self.turns.iter().filter_map(move |diff| {
            let divergence = diff.first_divergence.as_ref()?;
            let index = diff.index;
            Some(TurnPair {
                index,
                previous: &self.session.turns[index - 1],
                current: &self.session.turns[index],
                previous_rendered: self.kept.get(&(index - 1))?,
                current_rendered: self.kept.get(&index)?,
                divergence,
            })
        })
    }

    /// What `engine` serves from cache for each turn, as recorded and as it would be if every
    /// turn extended the one before (a stable prefix). Empty unless the analysis was made
    /// [`SessionAnalysis::with_cache_view`].
    pub fn predict_cache(&self, engine: &Engine) -> Vec<TurnCachePrediction> {
        let keeps_generated = engine.keeps_generated_tokens() && self.continues_into_answer;
        let mut written: Vec<Vec<usize>> = Vec::with_capacity(self.tokens.len());
        let mut predictions = Vec::with_capacity(self.tokens.len());
        for (index, (tokens, turn)) in self.tokens.iter().zip(&self.cache_turns).enumerate() {
            let earlier: Vec<Earlier> = (0..index)
                .map(|before| {
                    let earlier_tokens = &self.tokens[before];
                    // A different cache salt isolates: nothing is shared (vLLM, SGLang).
                    let isolated = matches!(engine, Engine::Vllm { .. } | Engine::Sglang { .. })
                        && self.cache_turns[before].cache_salt != turn.cache_salt;
                    let common_prompt = if isolated {
                        0
                    } else {
                        earlier_tokens.common_prefix_len(tokens)
                    };
                    let generated = &self.generated[before];
                    let through_generated = keeps_generated
                        && common_prompt == earlier_tokens.len()
                        && !generated.is_empty();
                    let common_sequence = if through_generated {
                        common_prompt + tokens.common_prefix_from(common_prompt, generated)
                    } else {
                        common_prompt
                    };
                    Earlier {
                        prompt_tokens: earlier_tokens.len(),
                        common_prompt,
                        common_sequence,
                        written: written[before].clone(),
                    }
                })
                .collect();
            let mut earlier = earlier;
            if let (Engine::LlamaCpp { cache_reuse }, Some(previous)) = (engine, earlier.last_mut())
                && *cache_reuse > 0
            {
                // The slot holds the previous sequence; chunks of it past the common prefix
                // can be shifted into place.
                let mut slot = self.tokens[index - 1].ids();
                slot.extend_from_slice(&self.generated[index - 1]);
                previous.common_sequence = llamacpp_reuse(&slot, &tokens.ids(), *cache_reuse);
            }
            let recorded = engine.predict(turn, &earlier);
            // A stable prefix: the turn right before is sent again in full.
            let stable = earlier.last().map_or(recorded, |previous| {
                let full = Earlier {
                    common_prompt: previous.prompt_tokens.min(turn.prompt_tokens),
                    common_sequence: (previous.prompt_tokens
                        + self.generated[index - 1].len() * usize::from(keeps_generated))
                    .min(turn.prompt_tokens),
                    ..previous.clone()
                };
                engine.predict(turn, &[full])
            });
            written.push(engine.writes(turn));
            let generated_lost = earlier.last().and_then(|previous| {
                let generated = self.generated[index - 1].len();
                (keeps_generated
                    && previous.common_prompt == previous.prompt_tokens
                    && generated > 0)
                    .then(|| generated - (previous.common_sequence - previous.common_prompt))
                    .filter(|lost| *lost > 0 && previous.common_sequence < turn.prompt_tokens)
            });
            predictions.push(TurnCachePrediction {
                prompt_tokens: turn.prompt_tokens,
                recorded,
                stable,
                generated_not_reproduced: generated_lost,
                figures: engine.figures(turn),
            });
        }
        predictions
    }

    /// Problems with the session's Anthropic cache breakpoints, for a model minimum.
    pub fn audit_breakpoints(&self, engine: &Engine) -> Vec<BreakpointIssue> {
        if !matches!(engine, Engine::Anthropic { .. }) {
            return Vec::new();
        }
        let minimum = self
            .cache_turns
            .first()
            .and_then(|turn| engine.figures(turn))
            .map_or(1024, |figures| figures.min_cacheable_tokens);
        let common_with_next: Vec<usize> = self
            .tokens
            .windows(2)
            .map(|pair| pair[0].common_prefix_len(&pair[1]))
            .collect();
        audit_breakpoints(&self.cache_turns, &common_with_next, minimum)
    }

    /// Where a part of a turn is in the file.
    pub fn span_of(&self, turn: usize, part: &PartPath) -> Option<Span> {
        let turn = self.session.turns.get(turn)?;
        let start = self.session.locate(turn, part, 0)?;
        let position = self.session.line_column(start);
        Some(Span {
            line: position.line,
            column: position.column,
            end_line: position.line,
            end_column: position.column + 1,
            offset: start,
            len: 1,
        })
    }

    pub fn prompt_tokens(&self) -> usize {
        self.turns.iter().map(|turn| turn.prompt_tokens).sum()
    }

    pub fn reused_tokens(&self) -> usize {
        self.turns.iter().map(|turn| turn.reused_tokens).sum()
    }
}

/// One turn's predicted cache use.
#[derive(Clone, Debug)]
pub struct TurnCachePrediction {
    pub prompt_tokens: usize,
    pub recorded: Prediction,
    /// The prediction had the turn extended the one before.
    pub stable: Prediction,
    /// Generated tokens of the turn before that this turn's rendering of the answer does not
    /// reproduce (reasoning dropped, arguments re-serialized): the engine cached them in vain.
    pub generated_not_reproduced: Option<usize>,
    pub figures: Option<&'static ModelFigures>,
}

/// Diffs a turn against the one before it (`None` for a first turn). `current` names the
/// file the later turn is in, where the divergence is placed.
pub fn diff_turns(
    previous: Option<(&Request, &Rendered)>,
    (session, turn, current): (&SessionFile, &Turn, &Rendered),
    index: usize,
    renderer: &Renderer,
) -> TurnDiff {
    let reused_tokens = previous.map_or(0, |(_, previous)| {
        previous.tokens.common_prefix_len(&current.tokens)
    });
    let first_divergence = previous
        .filter(|(_, previous)| reused_tokens < previous.tokens.len())
        .map(|(previous_request, previous)| {
            divergence(
                session,
                (previous_request, turn),
                previous,
                current,
                reused_tokens,
                renderer.tokenizer(),
            )
        });
    TurnDiff {
        index,
        prompt_tokens: current.tokens.len(),
        reused_tokens,
        first_divergence,
    }
}

fn common_prefix_len<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(a, b)| a == b).count()
}

fn divergence(
    session: &SessionFile,
    (previous_request, turn): (&Request, &Turn),
    previous: &Rendered,
    current: &Rendered,
    reused_tokens: usize,
    tokenizer: &crate::tokenize::Tokenizer,
) -> Divergence {
    let token_start = current
        .tokens
        .start(reused_tokens)
        .unwrap_or(current.text.len());
    // The first differing token may share its first bytes; point at the first differing byte.
    let same_bytes = common_prefix_len(
        &previous.text.as_bytes()[token_start.min(previous.text.len())..],
        &current.text.as_bytes()[token_start.min(current.text.len())..],
    );
    let rendered_byte = floor_boundary(&current.text, token_start + same_bytes);
    let part_index = current
        .segment_at(rendered_byte)
        .map(|segment| segment.part);
    // Where this turn has only scaffolding (its message ends) but the earlier turn had
    // content there (text this turn cut, a block it dropped), name that content; where both
    // have scaffolding right after a content part, that part was cut or extended.
    let current_part = part_index.map(|index| &turn.request.parts[index]);
    let part_path = match current_part {
        Some(part) if part.kind.is_structural() => {
            let before = rendered_byte.checked_sub(1);
            content_part_at(previous, previous_request, rendered_byte)
                .or_else(|| {
                    before.and_then(|before| content_part_at(current, &turn.request, before))
                })
                .or_else(|| {
                    before.and_then(|before| content_part_at(previous, previous_request, before))
                })
                .map_or_else(|| part.path.clone(), |content| content.path.clone())
        }
        Some(part) => part.path.clone(),
        None => PartPath::default(),
    };
    // The offset inside this turn's text of that part, when it is rendered verbatim.
    let own_text = current.segments.iter().find(|segment| {
        let part = &turn.request.parts[segment.part];
        part.path == part_path
            && current.text.get(segment.range.clone()) == Some(part.text.as_str())
    });
    let byte = own_text.map_or(0, |segment| {
        rendered_byte.clamp(segment.range.start, segment.range.end) - segment.range.start
    });
    let change_end = own_text.map_or(byte, |segment| {
        let part = &turn.request.parts[segment.part];
        let previous_text = previous_request
            .parts
            .iter()
            .find(|previous_part| {
                previous_part.path == part.path && previous_part.kind == part.kind
            })
            .map_or("", |previous_part| previous_part.text.as_str());
        let change = change_between(previous_text, &part.text);
        (part.text.len() - change.kept_suffix.len())
            .max(byte + 1)
            .min(part.text.len())
    });
    let start = session.locate(turn, &part_path, byte);
    let end = session.locate(turn, &part_path, change_end);
    let position = start.map(|start| session.line_column(start));
    let span = start.zip(end).map(|(start, end)| {
        let end = end.max(start + 1);
        let from = session.line_column(start);
        let to = session.line_column(end);
        Span {
            line: from.line,
            column: from.column,
            end_line: to.line,
            end_column: to.column,
            offset: start,
            len: end - start,
        }
    });
    let window = |rendered: &Rendered| {
        let from = reused_tokens.saturating_sub(WINDOW_BEFORE);
        let to = (reused_tokens + WINDOW_AFTER).min(rendered.tokens.len());
        tokenizer.decode(&rendered.tokens.ids_in(from..to))
    };
    Divergence {
        token: reused_tokens,
        part: part_path,
        byte,
        line: position.map_or(0, |position| position.line),
        column: position.map_or(0, |position| position.column),
        span,
        previous_window: window(previous),
        current_window: window(current),
        rendered_byte,
    }
}

fn common_suffix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(a, b)| a == b)
        .count()
}

fn floor_boundary(text: &str, offset: usize) -> usize {
    crate::locate::floor_char_boundary(text, offset)
}

/// Two consecutive turns where the later one does not extend the earlier: what rules see.
pub struct TurnPair<'a> {
    /// Index of the later turn.
    pub index: usize,
    pub previous: &'a Turn,
    pub current: &'a Turn,
    pub previous_rendered: &'a Rendered,
    pub current_rendered: &'a Rendered,
    pub divergence: &'a Divergence,
}

/// The text that changed inside the diverging part: what the previous turn had and what
/// this turn has instead, between their common prefix and common suffix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change<'a> {
    pub before: &'a str,
    pub after: &'a str,
    /// The text both share after the change.
    pub kept_suffix: &'a str,
    /// The whole part text, previous and current.
    pub previous_text: &'a str,
    pub current_text: &'a str,
}

impl<'a> TurnPair<'a> {
    /// The part of the later turn where the divergence is: the content part it is named
    /// after when this turn has one, else what is rendered at the divergence.
    pub fn current_part(&self) -> Option<&'a Part> {
        content_part_named(&self.current.request, &self.divergence.part)
            .or_else(|| self.current_part_at_divergence())
    }

    fn current_part_at_divergence(&self) -> Option<&'a Part> {
        part_at(
            self.current_rendered,
            &self.current.request,
            self.divergence.rendered_byte,
        )
    }

    /// The part of the earlier turn where the divergence is, found the same way.
    pub fn previous_part(&self) -> Option<&'a Part> {
        content_part_named(&self.previous.request, &self.divergence.part)
            .or_else(|| self.previous_part_at_divergence())
    }

    fn previous_part_at_divergence(&self) -> Option<&'a Part> {
        part_at(
            self.previous_rendered,
            &self.previous.request,
            self.divergence.rendered_byte,
        )
    }

    /// What changed inside the diverging content part, when both turns have it: the part
    /// this turn diverges in, or, where this turn has only scaffolding there (its message
    /// ends), the earlier turn's part.
    pub fn change(&self) -> Option<Change<'a>> {
        let content = |part: &&Part| !part.kind.is_structural();
        let same = |parts: &'a [Part], like: &Part| {
            parts
                .iter()
                .find(|part| part.path == like.path && part.kind == like.kind)
        };
        let (previous, current) = match self.current_part().filter(content) {
            Some(current) => (same(&self.previous.request.parts, current)?, current),
            None => {
                let previous = self.previous_part().filter(content)?;
                (previous, same(&self.current.request.parts, previous)?)
            }
        };
        Some(change_between(&previous.text, &current.text))
    }

    /// The earlier turn's content parts after the one the divergence is in.
    fn previous_later_parts(&self) -> &'a [Part] {
        let parts = &self.previous.request.parts;
        let first_later = self
            .previous_part()
            .and_then(|part| {
                parts
                    .iter()
                    .position(|candidate| std::ptr::eq(candidate, part))
            })
            .map_or(parts.len(), |position| position + 1);
        &parts[first_later..]
    }

    /// What the earlier turn had from the divergence on, as texts: the changed text of the
    /// diverging part (or the whole part when this turn has none like it), then every later
    /// content part.
    pub fn previous_tail(&self) -> Vec<&'a str> {
        let mut tail = Vec::new();
        match (self.change(), self.previous_part()) {
            (Some(change), _) => tail.push(change.before),
            (None, Some(part)) if !part.kind.is_structural() => tail.push(part.text.as_str()),
            _ => {}
        }
        tail.extend(
            self.previous_later_parts()
                .iter()
                .filter(|part| !part.kind.is_structural())
                .map(|part| part.text.as_str()),
        );
        tail
    }

    /// This turn's rendered text from the divergence on.
    pub fn current_tail_text(&self) -> &'a str {
        self.current_rendered
            .text
            .get(self.divergence.rendered_byte..)
            .unwrap_or_default()
    }

    /// Whether content the earlier turn had after the divergence is sent again in this turn
    /// and must be recomputed. When it is not, the earlier turn's tail was volatile and is
    /// simply dropped: the recommended placement for per-turn content.
    pub fn recomputes_kept_content(&self) -> bool {
        if self
            .change()
            .is_some_and(|change| has_content(change.kept_suffix))
        {
            return true;
        }
        let previous = &self.previous.request;
        let current = &self.current.request;
        let divergence_part = self.current_part().map_or(0, |part| {
            current
                .parts
                .iter()
                .position(|candidate| std::ptr::eq(candidate, part))
                .unwrap_or(0)
        });
        let current_later: HashSet<&str> = current.parts[divergence_part..]
            .iter()
            .filter(|part| !part.kind.is_structural())
            .map(|part| part.text.as_str())
            .collect();
        let previous_last_message = previous.messages.len().checked_sub(1);
        let current_last_message = current.messages.len().checked_sub(1);
        self.previous_later_parts()
            .iter()
            .filter(|part| !part.kind.is_structural() && has_content(&part.text))
            .filter(|part| current_later.contains(part.text.as_str()))
            .any(|part| {
                // A trailing note sent again as the newest message is a moved tail, not kept
                // history: it was at the end before and is at the end again.
                let moved_tail =
                    part.message.is_some() && part.message == previous_last_message && {
                        current
                            .parts
                            .iter()
                            .rev()
                            .find(|candidate| candidate.text == part.text)
                            .is_some_and(|candidate| {
                                candidate.message.is_some()
                                    && candidate.message == current_last_message
                            })
                    };
                !moved_tail
            })
    }

    /// Tokens the earlier turn had past the divergence point.
    pub fn tokens_lost(&self) -> usize {
        self.previous_rendered
            .tokens
            .len()
            .saturating_sub(self.divergence.token)
    }
}

fn content_part_named<'a>(request: &'a Request, path: &PartPath) -> Option<&'a Part> {
    request
        .parts
        .iter()
        .find(|part| !part.kind.is_structural() && &part.path == path)
}

fn content_part_at<'a>(
    rendered: &Rendered,
    request: &'a Request,
    offset: usize,
) -> Option<&'a Part> {
    part_at(rendered, request, offset).filter(|part| !part.kind.is_structural())
}

fn part_at<'a>(rendered: &Rendered, request: &'a Request, offset: usize) -> Option<&'a Part> {
    rendered
        .segment_at(offset)
        .and_then(|segment| request.parts.get(segment.part))
}

/// The change between two versions of a text, cut at char boundaries.
pub fn change_between<'a>(previous: &'a str, current: &'a str) -> Change<'a> {
    let prefix = floor_boundary(
        previous,
        common_prefix_len(previous.as_bytes(), current.as_bytes()),
    );
    let max_suffix = previous.len().min(current.len()) - prefix;
    let suffix = common_suffix_len(
        &previous.as_bytes()[prefix..],
        &current.as_bytes()[prefix..],
    )
    .min(max_suffix);
    let previous_end = ceil_boundary(previous, previous.len() - suffix);
    let current_end = ceil_boundary(current, current.len() - suffix);
    Change {
        before: &previous[prefix..previous_end],
        after: &current[prefix..current_end],
        kept_suffix: &current[current_end..],
        previous_text: previous,
        current_text: current,
    }
}

fn ceil_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset += 1;
    }
    offset
}

/// Whether a text holds something a reader would call content: a word, not punctuation.
fn has_content(text: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric())
        .any(|word| word.chars().count() >= 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_is_cut_between_common_prefix_and_suffix() {
        let change = change_between("Time: 10:22:31. Be brief.", "Time: 10:22:32. Be brief.");
        assert_eq!((change.before, change.after), ("1", "2"));
        assert_eq!(change.kept_suffix, ". Be brief.");
        let change = change_between("Hi\n\nreminder: 5 left", "Hi");
        assert_eq!(
            (change.before, change.after, change.kept_suffix),
            ("\n\nreminder: 5 left", "", "")
        );
        let change = change_between("é", "è");
        assert_eq!((change.before, change.after), ("é", "è"));
    }
}
