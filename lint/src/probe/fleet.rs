//! Replaying a session through a gateway in front of llama.cpp replicas: which replica
//! served each turn, and the tokens it recomputed because it had not seen the prefix.

use kvlint_core::routing::{ROUTING_KEY_HEADER, request_routing_key, routing_key};
use kvlint_core::session::SessionFile;
use kvlint_request::error::InputError;

use crate::engine_client::Client;
use kvlint_protocol::EngineName;

use super::observe::observe;
use super::predict::predicted_cached;
use super::replay::chat_body;
use crate::engine_client::engine_tokens;
use crate::engine_client::prometheus_value;
use crate::report::probe::{ProbeSession, ProbeTurn};

/// The replicas a fleet probe reads: llama.cpp servers, one slot each, whose
/// `tokens_predicted_total` counter tells which one answered.
const REPLICA_KIND: EngineName = EngineName::LlamaCpp;

/// Replicas behind a gateway: each is probed directly to learn which one served a turn.
pub struct Fleet {
    pub gateway: Client,
    pub replicas: Vec<Client>,
    /// Each replica's slot: the last sequence it processed (llama.cpp, one slot each).
    slots: Vec<Vec<u32>>,
}

impl Fleet {
    pub fn new(gateway: Client, replicas: Vec<Client>) -> Self {
        let slots = vec![Vec::new(); replicas.len()];
        Self {
            gateway,
            replicas,
            slots,
        }
    }

    /// Tokens each replica has generated so far (`llamacpp:tokens_predicted_total`): the one
    /// that grows served the turn.
    fn predicted_totals(&self) -> Vec<Option<f64>> {
        self.replicas
            .iter()
            .map(|replica| {
                prometheus_value(
                    &replica.get_text("/metrics")?,
                    "llamacpp:tokens_predicted_total",
                )
            })
            .collect()
    }
}

/// Replays a session through a gateway and finds, per turn, which replica served it and
/// whether that replica held the prefix. Every turn carries the session's routing key in the
/// header a gateway can hash on: the key the SDK sent (`prompt_cache_key`), else the same
/// derivation over the recorded head.
pub fn probe_fleet(
    fleet: &mut Fleet,
    session: &SessionFile,
    model: Option<&str>,
) -> Result<ProbeSession, InputError> {
    let key = match session.turns().next() {
        Some(first) => request_routing_key(&first?.request),
        None => routing_key([]),
    };
    let mut previous: Option<Vec<u32>> = None;
    let mut turns = Vec::new();
    for (index, turn) in session.turns().enumerate() {
        let body = chat_body(&*turn?, model);
        let mut note = None;
        let Some(tokenizer) = fleet.replicas.first() else {
            break;
        };
        let cache_model = tokenizer.cache_model(REPLICA_KIND, model);
        let tokens = engine_tokens(tokenizer, REPLICA_KIND, &body)
            .map_err(|failure| note = Some(failure.0))
            .ok();
        let before = fleet.predicted_totals();
        let observed = observe(
            &fleet.gateway,
            REPLICA_KIND,
            &body,
            &[(ROUTING_KEY_HEADER, &key)],
            &mut note,
        );
        let after = fleet.predicted_totals();
        let replica = before
            .iter()
            .zip(&after)
            .position(|(before, after)| matches!((before, after), (Some(b), Some(a)) if a > b));
        let (predicted, lost) = match (&tokens, replica) {
            (Some(tokens), Some(replica)) => {
                let served =
                    predicted_cached(&cache_model, tokens, [fleet.slots[replica].as_slice()]);
                // A route that sent the turn where the session's previous turn went.
                let sticky = predicted_cached(&cache_model, tokens, previous.as_deref());
                fleet.slots[replica].clone_from(tokens);
                (Some(served), Some(sticky.saturating_sub(served)))
            }
            _ => (None, None),
        };
        if note.is_none() && replica.is_none() {
            note = Some("no replica's metrics moved: cannot tell which one served the turn (start replicas with --metrics)".into());
        }
        if let (Some(lost), Some(replica), None) = (lost, replica, &note)
            && lost > 0
        {
            note = Some(format!(
                "turn {index} went to replica {replica}, which had not seen the prefix: {lost} tokens recomputed; a prefix-aware or sticky route (hash on the {ROUTING_KEY_HEADER} header) would have served them"
            ));
        }
        turns.push(ProbeTurn {
            replica,
            lost_locality_tokens: lost,
            ..ProbeTurn::new(
                index,
                tokens.as_ref().map(Vec::len),
                predicted,
                observed,
                note,
            )
        });
        previous = tokens;
    }
    Ok(ProbeSession {
        path: session.path.clone(),
        engine_url: fleet.gateway.shown_url(),
        engine_kind: REPLICA_KIND,
        routing_key: Some(key),
        turns,
    })
}
