//! The replicas as requests reach them ([`Fleet`]): the router's choice, each replica's cache
//! serving what it holds, its prefill queue, what each session in flight last used, the
//! signals routers read (late, when published after a delay), and the figures summed up.

use std::collections::{HashMap, VecDeque};

use rand::rngs::SmallRng;

use super::routers::{self, ReplicaSignals, Route, View};
use super::run::{Recorded, Replayed, ends_session};
use super::{Belief, Latency, Policy, ReplicaLoad, Setup, SimulationResult};
use crate::cache::{BlockPool, Prompt, ReplicaCache};
use crate::stats::Distribution;
use crate::trace::{Trace, TraceRequest, range};

/// One request of a session as the fleet met it: what [`lineage`] follows.
#[derive(Clone, Copy, Debug)]
struct Step {
    request: usize,
    shared_with_previous: u32,
    shared_with_previous_sequence: u32,
}

impl Step {
    fn of(index: usize, request: &TraceRequest) -> Self {
        Self {
            request: index,
            shared_with_previous: request.shared_with_previous,
            shared_with_previous_sequence: request.shared_with_previous_sequence,
        }
    }
}

/// Leading tokens the sequence of `earlier` (its prompt and generated tokens) shares with the
/// prompt of `later`, the steps of one session in order, `later` the last: along the session,
/// the least of what each request shares with the one before (exact unless two of them
/// diverge at the same token). `None` for a request not before `later` in the session.
fn lineage(steps: &[Step], earlier: usize) -> Option<u32> {
    let position = steps
        .binary_search_by_key(&earlier, |step| step.request)
        .ok()?;
    let mut after = steps.get(position + 1..)?.iter();
    let mut shared = after.next()?.shared_with_previous_sequence;
    for step in after {
        shared = shared.min(step.shared_with_previous);
    }
    Some(shared)
}

/// A request a replica has not answered yet.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    prefill_start: f64,
    prefill_end: f64,
    finished: f64,
    /// Prompt tokens it prefills.
    computed: u32,
    /// Its prompt's blocks.
    blocks: u32,
    arrived: f64,
}

/// A request an engine served that the routers have not heard of yet.
struct Unpublished {
    time: f64,
    replica: usize,
    request: TraceRequest,
    /// Its session's steps, its own the last.
    steps: Vec<Step>,
    blocks: Vec<u64>,
    generated_blocks: Vec<u64>,
}

/// The engines' caches as routers that follow KV events read them when signals arrive late:
/// a copy of each engine's cache, fed each request the engine served (the blocks it stored,
/// and so evicted) only once the delay has passed since.
struct Published {
    caches: Vec<ReplicaCache>,
    /// Requests served and not published yet, in the order served.
    pending: VecDeque<Unpublished>,
}

impl Published {
    /// Publishes what the engines served until `as_of`.
    fn catch_up(&mut self, as_of: f64) {
        while self
            .pending
            .front()
            .is_some_and(|served| served.time <= as_of)
        {
            let Some(served) = self.pending.pop_front() else {
                break;
            };
            let lineage = |earlier: usize| lineage(&served.steps, earlier);
            self.caches[served.replica].serve(&prompt_of(
                &served.steps,
                &served.request,
                &served.blocks,
                &served.generated_blocks,
                &lineage,
            ));
        }
    }
}

/// The request whose step ends `steps` as a cache sees it.
fn prompt_of<'a>(
    steps: &[Step],
    request: &TraceRequest,
    blocks: &'a [u64],
    generated_blocks: &'a [u64],
    lineage: &'a dyn Fn(usize) -> Option<u32>,
) -> Prompt<'a> {
    let mut earlier = steps.iter().rev().map(|step| step.request);
    Prompt {
        lineage,
        request: earlier.next().unwrap_or_default(),
        session: request.session,
        previous: earlier.next(),
        blocks,
        generated_blocks,
        tokens: request.input_tokens,
        output_tokens: request.output_tokens,
        shared_with_previous_sequence: request.shared_with_previous_sequence,
    }
}

