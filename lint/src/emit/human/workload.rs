//! `kvlint workload`'s human output: the workload's sessions, reuse and distributions.

use kvlint_fleet::Distribution;
use kvlint_workload::WorkloadReport;
use kvlint_workload::words::grouped;

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        "0.0%".into()
    } else {
        format!("{:.1}%", 100.0 * part as f64 / whole as f64)
    }
}

fn distribution_line(name: &str, distribution: &Distribution) -> String {
    format!(
        "  {name:<24} p10 {:>9.1}  p50 {:>9.1}  p90 {:>9.1}  p99 {:>9.1}  max {:>9.1}  (n = {})\n",
        distribution.p10,
        distribution.p50,
        distribution.p90,
        distribution.p99,
        distribution.max,
        distribution.count
    )
}

/// `kvlint workload`'s report as a person reads it.
pub fn render_workload(report: &WorkloadReport, tracing_seconds: Option<f64>) -> String {
    let mut text = format!(
        "{} sessions, {} requests, {} prompt tokens, {} output tokens (rendered with {}, blocks of {} tokens)\n\n",
        report.sessions,
        report.requests,
        report.prompt_tokens,
        report.output_tokens,
        report.renderer,
        report.block_size
    );
    let whole = report.prompt_tokens;
    text.push_str(&format!(
        "  {:<40} {:>22} {:>22}\n",
        "reuse", "as recorded", "findings fixed"
    ));
    let row = |name: &str, recorded: u64, ideal: u64| {
        format!(
            "  {name:<40} {:>14} {:>7} {:>14} {:>7}\n",
            recorded,
            share(recorded, whole),
            ideal,
            share(ideal, whole)
        )
    };
    text.push_str(&row(
        "within a session (tokens)",
        report.reuse.within_session_tokens,
        report.ideal.within_session_tokens,
    ));
    text.push_str(&row(
        "within a session (whole blocks)",
        report.reuse.within_session_block_tokens,
        report.ideal.within_session_block_tokens,
    ));
    text.push_str(&row(
        "across sessions, beyond (whole blocks)",
        report.reuse.cross_session_block_tokens,
        report.ideal.cross_session_block_tokens,
    ));
    text.push_str(&format!(
        "  {:<40} {:>22} {:>22}\n",
        "prefix-sharing rate",
        format!("{:.1}%", 100.0 * report.reuse.prefix_sharing_rate),
        format!("{:.1}%", 100.0 * report.ideal.prefix_sharing_rate),
    ));
    text.push_str(&format!(
        "  {} prompt blocks, {} distinct: an infinite shared cache serves {:.1}% of them\n\n",
        grouped(report.prompt_blocks),
        grouped(report.distinct_blocks),
        100.0 * report.block_hit_rate
    ));
    for cost in &report.finding_costs {
        text.push_str(&format!(
            "  {}: {} turns, {} tokens the previous turn had made reusable\n",
            cost.rule, cost.turns, cost.tokens
        ));
    }
    if !report.finding_costs.is_empty() {
        text.push('\n');
    }
    text.push_str(&misses_lines(report));
    text.push_str(&distribution_line("input tokens", &report.input_tokens));
    text.push_str(&distribution_line(
        "new tokens per turn",
        &report.new_tokens,
    ));
    text.push_str(&distribution_line(
        "output tokens",
        &report.output_tokens_per_request,
    ));
    text.push_str(&distribution_line(
        "turns per session",
        &report.turns_per_session,
    ));
    if let Some(think) = &report.think_time {
        text.push_str(&distribution_line("between turns (s)", think));
    }
    if let Some(gaps) = &report.arrival_gaps {
        text.push_str(&distribution_line("between requests (s)", gaps));
    }
    if let Some(burstiness) = report.burstiness {
        text.push_str(&format!(
            "  arrival burstiness (gaps' coefficient of variation): {burstiness:.2}\n"
        ));
    }
    if let Some(seconds) = tracing_seconds {
        text.push_str(&format!(
            "\ntraced in {seconds:.2} s ({:.0} prompt tokens/s)\n",
            report.prompt_tokens as f64 / seconds.max(1e-9)
        ));
    }
    text
}

/// The misses, avoidable or not, in tokens and, with prices, in dollars.
fn misses_lines(report: &WorkloadReport) -> String {
    let misses = &report.misses;
    let whole = report.prompt_tokens;
    let dollars =
        |usd: Option<f64>| usd.map_or(String::new(), |usd| format!("  {}", usd_words(usd)));
    let priced = misses.dollars.as_ref();
    let mut text = format!(
        "  misses: {} tokens unavoidable ({}, sent for the first time){}
",
        grouped(misses.unavoidable_tokens),
        share(misses.unavoidable_tokens, whole),
        dollars(priced.map(|priced| priced.unavoidable)),
    );
    let expired = match misses.lifetime_seconds {
        Some(lifetime) => format!(
            ", {} expired (sent more than {} before)",
            grouped(misses.expired_tokens),
            kvlint_rules::words::duration(lifetime)
        ),
        None => String::new(),
    };
    text.push_str(&format!(
        "          {} tokens avoidable ({}: {} lost to the breaks above{expired}){}
",
        grouped(misses.avoidable_tokens()),
        share(misses.avoidable_tokens(), whole),
        grouped(misses.broken_tokens),
        dollars(priced.map(|priced| priced.avoidable)),
    ));
    if let Some(priced) = priced {
        text.push_str(&format!(
            "          read from the cache instead, the avoidable misses cost {} less ({} prices)\n",
            usd_words(priced.avoidable_savings),
            priced.prices.model
        ));
    }
    text.push('\n');
    text
}

/// Dollars to the cent, or to a hundredth of a cent under one dollar.
fn usd_words(usd: f64) -> String {
    if usd >= 1.0 {
        format!("${usd:.2}")
    } else {
        format!("${usd:.4}")
    }
}
