//! `kvlint simulate`'s page: policies, percentiles, the sweep, and a router's belief against
//! the engines' truth.

use super::*;

/// `kvlint simulate` on the corpus with `settings` (Poisson arrivals at 2 per second, bursty,
/// prefill at 2,000 tokens per second), run for its JSON results and for its HTML page, which
/// is kept as `name`: the results, the page and where it is kept.
fn simulated(name: &str, settings: &[&str]) -> (Vec<Value>, String, PathBuf) {
    let run = |format: &str| {
        let mut args = vec!["simulate", "fixtures/corpus/sessions", "--no-trace-cache"];
        args.extend_from_slice(settings);
        args.extend([
            "--arrival",
            "poisson:2,burstiness=2",
            "--prefill-tps",
            "2000",
            "--format",
            format,
        ]);
        let (code, stdout, stderr) = kvlint(&args);
        assert_eq!(code, 0, "{stderr}");
        stdout
    };
    let results: Vec<Value> = serde_json::from_str(&run("json")).unwrap();
    let page = run("html");
    let page_path = kept(name);
    std::fs::write(&page_path, &page).unwrap();
    (results, page, page_path)
}

#[test]
fn the_simulate_report_plots_policies_percentiles_and_the_sweep() {
    let (results, page, page_path) = simulated(
        "simulate.html",
        &[
            "--replicas",
            "2,4",
            "--cache",
            "200,2000,unbounded",
            "--routing",
            "round-robin,session-hash,prefix-aware,ideal",
        ],
    );
    assert_eq!(results.len(), 2 * 3 * 4);

    // Served and computed: one row per result, the numbers grouped.
    let served = figure(&page, "served");
    assert_eq!(
        served.matches("<rect class=\"served\"").count(),
        results.len()
    );
    let table_start = page.find("<table id=\"simulations\"").unwrap();
    let table = &page[table_start..];
    for result in &results {
        let tokens = result["served_tokens"].as_u64().unwrap();
        assert!(
            table.contains(&format!("<td>{}</td>", grouped(tokens))),
            "{tokens}"
        );
    }
    // Each row marks its two bounds, the numbers as the JSON run has them; the table has both.
    for (class, key) in [
        ("bound-infinite", "infinite_served_tokens"),
        ("bound-belady", "belady_served_tokens"),
    ] {
        let marks = Regex::new(&format!(
            r#"<line class="{class}"[^>]*><title>[^<]*: ([\d,]+) served</title>"#
        ))
        .unwrap();
        let drawn: Vec<String> = marks
            .captures_iter(served)
            .map(|found| found[1].to_owned())
            .collect();
        let expected: Vec<String> = results
            .iter()
            .map(|result| grouped(result["bounds"][key].as_u64().unwrap()))
            .collect();
        assert_eq!(drawn, expected, "{class}");
    }
    for result in &results {
        let bounds = &result["bounds"];
        let cell = format!(
            "<td>{} · {}</td>",
            grouped(bounds["infinite_served_tokens"].as_u64().unwrap()),
            grouped(bounds["belady_served_tokens"].as_u64().unwrap())
        );
        assert!(table.contains(&cell), "{cell}");
    }

    // TTFT: every result's percentiles, on a log axis in seconds.
    let ttft = figure(&page, "ttft");
    let (first, origin, decade) = log_axis(ttft);
    let marks = Regex::new(r#"<g class="ttft" data-p50="([^"]+)" data-p95="[^"]+" data-p99="([^"]+)"><line x1="([\d.]+)" y1="[\d.]+" x2="([\d.]+)""#)
        .unwrap();
    let drawn: Vec<_> = marks.captures_iter(ttft).collect();
    assert_eq!(drawn.len(), results.len());
    for (found, result) in drawn.iter().zip(&results) {
        let p99: f64 = found[2].parse().unwrap();
        // serde_json reads floats to within an ulp or so.
        let expected = result["ttft"]["p99"].as_f64().unwrap();
        assert!(
            (p99 - expected).abs() <= 1e-12 * expected.max(1.0),
            "{p99} {expected}"
        );
        if p99 > 0.0 {
            let x: f64 = found[4].parse().unwrap();
            let expected = origin + (p99.log10() - f64::from(first)) * decade;
            assert!((x - expected).abs() < 0.2, "{x} {expected}");
        }
    }

    // The sweep: one line per policy over the six points, in each plot.
    for id in ["sweep-hit-rate", "sweep-ttft"] {
        let sweep = figure(&page, id);
        assert_eq!(sweep.matches("<polyline").count(), 4, "#{id}");
        assert_eq!(sweep.matches("<text class=\"x-tick\"").count(), 6, "#{id}");
    }
    // The knees, worked out here from the JSON: along the caches 200, 2,000, unbounded (the
    // step to unbounded one doubling) and along the replicas 2, 4 (one doubling), the first
    // point whose next serves under 5 % more.
    let served = |policy: &str, replicas: u64, cache: &str| {
        results
            .iter()
            .find(|result| {
                result["policy"] == policy
                    && result["replicas"] == replicas
                    && result["cache"] == cache
            })
            .map(|result| result["served_tokens"].as_u64().unwrap() as f64)
            .unwrap()
    };
    let caches = ["200 blocks", "2000 blocks", "unbounded"];
    let doublings = [(2000.0f64 / 200.0).log2(), 1.0];
    let mut cache_knees = 0;
    let mut replica_knees = 0;
    for policy in [
        "round-robin",
        "session-hash",
        "prefix-aware:overload=5",
        "ideal",
    ] {
        for replicas in [2, 4] {
            let knee = (0..2).find(|step| {
                let (now, next) = (
                    served(policy, replicas, caches[*step]),
                    served(policy, replicas, caches[step + 1]),
                );
                next / now - 1.0 < 0.05 * doublings[*step]
            });
            if let Some(step) = knee {
                cache_knees += 1;
                let row = format!("<tr><td>{policy} · {replicas} replicas</td>");
                let table = &page[page
                    .find("<table class=\"sweep\" id=\"sweep-cache\"")
                    .unwrap()..];
                let cells = &table[table.find(&row).unwrap_or_else(|| panic!("{row}"))..];
                let cells = &cells[..cells.find("</tr>").unwrap()];
                assert_eq!(cells.matches("<td").count(), 4, "{cells}");
                let marked = cells.split("<td").nth(2 + step).unwrap();
                assert!(
                    marked.starts_with(" class=\"knee\">"),
                    "{policy} {replicas}: {cells}"
                );
            }
        }
        for cache in caches {
            if served(policy, 4, cache) / served(policy, 2, cache) - 1.0 < 0.05 {
                replica_knees += 1;
            }
        }
    }
    let sweep_cache = &page[page.find("id=\"sweep-cache\"").unwrap()..];
    let sweep_cache = &sweep_cache[..sweep_cache.find("</table>").unwrap()];
    assert_eq!(sweep_cache.matches("class=\"knee\"").count(), cache_knees);
    let sweep_replicas = &page[page.find("id=\"sweep-replicas\"").unwrap()..];
    let sweep_replicas = &sweep_replicas[..sweep_replicas.find("</table>").unwrap()];
    assert_eq!(
        sweep_replicas.matches("class=\"knee\"").count(),
        replica_knees
    );
    // Every knee ringed on the hit rate's lines.
    assert_eq!(
        figure(&page, "sweep-hit-rate")
            .matches("<circle class=\"mark\"")
            .count(),
        cache_knees + replica_knees
    );
    screenshot(&page_path, 2700);
}

/// `--compare` takes sessions as the positional arguments do: the human report follows with
/// theirs, the HTML page draws them as a second series; JSON, one report per document, refuses
/// it as a usage error.
#[test]
fn compare_takes_sessions_and_json_refuses_it() {
    let corpus = "fixtures/corpus/sessions";
    let one = "fixtures/corpus/sessions/crewai-1.jsonl";
    let run = |format: &str| {
        kvlint(&[
            "workload",
            "--no-trace-cache",
            corpus,
            "--compare",
            one,
            "--format",
            format,
        ])
    };
    let (code, human, stderr) = run("human");
    assert_eq!(code, 0, "{stderr}");
    let (_, alone, _) = kvlint(&["workload", "--no-trace-cache", one]);
    let compared = human
        .split_once("\ncompared with crewai-1.jsonl:\n")
        .unwrap_or_else(|| panic!("{human}"))
        .1;
    // The compared workload's own report, as run alone (its tracing time aside).
    let first_line = |text: &str| text.lines().next().unwrap().to_owned();
    assert_eq!(first_line(compared), first_line(&alone));
    assert!(first_line(compared).starts_with("1 sessions"), "{compared}");
    let (code, page, stderr) = run("html");
    assert_eq!(code, 0, "{stderr}");
    assert!(page.contains("<b>crewai-1.jsonl</b>: 1 sessions"), "{page}");
    assert!(figure(&page, "input-tokens").contains("data-series=\"1\""));
    let (code, _, stderr) = run("json");
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--compare is drawn in the HTML report"),
        "{stderr}"
    );
}

