//! Tokenizers: the embedded OpenAI `o200k_base` encoding, or a Hugging Face `tokenizer.json`.
//!
//! Agent prompts repeat: turn N+1 resends everything turn N had. Encodings are therefore
//! cached per chunk of text, keyed by its blake3 hash, so each distinct message is tokenized
//! once per session rather than once per turn. The cache keeps at most
//! [`CHUNK_CACHE_BUDGET`] bytes of encodings, forgetting the least recently used first.
//!
//! For a Hugging Face tokenizer, a rendered prompt is cut at its special tokens (`<|im_start|>`
//! and the like). The `tokenizers` crate splits those out before normalizing and
//! pre-tokenizing, so the text between two of them is encoded independently of the rest and
//! per-chunk encoding gives exactly the tokens of encoding the whole text.

use std::path::Path;
use std::sync::{Arc, Mutex};

use kvlint_request::error::InputError;

use crate::error::RenderError;

mod chunk_cache;
mod o200k;
mod splitter;
mod tokens;

pub use chunk_cache::CHUNK_CACHE_BUDGET;
pub use tokens::{Chunk, Tokens, TokensRebuild};

use chunk_cache::ChunkCache;
use splitter::{Splitter, splitter};
use tokens::chunk_offset;

enum Backend {
    /// `None` if its tables could not be built ([`o200k::o200k_base`]): it encodes nothing.
    O200k(Option<&'static bpe_openai::Tokenizer>),
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
    cache: Mutex<ChunkCache>,
    /// [`Tokenizer::added_special_tokens`], worked out on first use.
    added_special_tokens: std::sync::OnceLock<(String, String)>,
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
        Self::with_backend(Backend::O200k(o200k::o200k_base()), "o200k_base".into())
    }

