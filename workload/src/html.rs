//! The workload report as one self-contained HTML page: the reuse figures, the distributions
//! as histograms and the reuse over a session's age as a line, drawn as inline SVG (no script,
//! no request for anything), and the simulations run with it, if any.

use std::fmt::Write;

use crate::report::WorkloadReport;
use crate::simulate::SimulationResult;
use crate::stats::Distribution;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const WIDTH: f64 = 520.0;
const HEIGHT: f64 = 180.0;
const MARGIN: f64 = 36.0;

/// A histogram of `distribution`, titled.
fn histogram(id: &str, title: &str, unit: &str, distribution: &Distribution) -> String {
    let mut svg = String::new();
    let most = distribution
        .bins
        .iter()
        .map(|(_, count)| *count)
        .max()
        .unwrap_or(0)
        .max(1);
    let width = (WIDTH - 2.0 * MARGIN) / distribution.bins.len().max(1) as f64;
    let _ = write!(
        svg,
        r#"<figure id="{id}"><figcaption>{title} <small>(n = {count}, p50 {p50:.0}, p90 {p90:.0}, p99 {p99:.0} {unit})</small></figcaption><svg class="plot" role="img" aria-label="{title}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">"#,
        title = escape(title),
        count = distribution.count,
        p50 = distribution.p50,
        p90 = distribution.p90,
        p99 = distribution.p99,
    );
    for (index, (bound, count)) in distribution.bins.iter().enumerate() {
        let height = (HEIGHT - 2.0 * MARGIN) * *count as f64 / most as f64;
        let x = MARGIN + index as f64 * width;
        let y = HEIGHT - MARGIN - height;
        let _ = write!(
            svg,
            r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{:.1}" height="{height:.1}"><title>up to {bound:.0} {unit}: {count}</title></rect>"#,
            (width - 1.0).max(0.5),
        );
    }
    let _ = write!(
        svg,
        r#"<line x1="{MARGIN}" y1="{base}" x2="{right}" y2="{base}" class="axis"/><text x="{MARGIN}" y="{label}">{min:.0}</text><text x="{right}" y="{label}" text-anchor="end">{max:.0} {unit}</text></svg></figure>"#,
        base = HEIGHT - MARGIN,
        right = WIDTH - MARGIN,
        label = HEIGHT - MARGIN + 16.0,
        min = distribution.min,
        max = distribution.max,
    );
    svg
}

/// The reuse over a session's age: one point per turn.
fn reuse_line(values: &[f64]) -> String {
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<figure id="reuse-by-turn"><figcaption>Share of the prompt the previous turn made reusable, by turn</figcaption><svg class="plot" role="img" aria-label="reuse by turn" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">"#
    );
    let step = (WIDTH - 2.0 * MARGIN) / values.len().saturating_sub(1).max(1) as f64;
    let points: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(turn, share)| {
            format!(
                "{:.1},{:.1}",
                MARGIN + turn as f64 * step,
                HEIGHT - MARGIN - (HEIGHT - 2.0 * MARGIN) * share.clamp(0.0, 1.0)
            )
        })
        .collect();
    let _ = write!(
        svg,
        r#"<polyline class="line" fill="none" points="{}"/><line x1="{MARGIN}" y1="{base}" x2="{right}" y2="{base}" class="axis"/><text x="{MARGIN}" y="{label}">turn 0</text><text x="{right}" y="{label}" text-anchor="end">turn {last}</text><text x="4" y="{top}">100%</text></svg></figure>"#,
        points.join(" "),
        base = HEIGHT - MARGIN,
        right = WIDTH - MARGIN,
        label = HEIGHT - MARGIN + 16.0,
        last = values.len().saturating_sub(1),
        top = MARGIN,
    );
    svg
}

fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// The page.
pub fn workload_html(
    title: &str,
    report: &WorkloadReport,
    simulations: &[SimulationResult],
) -> String {
    let mut page = String::new();
    let _ = write!(
        page,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>
body{{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1120px;color:#222}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
th:first-child,td:first-child{{text-align:left}}.plots{{display:flex;flex-wrap:wrap;gap:1em}}
figure{{margin:0}}.bar{{fill:#4a7fb5}}.line{{stroke:#c0392b;stroke-width:2}}.axis{{stroke:#555}}
text{{font-size:11px;fill:#444}}</style></head><body><h1>{title}</h1>"#,
        title = escape(title)
    );
    let reuse_row = |name: &str, reuse: &crate::report::Reuse| {
        format!(
            "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            reuse.within_session_tokens,
            reuse.within_session_block_tokens,
            reuse.cross_session_block_tokens,
            percent(reuse.prefix_sharing_rate)
        )
    };
    let _ = write!(
        page,
        "<p id=\"summary\">{} sessions, {} requests, {} prompt tokens, {} output tokens; rendered with {}, blocks of {} tokens.</p>\
         <table id=\"reuse\"><tr><th>Reuse</th><th>within a session (tokens)</th><th>within a session (whole blocks)</th><th>across sessions (whole blocks)</th><th>prefix-sharing rate</th></tr>{}{}</table>",
        report.sessions,
        report.requests,
        report.prompt_tokens,
        report.output_tokens,
        escape(&report.renderer),
        report.block_size,
        reuse_row("as recorded", &report.reuse),
        reuse_row("findings fixed", &report.ideal),
    );
    if !report.finding_costs.is_empty() {
        page.push_str(
            "<table id=\"findings\"><tr><th>Rule</th><th>turns</th><th>tokens not reused</th></tr>",
        );
        for cost in &report.finding_costs {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&cost.rule),
                cost.turns,
                cost.tokens
            );
        }
        page.push_str("</table>");
    }
    page.push_str("<div class=\"plots\">");
    page.push_str(&histogram(
        "input-tokens",
        "Input length",
        "tokens",
        &report.input_tokens,
    ));
    page.push_str(&histogram(
        "new-tokens",
        "New tokens per turn",
        "tokens",
        &report.new_tokens,
    ));
    page.push_str(&histogram(
        "output-tokens",
        "Output length",
        "tokens",
        &report.output_tokens_per_request,
    ));
    page.push_str(&histogram(
        "turns",
        "Turns per session",
        "turns",
        &report.turns_per_session,
    ));
    if let Some(think) = &report.think_time {
        page.push_str(&histogram(
            "think-time",
            "Time between a session's requests",
            "s",
            think,
        ));
    }
    if let Some(gaps) = &report.arrival_gaps {
        page.push_str(&histogram(
            "arrival-gaps",
            "Time between requests",
            "s",
            gaps,
        ));
    }
    page.push_str(&reuse_line(&report.reuse_by_turn));
    page.push_str("</div>");
    if let Some(burstiness) = report.burstiness {
        let _ = write!(
            page,
            "<p id=\"burstiness\">Arrival burstiness (coefficient of variation of the gaps): {burstiness:.2}</p>"
        );
    }
    if !simulations.is_empty() {
        page.push_str("<h2>Simulated fleet</h2><table id=\"simulations\"><tr><th>Routing</th><th>replicas</th><th>cache</th><th>served</th><th>computed</th><th>hit rate</th><th>lost to locality</th><th>evicted blocks</th><th>imbalance</th><th>TTFT p50</th><th>p95</th><th>p99</th></tr>");
        for result in simulations {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.3} s</td><td>{:.3} s</td><td>{:.3} s</td></tr>",
                escape(&result.policy),
                result.replicas,
                escape(&result.cache),
                result.served_tokens,
                result.computed_tokens,
                percent(result.hit_rate),
                result.lost_locality_tokens,
                result.evicted_blocks,
                result.imbalance,
                result.ttft.p50,
                result.ttft.p95,
                result.ttft.p99
            );
        }
        page.push_str("</table>");
    }
    page.push_str("</body></html>\n");
    page
}
