//! Text on the pages: escaped for HTML, and numbers for reading (grouped thousands, three
//! significant digits, shares as percentages).

pub(crate) use crate::words::grouped;

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `text` with each run of four digits or more grouped (`4000 blocks`: `4,000 blocks`), a
/// decimal fraction's digits aside.
pub fn grouped_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        let (before, from) = rest.split_at(start);
        out.push_str(before);
        let end = from
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(from.len());
        let (digits, after) = from.split_at(end);
        match digits.parse::<u64>() {
            Ok(number) if digits.len() >= 4 && !out.ends_with('.') => {
                out.push_str(&grouped(number))
            }
            _ => out.push_str(digits),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `value` for reading: a whole number from 100 on (grouped), else three significant digits
/// without trailing zeros (`0.25`, `1.5`, `12.5`).
pub fn readable(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    let sign = if value < 0.0 { "-" } else { "" };
    let magnitude = value.abs();
    if magnitude >= 99.5 {
        return format!("{sign}{}", grouped(magnitude.round() as u64));
    }
    if magnitude == 0.0 {
        return "0".into();
    }
    let decimals = (2 - magnitude.log10().floor() as i32).clamp(0, 12) as usize;
    let text = format!("{magnitude:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("{sign}{text}")
}

pub fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_grouped() {
        assert_eq!(grouped(4_958_720), "4,958,720");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(0), "0");
        assert_eq!(readable(12_345.4), "12,345");
        assert_eq!(readable(0.01), "0.01");
        assert_eq!(readable(1.5), "1.5");
        assert_eq!(readable(10.0), "10");
        assert_eq!(readable(0.000123), "0.000123");
        assert_eq!(grouped_in("4000 blocks"), "4,000 blocks");
        assert_eq!(
            grouped_in("2 × 65536 tokens, 1.2345"),
            "2 × 65,536 tokens, 1.2345"
        );
    }
}
