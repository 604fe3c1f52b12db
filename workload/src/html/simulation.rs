//! `kvlint simulate`'s page: per policy and point of the sweep, the prompt tokens served from
//! cache and computed, and the time to first token's percentiles on a logarithmic axis; when
//! several replica counts or cache sizes were simulated, the hit rate and the TTFT p99 along
//! the sweep, one line per policy; for routers with an index of their own, their belief
//! against what the engines served.

use std::fmt::Write;

use super::plot::{
    Axis, Lines, ROW_HEIGHT, Scale, lines_figure, page_start, row_label_svg, rows_frame,
};
use super::text::{escape, grouped, grouped_in, percent, readable};
use crate::words::loss_sentence;
use kvlint_fleet::{
    Along, Belief, Bounds, CacheSize, KNEE_GAIN, Policy, Ranking, SimulationResult, sweep_grid,
};

/// The sweep's points (replicas and cache), in the order first simulated.
fn sweep_points(results: &[SimulationResult]) -> Vec<(usize, CacheSize)> {
    let mut points: Vec<(usize, CacheSize)> = Vec::new();
    for result in results {
        let point = (result.replicas, result.cache);
        if !points.contains(&point) {
            points.push(point);
        }
    }
    points
}

/// A result's name on the page: its policy, and its point when there are several.
fn row_label(result: &SimulationResult, sweep: bool) -> String {
    if sweep {
        format!(
            "{} · {} × {}",
            result.routing_label(),
            result.replicas,
            grouped_in(&result.cache.to_string())
        )
    } else {
        result.routing_label()
    }
}

/// Per result, the prompt tokens served from cache and those computed, stacked.
fn served_figure(results: &[SimulationResult], labels: &[String]) -> String {
    let frame = rows_frame(labels);
    let most = results
        .iter()
        .map(|result| result.prompt_tokens)
        .max()
        .unwrap_or(0);
    let x = Axis::linear(0.0, most as f64, frame.left, frame.right);
    let mut svg = String::new();
    frame.open(&mut svg, "served and computed prompt tokens", "linear");
    frame.x_axis(&mut svg, &x, "prompt tokens", |tokens| {
        grouped(tokens.round() as u64)
    });
    for (row, (result, label)) in results.iter().zip(labels).enumerate() {
        let top = row_label_svg(&mut svg, &frame, row, label);
        let served_end = x.position(result.served_tokens as f64);
        let end = x.position((result.served_tokens + result.computed_tokens) as f64);
        let _ = write!(
            svg,
            r#"<rect class="served" x="{l}" y="{top:.1}" width="{served:.1}" height="{h}"><title>served from cache: {st}</title></rect><rect class="computed" x="{served_end:.1}" y="{top:.1}" width="{computed:.1}" height="{h}"><title>computed: {ct}</title></rect><text x="{tx:.1}" y="{ty:.1}">{hit} served</text>"#,
            l = frame.left,
            served = served_end - frame.left,
            computed = end - served_end,
            h = ROW_HEIGHT - 6.0,
            st = grouped(result.served_tokens),
            ct = grouped(result.computed_tokens),
            tx = end + 5.0,
            ty = top + 13.0,
            hit = percent(result.hit_rate),
        );
        if let Some(bounds) = &result.bounds {
            bound_marks(&mut svg, &x, top, bounds);
        }
    }
    svg.push_str("</svg>");
    format!(
        r#"<figure id="served"><figcaption>Prompt tokens served from cache and computed</figcaption>{svg}<ul class="legend"><li><span class="swatch" style="background:#1f5fa8"></span>served from cache</li><li><span class="swatch" style="background:#c9ced6"></span>computed (prefilled)</li><li><span class="swatch" style="background:#111"></span>bound: infinite shared cache</li><li><span class="swatch" style="background:#d4731f"></span>bound: Belady's eviction at replicas × cache</li></ul></figure>"#
    )
}

