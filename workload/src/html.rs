//! The reports as self-contained HTML pages, drawn as inline SVG (no script, no request for
//! anything): the workload's reuse figures, its distributions as cumulative distributions on
//! logarithmic axes with p50, p90 and p99 marked, and the reuse over a session's age; with
//! workloads to compare (production against a benchmark), each drawn over the first on the
//! same axes. `kvlint simulate`'s page is [`simulation_html`].

pub(crate) mod plot;
mod simulation;
mod text;

use std::fmt::Write;

use crate::report::WorkloadReport;
use kvlint_fleet::{Distribution, SimulationResult};

use plot::{
    Axis, Lines, ROW_HEIGHT, Scale, Series, cdf_figure, colour, lines_figure, page_start,
    row_label_svg, rows_frame,
};
pub use simulation::simulation_html;
use text::{escape, grouped, percent};

/// The prefix-sharing rate of each workload, as recorded and with its findings fixed, as bars
/// on one axis.
fn sharing_figure(workloads: &[(&str, &WorkloadReport)]) -> String {
    let rows: Vec<(usize, String, f64)> = workloads
        .iter()
        .enumerate()
        .flat_map(|(index, (name, report))| {
            let mut rows = vec![(
                index,
                format!("{name}: as recorded"),
                report.reuse.prefix_sharing_rate,
            )];
            if report.ideal != report.reuse {
                rows.push((
                    index,
                    format!("{name}: findings fixed"),
                    report.ideal.prefix_sharing_rate,
                ));
            }
            rows
        })
        .collect();
    let labels: Vec<String> = rows.iter().map(|(_, label, _)| label.clone()).collect();
    let frame = rows_frame(&labels);
    let x = Axis::linear(0.0, 1.0, frame.left, frame.right);
    let mut svg = String::new();
    frame.open(&mut svg, "prefix-sharing rate", "linear");
    frame.x_axis(
        &mut svg,
        &x,
        "share of prompt tokens an infinite shared block cache serves",
        |share| format!("{:.0}%", share * 100.0),
    );
    for (row, (index, label, rate)) in rows.iter().enumerate() {
        let top = row_label_svg(&mut svg, &frame, row, label);
        let _ = write!(
            svg,
            r#"<rect class="sharing" data-series="{index}" data-rate="{rate}" x="{l}" y="{top:.1}" width="{w:.1}" height="{h:.1}" fill="{}" fill-opacity="{opacity}"/><text x="{vx:.1}" y="{ty:.1}">{}</text>"#,
            colour(*index),
            percent(*rate),
            ty = top + 13.0,
            l = frame.left,
            w = x.position(*rate) - frame.left,
            h = ROW_HEIGHT - 6.0,
            opacity = if label.ends_with("as recorded") {
                1.0
            } else {
                0.45
            },
            vx = x.position(*rate) + 5.0,
        );
    }
    svg.push_str("</svg>");
    format!(
        r#"<figure id="sharing-rate"><figcaption>Prefix-sharing rate</figcaption>{svg}</figure>"#
    )
}

fn summary(name: &str, report: &WorkloadReport) -> String {
    format!(
        "<b>{}</b>: {} sessions, {} requests, {} prompt tokens, {} output tokens; rendered with {}, blocks of {} tokens.",
        escape(name),
        grouped(report.sessions as u64),
        grouped(report.requests as u64),
        grouped(report.prompt_tokens),
        grouped(report.output_tokens),
        escape(&report.renderer),
        grouped(u64::from(report.block_size)),
    )
}

