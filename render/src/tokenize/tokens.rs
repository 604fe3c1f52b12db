//! Tokens: a text's encoding as a sequence of shared chunks, and their rebuilding in place.

use std::sync::Arc;

use crate::prefix::common_prefix_len;

/// The encoding of one chunk of text: token ids and the byte offset each starts at, in the
/// chunk (32 bits: a chunk of 4 GiB or more counts every later token at its 4 GiB mark).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    pub ids: Vec<u32>,
    pub starts: Vec<u32>,
}

/// An offset in a chunk, as a chunk keeps it.
pub(super) fn chunk_offset(offset: usize) -> u32 {
    u32::try_from(offset).unwrap_or(u32::MAX)
}

/// The tokens of a text, as a sequence of shared chunks.
///
/// Consecutive turns share most of their chunks (the same `Arc`), so comparing two turns
/// skips shared chunks whole, and building a turn's tokens costs one pointer per chunk,
/// not one copy per token.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    pub(super) chunks: Vec<PlacedChunk>,
    pub(super) len: usize,
}

/// A chunk with the byte offset of its text and the index of its first token.
#[derive(Clone, Debug)]
pub(super) struct PlacedChunk {
    pub(super) chunk: Arc<Chunk>,
    pub(super) offset: usize,
    pub(super) first: usize,
}

impl Tokens {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn push(&mut self, chunk: Arc<Chunk>, offset: usize) {
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

impl Chunk {
    /// The bytes this encoding takes.
    pub(super) fn size(&self) -> usize {
        size_of::<Self>()
            + self.ids.capacity() * size_of::<u32>()
            + self.starts.capacity() * size_of::<u32>()
    }
}
