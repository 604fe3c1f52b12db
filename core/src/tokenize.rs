//! Tokenizers: the embedded OpenAI `o200k_base` encoding, or a Hugging Face `tokenizer.json`.
//!
//! Agent prompts repeat: turn N+1 resends everything turn N had. Encodings are therefore
//! cached per chunk of text, keyed by its blake3 hash, so each distinct message is tokenized
//! once per session rather than once per turn.
//!
//! For a Hugging Face tokenizer, a rendered prompt is cut at its special tokens (`<|im_start|>`
//! and the like). The `tokenizers` crate splits those out before normalizing and
//! pre-tokenizing, so the text between two of them is encoded independently of the rest and
//! per-chunk encoding gives exactly the tokens of encoding the whole text.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::error::InputError;

/// Token ids with the byte offset where each token starts in the encoded text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    pub ids: Vec<u32>,
    pub starts: Vec<usize>,
}

impl Tokens {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Appends `chunk`, whose offsets are relative to a text starting at `offset`.
    fn extend(&mut self, chunk: &Tokens, offset: usize) {
        self.ids.extend_from_slice(&chunk.ids);
        self.starts
            .extend(chunk.starts.iter().map(|start| start + offset));
    }

    /// The index of the token that covers byte `offset`.
    pub fn token_at(&self, offset: usize) -> usize {
        self.starts
            .partition_point(|start| *start <= offset)
            .saturating_sub(1)
    }
}

struct Splitter {
    matcher: aho_corasick::AhoCorasick,
    ids: Vec<u32>,
}

enum Backend {
    O200k(&'static bpe_openai::Tokenizer),
    HuggingFace {
        tokenizer: Box<tokenizers::Tokenizer>,
        /// Finds the special tokens a text can be cut at; `None` when cutting is unsafe.
        splitter: Option<Splitter>,
    },
}

/// A tokenizer with a per-chunk encoding cache.
pub struct Tokenizer {
    backend: Backend,
    name: String,
    cache: Mutex<HashMap<blake3::Hash, Arc<Tokens>>>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("name", &self.name)
            .finish()
    }
}

impl Tokenizer {
    /// OpenAI's `o200k_base`, embedded in the binary: no download, works offline.
    pub fn o200k_base() -> Self {
        Self::with_backend(
            Backend::O200k(bpe_openai::o200k_base()),
            "o200k_base".into(),
        )
    }

    /// A Hugging Face `tokenizer.json`.
    pub fn from_file(path: &Path) -> Result<Self, InputError> {
        let display = path.display().to_string();
        let tokenizer =
            tokenizers::Tokenizer::from_file(path).map_err(|error| InputError::Tokenizer {
                path: display.clone(),
                message: error.to_string(),
            })?;
        let splitter = splitter(&tokenizer);
        let name = path
            .parent()
            .and_then(Path::file_name)
            .filter(|_| {
                path.file_name()
                    .is_some_and(|file| file == "tokenizer.json")
            })
            .unwrap_or(path.as_os_str())
            .to_string_lossy()
            .into_owned();
        Ok(Self::with_backend(
            Backend::HuggingFace {
                tokenizer: Box::new(tokenizer),
                splitter,
            },
            name,
        ))
    }

