//! Fleet realism that changes decisions (`kvlint simulate --signal-delay`, `--routers`,
//! `--replica-speed`), applied by the run ([`super::run`]):
//!
//! - **Late signals.** A router decides on each replica's load as it was `signal_delay`
//!   seconds before: from the requests that had arrived by then (their queue, running,
//!   waiting and prefill figures at that instant). A router that follows the engines' KV
//!   events (it reads [`super::routers::View::caches`]: `prefix-aware`, `dynamo-kv`,
//!   `dynamo-lmetric`, `llmd-precise`) reads a published copy of each engine's cache, fed
//!   each request the engine served (the blocks it stored and those it evicted for them)
//!   only once the delay has passed: the engine's cache as it was then. A router's own index
//!   (SGLang's tree, llm-d's LRU, …) is updated at its own decision, as the real ones are,
//!   and is not delayed.
//! - **Router replicas without shared state.** `routers` copies of the router, each with its
//!   own index, counters and turn; a front balancer sends the requests, in the order they
//!   arrive, to each router in turn (round-robin). They share the replicas, their load and
//!   their KV events, not what they learnt from their own decisions.
//! - **Replicas of unequal speed.** Replica `i` prefills at `prefill_tps × speed[i]` and
//!   decodes at `decode_tps × speed[i]`; a replica not listed runs at 1. The routers read the
//!   queue in seconds, so a slow replica looks busier.

use super::SimulationResult;

/// How the fleet departs from one router that sees every replica as it is, and the bounds a
/// result adds; the default is one router, signals as they are, replicas of equal speed, no
/// bounds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FleetOptions {
    /// Seconds the routers' load signals and the engines' KV events lag behind the replicas.
    pub signal_delay: f64,
    /// Router replicas without shared state, each request sent to the next in turn (a
    /// round-robin front balancer); 0 or 1: one.
    pub routers: usize,
    /// Each replica's prefill and decode speed relative to the setup's (a replica not listed:
    /// 1).
    pub replica_speed: Vec<f64>,
    /// Compute the result's [`super::Bounds`].
    pub bounds: bool,
}

