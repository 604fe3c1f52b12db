//! What a whole session tells a hosted API's cache, beyond any one pair of turns: prompts
//! that never reach the model's minimum cacheable length, Anthropic requests that never mark
//! a breakpoint, OpenAI requests that never send a cache routing key.

use super::engine::Engine;
use super::turn::CacheTurn;

/// A session-level reason why a hosted API caches less than the session's repeated prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionIssue {
    /// Every prompt is shorter than the model's minimum cacheable length: nothing is cached,
    /// however stable the prompt.
    BelowMinimum {
        longest_prompt: usize,
        minimum: usize,
    },
    /// Anthropic: no request carries `cache_control` (no marked block, no top-level
    /// automatic breakpoint), while the turns share a prefix long enough to cache.
    NoBreakpoint {
        /// Prompt tokens each turn repeats from the one before, summed over the turns whose
        /// shared prefix reaches the minimum: what a breakpoint on the newest message would
        /// let the next turn read.
        repeated_tokens: usize,
        longest_prefix: usize,
        minimum: usize,
    },
    /// OpenAI: no request sends a cache routing key (`prompt_cache_key` or `user`), while
    /// the turns share a prefix long enough to cache.
    NoCacheRoutingKey { longest_prefix: usize },
}

/// Audits a session for what no pair of turns shows. `common_with_next[i]` is the number of
/// leading tokens turn `i+1` shares with turn `i`. Self-hosted engines have no minimum, no
/// breakpoints and no routing key: nothing to say.
pub fn audit_session(
    engine: &Engine,
    turns: &[CacheTurn],
    common_with_next: &[usize],
) -> Vec<SessionIssue> {
    let minimums: Vec<usize> = turns
        .iter()
        .filter_map(|turn| engine.min_cacheable_tokens(turn))
        .collect();
    if minimums.is_empty() || minimums.len() < turns.len() {
        return Vec::new();
    }
    let longest = turns
        .iter()
        .zip(&minimums)
        .max_by_key(|(turn, _)| turn.prompt_tokens);
    if let Some((longest, &minimum)) = longest
        && turns
            .iter()
            .zip(&minimums)
            .all(|(turn, minimum)| turn.prompt_tokens < *minimum)
    {
        return vec![SessionIssue::BelowMinimum {
            longest_prompt: longest.prompt_tokens,
            minimum,
        }];
    }
    // The prefixes a later turn could read: as long as its model's minimum.
    let cacheable: Vec<usize> = common_with_next
        .iter()
        .zip(&minimums[1..])
        .filter(|(common, minimum)| common >= minimum)
        .map(|(common, _)| *common)
        .collect();
    let Some(&longest_prefix) = cacheable.iter().max() else {
        return Vec::new();
    };
    match engine {
        Engine::Anthropic { .. } if turns.iter().all(|turn| turn.breakpoint_blocks.is_empty()) => {
            vec![SessionIssue::NoBreakpoint {
                repeated_tokens: cacheable.iter().sum(),
                longest_prefix,
                minimum: minimums[0],
            }]
        }
        Engine::OpenAi { .. } if turns.iter().all(|turn| turn.cache_routing_key.is_none()) => {
            vec![SessionIssue::NoCacheRoutingKey { longest_prefix }]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn turn(prompt_tokens: usize) -> CacheTurn {
        CacheTurn {
            prompt_tokens,
            block_ends: vec![prompt_tokens],
            ..CacheTurn::default()
        }
    }

    fn engine(spec: &str) -> Engine {
        spec.parse().unwrap()
    }

    #[test]
    fn prompts_under_the_minimum_are_one_issue_per_session() {
        // claude-haiku-4-5 caches from 4,096 tokens (core/data/models.toml).
        let haiku = engine("anthropic:claude-haiku-4-5");
        let turns = [turn(2000), turn(3000), turn(4000)];
        assert_eq!(
            audit_session(&haiku, &turns, &[2000, 3000]),
            vec![SessionIssue::BelowMinimum {
                longest_prompt: 4000,
                minimum: 4096
            }]
        );
        // One prompt at the minimum: something can be cached.
        let turns = [turn(2000), turn(4096)];
        assert_eq!(audit_session(&haiku, &turns, &[1000]), Vec::new());
        // Self-hosted engines have no minimum.
        assert_eq!(audit_session(&engine("vllm"), &turns, &[2000]), Vec::new());
    }

    #[test]
    fn anthropic_without_any_breakpoint_repeats_what_it_could_read() {
        let sonnet = engine("anthropic:claude-sonnet-4-5");
        let turns = [turn(1500), turn(2500), turn(3500)];
        // Turn 1 repeats 1,400 tokens of turn 0, turn 2 repeats 2,400 of turn 1.
        assert_eq!(
            audit_session(&sonnet, &turns, &[1400, 2400]),
            vec![SessionIssue::NoBreakpoint {
                repeated_tokens: 3800,
                longest_prefix: 2400,
                minimum: 1024
            }]
        );
        // A shared prefix under the minimum could not be cached anyway.
        assert_eq!(audit_session(&sonnet, &turns, &[900, 1000]), Vec::new());
        // One marked block anywhere in the session: the breakpoint audit speaks instead.
        let mut marked = turns.clone();
        marked[1].breakpoint_blocks = vec![0];
        assert_eq!(audit_session(&sonnet, &marked, &[1400, 2400]), Vec::new());
        // Other engines never read `cache_control`.
        let long = [turn(5000), turn(6000)];
        assert_eq!(audit_session(&engine("gemini"), &long, &[4900]), Vec::new());
    }

    #[test]
    fn openai_without_a_routing_key_is_named_and_a_key_silences_it() {
        let openai = engine("openai:gpt-4.1");
        let turns = [turn(1500), turn(2500)];
        assert_eq!(
            audit_session(&openai, &turns, &[1400]),
            vec![SessionIssue::NoCacheRoutingKey {
                longest_prefix: 1400
            }]
        );
        let mut keyed = turns.clone();
        keyed[0].cache_routing_key = Some("session-7".to_owned());
        assert_eq!(audit_session(&openai, &keyed, &[1400]), Vec::new());
        // Anthropic routes by nothing of the kind.
        assert_eq!(
            audit_session(&engine("anthropic"), &turns, &[1400]),
            vec![SessionIssue::NoBreakpoint {
                repeated_tokens: 1400,
                longest_prefix: 1400,
                minimum: 1024
            }]
        );
    }
}
