//! `kvlint simulate --calibrate RECORDINGS`: the simulator checked on a team's own traffic
//! before it is trusted with a what-if. Sessions `kvlint proxy --record` wrote on a real fleet
//! name, per request, the replica that served it (`replica`: the gateway's replica header, or
//! the replica whose counters moved, `--replica-metrics`) and carry the engine's answer with
//! the prompt tokens it served from cache. The same arrivals are replayed through the model of
//! the router that was deployed, and each request's recorded replica and served tokens are
//! compared with the model's.
//!
//! The replay is teacher-forced unless told otherwise: the engines' caches serve from the
//! recorded replica and the router is told the recorded decision, so that one disagreement
//! does not change every decision after it and each request is judged on the state the real
//! fleet had. Without forcing (`--calibrate-free`) the model runs on its own choices.
//!
//! Replicas are named by strings (a URL, `127.0.0.1:8081`, a header's value); they are
//! numbered in the order of the router's `--worker-urls` when that list is given (a router
//! that breaks ties by position needs it), else in the order they first served a request.
//! Names compare without their `http://` or `https://` and a trailing `/`.

use serde::Serialize;

use super::routers::{Branch, Choice};
use super::run::{Recorded, Replayed, replay};
use super::{Arrival, CacheSize, Policy, Setup, SimEngine, as_spelled};
use crate::error::SpecError;
use crate::trace::{Trace, arrival_order};

/// One request as the real fleet served it, read off its recording line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The recording and the line the request is on.
    pub file: String,
    pub line: usize,
    /// The replica that served it, as the recording names it.
    pub replica: String,
    /// The prompt tokens the engine reported serving from cache (`None`: its answer does not
    /// say, e.g. an error).
    pub served_tokens: Option<u32>,
}

/// Recordings that cannot be calibrated against.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum CalibrateError {
    #[error("{file}:{line}: replica `{replica}` is not one of --calibrate-replicas ({given})")]
    #[diagnostic(code(kvlint::simulate::calibrate::unknown_replica))]
    UnknownReplica {
        file: String,
        line: usize,
        replica: String,
        given: String,
    },
    #[error("--calibrate-replicas names `{replica}` twice")]
    #[diagnostic(code(kvlint::simulate::calibrate::repeated_replica))]
    RepeatedReplica { replica: String },
    #[error("the recordings hold {recorded} requests, their trace {traced}")]
    #[diagnostic(
        code(kvlint::simulate::calibrate::requests),
        help("calibrate on recordings only: no --dataset or --hashed-trace")
    )]
    Requests { recorded: usize, traced: usize },
    #[error(transparent)]
    #[diagnostic(transparent)]
    Setting(#[from] SpecError),
}

/// How a request's recorded replica compares with the model's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Agreement {
    /// The model chose the recorded replica, and no other as good.
    Agree,
    /// The recorded replica is one of those the model held equal (its tie set): a router
    /// that breaks such ties at random, or by an order the model does not know, could have
    /// sent it either way.
    AgreeInTie,
    /// The model chose another replica because a load gate decided (its branch was
    /// [`Branch::Gate`]): load signals the real router read otherwise, or at another moment.
    DisagreeGate,
    /// The model chose another replica for a match its index held usable (its branch was
    /// [`Branch::Match`]).
    DisagreeHit,
    /// The model chose another replica without a usable match: its rule for a miss decided,
    /// or it keeps no index (round-robin, session-hash, least-loaded, … are always here when
    /// they disagree).
    DisagreeMiss,
}

impl Agreement {
    /// The class as the JSON output spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Agree => "agree",
            Self::AgreeInTie => "agree-in-tie",
            Self::DisagreeGate => "disagree-gate",
            Self::DisagreeHit => "disagree-hit",
            Self::DisagreeMiss => "disagree-miss",
        }
    }
}

