//! A workload as an engine's prefix cache sees it: per request, its session, when it was sent,
//! its prompt and output lengths, and its prompt as a chain of block hashes, stored as the
//! blocks it adds to the session's previous request (a turn resends the head of the one
//! before: only the rest is new). Every producer (sessions rendered by `kvlint-workload`,
//! benchmark datasets, a log's rows, hashed traces) builds it with [`crate::TraceBuilder`].

mod build;

use std::ops::Range;

pub use build::{Blocks, NewRequest, SessionChain, TraceBuilder, chain_hash};

/// One request of the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRequest {
    /// Its session, an index into [`Trace::sessions`].
    pub session: u32,
    /// When it was sent, in seconds since the Unix epoch, when the recording says.
    pub time: Option<f64>,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Leading prompt tokens shared with the session's previous request's prompt.
    pub shared_with_previous: u32,
    /// Leading prompt tokens shared with the session's previous prompt followed by the
    /// tokens generated for it (what an engine that keeps generated tokens holds).
    pub shared_with_previous_sequence: u32,
    /// The previous request's prompt length, had this turn extended it (what the turn would
    /// share with its findings fixed).
    pub previous_input_tokens: u32,
    /// Leading full blocks equal to the session's previous request's blocks.
    pub kept_blocks: u32,
    /// Its blocks after the kept ones, in [`Trace::blocks`].
    pub new_blocks: Range<u32>,
    /// Blocks the tokens generated for it complete after the prompt's (the engine caches
    /// them too), in [`Trace::blocks`].
    pub generated_blocks: Range<u32>,
    /// The rule kvlint's check names for this turn's break, if any (in [`Trace::rules`]).
    pub finding: Option<u16>,
}

/// One session of the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSession {
    /// Who the session is, whatever path its file was given by: what `session-hash` routing
    /// hashes ([`session_identity`]).
    pub identity: String,
    /// Its requests, in [`Trace::requests`].
    pub requests: Range<u32>,
}

/// A workload's requests as block-hash chains.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Tokens per block.
    pub block_size: u32,
    /// The renderer the prompts were tokenized with.
    pub renderer: String,
    pub sessions: Vec<TraceSession>,
    /// All requests, session after session.
    pub requests: Vec<TraceRequest>,
    /// Block hashes (the chain's, not the tokens'), referenced by the requests.
    pub blocks: Vec<u64>,
    /// Rule names, referenced by [`TraceRequest::finding`].
    pub rules: Vec<String>,
}

impl Trace {
    /// The prompt's full blocks of `request` (an index into [`Trace::requests`]), as hashes.
    pub fn prompt_blocks(&self, request: usize) -> Vec<u64> {
        let session = &self.sessions[self.requests[request].session as usize];
        let mut blocks = Vec::new();
        for earlier in session.requests.start as usize..=request {
            self.next_prompt_blocks(earlier, &mut blocks);
        }
        blocks
    }

    /// Turns `blocks`, the prompt blocks of the session's request before `request` (empty
    /// for a first request), into the prompt blocks of `request`.
    pub fn next_prompt_blocks(&self, request: usize, blocks: &mut Vec<u64>) {
        let entry = &self.requests[request];
        blocks.truncate(entry.kept_blocks as usize);
        blocks.extend_from_slice(&self.blocks[range(&entry.new_blocks)]);
    }

    /// The blocks the tokens generated for `request` complete.
    pub fn generated_blocks(&self, request: usize) -> &[u64] {
        &self.blocks[range(&self.requests[request].generated_blocks)]
    }

    /// Whether `request` is the first of its session.
    pub fn is_first(&self, request: usize) -> bool {
        let session = &self.sessions[self.requests[request].session as usize];
        session.requests.start as usize == request
    }

    /// Total prompt tokens.
    pub fn input_tokens(&self) -> u64 {
        self.requests
            .iter()
            .map(|request| u64::from(request.input_tokens))
            .sum()
    }
}

pub fn range(range: &Range<u32>) -> Range<usize> {
    range.start as usize..range.end as usize
}

impl Trace {
    /// Adds the sessions of `other` (traced with the same block size) after this trace's.
    pub fn append(&mut self, other: Trace) {
        let sessions = self.sessions.len() as u32;
        let requests = self.requests.len() as u32;
        let blocks = self.blocks.len() as u32;
        let rules: Vec<Option<u16>> = other
            .rules
            .iter()
            .map(|rule| self.rule_index(rule))
            .collect();
        let shift = |range: &Range<u32>, by: u32| range.start + by..range.end + by;
        self.sessions
            .extend(other.sessions.into_iter().map(|session| TraceSession {
                identity: session.identity,
                requests: shift(&session.requests, requests),
            }));
        self.requests
            .extend(other.requests.into_iter().map(|request| {
                TraceRequest {
                    session: request.session + sessions,
                    new_blocks: shift(&request.new_blocks, blocks),
                    generated_blocks: shift(&request.generated_blocks, blocks),
                    finding: request
                        .finding
                        .and_then(|rule| rules.get(usize::from(rule)).copied().flatten()),
                    ..request
                }
            }));
        self.blocks.extend(other.blocks);
    }

    /// The index of `rule` in [`Trace::rules`], added when new; `None`, and not added, when the
    /// index would not fit a `u16`.
    pub fn rule_index(&mut self, rule: &str) -> Option<u16> {
        if let Some(known) = self.rules.iter().position(|name| name == rule) {
            return u16::try_from(known).ok();
        }
        let index = u16::try_from(self.rules.len()).ok()?;
        self.rules.push(rule.to_owned());
        Some(index)
    }
}

/// The order the requests were sent in: by time when every request has one, else session
/// after session.
pub fn arrival_order(trace: &Trace) -> Vec<usize> {
    let mut order: Vec<usize> = (0..trace.requests.len()).collect();
    if trace.requests.iter().all(|request| request.time.is_some()) {
        order.sort_by(|left, right| {
            let time = |index: &usize| trace.requests[*index].time.unwrap_or(0.0);
            time(left).total_cmp(&time(right))
        });
    }
    order
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_rule_is_interned_once_and_none_past_what_a_u16_indexes() {
        let mut trace = Trace {
            block_size: 16,
            renderer: String::new(),
            sessions: Vec::new(),
            requests: Vec::new(),
            blocks: Vec::new(),
            rules: (0..=u16::MAX)
                .map(|index| format!("rule-{index}"))
                .collect(),
        };
        assert_eq!(trace.rule_index("rule-7"), Some(7));
        assert_eq!(trace.rule_index("rule-65535"), Some(u16::MAX));
        // A new rule past the last index is neither given one nor kept.
        assert_eq!(trace.rule_index("new"), None);
        assert_eq!(trace.rules.len(), usize::from(u16::MAX) + 1);
        trace.rules.truncate(2);
        assert_eq!(trace.rule_index("new"), Some(2));
        assert_eq!(trace.rule_index("new"), Some(2));
        assert_eq!(trace.rules.len(), 3);
    }
}
