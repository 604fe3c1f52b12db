//! What an engine serves from cache over a whole session: each turn's tokens kept as a cache
//! sees them, then every engine's prediction from the same view.

use std::time::Duration;

use kvlint_fleet::cache::llamacpp_reuse;
use serde_json::Value;

use super::{
    BreakpointIssue, CacheTurn, Earlier, Engine, ModelFigures, Opening, Prediction, ReportedUsage,
    SessionIssue, audit_breakpoints, audit_session, generated_text, reported_usage,
};
use kvlint_render::render::{Rendered, Renderer};
use kvlint_render::tokenize::Tokens;
use kvlint_request::request::Request;

/// A session's turns as a cache sees them: their tokens (shared chunks: cheap to keep), block
/// and breakpoint ends, and the tokens each recorded response generated.
#[derive(Default)]
pub struct SessionCacheView {
    tokens: Vec<Tokens>,
    cache_turns: Vec<CacheTurn>,
    generated: Vec<Vec<u32>>,
    /// The usage each recorded response reports.
    reported: Vec<Option<ReportedUsage>>,
    /// When each turn was sent (seconds since the Unix epoch), and how long the API keeps a
    /// prefix it read or wrote, as the turn asks ([`Engine::cache_ttl`]), when known.
    times: Vec<(Option<f64>, Option<Duration>)>,
    /// Whether prompts end with the generation prompt, so that the next turn's rendering of
    /// the answer can continue right where the generated tokens did (engine mode).
    continues_into_answer: bool,
}

impl SessionCacheView {
    pub fn new(renderer: &Renderer) -> Self {
        Self {
            continues_into_answer: renderer.ends_with_generation_prompt(),
            ..Self::default()
        }
    }

    /// Adds the next turn: its request, rendering and recorded response.
    pub fn push(
        &mut self,
        request: &Request,
        rendered: &Rendered,
        response: Option<&Value>,
        renderer: &Renderer,
    ) {
        let generated = response
            .and_then(generated_text)
            .map(|text| renderer.tokenizer().encode_piece(&text).ids.clone())
            .unwrap_or_default();
        self.cache_turns
            .push(CacheTurn::new(request, rendered, generated.len()));
        self.tokens.push(rendered.tokens.clone());
        self.generated.push(generated);
        self.reported.push(response.and_then(reported_usage));
    }

    /// When the turn last added was sent, and how long the API keeps its prefix: what
    /// [`Self::audit_idle`] reads.
    pub fn push_time(&mut self, time: Option<f64>, lifetime: Option<Duration>) {
        self.times
            .resize(self.tokens.len().saturating_sub(1), (None, None));
        self.times.push((time, lifetime));
    }

    /// Adds the turns of `later`, a view of the turns that follow this view's.
    pub fn append(&mut self, later: Self) {
        self.times.resize(self.tokens.len(), (None, None));
        self.tokens.extend(later.tokens);
        self.cache_turns.extend(later.cache_turns);
        self.generated.extend(later.generated);
        self.reported.extend(later.reported);
        self.times.extend(later.times);
    }

    /// The turns that came after the cache had let their session's prefix go: sent longer
    /// after the turn before than the API keeps a prefix, while `predictions` (which know no
    /// time) have them read it.
    pub fn audit_idle(
        &self,
        engine: &Engine,
        predictions: &[TurnCachePrediction],
    ) -> Option<IdleIssue> {
        engine.provider()?;
        let mut issue: Option<IdleIssue> = None;
        let turns = self.times.windows(2).zip(predictions.iter().skip(1));
        for (index, (pair, prediction)) in turns.enumerate().map(|(at, turn)| (at + 1, turn)) {
            let [(Some(before), _), (Some(now), Some(lifetime))] = *pair else {
                continue;
            };
            let gap = now - before;
            let expired = prediction.recorded.cached;
            if gap <= lifetime.as_secs_f64() || expired == 0 {
                continue;
            }
            // Written again instead of read.
            let dollars = prediction
                .figures
                .map(|figures| figures.rewrite_dollars(expired));
            let found = issue.get_or_insert(IdleIssue {
                turn: index,
                lifetime,
                dollars: Some(0.0),
                ..IdleIssue::default()
            });
            found.turns += 1;
            found.tokens += expired;
            found.dollars = found.dollars.zip(dollars).map(|(sum, more)| sum + more);
            found.longest_gap = found.longest_gap.max(gap);
            found.gaps.push((gap, expired));
        }
        let mut issue = issue?;
        if let Some(figures) = predictions.iter().find_map(|prediction| prediction.figures) {
            let written: usize = predictions
                .iter()
                .map(|prediction| prediction.recorded.written)
                .sum();
            issue.fixes = Some(IdleFixes::priced(&issue, engine, figures, written));
        }
        Some(issue)
    }

    /// The session's [`Opening`], for the cold-start audit across a recording's sessions
    /// ([`super::audit_cold_starts`]); `None` for a self-hosted engine or an empty session.
    pub fn opening(&self, engine: &Engine) -> Option<Opening> {
        engine.provider()?;
        let (turn, tokens) = self.cache_turns.first().zip(self.tokens.first())?;
        let times = self.times.iter().filter_map(|(time, _)| *time).collect();
        let lifetime = self.times.first().and_then(|(_, lifetime)| *lifetime);
        Some(Opening::new(engine, turn, &tokens.ids(), times, lifetime))
    }