/// One request: where it was served and where the model would send it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CalibratedRequest {
    pub file: String,
    pub line: usize,
    /// Seconds since the first arrival.
    pub time: f64,
    /// Replica numbers, into [`Calibration::replicas`].
    pub recorded_replica: usize,
    pub simulated_replica: usize,
    /// The replicas the model held equal to its choice, when it has more than one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tie: Option<Vec<usize>>,
    pub class: Agreement,
    /// What decided the model's choice: `match`, `miss`, `gate` or `blind`.
    pub branch: Branch,
    /// The prompt tokens the model expected its replica to serve (routers with an index).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_tokens: Option<u32>,
    /// Served from cache: as the engine reported (`None`: not reported), and as simulated
    /// where the request was served (the recorded replica when forced).
    pub recorded_served_tokens: Option<u32>,
    pub simulated_served_tokens: u32,
}

/// Requests per class, and what share of all agree (`agree` and `agree-in-tie`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AgreementSummary {
    pub requests: usize,
    pub agree: usize,
    pub agree_in_tie: usize,
    pub disagree_gate: usize,
    pub disagree_hit: usize,
    pub disagree_miss: usize,
    pub agreement: f64,
}

/// Served tokens as recorded against simulated, over the requests whose answer reported them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ServedComparison {
    pub compared: usize,
    /// Requests whose simulated served tokens are the recorded ones exactly.
    pub exact: usize,
    pub recorded_tokens: u64,
    pub simulated_tokens: u64,
    /// The sum over requests of |simulated − recorded|.
    pub absolute_error_tokens: u64,
    /// That sum over the recorded tokens (0 when none were recorded).
    pub relative_error: f64,
}

/// The model of one router against the recorded fleet.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Calibration {
    #[serde(serialize_with = "as_spelled")]
    pub policy: Policy,
    #[serde(serialize_with = "as_spelled")]
    pub engine: SimEngine,
    #[serde(serialize_with = "as_spelled")]
    pub cache: CacheSize,
    /// Whether the replay was teacher-forced.
    pub forced: bool,
    /// The replicas' names, by number.
    pub replicas: Vec<String>,
    pub agreement: AgreementSummary,
    pub served: ServedComparison,
    /// Per request, in arrival order.
    pub requests: Vec<CalibratedRequest>,
}

/// `name` as replicas are compared: without its scheme and trailing `/`.
fn replica_key(name: &str) -> &str {
    let name = name.trim();
    let name = name
        .strip_prefix("http://")
        .or_else(|| name.strip_prefix("https://"))
        .unwrap_or(name);
    name.trim_end_matches('/')
}

/// The replicas' names, numbered, and each request's replica number: in `given`'s order, or
/// (`given` empty) in the order they first served a request, `order` being the arrival order.
fn number_replicas(
    recorded: &[RecordedRequest],
    order: &[usize],
    given: &[String],
) -> Result<(Vec<String>, Vec<usize>), CalibrateError> {
    let mut names: Vec<String> = Vec::new();
    for name in given {
        if names
            .iter()
            .any(|known| replica_key(known) == replica_key(name))
        {
            return Err(CalibrateError::RepeatedReplica {
                replica: name.clone(),
            });
        }
        names.push(name.clone());
    }
    let mut numbers = vec![0; recorded.len()];
    for &index in order {
        let request = &recorded[index];
        let key = replica_key(&request.replica);
        numbers[index] = match names.iter().position(|name| replica_key(name) == key) {
            Some(number) => number,
            None if given.is_empty() => {
                names.push(request.replica.clone());
                names.len() - 1
            }
            None => {
                return Err(CalibrateError::UnknownReplica {
                    file: request.file.clone(),
                    line: request.line,
                    replica: request.replica.clone(),
                    given: given.join(", "),
                });
            }
        };
    }
    Ok((names, numbers))
}

