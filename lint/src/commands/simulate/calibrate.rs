//! `kvlint simulate --calibrate RECORDINGS --routing POLICY`: the recorded arrivals replayed
//! through the model of the router that was deployed, each request's recorded replica and
//! served tokens against the model's ([`kvlint_fleet::calibrate`]).

use kvlint_fleet::{Agreement, Calibration, FleetOptions, Policy, Setup, calibrate};
use kvlint_workload::recorded_requests;
use miette::IntoDiagnostic;

use super::{Args, Outcome, SimulateFormat, deliver};
use crate::input::read_all;
use crate::workspace::discover::session_files;

/// Calibrates the one policy `--routing` names on the recordings `--calibrate` names.
pub fn run(args: &Args) -> miette::Result<Outcome> {
    let policies: Vec<Policy> = args
        .routing
        .iter()
        .flat_map(|list| list.0.clone())
        .collect();
    let [policy] = policies[..] else {
        miette::bail!(
            "--calibrate replays the router that was deployed: name it, one policy, with \
             --routing POLICY (given: {})",
            policies.len()
        );
    };
    let [cache] = args.cache[..] else {
        miette::bail!("--calibrate replays one cache size: give one --cache SIZE");
    };
    if args.format == SimulateFormat::Html {
        miette::bail!("--calibrate writes human or JSON (--format human|json), not HTML");
    }
    // The recordings first: a line without its replica is found before any rendering.
    let mut recorded = Vec::new();
    for file in session_files(&args.calibrate) {
        for session in read_all(&file.path).map_err(miette::Report::new)? {
            recorded.extend(recorded_requests(&session).map_err(miette::Report::new)?);
        }
    }
    let mut trace_args = args.trace.clone();
    // The trace's blocks are the engine's.
    trace_args.block = Some(args.engine.block_size());
    let traced = super::traced(&args.calibrate, &[], &trace_args)?;
    let setup = Setup {
        replicas: 0,
        cache,
        engine: args.engine,
        policy,
        arrival: args.arrival,
        prefill_tps: args.prefill_tps,
        decode_tps: args.decode_tps,
        seed: args.seed,
        per_request: false,
        fleet: FleetOptions::default(),
    };
    let calibration = calibrate(
        &traced.trace,
        &setup,
        &recorded,
        &args.calibrate_replicas,
        !args.calibrate_free,
    )
    .map_err(miette::Report::new)?;
    let text = match args.format {
        SimulateFormat::Json => {
            let mut json = serde_json::to_string_pretty(&calibration).into_diagnostic()?;
            json.push('\n');
            json
        }
        _ => human(&calibration),
    };
    Ok(Outcome {
        output: deliver(args.output.as_deref(), text)?,
        exit_code: 0,
    })
}

/// The summary, then one line per request that does not agree exactly.
fn human(calibration: &Calibration) -> String {
    let agreement = &calibration.agreement;
    let served = &calibration.served;
    let share = |count: usize| 100.0 * count as f64 / agreement.requests.max(1) as f64;
    let mut text = format!(
        "calibration of {} on {} recorded requests ({}, cache {}, {}), replicas: {}\n\n",
        calibration.policy,
        agreement.requests,
        calibration.engine,
        calibration.cache,
        if calibration.forced {
            "teacher-forced"
        } else {
            "free-running"
        },
        calibration
            .replicas
            .iter()
            .enumerate()
            .map(|(number, name)| format!("{number}={name}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    text.push_str(&format!(
        "  agreement {:.1}%: agree {} ({:.1}%), agree-in-tie {} ({:.1}%), disagree-gate {} ({:.1}%), disagree-hit {} ({:.1}%), disagree-miss {} ({:.1}%)\n",
        100.0 * agreement.agreement,
        agreement.agree,
        share(agreement.agree),
        agreement.agree_in_tie,
        share(agreement.agree_in_tie),
        agreement.disagree_gate,
        share(agreement.disagree_gate),
        agreement.disagree_hit,
        share(agreement.disagree_hit),
        agreement.disagree_miss,
        share(agreement.disagree_miss),
    ));
    text.push_str(&format!(
        "  served from cache: recorded {} tokens, simulated {}; {} of {} requests exact, absolute error {} tokens ({:.1}%)\n",
        served.recorded_tokens,
        served.simulated_tokens,
        served.exact,
        served.compared,
        served.absolute_error_tokens,
        100.0 * served.relative_error,
    ));
    let mut details = String::new();
    for request in &calibration.requests {
        let exact = request.recorded_served_tokens == Some(request.simulated_served_tokens);
        if request.class == Agreement::Agree && exact {
            continue;
        }
        details.push_str(&format!(
            "  {}:{} at {:.3}s: {} (branch {}), recorded replica {}, simulated {}{}; served recorded {}, simulated {}\n",
            request.file,
            request.line,
            request.time,
            request.class.name(),
            request.branch.name(),
            request.recorded_replica,
            request.simulated_replica,
            request.tie.as_ref().map_or(String::new(), |tie| format!(" (tied: {tie:?})")),
            request
                .recorded_served_tokens
                .map_or("not reported".to_owned(), |tokens| tokens.to_string()),
            request.simulated_served_tokens,
        ));
    }
    if !details.is_empty() {
        text.push_str("\n  requests that do not agree exactly:\n");
        text.push_str(&details);
    }
    text
}
