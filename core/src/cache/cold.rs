//! Sessions that start cold: the opening request of a session (or a sub-agent) shares a long
//! prefix with an earlier session of the same recording and the same model, a system prompt
//! and tools every session of the application sends, yet the hosted API serves none or part
//! of it, because no cache entry covers it (Anthropic writes entries only at breakpoints,
//! read back from a breakpoint at most 20 blocks on) or because the entry expired before the
//! session started. Not an edit: no pair of turns of one session shows it.
//!
//! Each session is summed up by its [`Opening`] (from [`super::SessionCacheView::opening`]):
//! its first request's prefix hashes at each block end, the entries it writes, and when its
//! turns were sent. [`audit_cold_starts`] walks the openings in order, each looked up in a
//! table of the prefixes the sessions before it opened with: linear in the blocks.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::time::Duration;

use kvlint_request::path::PartPath;

use super::{CacheTurn, Earlier, Engine, ModelFigures, Prediction};

/// What a session's opening request leaves in a hosted API's cache and could read there.
#[derive(Clone, Debug)]
pub struct Opening {
    turn: CacheTurn,
    /// The hash of the prompt up to each block end (the model's name first: caches are per
    /// model), in block order.
    hashes: Vec<u64>,
    /// Token positions of the entries the request writes (breakpoint models).
    writes: Vec<usize>,
    /// When each turn of the session was sent, where recorded, in turn order.
    times: Vec<f64>,
    lifetime: Option<Duration>,
    figures: Option<&'static ModelFigures>,
}

impl Opening {
    /// The opening of a session whose first request is `turn`, rendered as `ids`.
    pub(super) fn new(
        engine: &Engine,
        turn: &CacheTurn,
        ids: &[u32],
        times: Vec<f64>,
        lifetime: Option<Duration>,
    ) -> Self {
        let mut hasher = DefaultHasher::new();
        hasher.write(engine.model(turn).unwrap_or_default().as_bytes());
        let mut hashes = Vec::with_capacity(turn.block_ends.len());
        let mut hashed = 0;
        for end in &turn.block_ends {
            let end = (*end).min(ids.len());
            for id in &ids[hashed.min(end)..end] {
                hasher.write_u32(*id);
            }
            hashed = hashed.max(end);
            hashes.push(hasher.clone().finish());
        }
        Self {
            turn: turn.clone(),
            hashes,
            writes: engine.writes(turn),
            times,
            lifetime,
            figures: engine.figures(turn),
        }
    }

    fn start(&self) -> Option<f64> {
        self.times.first().copied()
    }

    /// The last time the session sent its opening prefix at or before `time`: each of its
    /// turns resends it.
    fn last_use_before(&self, time: f64) -> Option<f64> {
        self.times
            .iter()
            .copied()
            .filter(|at| *at <= time)
            .reduce(f64::max)
    }
}

/// A session that started cold although an earlier session had sent its opening prefix.
#[derive(Clone, Debug, PartialEq)]
pub struct ColdStartIssue {
    /// The session (an index into the openings given).
    pub session: usize,
    /// The earlier session whose opening it shares.
    pub shared_with: usize,
    /// Whether the earlier session was still sending when this one started (a sub-agent, or
    /// a parallel session), rather than done before it.
    pub while_running: bool,
    /// Leading tokens the two openings share, up to the end of `block`.
    pub shared_tokens: usize,
    /// The last block the two share, in this session's first request.
    pub block: PartPath,
    /// Tokens the API serves this session's first request from the earlier session's entries.
    pub cached: usize,
    /// Tokens it would serve with the fix.
    pub reachable: usize,
    pub cause: ColdCause,
    /// Whether no entry covers the whole shared prefix (said beside an expiry: a keep-alive
    /// alone would not serve all of it).
    pub entry_missing: bool,
    /// What the miss cost more than a read, in USD (written at the write price, else the
    /// input price, instead of read), at the model's prices.
    pub dollars: Option<f64>,
}