    fn with_backend(backend: Backend, name: String) -> Self {
        Self {
            backend,
            name,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is the embedded OpenAI encoding, whose counts for other providers are
    /// approximations.
    pub fn is_embedded(&self) -> bool {
        matches!(self.backend, Backend::O200k(_))
    }

    /// Encodes each piece on its own and concatenates the results: how a provider tokenizes
    /// a request message by message.
    pub fn encode_pieces<'a>(&self, pieces: impl IntoIterator<Item = &'a str>) -> Tokens {
        let mut tokens = Tokens::default();
        let mut offset = 0;
        for piece in pieces {
            tokens.extend(&self.encode_cached(piece), offset);
            offset += piece.len();
        }
        tokens
    }

    /// Encodes a whole rendered prompt, parsing special tokens the way engines do.
    pub fn encode_text(&self, text: &str) -> Tokens {
        let Backend::HuggingFace {
            splitter: Some(splitter),
            ..
        } = &self.backend
        else {
            return self.encode_pieces([text]);
        };
        let mut tokens = Tokens::default();
        let mut chunk_start = 0;
        for special in splitter.matcher.find_iter(text) {
            if chunk_start < special.start() {
                tokens.extend(
                    &self.encode_cached(&text[chunk_start..special.start()]),
                    chunk_start,
                );
            }
            tokens.ids.push(splitter.ids[special.pattern().as_usize()]);
            tokens.starts.push(special.start());
            chunk_start = special.end();
        }
        if chunk_start < text.len() {
            tokens.extend(&self.encode_cached(&text[chunk_start..]), chunk_start);
        }
        tokens
    }

    /// Encodes the whole text in one call, without the chunk cache: the reference the cached
    /// path must equal, and the baseline of the benchmark.
    pub fn encode_uncached(&self, text: &str) -> Tokens {
        self.encode_uncached_inner(text)
    }

    pub fn decode(&self, ids: &[u32]) -> String {
        match &self.backend {
            Backend::O200k(tokenizer) => {
                String::from_utf8_lossy(&tokenizer.bpe.decode_tokens(ids)).into_owned()
            }
            Backend::HuggingFace { tokenizer, .. } => {
                tokenizer.decode(ids, false).unwrap_or_default()
            }
        }
    }

    fn encode_cached(&self, text: &str) -> Arc<Tokens> {
        let key = blake3::hash(text.as_bytes());
        if let Some(hit) = self
            .cache
            .lock()
            .ok()
            .and_then(|cache| cache.get(&key).cloned())
        {
            return hit;
        }
        let encoded = Arc::new(self.encode_uncached_inner(text));
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(key, Arc::clone(&encoded));
        }
        encoded
    }

    fn encode_uncached_inner(&self, text: &str) -> Tokens {
        match &self.backend {
            Backend::O200k(tokenizer) => {
                let ids = tokenizer.encode(text);
                let mut starts = Vec::with_capacity(ids.len());
                let mut offset = 0;
                for id in &ids {
                    starts.push(offset);
                    offset += tokenizer.bpe.token_len(*id);
                }
                Tokens { ids, starts }
            }
            Backend::HuggingFace { tokenizer, .. } => match tokenizer.encode(text, false) {
                Ok(encoding) => Tokens {
                    ids: encoding.get_ids().to_vec(),
                    starts: encoding
                        .get_offsets()
                        .iter()
                        .map(|(start, _)| *start)
                        .collect(),
                },
                Err(_) => Tokens::default(),
            },
        }
    }
}

/// Finds the special tokens a text may be cut at without changing its encoding.
///
/// Tokens that strip neighbouring whitespace or must stand as a single word change their
/// surroundings, and a SentencePiece-style prefix space applies only to the text's start:
/// with either, the text is encoded whole.
fn splitter(tokenizer: &tokenizers::Tokenizer) -> Option<Splitter> {
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
        ids: tokens.into_iter().map(|(_, id)| id).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn o200k_offsets_point_at_each_token() {
        let tokenizer = Tokenizer::o200k_base();
        let text = "Hello, world! Today is 2025-01-01.";
        let tokens = tokenizer.encode_text(text);
        assert!(tokens.len() > 5);
        for (index, start) in tokens.starts.iter().enumerate() {
            let decoded = tokenizer.decode(&tokens.ids[index..=index]);
            assert!(
                text[*start..].starts_with(&decoded),
                "{decoded:?} at {start}"
            );
        }
        assert_eq!(tokenizer.decode(&tokens.ids), text);
    }

    #[test]
    fn pieces_are_cached_and_offset() {
        let tokenizer = Tokenizer::o200k_base();
        let tokens = tokenizer.encode_pieces(["abc ", "abc "]);
        let half = tokens.len() / 2;
        assert_eq!(tokens.ids[..half], tokens.ids[half..]);
        assert_eq!(tokens.starts[half], 4);
        assert_eq!(
            tokenizer.cache.lock().map(|cache| cache.len()).unwrap_or(0),
            1
        );
        assert_eq!(tokens.token_at(5), half);
    }
}
