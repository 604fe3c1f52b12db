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

use crate::error::InputError;
use crate::prefix::{common_prefix_len, common_slice_prefix_len};

/// The encoding of one chunk of text: token ids and the byte offset each starts at, in the
/// chunk (32 bits: a chunk of 4 GiB or more counts every later token at its 4 GiB mark).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    pub ids: Vec<u32>,
    pub starts: Vec<u32>,
}

/// An offset in a chunk, as a chunk keeps it.
fn chunk_offset(offset: usize) -> u32 {
    u32::try_from(offset).unwrap_or(u32::MAX)
}

/// The tokens of a text, as a sequence of shared chunks.
///
/// Consecutive turns share most of their chunks (the same `Arc`), so comparing two turns
/// skips shared chunks whole, and building a turn's tokens costs one pointer per chunk,
/// not one copy per token.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    chunks: Vec<PlacedChunk>,
    len: usize,
}

/// A chunk with the byte offset of its text and the index of its first token.
#[derive(Clone, Debug)]
struct PlacedChunk {
    chunk: Arc<Chunk>,
    offset: usize,
    first: usize,
}

impl Tokens {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn push(&mut self, chunk: Arc<Chunk>, offset: usize) {
        if !chunk.ids.is_empty() {
            self.push_piece(chunk, offset);
        }
    }

    /// Appends the encoding of one piece, even an empty one, so that in tokens built piece
    /// by piece chunk `k` is the encoding of piece `k`.
    pub fn push_piece(&mut self, chunk: Arc<Chunk>, offset: usize) {
        let count = chunk.ids.len();
        self.chunks.push(PlacedChunk {
            chunk,
            offset,
            first: self.len,
        });
        self.len += count;
    }

    /// The encoding of piece `index` of tokens built with [`Tokens::push_piece`].
    pub fn piece(&self, index: usize) -> Option<&Arc<Chunk>> {
        self.chunks.get(index).map(|placed| &placed.chunk)
    }

    /// Starts building other tokens piece by piece in these tokens' place: a piece pushed
    /// where these hold the same chunk already is kept as it is, so rebuilding the tokens of
    /// a turn two turns later rewrites only what changed.
    pub fn rebuild(mut self) -> TokensRebuild {
        self.len = 0;
        TokensRebuild {
            tokens: self,
            pieces: 0,
        }
    }

    /// The position of the chunk holding token `index`, and the index inside it.
    fn locate(&self, index: usize) -> Option<(usize, usize)> {
        let position = self
            .chunks
            .partition_point(|placed| placed.first <= index)
            .checked_sub(1)?;
        (index < self.len).then(|| (position, index - self.chunks[position].first))
    }

    /// The byte offset where token `index` starts.
    pub fn start(&self, index: usize) -> Option<usize> {
        self.locate(index).map(|(position, inner)| {
            let placed = &self.chunks[position];
            placed.offset + placed.chunk.starts[inner] as usize
        })
    }

    /// All ids, in order.
    pub fn ids(&self) -> Vec<u32> {
        self.ids_in(0..self.len)
    }

    /// The ids of a range of tokens.
    pub fn ids_in(&self, range: std::ops::Range<usize>) -> Vec<u32> {
        self.iter()
            .skip(range.start)
            .take(range.len())
            .map(|(id, _)| id)
            .collect()
    }

    /// All byte offsets where tokens start, in order.
    pub fn starts(&self) -> Vec<usize> {
        self.iter().map(|(_, start)| start).collect()
    }

    /// (id, start) of every token.
    pub fn iter(&self) -> impl Iterator<Item = (u32, usize)> + '_ {
        self.chunks
            .iter()
            .flat_map(|PlacedChunk { chunk, offset, .. }| {
                chunk
                    .ids
                    .iter()
                    .zip(&chunk.starts)
                    .map(move |(id, start)| (*id, offset + *start as usize))
            })
    }

    /// The number of leading tokens two texts share.
    pub fn common_prefix_len(&self, other: &Tokens) -> usize {
        // Shared chunks at the same token index are equal without looking inside.
        let shared = self
            .chunks
            .iter()
            .zip(&other.chunks)
            .take_while(|(a, b)| Arc::ptr_eq(&a.chunk, &b.chunk) && a.first == b.first)
            .count();
        let first = self
            .chunks
            .get(shared)
            .map_or(self.len, |placed| placed.first);
        first + common_prefix_len(self.ids_after(shared), other.ids_after(shared))
    }

    fn ids_after(&self, first_chunk: usize) -> impl Iterator<Item = u32> + '_ {
        self.chunks[first_chunk.min(self.chunks.len())..]
            .iter()
            .flat_map(|placed| placed.chunk.ids.iter().copied())
    }

    /// How many tokens start before byte `offset`.
    pub fn count_before(&self, offset: usize) -> usize {
        let position = self.chunks.partition_point(|placed| placed.offset < offset);
        let Some(placed) = position
            .checked_sub(1)
            .map(|position| &self.chunks[position])
        else {
            return 0;
        };
        placed.first
            + placed
                .chunk
                .starts
                .partition_point(|start| placed.offset + (*start as usize) < offset)
    }

    /// How many of `ids` follow, one for one, from token `start` on.
    pub fn common_prefix_from(&self, start: usize, ids: &[u32]) -> usize {
        let Some((position, inner)) = self.locate(start) else {
            return 0;
        };
        let first = self.chunks[position].chunk.ids[inner..].iter().copied();
        common_prefix_len(
            first.chain(self.ids_after(position + 1)),
            ids.iter().copied(),
        )
    }
}