impl SimulationResult {
    /// The result's policy, with its router replicas when more than one.
    pub fn routing_label(&self) -> String {
        if self.routers > 1 {
            format!("{} ×{} routers", self.policy, self.routers)
        } else {
            self.policy.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::run::tests::{SessionOfOne, one_request_sessions};
    use crate::simulate::{
        Arrival, Belief, CacheSize, Setup, SimEngine, SimulationResult, simulate,
    };
    use crate::trace::Trace;

    /// One-request sessions: (arrival second, prompt blocks, prompt tokens), 16-token blocks.
    fn trace(requests: &[(f64, &[u64], u32)]) -> Trace {
        let sessions: Vec<SessionOfOne<'_>> = requests
            .iter()
            .map(|(time, prompt, tokens)| SessionOfOne {
                time: *time,
                prompt,
                answer: &[],
                tokens: *tokens,
                output_tokens: 10,
            })
            .collect();
        one_request_sessions(16, &sessions)
    }

    fn run(trace: &Trace, policy: &str, prefill_tps: f64, fleet: FleetOptions) -> SimulationResult {
        let setup = Setup {
            replicas: 2,
            cache: CacheSize::Unbounded,
            engine: SimEngine::Vllm { block: 16 },
            policy: policy.parse().unwrap(),
            arrival: Arrival::Recorded,
            prefill_tps,
            decode_tps: Some(10.0),
            seed: 0,
            per_request: true,
            fleet,
        };
        simulate(trace, &setup).unwrap()
    }

    fn requests_per_replica(result: &SimulationResult) -> Vec<u64> {
        result
            .per_replica
            .iter()
            .map(|load| load.requests)
            .collect()
    }

    fn delayed(seconds: f64) -> FleetOptions {
        FleetOptions {
            signal_delay: seconds,
            ..FleetOptions::default()
        }
    }

    #[test]
    fn a_late_load_signal_sends_a_request_to_the_busy_replica() {
        // 100 tokens at 10 a second: the first request keeps replica 0 busy for 10 s. A second
        // later, least-loaded sees that queue and takes replica 1; with signals 2 s late, it
        // sees the fleet before the first request arrived, both idle, and takes the first.
        let trace = trace(&[(0.0, &[1], 100), (1.0, &[2], 100)]);
        let now = run(&trace, "least-loaded", 10.0, FleetOptions::default());
        assert_eq!(requests_per_replica(&now), [1, 1]);
        assert_eq!(now.ttft.max, 10.0);
        let late = run(&trace, "least-loaded", 10.0, delayed(2.0));
        assert_eq!(requests_per_replica(&late), [2, 0]);
        // The second waits for the first: 9 s, then its own 10 s.
        assert_eq!(late.ttft.max, 19.0);
        assert_eq!(late.signal_delay, 2.0);
    }

    #[test]
    fn late_kv_events_hide_what_the_engine_stored_until_the_delay_has_passed() {
        // Two prompts of blocks 1, 2 (40 tokens: both servable) a second apart, and a third
        // at 5 s. prefix-aware reads the engines' caches: at once, it predicts the 32 tokens
        // the engine serves; 2 s late, the second request's prediction is 0 (the engine's
        // store is not published yet) while the engine serves 32; by 5 s it is published.
        let trace = trace(&[(0.0, &[1, 2], 40), (1.0, &[1, 2], 40), (5.0, &[1, 2], 40)]);
        let now = run(&trace, "prefix-aware", 1000.0, FleetOptions::default());
        assert_eq!(now.served_per_request, Some(vec![0, 32, 32]));
        assert_eq!(
            now.belief,
            Some(Belief {
                predicted_tokens: 64,
                predicted_not_served_tokens: 0,
                served_not_predicted_tokens: 0,
            })
        );
        let late = run(&trace, "prefix-aware", 1000.0, delayed(2.0));
        assert_eq!(late.served_per_request, Some(vec![0, 32, 32]));
        assert_eq!(
            late.belief,
            Some(Belief {
                predicted_tokens: 32,
                predicted_not_served_tokens: 0,
                served_not_predicted_tokens: 32,
            })
        );
    }

    #[test]
    fn router_replicas_keep_their_own_turn() {
        // Round-robin behind two router replicas, each request to the next router: each
        // router sends its first request to replica 0, its second to replica 1.
        let trace = trace(&[
            (0.0, &[1], 20),
            (1.0, &[2], 20),
            (2.0, &[3], 20),
            (3.0, &[4], 20),
            (4.0, &[5], 20),
            (5.0, &[6], 20),
        ]);
        let one = run(&trace, "round-robin", 1000.0, FleetOptions::default());
        assert_eq!(requests_per_replica(&one), [3, 3]);
        let two = FleetOptions {
            routers: 2,
            ..FleetOptions::default()
        };
        let shared_nothing = run(&trace, "round-robin", 1000.0, two);
        // Requests 0 1 | 2 3 | 4 5 → replicas 0 0 | 1 1 | 0 0.
        assert_eq!(requests_per_replica(&shared_nothing), [4, 2]);
        assert_eq!(shared_nothing.routers, 2);
    }

    #[test]
    fn router_replicas_each_learn_only_their_own_decisions() {
        // The same prompt three times: one SGLang router matches the first in its tree for
        // the two repeats (32 tokens each). Behind two router replicas, the second request
        // reaches a router that has routed nothing: it predicts nothing; the third reaches
        // the first router again, which matches it.
        let trace = trace(&[(0.0, &[1, 2], 40), (1.0, &[1, 2], 40), (2.0, &[1, 2], 40)]);
        let one = run(
            &trace,
            "sglang-cache-aware",
            1000.0,
            FleetOptions::default(),
        );
        assert_eq!(one.served_per_request, Some(vec![0, 32, 32]));
        assert_eq!(one.belief.map(|belief| belief.predicted_tokens), Some(64));
        let two = FleetOptions {
            routers: 2,
            ..FleetOptions::default()
        };
        let shared_nothing = run(&trace, "sglang-cache-aware", 1000.0, two);
        assert_eq!(
            shared_nothing.belief.map(|belief| belief.predicted_tokens),
            Some(32)
        );
    }

    #[test]
    fn a_slow_replica_prefills_and_decodes_at_its_speed() {
        // Round-robin at 100 tokens a second: 100 tokens take 1 s on replica 0 and 2 s on
        // replica 1 at half speed; the 10 tokens decoded take 1 s and 2 s.
        let trace = trace(&[(0.0, &[1], 100), (0.0, &[2], 100)]);
        let equal = run(&trace, "round-robin", 100.0, FleetOptions::default());
        assert_eq!(equal.ttft.max, 1.0);
        assert_eq!(equal.makespan, 2.0);
        let uneven = FleetOptions {
            replica_speed: vec![1.0, 0.5],
            ..FleetOptions::default()
        };
        let slow = run(&trace, "round-robin", 100.0, uneven);
        assert_eq!(slow.ttft.max, 2.0);
        assert_eq!(slow.makespan, 4.0);
        assert_eq!(slow.replica_speed, [1.0, 0.5]);
    }
}