/// The page: the first of `workloads` is the workload reported, the others are drawn over it.
pub fn workload_html(
    title: &str,
    workloads: &[(&str, &WorkloadReport)],
    simulations: &[SimulationResult],
) -> String {
    let mut page = page_start(title);
    for (index, (name, report)) in workloads.iter().enumerate() {
        let id = if index == 0 {
            "summary".to_owned()
        } else {
            format!("summary-{index}")
        };
        let _ = write!(page, "<p id=\"{id}\">{}</p>", summary(name, report));
    }
    page.push_str(
        "<table id=\"reuse\"><tr><th>Reuse</th><th>within a session (tokens)</th><th>within a session (whole blocks)</th><th>across sessions (whole blocks)</th><th>prefix-sharing rate</th></tr>",
    );
    for (name, report) in workloads {
        for (case, reuse) in [
            ("as recorded", &report.reuse),
            ("findings fixed", &report.ideal),
        ] {
            let _ = write!(
                page,
                "<tr><td>{}: {case}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(name),
                grouped(reuse.within_session_tokens),
                grouped(reuse.within_session_block_tokens),
                grouped(reuse.cross_session_block_tokens),
                percent(reuse.prefix_sharing_rate)
            );
        }
    }
    page.push_str("</table>");
    page.push_str(&sharing_figure(workloads));
    for (name, report) in workloads {
        if report.finding_costs.is_empty() {
            continue;
        }
        let _ = write!(
            page,
            "<table id=\"findings\"><tr><th>Rule ({})</th><th>turns</th><th>tokens not reused</th></tr>",
            escape(name)
        );
        for cost in &report.finding_costs {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&cost.rule),
                grouped(cost.turns as u64),
                grouped(cost.tokens)
            );
        }
        page.push_str("</table>");
    }
    page.push_str(&misses_table(workloads));
    page.push_str("<div class=\"plots\">");
    type Pick = fn(&WorkloadReport) -> Option<&Distribution>;
    let plots: [(&str, &str, &str, Pick); 6] = [
        ("input-tokens", "Input length", "tokens", |report| {
            Some(&report.input_tokens)
        }),
        ("new-tokens", "New tokens per turn", "tokens", |report| {
            Some(&report.new_tokens)
        }),
        ("output-tokens", "Output length", "tokens", |report| {
            Some(&report.output_tokens_per_request)
        }),
        ("turns", "Turns per session", "turns", |report| {
            Some(&report.turns_per_session)
        }),
        (
            "think-time",
            "Time between a session's requests",
            "seconds",
            |report| report.think_time.as_ref(),
        ),
        (
            "arrival-gaps",
            "Time between requests",
            "seconds",
            |report| report.arrival_gaps.as_ref(),
        ),
    ];
    for (id, title, unit, distribution) in plots {
        let series: Vec<Series<'_>> = workloads
            .iter()
            .filter_map(|(name, report)| {
                Some(Series {
                    name,
                    distribution: distribution(report)?,
                })
            })
            .collect();
        if !series.is_empty() {
            page.push_str(&cdf_figure(id, title, unit, &series));
        }
    }
    page.push_str(&reuse_by_turn_figure(workloads));
    page.push_str("</div>");
    for (name, report) in workloads {
        if let Some(burstiness) = report.burstiness {
            let _ = write!(
                page,
                "<p class=\"burstiness\">{}: arrival burstiness (coefficient of variation of the gaps) {burstiness:.2}</p>",
                escape(name)
            );
        }
    }
    if !simulations.is_empty() {
        page.push_str("<h2>Simulated fleet</h2>");
        page.push_str(&simulation::table(simulations));
    }
    page.push_str("</body></html>\n");
    page
}

/// The share of the prompt the previous turn made reusable, by turn, one line per workload.
fn reuse_by_turn_figure(workloads: &[(&str, &WorkloadReport)]) -> String {
    let turns = workloads
        .iter()
        .map(|(_, report)| report.reuse_by_turn.len())
        .max()
        .unwrap_or(0);
    // At most 30 labelled turns: every nth.
    let every = turns.div_ceil(30).max(1);
    let labels: Vec<String> = (0..turns)
        .map(|turn| {
            if turn % every == 0 {
                turn.to_string()
            } else {
                String::new()
            }
        })
        .collect();
    let series: Vec<(String, Vec<f64>)> = workloads
        .iter()
        .map(|(name, report)| ((*name).to_owned(), report.reuse_by_turn.clone()))
        .collect();
    lines_figure(&Lines {
        id: "reuse-by-turn",
        title: "Share of the prompt the previous turn made reusable, by turn",
        labels: &labels,
        series: &series,
        y: Scale::Linear {
            low: 0.0,
            high: 1.0,
        },
        y_label: |share| format!("{:.0}%", share * 100.0),
        x_title: "turn of the session (0: the first)",
        marks: &[],
    })
}

/// The misses of each workload, avoidable or not, in tokens and, priced, in dollars.
fn misses_table(workloads: &[(&str, &WorkloadReport)]) -> String {
    let mut table = String::from(
        "<table id=\"misses\"><tr><th>Misses</th><th>unavoidable (first sent)</th><th>avoidable: breaks</th><th>avoidable: expired</th><th>unavoidable (USD)</th><th>avoidable (USD)</th></tr>",
    );
    for (name, report) in workloads {
        let misses = &report.misses;
        let usd = |pick: fn(&crate::MissDollars) -> f64| {
            misses
                .dollars
                .as_ref()
                .map_or("–".to_owned(), |dollars| format!("{:.4}", pick(dollars)))
        };
        let expired = match misses.lifetime_seconds {
            Some(_) => grouped(misses.expired_tokens),
            None => "–".to_owned(),
        };
        let _ = write!(
            table,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{expired}</td><td>{}</td><td>{}</td></tr>",
            escape(name),
            grouped(misses.unavoidable_tokens),
            grouped(misses.broken_tokens),
            usd(|dollars| dollars.unavoidable),
            usd(|dollars| dollars.avoidable),
        );
    }
    table.push_str("</table>");
    table
}