/// The two bounds on a row of the served figure: a mark where the infinite shared cache's
/// served tokens end, and one where Belady's eviction at the fleet's capacity's end.
fn bound_marks(svg: &mut String, x: &Axis, top: f64, bounds: &Bounds) {
    let marks = [
        (
            "bound-infinite",
            "#111",
            "infinite shared cache",
            Some(bounds.infinite_served_tokens),
        ),
        (
            "bound-belady",
            "#d4731f",
            "Belady's eviction at replicas × cache",
            bounds.belady_served_tokens,
        ),
    ];
    for (class, colour, name, tokens) in marks {
        let Some(tokens) = tokens else {
            continue;
        };
        let at = x.position(tokens as f64);
        let _ = write!(
            svg,
            r#"<line class="{class}" x1="{at:.1}" x2="{at:.1}" y1="{y1:.1}" y2="{y2:.1}" stroke="{colour}" stroke-width="3"><title>{name}: {served} served</title></line>"#,
            y1 = top - 2.0,
            y2 = top + ROW_HEIGHT - 4.0,
            served = grouped(tokens),
        );
    }
}

/// Per result whose router keeps an index of its own, what it predicted the chosen replica
/// would serve from cache against what the engine served: the predicted hits served, those
/// not served, and the served tokens it did not predict, stacked; nothing when no router
/// has an index.
fn belief_figure(results: &[SimulationResult], labels: &[String]) -> String {
    let (beliefs, labels): (Vec<&Belief>, Vec<String>) = results
        .iter()
        .zip(labels)
        .filter_map(|(result, label)| Some((result.belief.as_ref()?, label.clone())))
        .unzip();
    if beliefs.is_empty() {
        return String::new();
    }
    let mut frame = rows_frame(&labels);
    // Room for the three numbers after the bar.
    frame.width += 300.0;
    let most = beliefs
        .iter()
        .map(|belief| belief.predicted_tokens + belief.served_not_predicted_tokens)
        .max()
        .unwrap_or(0);
    let x = Axis::linear(0.0, most as f64, frame.left, frame.right);
    let mut svg = String::new();
    frame.open(&mut svg, "router's belief vs the engines' truth", "linear");
    frame.x_axis(&mut svg, &x, "prompt tokens", |tokens| {
        grouped(tokens.round() as u64)
    });
    for (row, (belief, label)) in beliefs.iter().zip(&labels).enumerate() {
        let top = row_label_svg(&mut svg, &frame, row, label);
        let predicted_served = belief
            .predicted_tokens
            .saturating_sub(belief.predicted_not_served_tokens);
        let segments = [
            (predicted_served, BELIEF_COLOURS[0], "predicted and served"),
            (
                belief.predicted_not_served_tokens,
                BELIEF_COLOURS[1],
                "predicted, not served",
            ),
            (
                belief.served_not_predicted_tokens,
                BELIEF_COLOURS[2],
                "served, not predicted",
            ),
        ];
        let _ = write!(
            svg,
            r#"<g class="belief" data-predicted="{}" data-predicted-not-served="{}" data-served-not-predicted="{}">"#,
            belief.predicted_tokens,
            belief.predicted_not_served_tokens,
            belief.served_not_predicted_tokens,
        );
        let mut start = 0;
        for (tokens, colour, name) in segments {
            let (from, to) = (
                x.position(start as f64),
                x.position((start + tokens) as f64),
            );
            let _ = write!(
                svg,
                r#"<rect x="{from:.1}" y="{top:.1}" width="{:.1}" height="{h}" fill="{colour}"><title>{name}: {}</title></rect>"#,
                to - from,
                grouped(tokens),
                h = ROW_HEIGHT - 6.0,
            );
            start += tokens;
        }
        let _ = write!(
            svg,
            r#"<text x="{tx:.1}" y="{ty:.1}">predicted {} · not served {} · served, not predicted {}</text></g>"#,
            grouped(belief.predicted_tokens),
            grouped(belief.predicted_not_served_tokens),
            grouped(belief.served_not_predicted_tokens),
            tx = x.position(start as f64) + 5.0,
            ty = top + 13.0,
        );
    }
    svg.push_str("</svg>");
    format!(
        r#"<figure id="belief"><figcaption>Router's belief vs the engines' truth (routers with an index of their own)</figcaption>{svg}<ul class="legend"><li><span class="swatch" style="background:{}"></span>predicted and served</li><li><span class="swatch" style="background:{}"></span>predicted, not served (the engine no longer or never held it)</li><li><span class="swatch" style="background:{}"></span>served, not predicted</li></ul></figure>"#,
        BELIEF_COLOURS[0], BELIEF_COLOURS[1], BELIEF_COLOURS[2],
    )
}