    /// A Hugging Face `tokenizer.json`.
    pub fn from_file(path: &Path) -> Result<Self, InputError> {
        let display = path.display().to_string();
        let tokenizer =
            tokenizers::Tokenizer::from_file(path).map_err(|error| RenderError::Tokenizer {
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
            cache: Mutex::new(ChunkCache::new(CHUNK_CACHE_BUDGET)),
            added_special_tokens: std::sync::OnceLock::new(),
        }
    }

    /// The same tokenizer with an encoding cache of at most `budget` bytes.
    pub fn with_cache_budget(self, budget: usize) -> Self {
        Self {
            cache: Mutex::new(ChunkCache::new(budget)),
            ..self
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Encodes each piece on its own and concatenates the results: how a provider tokenizes
    /// a request message by message.
    pub fn encode_pieces<'a>(&self, pieces: impl IntoIterator<Item = &'a str>) -> Tokens {
        let mut tokens = Tokens::default();
        let mut offset = 0;
        for piece in pieces {
            tokens.push_piece(self.encode_piece(piece), offset);
            offset += piece.len();
        }
        tokens
    }

    /// Encodes a whole rendered prompt, parsing special tokens the way engines do.
    pub fn encode_text(&self, text: &str) -> Tokens {
        self.encode_text_after(text, None)
    }

    /// [`Tokenizer::encode_text`] knowing an earlier text and its tokens (the turn before):
    /// the chunks of the head both texts share are taken over as they are, not hashed and
    /// looked up again, so encoding a turn costs what it adds.
    pub fn encode_text_after(&self, text: &str, earlier: Option<(&str, &Tokens)>) -> Tokens {
        let Backend::HuggingFace {
            splitter: Some(splitter),
            ..
        } = &self.backend
        else {
            return self.encode_pieces([text]);
        };
        let (mut tokens, mut chunk_start) = earlier
            .and_then(|(earlier_text, earlier_tokens)| {
                splitter.shared_head(text, earlier_text, earlier_tokens)
            })
            .unwrap_or_default();
        let rest = aho_corasick::Input::new(text).range(chunk_start..);
        for special in splitter.matcher.find_iter(rest) {
            if chunk_start < special.start() {
                let chunk = self.encode_piece(&text[chunk_start..special.start()]);
                tokens.push(chunk, chunk_start);
            }
            let special_token = &splitter.tokens[special.pattern().as_usize()];
            tokens.push(Arc::clone(special_token), special.start());
            chunk_start = special.end();
        }
        if chunk_start < text.len() {
            tokens.push(self.encode_piece(&text[chunk_start..]), chunk_start);
        }
        tokens
    }

    /// Encodes the whole text in one call, without the chunk cache: the reference the cached
    /// path must equal.
    pub fn encode_uncached(&self, text: &str) -> Tokens {
        let mut tokens = Tokens::default();
        tokens.push(Arc::new(self.encode_chunk(text)), 0);
        tokens
    }

    /// How many distinct pieces of text the cache holds encodings of.
    pub fn cached_pieces(&self) -> usize {
        self.cache.lock().map_or(0, |cache| cache.entries.len())
    }

    /// The bytes of encodings the cache holds.
    pub fn cached_bytes(&self) -> usize {
        self.cache.lock().map_or(0, |cache| cache.bytes)
    }

    /// Forgets every cached encoding.
    pub fn clear_cache(&self) {
        if let Ok(mut cache) = self.cache.lock() {
            cache.clear();
        }
    }

    /// The text of the special tokens the tokenizer adds around an encoded text when asked to
    /// (its post-processor's, e.g. Llama 3's `<|begin_of_text|>` in front): before and after.
    pub fn added_special_tokens(&self) -> &(String, String) {
        self.added_special_tokens
            .get_or_init(|| self.work_out_added_special_tokens())
    }

    fn work_out_added_special_tokens(&self) -> (String, String) {
        let Backend::HuggingFace { tokenizer, .. } = &self.backend else {
            return (String::new(), String::new());
        };
        let encode = |add_special_tokens| {
            tokenizer
                .encode("a", add_special_tokens)
                .map(|encoding| encoding.get_ids().to_vec())
                .unwrap_or_default()
        };
        let (with, without) = (encode(true), encode(false));
        let Some(at) = with
            .windows(without.len().max(1))
            .position(|window| window == without.as_slice())
        else {
            return (String::new(), String::new());
        };
        let text = |ids: &[u32]| {
            ids.iter()
                .filter_map(|id| tokenizer.id_to_token(*id))
                .collect::<String>()
        };
        (text(&with[..at]), text(&with[at + without.len()..]))
    }

    /// The id of an added token of a Hugging Face tokenizer (`<|im_start|>`).
    pub fn added_token_id(&self, text: &str) -> Option<u32> {
        match &self.backend {
            Backend::O200k(_) => None,
            Backend::HuggingFace { tokenizer, .. } => tokenizer
                .get_added_vocabulary()
                .token_to_id(text, tokenizer.get_model()),
        }
    }

    pub fn decode(&self, ids: &[u32]) -> String {
        match &self.backend {
            Backend::O200k(tokenizer) => tokenizer.map_or_else(String::new, |tokenizer| {
                String::from_utf8_lossy(&tokenizer.bpe.decode_tokens(ids)).into_owned()
            }),
            Backend::HuggingFace { tokenizer, .. } => {
                tokenizer.decode(ids, false).unwrap_or_default()
            }
        }
    }

    /// The encoding of one piece of text, from the cache when it was seen before.
    pub fn encode_piece(&self, text: &str) -> Arc<Chunk> {
        let key = blake3::hash(text.as_bytes());
        if let Some(hit) = self.cache.lock().ok().and_then(|mut cache| cache.get(&key)) {
            return hit;
        }
        let encoded = Arc::new(self.encode_chunk(text));
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(key, Arc::clone(&encoded));
        }
        encoded
    }

    fn encode_chunk(&self, text: &str) -> Chunk {
        match &self.backend {
            Backend::O200k(None) => Chunk::default(),
            Backend::O200k(Some(tokenizer)) => {
                let ids = tokenizer.encode(text);
                let mut starts = Vec::with_capacity(ids.len());
                let mut offset = 0;
                for id in &ids {
                    starts.push(chunk_offset(offset));
                    offset += tokenizer.bpe.token_len(*id);
                }
                Chunk { ids, starts }
            }
            Backend::HuggingFace { tokenizer, .. } => match tokenizer.encode(text, false) {
                Ok(encoding) => Chunk {
                    ids: encoding.get_ids().to_vec(),
                    starts: encoding
                        .get_offsets()
                        .iter()
                        .map(|(start, _)| chunk_offset(*start))
                        .collect(),
                },
                Err(_) => Chunk::default(),
            },
        }
    }
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
        for (id, start) in tokens.iter() {
            let decoded = tokenizer.decode(&[id]);
            assert!(
                text[start..].starts_with(&decoded),
                "{decoded:?} at {start}"
            );
        }
        assert_eq!(tokenizer.decode(&tokens.ids()), text);
    }