/// Tokens being built piece by piece in the place of earlier ones ([`Tokens::rebuild`]).
pub struct TokensRebuild {
    tokens: Tokens,
    /// Pieces pushed so far; the chunks after them are the earlier tokens'.
    pieces: usize,
}

impl TokensRebuild {
    /// Whether the next piece is there already: `chunk`, at byte `offset`, after the same
    /// tokens.
    pub fn holds_next(&self, chunk: &Arc<Chunk>, offset: usize) -> bool {
        self.tokens.chunks.get(self.pieces).is_some_and(|placed| {
            Arc::ptr_eq(&placed.chunk, chunk)
                && placed.offset == offset
                && placed.first == self.tokens.len
        })
    }

    /// Appends the encoding of one piece, even an empty one: chunk `k` of the tokens built
    /// is the encoding of piece `k`.
    pub fn push_piece(&mut self, chunk: &Arc<Chunk>, offset: usize) {
        let first = self.tokens.len;
        match self.tokens.chunks.get_mut(self.pieces) {
            Some(placed) => {
                if !Arc::ptr_eq(&placed.chunk, chunk) {
                    placed.chunk = Arc::clone(chunk);
                }
                placed.offset = offset;
                placed.first = first;
            }
            None => self.tokens.chunks.push(PlacedChunk {
                chunk: Arc::clone(chunk),
                offset,
                first,
            }),
        }
        self.tokens.len += chunk.ids.len();
        self.pieces += 1;
    }

    pub fn finish(mut self) -> Tokens {
        self.tokens.chunks.truncate(self.pieces);
        self.tokens
    }
}

struct Splitter {
    matcher: aho_corasick::AhoCorasick,
    /// The one-token encoding of each special token, by pattern index.
    tokens: Vec<Arc<Chunk>>,
    /// The byte length of each special token, by pattern index.
    lengths: Vec<usize>,
}

impl Splitter {
    /// The chunks of `earlier` that `text` is cut into as well, and the byte where they end:
    /// those up to the last special token starting at least the longest special token's
    /// length before the end of the bytes both texts share. Whether a special token starts
    /// at a byte is decided by the bytes up to that length after it, so up to there both
    /// texts are cut at the same places, and equal chunks encode to equal tokens.
    fn shared_head(&self, text: &str, earlier: &str, tokens: &Tokens) -> Option<(Tokens, usize)> {
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

enum Backend {
    O200k(&'static bpe_openai::Tokenizer),
    HuggingFace {
        tokenizer: Box<tokenizers::Tokenizer>,
        /// Finds the special tokens a text can be cut at; `None` when cutting is unsafe.
        splitter: Option<Splitter>,
    },
}

/// The most bytes of encodings a tokenizer's cache keeps.
pub const CHUNK_CACHE_BUDGET: usize = 256 << 20;

/// A tokenizer with a per-chunk encoding cache.
pub struct Tokenizer {
    backend: Backend,
    name: String,
    cache: Mutex<ChunkCache>,
    /// [`Tokenizer::added_special_tokens`], worked out on first use.
    added_special_tokens: std::sync::OnceLock<(String, String)>,
}

/// Encodings by the hash of their text, the least recently used forgotten first once they
/// take more than the budget.
struct ChunkCache {
    entries: lru::LruCache<blake3::Hash, Arc<Chunk>>,
    bytes: usize,
    budget: usize,
}

impl ChunkCache {
    fn new(budget: usize) -> Self {
        Self {
            entries: lru::LruCache::unbounded(),
            bytes: 0,
            budget,
        }
    }

    fn get(&mut self, key: &blake3::Hash) -> Option<Arc<Chunk>> {
        self.entries.get(key).cloned()
    }

    fn insert(&mut self, key: blake3::Hash, chunk: Arc<Chunk>) {
        self.bytes += chunk.size();
        if let Some((_, replaced)) = self.entries.push(key, chunk) {
            self.bytes -= replaced.size();
        }
        while self.bytes > self.budget {
            let Some((_, forgotten)) = self.entries.pop_lru() else {
                break;
            };
            self.bytes -= forgotten.size();
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

impl Chunk {
    /// The bytes this encoding takes.
    fn size(&self) -> usize {
        size_of::<Self>()
            + self.ids.capacity() * size_of::<u32>()
            + self.starts.capacity() * size_of::<u32>()
    }
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
            Backend::O200k(tokenizer) => {
                String::from_utf8_lossy(&tokenizer.bpe.decode_tokens(ids)).into_owned()
            }
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
            Backend::O200k(tokenizer) => {
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