/// A request as it reaches the fleet, from a trace held whole or read as it goes.
pub(crate) struct Arriving<'a> {
    /// Its number: its index in the trace, or its place in a trace read as it goes.
    pub index: usize,
    pub request: &'a TraceRequest,
    /// Who its session is (what `session-hash` routing hashes).
    pub identity: &'a str,
    /// Its prompt's blocks after the `kept_blocks` of the session's previous request.
    pub new_blocks: &'a [u64],
    pub generated_blocks: &'a [u64],
    /// Whether it is its session's last: the fleet forgets the session after it.
    pub last: bool,
}

impl<'a> Arriving<'a> {
    /// The request `index` of `trace`.
    pub(super) fn of(trace: &'a Trace, index: usize) -> Self {
        let request = &trace.requests[index];
        Self {
            index,
            request,
            identity: &trace.sessions[request.session as usize].identity,
            new_blocks: &trace.blocks[range(&request.new_blocks)],
            generated_blocks: trace.generated_blocks(index),
            last: ends_session(trace, index),
        }
    }
}

/// What the fleet keeps of a session between its requests.
#[derive(Default)]
struct SessionState {
    /// Its last request's prompt blocks.
    blocks: Vec<u64>,
    /// Its requests so far.
    steps: Vec<Step>,
    /// Where its last request went.
    replica: Option<usize>,
}

/// The replicas as requests reach them: their caches and queues, what each session last used,
/// and the figures summed so far.
pub(super) struct Fleet<'a> {
    setup: &'a Setup,
    replica_count: usize,
    /// `ideal`: one cache all replicas share.
    shared: bool,
    caches: Vec<ReplicaCache>,
    /// The engines' caches as the routers read them when signals arrive late.
    published: Option<Published>,
    /// Router replicas without shared state, each request to the next in turn.
    routers: Vec<Box<dyn Route>>,
    routed: usize,
    /// The requests in the order served, for the bounds.
    order: Option<Vec<u32>>,
    /// When each replica has prefilled what it was sent.
    free_at: Vec<f64>,
    /// The requests each replica has not answered yet, for routers that read load.
    in_flight: Option<Vec<Vec<InFlight>>>,
    belief: Option<Belief>,
    loads: Vec<ReplicaLoad>,
    /// The sessions in flight.
    sessions: HashMap<u32, SessionState>,
    ttfts: Vec<f64>,
    served_per_request: Option<Vec<u32>>,
    /// Recorded decisions to follow or compare with, and per request what the router chose.
    recorded: Option<Recorded<'a>>,
    pub(super) replayed: Vec<Option<Replayed>>,
    served_total: u64,
    lost_locality: u64,
    changes: u64,
    evicted: u64,
    makespan: f64,
}

impl<'a> Fleet<'a> {
    /// A fleet for `requests` requests (a hint when the trace is read as it goes).
    pub(super) fn new(requests: usize, setup: &'a Setup, recorded: Option<Recorded<'a>>) -> Self {
        let block = setup.engine.block_size();
        let replica_count = setup.replicas.max(1);
        let shared = setup.policy == Policy::Ideal;
        let router_count = setup.fleet.routers.max(1);
        let routers: Vec<Box<dyn Route>> = (0..router_count)
            .map(|_| routers::router(setup.policy, replica_count))
            .collect();
        let delayed = setup.fleet.signal_delay > 0.0;
        let caches: Vec<ReplicaCache> = if shared {
            vec![ReplicaCache::Ideal(BlockPool::new(block, None))]
        } else {
            (0..replica_count)
                .map(|_| setup.engine.cache(setup.cache))
                .collect()
        };
        Self {
            setup,
            replica_count,
            shared,
            caches,
            free_at: vec![0.0f64; replica_count],
            published: (delayed && !shared).then(|| Published {
                caches: (0..replica_count)
                    .map(|_| setup.engine.cache(setup.cache))
                    .collect(),
                pending: VecDeque::new(),
            }),
            in_flight: (delayed || routers.iter().any(|router| router.reads_load()))
                .then(|| vec![Vec::new(); replica_count]),
            belief: None,
            routers,
            routed: 0,
            order: setup.fleet.bounds.then(|| Vec::with_capacity(requests)),
            loads: vec![ReplicaLoad::default(); replica_count],
            sessions: HashMap::new(),
            ttfts: Vec::with_capacity(requests),
            served_per_request: setup.per_request.then(|| vec![0u32; requests]),
            replayed: if recorded.is_some() {
                vec![None; requests]
            } else {
                Vec::new()
            },
            recorded,
            served_total: 0,
            lost_locality: 0,
            changes: 0,
            evicted: 0,
            makespan: 0.0f64,
        }
    }

