//! Cutting a rendered prompt at its special tokens, so each chunk between them is encoded
//! on its own with the same tokens as the whole text.

use std::sync::Arc;

use super::tokens::{Chunk, Tokens};
use crate::prefix::common_slice_prefix_len;

pub(super) struct Splitter {
    pub(super) matcher: aho_corasick::AhoCorasick,
    /// The one-token encoding of each special token, by pattern index.
    pub(super) tokens: Vec<Arc<Chunk>>,
    /// The byte length of each special token, by pattern index.
    lengths: Vec<usize>,
}

impl Splitter {
    /// The chunks of `earlier` that `text` is cut into as well, and the byte where they end:
    /// those up to the last special token starting at least the longest special token's
    /// length before the end of the bytes both texts share. Whether a special token starts
    /// at a byte is decided by the bytes up to that length after it, so up to there both
    /// texts are cut at the same places, and equal chunks encode to equal tokens.
    pub(super) fn shared_head(
        &self,
        text: &str,
        earlier: &str,
        tokens: &Tokens,
    ) -> Option<(Tokens, usize)> {
        let shared = common_slice_prefix_len(text.as_bytes(), earlier.as_bytes());
        let last_start = shared.checked_sub(self.matcher.max_pattern_len())?;
        let candidates = tokens
            .chunks
            .partition_point(|placed| placed.offset <= last_start);
        let (kept, special) = tokens.chunks[..candidates]
            .iter()
            .enumerate()
            .rev()
            .find_map(|(position, placed)| {
                self.tokens
                    .iter()
                    .position(|special| Arc::ptr_eq(special, &placed.chunk))
                    .map(|special| (position, special))
            })?;
        let end = tokens.chunks[kept].offset + self.lengths[special];
        let head = Tokens {
            chunks: tokens.chunks[..=kept].to_vec(),
            len: tokens.chunks[kept].first + 1,
        };
        Some((head, end))
    }
}

/// Finds the special tokens a text may be cut at without changing its encoding.
///
/// Tokens that strip neighbouring whitespace or must stand as a single word change their
/// surroundings, and a SentencePiece-style prefix space applies only to the text's start:
/// with either, the text is encoded whole.
pub(super) fn splitter(tokenizer: &tokenizers::Tokenizer) -> Option<Splitter> {
    let pre_tokenizer = serde_json::to_string(&tokenizer.get_pre_tokenizer()).ok()?;
    let normalizer = serde_json::to_string(&tokenizer.get_normalizer()).ok()?;
    if pre_tokenizer.contains("Metaspace") || normalizer.contains("Prepend") {
        return None;
    }
    let mut tokens: Vec<(String, u32)> = tokenizer
        .get_added_tokens_decoder()
        .into_iter()
        .filter(|(_, token)| {
            !token.normalized && !token.lstrip && !token.rstrip && !token.single_word
        })
        .filter(|(_, token)| !token.content.is_empty())
        .map(|(id, token)| (token.content, id))
        .collect();
    tokens.sort();
    let matcher = aho_corasick::AhoCorasick::builder()
        .match_kind(aho_corasick::MatchKind::LeftmostLongest)
        .build(tokens.iter().map(|(content, _)| content))
        .ok()?;
    Some(Splitter {
        matcher,
        lengths: tokens.iter().map(|(content, _)| content.len()).collect(),
        tokens: tokens
            .into_iter()
            .map(|(_, id)| {
                Arc::new(Chunk {
                    ids: vec![id],
                    starts: vec![0],
                })
            })
            .collect(),
    })
}
