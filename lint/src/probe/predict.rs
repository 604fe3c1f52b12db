//! kvlint's prediction for a turn the probe replays against a self-hosted engine: the cache
//! model `kvlint check` uses ([`Engine::predict`] over a [`CacheTurn`] and what earlier
//! requests left in the cache), fed with the engine's own tokens.

use kvlint_core::cache::{CacheTurn, Earlier, Engine};
use kvlint_core::common_prefix_len;

/// Tokens `engine` serves from cache for a prompt of `tokens`, given the sequences its cache
/// holds, oldest first (the last is the request right before, which a llama.cpp slot keeps).
pub(crate) fn predicted_cached<'a>(
    engine: &Engine,
    tokens: &[u32],
    cached_sequences: impl IntoIterator<Item = &'a [u32]>,
) -> usize {
    // Self-hosted engines match on token ids alone: the prompt length is the one fact about
    // the turn their models read (blocks and breakpoints are the hosted APIs', which the
    // probe predicts from kvlint's rendering through `kvlint_rules::check_session`).
    let turn = CacheTurn {
        prompt_tokens: tokens.len(),
        ..CacheTurn::default()
    };
    let earlier: Vec<Earlier> = cached_sequences
        .into_iter()
        .map(|sequence| {
            let common = common_prefix_len(sequence, tokens);
            Earlier {
                prompt_tokens: sequence.len(),
                common_prompt: common,
                // The probe asks for one generated token and does not read it back: what the
                // cache matches is the prompts the engine was sent.
                common_sequence: common,
                written: Vec::new(),
            }
        })
        .collect();
    engine.predict(&turn, &earlier).cached
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engine_reads_the_cache_its_own_way() {
        let previous: Vec<u32> = (0..40).collect();
        let older: Vec<u32> = (0..60).collect();
        let tokens: Vec<u32> = (0..50).chain(100..110).collect();
        let cached = [older.as_slice(), previous.as_slice()];
        // One slot: only the request right before.
        assert_eq!(
            predicted_cached(&Engine::LlamaCpp { cache_reuse: 0 }, &tokens, cached),
            40
        );
        // A prefix cache: the longest match, in whole blocks.
        let vllm = Engine::Vllm {
            block: 16,
            speculative: false,
        };
        assert_eq!(predicted_cached(&vllm, &tokens, cached), 48);
        assert_eq!(
            predicted_cached(&Engine::Sglang { page: 1 }, &tokens, cached),
            50
        );
        assert_eq!(predicted_cached(&vllm, &tokens, []), 0);
    }
}