    /// Routes `arriving` at `now`, serves it from the chosen replica's cache and queues its
    /// prefill there; returns when its answer is finished.
    pub(super) fn serve(&mut self, now: f64, arriving: Arriving<'_>, rng: &mut SmallRng) -> f64 {
        let Arriving {
            index,
            request,
            identity,
            new_blocks,
            generated_blocks,
            last,
        } = arriving;
        let signals = self.signals(now);
        if let Some(published) = self.published.as_mut() {
            published.catch_up(now - self.setup.fleet.signal_delay);
        }
        let mut session = self.sessions.remove(&request.session).unwrap_or_default();
        session.blocks.truncate(request.kept_blocks as usize);
        session.blocks.extend_from_slice(new_blocks);
        session.steps.push(Step::of(index, request));
        let lineage = |earlier: usize| lineage(&session.steps, earlier);
        let prompt = prompt_of(
            &session.steps,
            request,
            &session.blocks,
            generated_blocks,
            &lineage,
        );
        let view = View {
            prompt: &prompt,
            session: identity,
            caches: match (&self.published, self.shared) {
                (_, true) => &[],
                (Some(published), false) => &published.caches,
                (None, false) => &self.caches,
            },
            signals: &signals,
            block_size: self.setup.engine.block_size(),
            now,
        };
        let front = self.routed % self.routers.len();
        self.routed += 1;
        let router = &mut self.routers[front];
        let forced = self
            .recorded
            .as_ref()
            .filter(|recorded| recorded.forced)
            .map(|recorded| recorded.replicas[index]);
        let choice = match forced {
            Some(replica) => router.pick_forced(&view, rng, replica),
            None => router.decide(&view, rng, None),
        };
        let decision = choice.decision;
        let replica = forced.unwrap_or(decision.replica);
        let cache_index = if self.shared { 0 } else { replica };
        // What the session's previous replica would have served.
        let elsewhere = match session.replica {
            Some(before) if before != replica && !self.shared => {
                self.changes += 1;
                Some(self.caches[before].peek(&prompt))
            }
            _ => None,
        };
        let served = self.caches[cache_index].serve(&prompt);
        if let Some(published) = self.published.as_mut() {
            published.pending.push_back(Unpublished {
                time: now,
                replica,
                request: request.clone(),
                steps: session.steps.clone(),
                blocks: session.blocks.clone(),
                generated_blocks: generated_blocks.to_vec(),
            });
        }
        if let Some(order) = self.order.as_mut() {
            order.push(index as u32);
        }
        if let Some(would) = elsewhere {
            self.lost_locality += u64::from(would.saturating_sub(served.cached));
        }
        self.evicted += served.evicted;
        self.served_total += u64::from(served.cached);
        if let Some(predicted) = decision.predicted {
            let belief = self.belief.get_or_insert_with(Belief::default);
            belief.predicted_tokens += u64::from(predicted);
            belief.predicted_not_served_tokens +=
                u64::from(predicted.saturating_sub(served.cached));
            belief.served_not_predicted_tokens +=
                u64::from(served.cached.saturating_sub(predicted));
        }
        if let Some(per_request) = self.served_per_request.as_mut() {
            per_request[index] = served.cached;
        }
        if let Some(replayed) = self.replayed.get_mut(index) {
            *replayed = Some(Replayed {
                choice,
                served: served.cached,
            });
        }
        let computed = request.input_tokens.saturating_sub(served.cached);
        let finished = self.prefill(replica, now, request, computed);
        if !last {
            session.replica = Some(replica);
            self.sessions.insert(request.session, session);
        }
        finished
    }