/// The class of a request the model chose `choice` for, served by `recorded`.
fn classify(choice: &Choice, recorded: usize) -> Agreement {
    if choice.ties.len() > 1 && choice.ties.contains(&recorded) {
        Agreement::AgreeInTie
    } else if choice.decision.replica == recorded {
        Agreement::Agree
    } else {
        match choice.branch {
            Branch::Gate => Agreement::DisagreeGate,
            Branch::Match => Agreement::DisagreeHit,
            Branch::Miss | Branch::Blind => Agreement::DisagreeMiss,
        }
    }
}

/// Replays `trace` (the trace of the recordings `recorded` was read from, request for
/// request) through the router of `setup`, beside the recorded decisions: teacher-forced when
/// `forced`. The replicas are `replica_order` when given, else those of the recordings in the
/// order they first served; `setup`'s replica count and arrivals are set from the recordings.
pub fn calibrate(
    trace: &Trace,
    setup: &Setup,
    recorded: &[RecordedRequest],
    replica_order: &[String],
    forced: bool,
) -> Result<Calibration, CalibrateError> {
    if recorded.len() != trace.requests.len() {
        return Err(CalibrateError::Requests {
            recorded: recorded.len(),
            traced: trace.requests.len(),
        });
    }
    let order = arrival_order(trace);
    let (replicas, numbers) = number_replicas(recorded, &order, replica_order)?;
    let setup = Setup {
        replicas: replicas.len(),
        arrival: Arrival::Recorded,
        ..setup.clone()
    };
    let replayed = replay(
        trace,
        &setup,
        Recorded {
            replicas: &numbers,
            forced,
        },
    )?;
    let origin = order
        .first()
        .and_then(|first| trace.requests[*first].time)
        .unwrap_or(0.0);
    let requests: Vec<CalibratedRequest> = order
        .iter()
        .map(|&index| {
            let (Replayed { choice, served }, request) = (&replayed[index], &recorded[index]);
            CalibratedRequest {
                file: request.file.clone(),
                line: request.line,
                // To the microsecond: recorded times are milliseconds since 1970 in a float.
                time: ((trace.requests[index].time.unwrap_or(origin) - origin) * 1e6).round() / 1e6,
                recorded_replica: numbers[index],
                simulated_replica: choice.decision.replica,
                tie: (choice.ties.len() > 1).then(|| choice.ties.clone()),
                class: classify(choice, numbers[index]),
                branch: choice.branch,
                predicted_tokens: choice.decision.predicted,
                recorded_served_tokens: request.served_tokens,
                simulated_served_tokens: *served,
            }
        })
        .collect();
    Ok(Calibration {
        policy: setup.policy,
        engine: setup.engine,
        cache: setup.cache,
        forced,
        replicas,
        agreement: agreement(&requests),
        served: served(&requests),
        requests,
    })
}

fn agreement(requests: &[CalibratedRequest]) -> AgreementSummary {
    let count = |class| {
        requests
            .iter()
            .filter(|request| request.class == class)
            .count()
    };
    let summary = AgreementSummary {
        requests: requests.len(),
        agree: count(Agreement::Agree),
        agree_in_tie: count(Agreement::AgreeInTie),
        disagree_gate: count(Agreement::DisagreeGate),
        disagree_hit: count(Agreement::DisagreeHit),
        disagree_miss: count(Agreement::DisagreeMiss),
        agreement: 1.0,
    };
    AgreementSummary {
        agreement: if requests.is_empty() {
            1.0
        } else {
            (summary.agree + summary.agree_in_tie) as f64 / requests.len() as f64
        },
        ..summary
    }
}

