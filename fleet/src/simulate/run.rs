//! One point of a simulation, step by step: requests arrive ([`Arrivals`]), a router routes
//! each to a replica ([`super::routers`]), the replica's cache serves what it holds and the
//! replica prefills the rest ([`super::fleet::Fleet`]), and the run's figures are summed up at
//! the end.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution as _, Gamma};

use super::fleet::{Arriving, Fleet};
use super::routers::Choice;
use super::{Arrival, Setup, SimulationResult};
use crate::error::{SpecError, StreamedRunError};
use crate::hashed_trace::StreamedTrace;
use crate::trace::Trace;
use crate::trace::arrival_order;

/// An event of the simulation: a request of a session arrives.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Event {
    time: f64,
    /// Ties keep the order events were scheduled in.
    sequence: u64,
    request: usize,
}

impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.time
            .total_cmp(&other.time)
            .then(self.sequence.cmp(&other.sequence))
    }
}

/// Whether `index` is the last request of its session.
pub(super) fn ends_session(trace: &Trace, index: usize) -> bool {
    let session = &trace.sessions[trace.requests[index].session as usize];
    index + 1 >= session.requests.end as usize
}

/// Runs one point of the simulation over `trace` (whose block size must be the engine's).
pub fn simulate(trace: &Trace, setup: &Setup) -> Result<SimulationResult, SpecError> {
    Ok(run(trace, setup, None)?.result(Some(trace)))
}

/// Runs one point of the simulation over `trace`, read as it goes: its requests at their
/// recorded times, with the figures [`simulate`] gives on the same trace held whole, but the
/// bounds and the per-request figures, which need the whole trace.
pub fn simulate_streamed(
    trace: &StreamedTrace,
    setup: &Setup,
) -> Result<SimulationResult, StreamedRunError> {
    streamable(trace.block_size, setup)?;
    let mut fleet = Fleet::new(trace.requests, setup, None);
    let mut rng = SmallRng::seed_from_u64(setup.seed);
    trace.replay(|streamed| {
        let arriving = Arriving {
            index: streamed.line,
            request: streamed.request,
            identity: streamed.identity,
            new_blocks: streamed.new_blocks,
            generated_blocks: &[],
            last: streamed.last,
        };
        fleet.serve(streamed.time, arriving, &mut rng);
    })?;
    Ok(fleet.result(None))
}

/// Whether a run of `setup` can read a trace of `block_size`-token blocks as it goes, holding
/// only the sessions in flight: the one rule of [`simulate_streamed`] and of a caller choosing
/// how to read a trace. Refused, naming the setting: another block size than the engine's,
/// arrivals other than the recorded times, the bounds and the per-request figures (they need
/// the trace held whole).
pub fn streamable(block_size: u32, setup: &Setup) -> Result<(), StreamedRunError> {
    let refused = |setting: String, reason| Err(StreamedRunError::Setting { setting, reason });
    if block_size != setup.engine.block_size() {
        return refused(
            format!("an engine block of {} tokens", setup.engine.block_size()),
            "the trace's blocks are another size",
        );
    }
    if setup.arrival != Arrival::Recorded {
        return refused(
            format!("arrival {}", setup.arrival),
            "a trace read as it goes is replayed at its recorded times",
        );
    }
    if setup.fleet.bounds || setup.per_request {
        return refused(
            "the bounds or the per-request figures".to_owned(),
            "they need the trace held whole",
        );
    }
    Ok(())
}

/// Recorded decisions replayed ([`super::calibrate`]): the replica each request was sent to
/// (by trace index), and whether the run follows them (teacher forcing: the router is told the
/// recorded replica and the engines serve from it) or only compares with them.
pub(super) struct Recorded<'a> {
    pub replicas: &'a [usize],
    pub forced: bool,
}

/// What the router chose for one request, and the prompt tokens served from cache where it
/// was served (the recorded replica when forced).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Replayed {
    pub choice: Choice,
    pub served: u32,
}

/// Replays `trace` through the router of `setup` beside the `recorded` decisions: per request
/// (trace order), what the router chose and what was served.
pub(super) fn replay(
    trace: &Trace,
    setup: &Setup,
    recorded: Recorded<'_>,
) -> Result<Vec<Replayed>, SpecError> {
    if recorded.replicas.len() != trace.requests.len() {
        return Err(SpecError::new(
            &setup.policy.to_string(),
            format!(
                "{} recorded decisions for {} requests",
                recorded.replicas.len(),
                trace.requests.len()
            ),
        ));
    }
    run(trace, setup, Some(recorded))?
        .replayed
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| SpecError::new("recorded", "a recorded request was not replayed"))
}