    /// What `engine` serves from cache for each turn, as recorded and as it would be if every
    /// turn extended the one before (a stable prefix).
    pub fn predict(&self, engine: &Engine) -> Vec<TurnCachePrediction> {
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
                model: engine.model(turn).map(str::to_owned),
                reported: self.reported.get(index).copied().flatten(),
            });
        }
        predictions
    }

    /// Problems with the session's Anthropic cache breakpoints, for a model minimum, given
    /// the engine's `predictions` for the session ([`Self::predict`]).
    pub fn audit_breakpoints(
        &self,
        engine: &Engine,
        predictions: &[TurnCachePrediction],
    ) -> Vec<BreakpointIssue> {
        if !matches!(engine, Engine::Anthropic { .. }) {
            return Vec::new();
        }
        let minimum = self
            .cache_turns
            .first()
            .and_then(|turn| engine.figures(turn))
            .map_or(1024, |figures| figures.min_cacheable_tokens);
        let cached: Vec<usize> = predictions
            .iter()
            .map(|prediction| prediction.recorded.cached)
            .collect();
        audit_breakpoints(
            &self.cache_turns,
            &self.common_with_next(),
            &cached,
            minimum,
        )
    }

    /// What only the whole session shows a hosted API's cache: prompts under the model's
    /// minimum, no breakpoint (Anthropic), no cache routing key (OpenAI).
    pub fn audit_session(&self, engine: &Engine) -> Vec<SessionIssue> {
        audit_session(engine, &self.cache_turns, &self.common_with_next())
    }

    /// For each turn but the last, the leading tokens the next turn shares with it.
    fn common_with_next(&self) -> Vec<usize> {
        self.tokens
            .windows(2)
            .map(|pair| pair[0].common_prefix_len(&pair[1]))
            .collect()
    }
}

/// Turns of a session that came after the cache's lifetime: the prefix the turn before left
/// was gone, and written again.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IdleIssue {
    /// The first such turn.
    pub turn: usize,
    /// How many.
    pub turns: usize,
    /// Prompt tokens they would have read from the cache, written again instead.
    pub tokens: usize,
    /// What that cost more, in USD, at the model's prices (`None` without them).
    pub dollars: Option<f64>,
    /// How long the API kept the prefix (the first such turn's).
    pub lifetime: Duration,
    /// Seconds between each such turn and the one before, and the prompt tokens it wrote
    /// again, in turn order.
    pub gaps: Vec<(f64, usize)>,
    pub longest_gap: f64,
    /// What each fix would save and cost, at the model's prices.
    pub fixes: Option<IdleFixes>,
}

/// The two fixes for idle gaps, priced over the session as recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct IdleFixes {
    /// The longer lifetime the API sells (`None` where it sells none): its length, the gaps
    /// it covers, what their turns would save reading instead of writing, and what every
    /// write of the session would cost more.
    pub longer: Option<LongerLifetime>,
    /// A small request every `interval` while the session waits, sized from the gaps: it pays
    /// for itself on gaps up to `up_to_gap` seconds (its reads of the prefix cost less than
    /// the write they avoid).
    pub keep_alive: KeepAlive,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LongerLifetime {
    pub lifetime: Duration,
    pub gaps: usize,
    pub saved: f64,
    pub extra: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct KeepAlive {
    pub interval: Duration,
    pub up_to_gap: f64,
    pub gaps: usize,
    pub saved: f64,
    pub cost: f64,
}

impl IdleFixes {
    /// Prices both fixes: `written`, the tokens the session's turns wrote to the cache.
    fn priced(issue: &IdleIssue, engine: &Engine, figures: &ModelFigures, written: usize) -> Self {
        let write = figures.write_price();
        let per_token = |price: f64| price / 1_000_000.0;
        // Read instead of written again.
        let saving = |tokens: usize| figures.rewrite_dollars(tokens);
        let longer = engine.longer_lifetime(figures).map(|(lifetime, multiple)| {
            let covered = issue
                .gaps
                .iter()
                .filter(|(gap, _)| *gap <= lifetime.as_secs_f64());
            LongerLifetime {
                lifetime,
                gaps: covered.clone().count(),
                saved: covered.map(|(_, tokens)| saving(*tokens)).sum(),
                extra: written as f64 * per_token(multiple * figures.input - write).max(0.0),
            }
        });
        // A ping a little before the lifetime ends reads the prefix at the cached price.
        let interval = issue
            .lifetime
            .saturating_sub(Duration::from_secs(30))
            .max(Duration::from_secs(60));
        let pings = |gap: f64| (gap / interval.as_secs_f64()).floor();
        let pays = |(gap, tokens): &(f64, usize)| {
            pings(*gap) * *tokens as f64 * per_token(figures.cached_input) < saving(*tokens)
        };
        // Worth it while the pings cost less than the write: up to this many of them.
        let break_even = (write - figures.cached_input) / figures.cached_input.max(f64::EPSILON);
        let kept: Vec<&(f64, usize)> = issue.gaps.iter().filter(|gap| pays(gap)).collect();
        let keep_alive = KeepAlive {
            interval,
            up_to_gap: (break_even.floor() + 1.0) * interval.as_secs_f64(),
            gaps: kept.len(),
            saved: kept.iter().map(|(_, tokens)| saving(*tokens)).sum(),
            cost: kept
                .iter()
                .map(|(gap, tokens)| pings(*gap) * *tokens as f64 * per_token(figures.cached_input))
                .sum(),
        };
        Self { longer, keep_alive }
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
    /// The model the turn uses, for hosted APIs (the figures may be its provider's default).
    pub model: Option<String>,
    /// What the recorded response says was served from cache, when it says.
    pub reported: Option<ReportedUsage>,
}