fn served(requests: &[CalibratedRequest]) -> ServedComparison {
    let mut comparison = ServedComparison::default();
    for request in requests {
        let Some(recorded) = request.recorded_served_tokens else {
            continue;
        };
        let simulated = request.simulated_served_tokens;
        comparison.compared += 1;
        comparison.exact += usize::from(simulated == recorded);
        comparison.recorded_tokens += u64::from(recorded);
        comparison.simulated_tokens += u64::from(simulated);
        comparison.absolute_error_tokens += u64::from(simulated.abs_diff(recorded));
    }
    if comparison.recorded_tokens > 0 {
        comparison.relative_error =
            comparison.absolute_error_tokens as f64 / comparison.recorded_tokens as f64;
    }
    comparison
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::run::tests::trace;
    use crate::simulate::{CacheSize, FleetOptions, SimEngine};

    /// The three one-request sessions of the run's tests (blocks 1, 2; then 11, 12, 13; then
    /// 1, 2 again), each recorded as served by `replicas` with `served` tokens from cache.
    fn recorded(replicas: [&str; 3], served: [u32; 3]) -> Vec<RecordedRequest> {
        replicas
            .iter()
            .zip(served)
            .enumerate()
            .map(|(line, (replica, served))| RecordedRequest {
                file: format!("session-{line}.jsonl"),
                line: 1,
                replica: (*replica).to_owned(),
                served_tokens: Some(served),
            })
            .collect()
    }

    fn calibrated(
        policy: &str,
        requests: &[RecordedRequest],
        order: &[&str],
        forced: bool,
    ) -> Calibration {
        let order: Vec<String> = order.iter().map(|name| (*name).to_owned()).collect();
        calibrate(&trace(), &setup(policy), requests, &order, forced).unwrap()
    }

    /// Two replicas of unbounded vLLM caches under `policy`, arrivals to be replaced by the
    /// recorded ones.
    fn setup(policy: &str) -> Setup {
        Setup {
            replicas: 2,
            cache: CacheSize::Unbounded,
            engine: SimEngine::Vllm { block: 16 },
            policy: policy.parse().unwrap(),
            arrival: Arrival::Closed { concurrency: 1 },
            prefill_tps: 1000.0,
            decode_tps: None,
            seed: 0,
            per_request: false,
            fleet: FleetOptions::default(),
        }
    }

    fn classes(calibration: &Calibration) -> Vec<Agreement> {
        calibration
            .requests
            .iter()
            .map(|request| request.class)
            .collect()
    }

    #[test]
    fn replicas_are_numbered_as_first_seen_or_as_the_router_lists_them() {
        // Round-robin sent the three requests to a, b, a: the model agrees on each, and the
        // third request finds its blocks where the first left them (32 tokens).
        let requests = recorded(["a", "b", "a"], [0, 0, 32]);
        let first_seen = calibrated("round-robin", &requests, &[], true);
        assert_eq!(first_seen.replicas, ["a", "b"]);
        assert_eq!(classes(&first_seen), [Agreement::Agree; 3]);
        assert_eq!(first_seen.agreement.agreement, 1.0);
        assert_eq!(
            first_seen.served,
            ServedComparison {
                compared: 3,
                exact: 3,
                recorded_tokens: 32,
                simulated_tokens: 32,
                absolute_error_tokens: 0,
                relative_error: 0.0,
            }
        );
        // The router listed b first: its round-robin starts at b, and the first request
        // disagrees. Forced, the router's turn continues after the replica the request went
        // to, and the next two agree; free, every decision after the first disagrees too.
        let replicas = |calibration: &Calibration| -> Vec<(usize, usize)> {
            calibration
                .requests
                .iter()
                .map(|request| (request.recorded_replica, request.simulated_replica))
                .collect()
        };
        let listed = calibrated("round-robin", &requests, &["http://b/", "a"], true);
        assert_eq!(listed.replicas, ["http://b/", "a"]);
        assert_eq!(replicas(&listed), [(1, 0), (0, 0), (1, 1)]);
        assert_eq!(listed.agreement.disagree_miss, 1);
        let free = calibrated("round-robin", &requests, &["http://b/", "a"], false);
        assert_eq!(replicas(&free), [(1, 0), (0, 1), (1, 0)]);
        assert_eq!(free.agreement.disagree_miss, 3);
        let unknown = calibrate(
            &trace(),
            &setup("round-robin"),
            &requests,
            &["a".to_owned()],
            true,
        )
        .unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "session-1.jsonl:1: replica `b` is not one of --calibrate-replicas (a)"
        );
    }

    #[test]
    fn forcing_serves_from_the_recorded_replica_and_a_disagreement_is_counted_once() {
        // The fleet sent the second request to a (round-robin would send it to b) and the
        // third to b, which never saw the first's blocks: it served nothing.
        let requests = recorded(["a", "a", "b"], [0, 0, 0]);
        let forced = calibrated("round-robin", &requests, &[], true);
        assert_eq!(forced.requests[1].class, Agreement::DisagreeMiss);
        assert_eq!(forced.requests[2].simulated_served_tokens, 0);
        assert_eq!(forced.served.exact, 3);
        // Free, the model serves the third request from its own choice, a, where the first
        // request's blocks are: 32 tokens the fleet did not serve.
        let free = calibrated("round-robin", &requests, &[], false);
        assert_eq!(free.requests[2].simulated_served_tokens, 32);
        assert_eq!(free.served.absolute_error_tokens, 32);
    }

    #[test]
    fn a_tie_agrees_either_way_and_a_hit_predicted_elsewhere_disagrees() {
        // SGLang's tree holds the first request's text on a: it sends the third there, the
        // fleet sent it to b.
        let requests = recorded(["a", "b", "b"], [0, 0, 0]);
        let calibration = calibrated("sglang-cache-aware", &requests, &[], true);
        // The first request finds two empty trees: either could have been chosen.
        let first = &calibration.requests[0];
        assert_eq!(first.class, Agreement::AgreeInTie);
        assert_eq!(first.tie, Some(vec![0, 1]));
        let third = &calibration.requests[2];
        assert_eq!(third.class, Agreement::DisagreeHit);
        assert_eq!((third.recorded_replica, third.simulated_replica), (1, 0));
        assert_eq!(third.predicted_tokens, Some(32));
        assert_eq!(third.branch, Branch::Match);
        assert_eq!(calibration.agreement.disagree_hit, 1);
    }

    #[test]
    fn an_overlap_under_the_router_s_threshold_is_a_miss_not_a_hit() {
        // Ray's tree holds the first request's two blocks on a: the third request matches 32
        // of its 40 tokens there, under match=0.9, so the smallest tree (a's two blocks
        // against b's three) takes it; the fleet sent it to b.
        let requests = recorded(["a", "b", "b"], [0, 0, 0]);
        let calibration = calibrated("ray-prefix:match=0.9", &requests, &[], true);
        let third = &calibration.requests[2];
        assert_eq!((third.recorded_replica, third.simulated_replica), (1, 0));
        assert_eq!(third.predicted_tokens, Some(32));
        assert_eq!(
            (third.class, third.branch),
            (Agreement::DisagreeMiss, Branch::Miss)
        );
        assert_eq!(calibration.agreement.disagree_hit, 0);
    }

    #[test]
    fn a_disagreement_the_load_gate_decided_is_disagree_gate() {
        // At 10 tokens a second the first request (40 tokens) is still in flight on a when the
        // second arrives a second later: one request apart is over imbalance=0, and Ray's
        // power of two choices sends it to the idle b. The fleet sent it to a.
        let requests = recorded(["a", "a", "b"], [0, 0, 0]);
        let setup = Setup {
            prefill_tps: 10.0,
            ..setup("ray-prefix:imbalance=0")
        };
        let calibration = calibrate(&trace(), &setup, &requests, &[], true).unwrap();
        let second = &calibration.requests[1];
        assert_eq!((second.recorded_replica, second.simulated_replica), (0, 1));
        assert_eq!(
            (second.class, second.branch),
            (Agreement::DisagreeGate, Branch::Gate)
        );
        assert_eq!(calibration.agreement.disagree_gate, 1);
    }
}
