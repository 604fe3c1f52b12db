//! Which replica behind a gateway served a request, read off the replicas' own metrics
//! (`--replica-metrics`), as `kvlint probe --gateway` does: the one replica whose
//! generated-token counter moved since the previous reading. The counters are read the moment
//! a response ends, in a stage of their own between the forwarding path and the analysis,
//! so that the next request of a sequential agent has not moved them yet; requests answered
//! at the same time move several counters, and their replica stays unknown.

use std::sync::mpsc::{Receiver, SyncSender};

use rustls::pki_types::CertificateDer;

use super::Exchange;
use super::analysis::engine_client;
use kvlint_protocol::EngineName;

use crate::engine_client::{Client, prometheus_value};

pub(super) struct Counters {
    replicas: Vec<(String, Client)>,
    /// The counter read.
    metric: &'static str,
    /// Each replica's counter at the previous reading.
    last: Vec<Option<f64>>,
}

impl Counters {
    pub(super) fn new(
        replicas: &[String],
        kind: EngineName,
        authorities: &[CertificateDer<'static>],
    ) -> Self {
        let metric = match kind {
            EngineName::Vllm => "vllm:generation_tokens_total",
            EngineName::Sglang => "sglang:generation_tokens_total",
            _ => "llamacpp:tokens_predicted_total",
        };
        let replicas = replicas
            .iter()
            .map(|url| {
                let url = url.trim_end_matches('/').to_owned();
                let client = engine_client(&url, authorities);
                (url, client)
            })
            .collect::<Vec<_>>();
        Self {
            last: vec![None; replicas.len()],
            replicas,
            metric,
        }
    }

    /// Tags each prompt exchange with its replica and passes every exchange on.
    pub(super) fn run(mut self, exchanges: Receiver<Exchange>, analysis: SyncSender<Exchange>) {
        // The reading the first request is compared with.
        let _ = self.moved();
        for mut exchange in exchanges {
            if exchange.is_prompt() {
                exchange.replica = self.moved();
            }
            if analysis.send(exchange).is_err() {
                return;
            }
        }
    }

    /// Reads every replica's counter: the one replica whose counter moved since the previous
    /// reading served the request; none or several: not known.
    fn moved(&mut self) -> Option<String> {
        let now: Vec<Option<f64>> = self
            .replicas
            .iter()
            .map(|(_, client)| prometheus_value(&client.get_text("/metrics")?, self.metric))
            .collect();
        let moved: Vec<usize> = now
            .iter()
            .zip(&self.last)
            .enumerate()
            .filter(|(_, (now, last))| now.zip(**last).is_some_and(|(now, last)| now > last))
            .map(|(index, _)| index)
            .collect();
        self.last = now;
        match moved.as_slice() {
            [one] => Some(self.replicas[*one].0.clone()),
            _ => None,
        }
    }
}
