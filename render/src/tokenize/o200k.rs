//! OpenAI's `o200k_base` encoding, from `bpe-openai`.
//!
//! Natively it is the crate's own tokenizer, whose tables its build script precomputes and
//! embeds (about 32 MB). That is over the upload limit of the edge runtimes a WebAssembly build
//! is for (Cloudflare Workers: 10 MB compressed), so in WebAssembly the tables are built at
//! first use instead, from the encoding's tiktoken file (`data/o200k_base.tiktoken.gz`, 1.7 MB,
//! the file `bpe-openai` builds its own from, MIT-licensed as OpenAI's tiktoken publishes it):
//! `BytePairEncoding::from_dictionary` as `bpe-openai`'s `build.rs` calls it, and the
//! pre-tokenizer `bpe-openai`'s `o200k_base()` uses (`src/lib.rs`, `BPE_O200K_BASE`; its
//! patterns are private there). That costs about two seconds on the first encoding.
//!
//! The copy is checked natively: the tests build it on every target and compare it with
//! `bpe_openai::o200k_base()`, the whole vocabulary and the tokens of the fixtures' texts.

/// The encoding, or `None` if its tables could not be built (never, for the embedded file the
/// tests check).
#[cfg(not(target_family = "wasm"))]
pub(super) fn o200k_base() -> Option<&'static bpe_openai::Tokenizer> {
    Some(bpe_openai::o200k_base())
}

#[cfg(target_family = "wasm")]
pub(super) fn o200k_base() -> Option<&'static bpe_openai::Tokenizer> {
    static BUILT: std::sync::LazyLock<Option<bpe_openai::Tokenizer>> =
        std::sync::LazyLock::new(from_tiktoken);
    BUILT.as_ref()
}

/// The hash factor `bpe-openai`'s build script gives `from_dictionary` for `o200k_base` (one
/// that hashes its tokens without collisions).
#[cfg(any(target_family = "wasm", test))]
const HASH_FACTOR: u64 = 17_846_336_922_010_275_747;

/// Builds the encoding's tables from its tiktoken file.
#[cfg(any(target_family = "wasm", test))]
fn from_tiktoken() -> Option<bpe_openai::Tokenizer> {
    use bpe::byte_pair_encoding::{BytePairEncoding, read_tiktoken};
    use std::io::Read;

    let mut tiktoken = String::new();
    flate2::read::GzDecoder::new(&include_bytes!("../../data/o200k_base.tiktoken.gz")[..])
        .read_to_string(&mut tiktoken)
        .ok()?;
    let tokens = read_tiktoken(&tiktoken).ok()?;
    let encoding = BytePairEncoding::from_dictionary(tokens, Some(HASH_FACTOR));
    // tiktoken's o200k pattern, its negative look-ahead `\s+(?!\S)` rewritten as a one-character
    // look-ahead pattern (`true`), as bpe-openai writes it.
    let words = [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+$",
    ]
    .join("|");
    bpe_openai::Tokenizer::new_lookahead(
        encoding,
        &[(&words, false), (r"\s+\s", true), (r"\s+", false)],
        false,
    )
    .ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Texts that exercise every branch of the pre-tokenizer: cased words and contractions,
    /// digits in threes, punctuation runs with newlines and slashes, whitespace before a word
    /// and at the end, scripts without case, marks, emoji.
    const EDGES: &[&str] = &[
        "Hello, World! I'm here; you'RE not. They'LL've gone.\n",
        "HTTPServer parseJSON XMLHttpRequest camelCase snake_case kebab-case",
        "1234567 3.14159 2026-12-03T08:07:01Z 0x1F 1,000,000",
        "path/to/file.rs:12:5 https://example.com/a?b=c&d=e ```rust\n}\n```",
        "  leading and trailing  \n\n\n\t\tindented\r\nwindows\r\n   ",
        "日本語のテキスト、中文文本，한국어 텍스트 العربية עברית हिन्दी",
        "naïve café Ångström e\u{301} Z\u{30c}\u{327} 😀🎉 👩‍👩‍👧 {\"json\": [1, 2]}",
        "",
        " ",
        "\n",
    ];

    #[test]
    fn the_tables_built_from_the_tiktoken_file_are_bpe_openais() {
        let built = from_tiktoken().unwrap();
        let embedded = bpe_openai::o200k_base();
        assert_eq!(built.bpe.num_tokens(), embedded.bpe.num_tokens());
        for id in 0..u32::try_from(embedded.bpe.num_tokens()).unwrap() {
            assert_eq!(
                built.bpe.token_bytes(id),
                embedded.bpe.token_bytes(id),
                "token {id}"
            );
        }
        let sessions = kvlint_fixtures::corpus_sessions();
        assert!(!sessions.is_empty(), "no corpus sessions");
        let mut texts: Vec<String> = EDGES.iter().map(|text| (*text).to_owned()).collect();
        for session in sessions {
            let file = std::fs::read_to_string(&session).unwrap();
            for line in file.lines() {
                strings(&serde_json::from_str(line).unwrap(), &mut texts);
            }
            // The raw file too: JSON with its escapes, as long texts.
            texts.push(file);
        }
        for text in &texts {
            assert_eq!(
                built.encode(text.as_str()),
                embedded.encode(text.as_str()),
                "{text:?}"
            );
        }
    }

    /// Every string of a JSON value, keys included.
    fn strings(value: &serde_json::Value, found: &mut Vec<String>) {
        match value {
            serde_json::Value::String(text) => found.push(text.clone()),
            serde_json::Value::Array(items) => items.iter().for_each(|item| strings(item, found)),
            serde_json::Value::Object(entries) => {
                for (key, item) in entries {
                    found.push(key.clone());
                    strings(item, found);
                }
            }
            _ => {}
        }
    }
}