/// The events of `trace` under `setup`, one after the other, through the fleet.
fn run<'a>(
    trace: &'a Trace,
    setup: &'a Setup,
    recorded: Option<Recorded<'a>>,
) -> Result<Fleet<'a>, SpecError> {
    let block = setup.engine.block_size();
    if trace.block_size != block {
        return Err(SpecError::new(
            &setup.engine.to_string(),
            format!(
                "the trace has blocks of {} tokens, the engine {block}",
                trace.block_size
            ),
        ));
    }
    let mut fleet = Fleet::new(trace.requests.len(), setup, recorded);
    let mut rng = SmallRng::seed_from_u64(setup.seed);
    let mut arrivals = Arrivals::start(trace, setup, &mut rng)?;
    while let Some(Reverse(event)) = arrivals.queue.pop() {
        let finished = fleet.serve(event.time, Arriving::of(trace, event.request), &mut rng);
        arrivals.follow(trace, setup, event.request, finished);
    }
    Ok(fleet)
}

/// When requests arrive: the events in time order, and the sessions not started yet.
struct Arrivals {
    queue: BinaryHeap<Reverse<Event>>,
    sequence: u64,
    /// Sessions not started yet, in the order they start (closed arrivals).
    pending_sessions: std::vec::IntoIter<usize>,
}

impl Arrivals {
    /// The first arrivals: every request at its recorded time, the first request of each
    /// session at Poisson gaps, or as many sessions as the concurrency at time 0.
    fn start(trace: &Trace, setup: &Setup, rng: &mut SmallRng) -> Result<Self, SpecError> {
        let times_known = trace.requests.iter().all(|request| request.time.is_some());
        if setup.arrival == Arrival::Recorded && !times_known {
            return Err(SpecError::new(
                "recorded",
                "some requests have no recorded time: use poisson:RATE or closed:CONCURRENCY",
            ));
        }
        let origin = trace
            .requests
            .iter()
            .filter_map(|request| request.time)
            .fold(f64::INFINITY, f64::min);
        let session_order: Vec<usize> = {
            let mut firsts: Vec<usize> = arrival_order(trace)
                .into_iter()
                .filter(|request| trace.is_first(*request))
                .collect();
            firsts.dedup();
            firsts
        };
        let mut arrivals = Self {
            queue: BinaryHeap::new(),
            sequence: 0,
            pending_sessions: session_order.into_iter(),
        };
        match setup.arrival {
            Arrival::Recorded => {
                for (index, request) in trace.requests.iter().enumerate() {
                    arrivals.schedule(request.time.unwrap_or(origin) - origin, index);
                }
            }
            Arrival::Poisson { rate, burstiness } => {
                let shape = 1.0 / (burstiness * burstiness);
                let gaps = Gamma::new(shape, 1.0 / (rate * shape)).map_err(|error| {
                    SpecError::new(&setup.arrival.to_string(), error.to_string())
                })?;
                let mut time = 0.0;
                while let Some(first) = arrivals.pending_sessions.next() {
                    arrivals.schedule(time, first);
                    time += gaps.sample(rng);
                }
            }
            Arrival::Closed { concurrency } => {
                for _ in 0..concurrency {
                    let Some(first) = arrivals.pending_sessions.next() else {
                        break;
                    };
                    arrivals.schedule(0.0, first);
                }
            }
        }
        Ok(arrivals)
    }

    fn schedule(&mut self, time: f64, request: usize) {
        self.sequence += 1;
        self.queue.push(Reverse(Event {
            time,
            sequence: self.sequence,
            request,
        }));
    }