/// A router with an index of its own (`sglang-cache-aware`) shows its belief against what the
/// engines served, in a figure and in the table, its numbers grouped as the JSON run has them;
/// round-robin, without an index, shows none. 200 blocks a replica: the tree predicts hits
/// the engines have evicted.
#[test]
fn the_simulate_report_shows_a_routers_belief_against_the_engines_truth() {
    let (results, page, page_path) = simulated(
        "simulate-belief.html",
        &[
            "--replicas",
            "2",
            "--cache",
            "200",
            "--routing",
            "sglang-cache-aware,round-robin",
        ],
    );
    assert_eq!(results.len(), 2);
    let (sglang, round_robin) = (&results[0], &results[1]);
    assert_eq!(sglang["policy"], "sglang-cache-aware");
    assert_eq!(round_robin["policy"], "round-robin");
    assert!(round_robin.get("belief").is_none(), "{round_robin}");
    let belief = |field: &str| grouped(sglang["belief"][field].as_u64().unwrap());
    let (predicted, not_served, unpredicted) = (
        belief("predicted_tokens"),
        belief("predicted_not_served_tokens"),
        belief("served_not_predicted_tokens"),
    );
    // Enough tokens for grouping to show, and a belief that parts from the truth.
    assert!(
        predicted.contains(',') && not_served.contains(','),
        "{sglang}"
    );

    // The figure: one row, sglang's, its three numbers grouped.
    let drawn = figure(&page, "belief");
    assert!(drawn.contains("Router's belief vs the engines' truth"));
    assert_eq!(drawn.matches("<g class=\"belief\"").count(), 1, "{drawn}");
    assert!(drawn.contains(">sglang-cache-aware</text>"), "{drawn}");
    assert!(!drawn.contains("round-robin"), "{drawn}");
    assert!(
        drawn.contains(&format!(
            "predicted {predicted} · not served {not_served} · served, not predicted {unpredicted}"
        )),
        "{drawn}"
    );

    // The table: sglang's row with the three numbers, round-robin's saying it has no index.
    let table_start = page.find("<table id=\"simulations\"").unwrap();
    let row = |policy: &str| {
        let start = table_start
            + page[table_start..]
                .find(&format!("<tr><td>{policy}</td>"))
                .unwrap();
        &page[start..start + page[start..].find("</tr>").unwrap()]
    };
    assert!(
        row("sglang-cache-aware").ends_with(&format!(
            "<td>{predicted}</td><td>{not_served}</td><td>{unpredicted}</td>"
        )),
        "{}",
        row("sglang-cache-aware")
    );
    assert!(
        row("round-robin").ends_with("<td colspan=\"3\">no index of its own</td>"),
        "{}",
        row("round-robin")
    );
    screenshot(&page_path, 1100);
}