impl ColdStartIssue {
    /// Tokens written again that could have been read.
    pub fn tokens(&self) -> usize {
        self.reachable - self.cached
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ColdCause {
    /// The earlier session's entry had expired: its last use was `gap` seconds before this
    /// session started, longer than the API keeps it.
    Expired { gap: f64, lifetime: Duration },
    /// No entry covers the shared prefix (Anthropic: no breakpoint at its end, nor within
    /// 20 blocks after it in this request).
    NoEntry,
}

/// What the sessions of one recording read from each other's cache entries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpeningAudit {
    /// The sessions that start cold, in order.
    pub cold_starts: Vec<ColdStartIssue>,
    /// The sessions whose first request reads an earlier session's entries: the session and
    /// what the API serves and writes for that request.
    pub reads: Vec<(usize, Prediction)>,
}

/// What the sessions of one recording read from each other's entries, and which start cold;
/// `openings` in the recording's order (a session without one, for another engine or without
/// turns, is `None`).
pub fn audit_cold_starts(engine: &Engine, openings: &[Option<Opening>]) -> OpeningAudit {
    let mut order: Vec<usize> = (0..openings.len())
        .filter(|index| openings[*index].is_some())
        .collect();
    // By start time where every opening has one, else as recorded.
    if order
        .iter()
        .all(|index| openings[*index].as_ref().and_then(Opening::start).is_some())
    {
        order.sort_by(|a, b| {
            let start = |index: &usize| openings[*index].as_ref().and_then(Opening::start);
            start(a)
                .partial_cmp(&start(b))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
    }
    // Each prefix hash, with the latest session that opened with it.
    let mut opened: HashMap<u64, usize> = HashMap::new();
    let mut audit = OpeningAudit::default();
    for index in order {
        let Some(opening) = &openings[index] else {
            continue;
        };
        let shared = opening
            .hashes
            .iter()
            .enumerate()
            .rev()
            .find_map(|(block, hash)| opened.get(hash).map(|earlier| (block, *earlier)));
        if let Some((block, earlier_index)) = shared
            && let Some(earlier) = &openings[earlier_index]
        {
            let (read, cold) =
                cold_start(engine, (index, opening), (earlier_index, earlier), block);
            if let Some(read) = read.filter(|read| read.cached > 0) {
                audit.reads.push((index, read));
            }
            audit.cold_starts.extend(cold);
        }
        for hash in &opening.hashes {
            opened.insert(*hash, index);
        }
    }
    audit.cold_starts.sort_by_key(|cold| cold.session);
    audit.reads.sort_by_key(|(session, _)| *session);
    audit
}

/// What `opening` reads from `earlier`'s entries, with which it shares blocks up to `block`,
/// and whether it starts cold.
fn cold_start(
    engine: &Engine,
    (session, opening): (usize, &Opening),
    (shared_with, earlier): (usize, &Opening),
    block: usize,
) -> (Option<Prediction>, Option<ColdStartIssue>) {
    let turn = &opening.turn;
    let Some(shared_tokens) = turn.block_ends.get(block).copied() else {
        return (None, None);
    };
    let from_earlier = |written: Vec<usize>| Earlier {
        prompt_tokens: earlier.turn.prompt_tokens,
        common_prompt: shared_tokens,
        common_sequence: shared_tokens,
        written,
    };
    let entries: Vec<usize> = earlier
        .writes
        .iter()
        .copied()
        .filter(|position| *position <= shared_tokens)
        .collect();
    let read = engine.predict(turn, &[from_earlier(entries)]);
    let readable = read.cached;
    // The fix, where the application places the entries (Anthropic, OpenAI's breakpoint
    // models): an entry at the end of the shared prefix, which both sessions write and read
    // (the same code sends both). Elsewhere the API places them: no entry to add.
    let places_entries = match engine {
        Engine::Anthropic { .. } => true,
        Engine::OpenAi { .. } => opening.figures.is_some_and(|figures| figures.breakpoints),
        _ => false,
    };
    let reachable = if places_entries {
        let mut fixed = turn.clone();
        if !fixed.breakpoint_blocks.contains(&block) {
            fixed.breakpoint_blocks.push(block);
        }
        engine
            .predict(&fixed, &[from_earlier(vec![shared_tokens])])
            .cached
    } else {
        readable
    };
    let (start, lifetime) = (opening.start(), earlier.lifetime);
    let expired = start.zip(lifetime).and_then(|(start, lifetime)| {
        let gap = start - earlier.last_use_before(start)?;
        (gap > lifetime.as_secs_f64()).then_some(ColdCause::Expired { gap, lifetime })
    });
    let entry_missing = readable < reachable;
    let cause = match expired {
        Some(cause) if reachable > 0 => cause,
        _ if entry_missing => ColdCause::NoEntry,
        _ => return (Some(read), None),
    };
    let cached = match cause {
        ColdCause::Expired { .. } => 0,
        ColdCause::NoEntry => readable,
    };
    let dollars = opening
        .figures
        .map(|figures| figures.rewrite_dollars(reachable - cached));
    let while_running =
        start.is_some_and(|start| earlier.times.last().is_some_and(|last| *last > start));
    let read = match cause {
        ColdCause::Expired { .. } => None,
        ColdCause::NoEntry => Some(read),
    };
    let issue = ColdStartIssue {
        session,
        shared_with,
        while_running,
        shared_tokens,
        block: turn
            .block_paths
            .get(block)
            .cloned()
            .unwrap_or_else(PartPath::root),
        cached,
        reachable,
        cause,
        entry_missing,
        dollars,
    };
    (read, Some(issue))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// An opening of `tokens` ids whose first `shared` are the same in every session, its
    /// blocks ending at `shared` and at the end, sent at `times`.
    fn opening(
        engine: &Engine,
        session: u32,
        tokens: usize,
        shared: usize,
        times: Vec<f64>,
    ) -> Option<Opening> {
        let ids: Vec<u32> = (0..tokens)
            .map(|index| {
                if index < shared {
                    index as u32
                } else {
                    100_000 * session + index as u32
                }
            })
            .collect();
        let turn = CacheTurn {
            prompt_tokens: tokens,
            block_ends: vec![shared, tokens],
            block_paths: vec![
                PartPath::root().key("system"),
                PartPath::root().key("messages"),
            ],
            model: Some("gpt-4o".into()),
            ..CacheTurn::default()
        };
        let lifetime = Some(Duration::from_secs(300));
        Some(Opening::new(engine, &turn, &ids, times, lifetime))
    }

    /// OpenAI places its own entries: a second session within the lifetime reads the shared
    /// prefix (in its 128-token steps), one after it starts cold (expired), and without times
    /// nothing can be said to have expired.
    #[test]
    fn an_api_that_places_its_entries_starts_cold_only_after_the_lifetime() {
        let engine: Engine = "openai:gpt-4o".parse().unwrap();
        let within = [
            opening(&engine, 1, 3000, 2000, vec![0.0, 60.0]),
            opening(&engine, 2, 2500, 2000, vec![200.0]),
        ];
        let audit = audit_cold_starts(&engine, &within);
        assert!(audit.cold_starts.is_empty());
        assert_eq!(audit.reads.len(), 1);
        assert_eq!((audit.reads[0].0, audit.reads[0].1.cached), (1, 1920));

        let after = [
            opening(&engine, 1, 3000, 2000, vec![0.0, 60.0]),
            opening(&engine, 2, 2500, 2000, vec![60.0 + 600.0]),
        ];
        let audit = audit_cold_starts(&engine, &after);
        assert!(audit.reads.is_empty());
        let [cold] = audit.cold_starts.as_slice() else {
            panic!("{audit:?}")
        };
        assert_eq!(
            (cold.session, cold.shared_with, cold.tokens()),
            (1, 0, 1920)
        );
        assert!(matches!(cold.cause, ColdCause::Expired { gap, .. } if gap == 600.0));
        assert!(!cold.while_running && !cold.entry_missing);
        assert_eq!(cold.block.to_string(), "system");

        let untimed = [
            opening(&engine, 1, 3000, 2000, Vec::new()),
            opening(&engine, 2, 2500, 2000, Vec::new()),
        ];
        assert!(audit_cold_starts(&engine, &untimed).cold_starts.is_empty());
    }

    /// Sessions of another model share no cache: their prefixes never match.
    #[test]
    fn caches_are_per_model() {
        let engine: Engine = "openai".parse().unwrap();
        let mut other = opening(&engine, 2, 2500, 2000, vec![660.0]).unwrap();
        other.turn.model = Some("gpt-4.1".into());
        let ids: Vec<u32> = (0..2500).map(|index| index as u32).collect();
        let other = Opening::new(&engine, &other.turn, &ids, vec![660.0], None);
        let openings = [opening(&engine, 1, 3000, 2000, vec![0.0]), Some(other)];
        let audit = audit_cold_starts(&engine, &openings);
        assert!(audit.cold_starts.is_empty() && audit.reads.is_empty());
    }
}
