//! The one common-prefix count: everything kvlint measures is how far two sequences (tokens,
//! bytes, hash chains) agree from the start.

/// How many leading items two sequences share.
pub fn common_prefix_len<T: PartialEq>(
    a: impl IntoIterator<Item = T>,
    b: impl IntoIterator<Item = T>,
) -> usize {
    a.into_iter().zip(b).take_while(|(a, b)| a == b).count()
}