    /// Queues `request`'s `computed` prompt tokens on `replica` at `now`: counts its load and
    /// its time to first token, and returns when its answer is finished.
    fn prefill(&mut self, replica: usize, now: f64, request: &TraceRequest, computed: u32) -> f64 {
        let setup = self.setup;
        let load = &mut self.loads[replica];
        load.requests += 1;
        load.prompt_tokens += u64::from(request.input_tokens);
        load.computed_tokens += u64::from(computed);
        let speed = setup
            .fleet
            .replica_speed
            .get(replica)
            .copied()
            .unwrap_or(1.0);
        let start = now.max(self.free_at[replica]);
        self.free_at[replica] = start + f64::from(computed) / (setup.prefill_tps * speed);
        self.ttfts.push(self.free_at[replica] - now);
        let finished = self.free_at[replica]
            + setup
                .decode_tps
                .map_or(0.0, |tps| f64::from(request.output_tokens) / (tps * speed));
        self.makespan = self.makespan.max(finished);
        if let Some(in_flight) = self.in_flight.as_mut() {
            in_flight[replica].push(InFlight {
                prefill_start: start,
                prefill_end: self.free_at[replica],
                finished,
                computed,
                blocks: request
                    .input_tokens
                    .div_ceil(setup.engine.block_size().max(1)),
                arrived: now,
            });
        }
        finished
    }

    /// Each replica's load as a router reads it at `now`: as it was the signal delay before,
    /// from the requests that had arrived by then.
    fn signals(&mut self, now: f64) -> Vec<ReplicaSignals> {
        let delay = self.setup.fleet.signal_delay;
        let as_of = now - delay;
        let capacity_blocks = self
            .setup
            .cache
            .blocks(self.setup.engine.block_size())
            .map(|blocks| blocks as u64);
        (0..self.replica_count)
            .map(|replica| {
                let mut signals = ReplicaSignals {
                    queued: (self.free_at[replica] - now).max(0.0),
                    capacity_blocks,
                    ..ReplicaSignals::default()
                };
                if let Some(in_flight) = self.in_flight.as_mut() {
                    let requests = &mut in_flight[replica];
                    requests.retain(|request| request.finished > as_of);
                    if delay > 0.0 {
                        // The queue as it was: the prefill of the last request sent by then.
                        signals.queued = requests
                            .iter()
                            .filter(|request| request.arrived <= as_of)
                            .map(|request| request.prefill_end - as_of)
                            .fold(0.0, f64::max);
                    }
                    for request in requests.iter().filter(|request| request.arrived <= as_of) {
                        signals.running += 1;
                        signals.waiting += u32::from(request.prefill_start > as_of);
                        if request.prefill_end > as_of {
                            signals.prefill_tokens += u64::from(request.computed);
                        }
                        signals.active_blocks += u64::from(request.blocks);
                    }
                }
                signals
            })
            .collect()
    }

    /// The run's figures; the bounds need the `trace` served, held whole.
    pub(super) fn result(self, trace: Option<&Trace>) -> SimulationResult {
        let Self {
            setup,
            replica_count,
            loads,
            ttfts,
            served_per_request,
            served_total,
            lost_locality,
            changes,
            evicted,
            makespan,
            belief,
            order,
            ..
        } = self;
        let prompt_tokens: u64 = loads.iter().map(|load| load.prompt_tokens).sum();
        let computed_tokens = prompt_tokens - served_total;
        let mean_computed = loads
            .iter()
            .map(|load| load.computed_tokens as f64)
            .sum::<f64>()
            / replica_count as f64;
        let busiest = loads
            .iter()
            .map(|load| load.computed_tokens as f64)
            .fold(0.0, f64::max);
        let ttft = Distribution::of(ttfts);
        SimulationResult {
            policy: setup.policy,
            cache: setup.cache,
            engine: setup.engine,
            replicas: replica_count,
            arrival: setup.arrival,
            requests: loads.iter().map(|load| load.requests).sum(),
            prompt_tokens,
            served_tokens: served_total,
            computed_tokens,
            hit_rate: if prompt_tokens == 0 {
                0.0
            } else {
                served_total as f64 / prompt_tokens as f64
            },
            lost_locality_tokens: lost_locality,
            replica_changes: changes,
            evicted_blocks: evicted,
            per_replica: loads,
            imbalance: if mean_computed > 0.0 {
                busiest / mean_computed
            } else {
                1.0
            },
            ttft: Latency {
                p50: ttft.p50,
                p95: ttft.p95,
                p99: ttft.p99,
                max: ttft.max,
            },
            makespan,
            belief,
            served_per_request,
            routers: setup.fleet.routers.max(1),
            signal_delay: setup.fleet.signal_delay,
            replica_speed: setup.fleet.replica_speed.clone(),
            bounds: order.zip(trace).map(|(order, trace)| {
                super::bounds::bounds(trace, setup.engine, replica_count, setup.cache, &order)
            }),
        }
    }
}