    #[test]
    fn pieces_are_cached_and_offset() {
        let tokenizer = Tokenizer::o200k_base();
        let tokens = tokenizer.encode_pieces(["abc ", "abc "]);
        let half = tokens.len() / 2;
        let ids = tokens.ids();
        assert_eq!(ids[..half], ids[half..]);
        assert_eq!(tokens.start(half), Some(4));
        assert_eq!(tokenizer.cached_pieces(), 1);
    }

    #[test]
    fn the_cache_forgets_the_least_recently_used_beyond_its_budget() {
        let piece = |index: usize| format!("piece number {index} of a long session, ");
        let one_piece = Tokenizer::o200k_base();
        one_piece.encode_piece(&piece(0));
        let budget = 3 * one_piece.cached_bytes() + one_piece.cached_bytes() / 2;
        let tokenizer = Tokenizer::o200k_base().with_cache_budget(budget);
        let first: Vec<Arc<Chunk>> = (0..3)
            .map(|index| tokenizer.encode_piece(&piece(index)))
            .collect();
        assert_eq!(tokenizer.cached_pieces(), 3);
        // Piece 0 used again (a hit): piece 1 is now the least recently used, and goes first.
        assert!(Arc::ptr_eq(&tokenizer.encode_piece(&piece(0)), &first[0]));
        tokenizer.encode_piece(&piece(3));
        assert_eq!(tokenizer.cached_pieces(), 3);
        assert!(tokenizer.cached_bytes() <= budget);
        assert!(Arc::ptr_eq(&tokenizer.encode_piece(&piece(0)), &first[0]));
        let again = tokenizer.encode_piece(&piece(1));
        assert!(!Arc::ptr_eq(&again, &first[1]), "piece 1 was encoded again");
        assert_eq!(
            again.ids, first[1].ids,
            "forgetting never changes an encoding"
        );
    }

    #[test]
    fn common_prefix_skips_shared_chunks_and_compares_the_rest() {
        let tokenizer = Tokenizer::o200k_base();
        let before = tokenizer.encode_pieces(["You are terse. ", "Time: 10:00:01", " Bye."]);
        let after = tokenizer.encode_pieces(["You are terse. ", "Time: 10:00:07", " Bye."]);
        let expected = before
            .ids()
            .iter()
            .zip(&after.ids())
            .take_while(|(a, b)| a == b)
            .count();
        assert!(expected > tokenizer.encode_pieces(["You are terse. "]).len());
        assert_eq!(before.common_prefix_len(&after), expected);
        assert_eq!(before.common_prefix_len(&before), before.len());
        let longer =
            tokenizer.encode_pieces(["You are terse. ", "Time: 10:00:01", " Bye.", " More."]);
        assert_eq!(before.common_prefix_len(&longer), before.len());
    }

    #[test]
    fn follows_given_ids_from_a_token_and_counts_tokens_before_an_offset() {
        let tokenizer = Tokenizer::o200k_base();
        let tokens = tokenizer.encode_pieces(["abc ", "", "def", " More."]);
        let first = tokenizer.encode_pieces(["abc "]).len();
        let more = tokenizer.encode_pieces([" More."]).ids();
        let start = tokens.len() - more.len();
        assert_eq!(tokens.common_prefix_from(start, &more), more.len());
        assert_eq!(tokens.common_prefix_from(start, &[u32::MAX]), 0);
        assert_eq!(tokens.count_before(0), 0);
        assert_eq!(tokens.count_before(4), first);
        assert_eq!(tokens.count_before(7), start);
    }
}