/// The belief figure's colours: predicted and served, predicted and not served, served and
/// not predicted.
const BELIEF_COLOURS: [&str; 3] = ["#1f5fa8", "#d62728", "#e07b00"];

/// Per result, the time to first token's p50, p95 and p99 on a logarithmic axis.
fn ttft_figure(results: &[SimulationResult], labels: &[String]) -> String {
    let frame = rows_frame(labels);
    let x = Axis::log(
        results
            .iter()
            .flat_map(|result| [result.ttft.p50, result.ttft.p95, result.ttft.p99]),
        frame.left,
        frame.right,
    );
    let mut svg = String::new();
    frame.open(&mut svg, "time to first token", "log");
    frame.x_axis(&mut svg, &x, "seconds", readable);
    for (row, (result, label)) in results.iter().zip(labels).enumerate() {
        let top = row_label_svg(&mut svg, &frame, row, label);
        let middle = top + (ROW_HEIGHT - 6.0) / 2.0;
        let ttft = &result.ttft;
        let (p50, p95, p99) = (
            x.position(ttft.p50),
            x.position(ttft.p95),
            x.position(ttft.p99),
        );
        let _ = write!(
            svg,
            r##"<g class="ttft" data-p50="{}" data-p95="{}" data-p99="{}"><line x1="{p50:.1}" y1="{middle:.1}" x2="{p99:.1}" y2="{middle:.1}" stroke="#888" stroke-width="2"/><circle cx="{p50:.1}" cy="{middle:.1}" r="4.5" fill="#fff" stroke="#1f5fa8" stroke-width="2"/><circle cx="{p95:.1}" cy="{middle:.1}" r="4.5" fill="#8fb0d8"/><circle cx="{p99:.1}" cy="{middle:.1}" r="4.5" fill="#1f5fa8"/><text x="{tx:.1}" y="{ty:.1}">p99 {} s</text></g>"##,
            ttft.p50,
            ttft.p95,
            ttft.p99,
            readable(ttft.p99),
            tx = p99 + 9.0,
            ty = top + 13.0,
        );
    }
    svg.push_str("</svg>");
    format!(
        r##"<figure id="ttft"><figcaption>Time to first token</figcaption>{svg}<ul class="legend"><li>○ p50 &nbsp; <span style="color:#8fb0d8">●</span> p95 &nbsp; <span style="color:#1f5fa8">●</span> p99 (values at or below 0 at the axis' left end)</li></ul></figure>"##
    )
}