    /// What follows request `index`, answered at `finished`: the session's next turn after the
    /// recorded think time, or (closed) the next session.
    fn follow(&mut self, trace: &Trace, setup: &Setup, index: usize, finished: f64) {
        let request = &trace.requests[index];
        match setup.arrival {
            Arrival::Recorded => {}
            _ if !ends_session(trace, index) => {
                let think = match (request.time, trace.requests[index + 1].time) {
                    (Some(now), Some(next)) => (next - now).max(0.0),
                    _ => 0.0,
                };
                self.schedule(finished + think, index + 1);
            }
            Arrival::Closed { .. } => {
                if let Some(next) = self.pending_sessions.next() {
                    self.schedule(finished, next);
                }
            }
            Arrival::Poisson { .. } => {}
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::simulate::{Belief, CacheSize, SimEngine};
    use crate::trace::{TraceRequest, TraceSession};

    /// A session of one request, for the traces the tests build by hand.
    pub(in crate::simulate) struct SessionOfOne<'a> {
        pub time: f64,
        pub prompt: &'a [u64],
        /// The blocks its answer adds (stored, never served to it).
        pub answer: &'a [u64],
        pub tokens: u32,
        pub output_tokens: u32,
    }

    /// A trace of one-request sessions on blocks of `block_size` tokens.
    pub(in crate::simulate) fn one_request_sessions(
        block_size: u32,
        sessions: &[SessionOfOne<'_>],
    ) -> Trace {
        let mut blocks = Vec::new();
        let mut requests = Vec::new();
        for (session, one) in sessions.iter().enumerate() {
            let start = blocks.len() as u32;
            blocks.extend_from_slice(one.prompt);
            let middle = blocks.len() as u32;
            blocks.extend_from_slice(one.answer);
            requests.push(TraceRequest {
                session: session as u32,
                time: Some(one.time),
                input_tokens: one.tokens,
                output_tokens: one.output_tokens,
                shared_with_previous: 0,
                shared_with_previous_sequence: 0,
                previous_input_tokens: 0,
                kept_blocks: 0,
                new_blocks: start..middle,
                generated_blocks: middle..blocks.len() as u32,
                finding: None,
            });
        }
        Trace {
            block_size,
            renderer: String::new(),
            sessions: (0..sessions.len() as u32)
                .map(|session| TraceSession {
                    identity: format!("s{session}"),
                    requests: session..session + 1,
                })
                .collect(),
            requests,
            blocks,
            rules: Vec::new(),
        }
    }

    /// Three one-request sessions, a second apart, on 16-token blocks: blocks 1, 2 (40
    /// tokens), blocks 11, 12, 13 (50 tokens), then blocks 1, 2 again (40 tokens).
    pub(in crate::simulate) fn trace() -> Trace {
        let session = |time: f64, prompt: &'static [u64], tokens: u32| SessionOfOne {
            time,
            prompt,
            answer: &[],
            tokens,
            output_tokens: 0,
        };
        one_request_sessions(
            16,
            &[
                session(0.0, &[1, 2], 40),
                session(1.0, &[11, 12, 13], 50),
                session(2.0, &[1, 2], 40),
            ],
        )
    }

    fn run(policy: &str, cache: CacheSize) -> SimulationResult {
        let setup = Setup {
            replicas: 1,
            cache,
            engine: SimEngine::Vllm { block: 16 },
            policy: policy.parse().unwrap(),
            arrival: Arrival::Recorded,
            prefill_tps: 1000.0,
            decode_tps: None,
            seed: 0,
            per_request: true,
            fleet: crate::simulate::FleetOptions::default(),
        };
        simulate(&trace(), &setup).unwrap()
    }

    #[test]
    fn a_router_s_belief_is_counted_against_what_the_engine_served() {
        // A pool of three blocks: the second session's three blocks evict blocks 1 and 2, but
        // SGLang's router still believes its replica holds them (two blocks, 32 tokens).
        let evicted = run("sglang-cache-aware", CacheSize::Blocks(3));
        assert_eq!(evicted.served_per_request, Some(vec![0, 0, 0]));
        assert_eq!(
            evicted.belief,
            Some(Belief {
                predicted_tokens: 32,
                predicted_not_served_tokens: 32,
                served_not_predicted_tokens: 0,
            })
        );
        // An LRU of two hashes keeps the last two of each request's hashes, never the first,
        // the model's: llm-d matches nothing from the head while the engine serves 32 tokens.
        let forgotten = run("llmd-prefix:lru=2", CacheSize::Unbounded);
        assert_eq!(forgotten.served_per_request, Some(vec![0, 0, 32]));
        assert_eq!(
            forgotten.belief,
            Some(Belief {
                predicted_tokens: 0,
                predicted_not_served_tokens: 0,
                served_not_predicted_tokens: 32,
            })
        );
        // A router without an index has no belief to report.
        assert_eq!(run("round-robin", CacheSize::Unbounded).belief, None);
    }
}
