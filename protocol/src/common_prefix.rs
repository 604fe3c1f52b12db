//! The one common-prefix count: everything kvlint measures is how far two sequences (tokens,
//! bytes, hash chains, messages) agree from the start.

/// How many leading items two sequences share.
pub fn common_prefix_len<T: PartialEq>(
    a: impl IntoIterator<Item = T>,
    b: impl IntoIterator<Item = T>,
) -> usize {
    a.into_iter().zip(b).take_while(|(a, b)| a == b).count()
}

/// [`common_prefix_len`] of two slices, comparing whole blocks first (a `memcmp` for bytes):
/// for long texts that mostly agree.
pub fn common_slice_prefix_len<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    const BLOCK: usize = 256;
    let blocks = a
        .chunks(BLOCK)
        .zip(b.chunks(BLOCK))
        .take_while(|(a, b)| a == b)
        .count();
    let agreed = blocks * BLOCK;
    (agreed + common_prefix_len(&a[agreed.min(a.len())..], &b[agreed.min(b.len())..]))
        .min(a.len().min(b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_agree_as_items_do() {
        let long: Vec<u8> = (0..1000).map(|index| (index % 251) as u8).collect();
        for cut in [0, 1, 255, 256, 257, 511, 999] {
            let mut other = long.clone();
            other[cut] ^= 1;
            assert_eq!(common_slice_prefix_len(&long, &other), cut);
            assert_eq!(common_slice_prefix_len(&long, &long[..cut]), cut);
            assert_eq!(common_slice_prefix_len(&long[..cut], &long), cut);
        }
        assert_eq!(common_slice_prefix_len(&long, &long), long.len());
    }
}