/// The hit rate and the TTFT p99 along the sweep, one line per policy.
fn sweep_figures(results: &[SimulationResult], points: &[(usize, CacheSize)]) -> String {
    let replicas_vary = points.iter().any(|(replicas, _)| *replicas != points[0].0);
    let caches_vary = points.iter().any(|(_, cache)| *cache != points[0].1);
    let (labels, x_title): (Vec<String>, &str) = match (replicas_vary, caches_vary) {
        (true, false) => (
            points
                .iter()
                .map(|(replicas, _)| replicas.to_string())
                .collect(),
            "replicas",
        ),
        (false, _) => (
            points
                .iter()
                .map(|(_, cache)| grouped_in(&cache.to_string()))
                .collect(),
            "cache per replica",
        ),
        (true, true) => (
            points
                .iter()
                .map(|(replicas, cache)| {
                    format!("{replicas} replicas\n{}", grouped_in(&cache.to_string()))
                })
                .collect(),
            "replicas × cache per replica",
        ),
    };
    let mut policies: Vec<Policy> = Vec::new();
    for result in results {
        if !policies.contains(&result.policy) {
            policies.push(result.policy);
        }
    }
    let along = |value: fn(&SimulationResult) -> f64| -> Vec<(String, Vec<f64>)> {
        policies
            .iter()
            .map(|policy| {
                let values = points
                    .iter()
                    .map(|(replicas, cache)| {
                        results
                            .iter()
                            .find(|result| {
                                result.policy == *policy
                                    && result.replicas == *replicas
                                    && result.cache == *cache
                            })
                            .map_or(f64::NAN, value)
                    })
                    .collect();
                (policy.to_string(), values)
            })
            .collect()
    };
    let hit_rates = along(|result| result.hit_rate);
    let p99s = along(|result| result.ttft.p99);
    // Each sweep's knees, ringed on the hit rate's lines.
    let mut knees: Vec<(usize, usize, String)> = Vec::new();
    for grid in [Along::Cache, Along::Replicas]
        .into_iter()
        .filter_map(|along| sweep_grid(results, along))
    {
        for row in &grid.rows {
            let Some(index) = row.knee.and_then(|column| row.cells[column]) else {
                continue;
            };
            let result = &results[index];
            let series = policies.iter().position(|policy| *policy == result.policy);
            let point = points
                .iter()
                .position(|point| *point == (result.replicas, result.cache));
            if let (Some(series), Some(point)) = (series, point) {
                knees.push((
                    series,
                    point,
                    format!("knee along the {}: {}", dimension(grid.along), row.label),
                ));
            }
        }
    }
    let mut figures = lines_figure(&Lines {
        id: "sweep-hit-rate",
        title: "Hit rate along the sweep",
        labels: &labels,
        series: &hit_rates,
        y: Scale::Linear {
            low: 0.0,
            high: 1.0,
        },
        y_label: |share| format!("{:.0}%", share * 100.0),
        x_title,
        marks: &knees,
    });
    let p99_axis = Axis::log(
        p99s.iter().flat_map(|(_, values)| values.iter().copied()),
        0.0,
        1.0,
    );
    figures.push_str(&lines_figure(&Lines {
        id: "sweep-ttft",
        title: "Time to first token, p99, along the sweep",
        labels: &labels,
        series: &p99s,
        y: p99_axis.scale,
        y_label: |seconds| format!("{} s", readable(seconds)),
        x_title,
        marks: &[],
    }));
    figures
}

/// What a sweep varies, as a page names it.
fn dimension(along: Along) -> &'static str {
    match along {
        Along::Cache => "cache per replica",
        Along::Replicas => "replicas",
    }
}

/// Each sweep as one table: a row per policy (and point of the other dimension), a column per
/// point, the hit rate in each cell, the knee marked.
fn sweep_tables(results: &[SimulationResult]) -> String {
    let mut tables = String::new();
    for grid in [Along::Cache, Along::Replicas]
        .into_iter()
        .filter_map(|along| sweep_grid(results, along))
    {
        let _ = write!(
            tables,
            "<table class=\"sweep\" id=\"sweep-{}\"><caption>Hit rate along the {}; ◆ the knee: the next point serves under {:.0} % more prompt tokens from cache per doubling</caption><tr><th>Routing</th>",
            match grid.along {
                Along::Cache => "cache",
                Along::Replicas => "replicas",
            },
            dimension(grid.along),
            KNEE_GAIN * 100.0,
        );
        for column in &grid.columns {
            let _ = write!(tables, "<th>{}</th>", escape(&grouped_in(column)));
        }
        tables.push_str("</tr>");
        for row in &grid.rows {
            let _ = write!(tables, "<tr><td>{}</td>", escape(&row.label));
            for (column, cell) in row.cells.iter().enumerate() {
                match cell {
                    Some(index) if row.knee == Some(column) => {
                        let _ = write!(
                            tables,
                            "<td class=\"knee\">{} ◆</td>",
                            percent(results[*index].hit_rate)
                        );
                    }
                    Some(index) => {
                        let _ = write!(tables, "<td>{}</td>", percent(results[*index].hit_rate));
                    }
                    None => tables.push_str("<td></td>"),
                }
            }
            tables.push_str("</tr>");
        }
        tables.push_str("</table>");
    }
    tables
}

/// Every result's figures, grouped for reading.
pub(super) fn table(results: &[SimulationResult]) -> String {
    let mut table = String::from(
        "<table id=\"simulations\"><tr><th>Routing</th><th>replicas</th><th>cache</th><th>served</th><th>computed</th><th>hit rate</th><th>lost to locality</th><th>evicted blocks</th><th>imbalance</th><th>TTFT p50</th><th>p95</th><th>p99</th><th>bounds: infinite · Belady</th><th>router predicted</th><th>predicted, not served</th><th>served, not predicted</th></tr>",
    );
    for result in results {
        let _ = write!(
            table,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{} s</td><td>{} s</td><td>{} s</td>",
            escape(&result.routing_label()),
            grouped(result.replicas as u64),
            escape(&grouped_in(&result.cache.to_string())),
            grouped(result.served_tokens),
            grouped(result.computed_tokens),
            percent(result.hit_rate),
            grouped(result.lost_locality_tokens),
            grouped(result.evicted_blocks),
            result.imbalance,
            readable(result.ttft.p50),
            readable(result.ttft.p95),
            readable(result.ttft.p99)
        );
        match &result.bounds {
            Some(bounds) => {
                let _ = write!(
                    table,
                    "<td>{} · {}</td>",
                    grouped(bounds.infinite_served_tokens),
                    bounds
                        .belady_served_tokens
                        .map_or_else(|| "not modelled".to_owned(), grouped),
                );
            }
            None => table.push_str("<td></td>"),
        }
        match &result.belief {
            Some(belief) => {
                let _ = write!(
                    table,
                    "<td>{}</td><td>{}</td><td>{}</td></tr>",
                    grouped(belief.predicted_tokens),
                    grouped(belief.predicted_not_served_tokens),
                    grouped(belief.served_not_predicted_tokens),
                );
            }
            None => table.push_str("<td colspan=\"3\">no index of its own</td></tr>"),
        }
    }
    table.push_str("</table>");
    table
}

/// `--compare`'s decision report: per point of the sweep, the policies ranked, their three
/// measures and places, and why each loses against the winner.
fn ranking_tables(rankings: &[Ranking]) -> String {
    let mut tables = String::new();
    for ranking in rankings {
        let _ = write!(
            tables,
            "<table class=\"ranking\"><caption>Decision report: {} replicas, cache {}, {} router(s) (rank: the sum of the places on served tokens, TTFT p99 and imbalance, the busiest replica's prefilled tokens over the mean)</caption>\
             <tr><th>rank</th><th>Routing</th><th>served</th><th>TTFT p99</th><th>imbalance</th><th>places</th><th>why it loses against the winner</th></tr>",
            grouped(ranking.replicas as u64),
            escape(&grouped_in(&ranking.cache.to_string())),
            ranking.routers,
        );
        for ranked in &ranking.ranked {
            let [served, p99, imbalance] = ranked.places;
            let _ = write!(
                tables,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} s</td><td>{:.2}</td><td>{served}/{p99}/{imbalance}</td><td>{}</td></tr>",
                ranked.rank,
                escape(&ranked.policy.to_string()),
                grouped(ranked.served_tokens),
                readable(ranked.ttft_p99),
                ranked.imbalance,
                ranked.loss.as_ref().map_or_else(
                    || "the winner".to_owned(),
                    |loss| escape(&loss_sentence(loss))
                ),
            );
        }
        tables.push_str("</table>");
    }
    tables
}

/// `kvlint simulate`'s results as one self-contained page, `--compare`'s rankings on top.
pub fn simulation_html(title: &str, results: &[SimulationResult], rankings: &[Ranking]) -> String {
    let mut page = page_start(title);
    if let Some(first) = results.first() {
        let _ = write!(
            page,
            "<p id=\"summary\">{} requests, {} prompt tokens; replicas modelled on {}, arrivals {}.</p>",
            grouped(first.requests),
            grouped(first.prompt_tokens),
            escape(&first.engine.to_string()),
            escape(&first.arrival.to_string()),
        );
    }
    page.push_str(&ranking_tables(rankings));
    let points = sweep_points(results);
    let sweep = points.len() > 1;
    page.push_str("<div class=\"plots\">");
    let labels: Vec<String> = results
        .iter()
        .map(|result| row_label(result, sweep))
        .collect();
    page.push_str(&served_figure(results, &labels));
    page.push_str(&ttft_figure(results, &labels));
    page.push_str(&belief_figure(results, &labels));
    if sweep {
        page.push_str(&sweep_figures(results, &points));
    }
    page.push_str("</div>");
    page.push_str(&sweep_tables(results));
    page.push_str(&table(results));
    page.push_str("</body></html>\n");
    page
}
