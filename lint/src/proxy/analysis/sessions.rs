//! Which session a request belongs to (the grouping recordings get too), and forgetting the
//! sessions idle longest so that memory stays bounded.

use serde_json::Value;

use super::{Analysis, Session};
use crate::proxy::Exchange;
use kvlint_protocol::key::Carried;

/// Sessions whose previous request is kept to check the next against; past this many, the
/// least recently seen is forgotten (its next request starts over), so that memory stays
/// bounded however many sessions pass.
pub(super) const LIVE_SESSIONS: usize = 1024;

impl Analysis {
    /// The session a request belongs to, as a recording's requests are grouped
    /// ([`kvlint_protocol::grouping`]): the agent's session id and the other session keys
    /// first ([`kvlint_protocol::key::SESSION_KEY`]), then which session's conversation it
    /// continues.
    pub(super) fn session_for(&mut self, exchange: &Exchange, body: &Value) -> usize {
        let headers = crate::proxy::forward::header_pairs(&exchange.request_headers);
        let carried = Carried {
            body: Some(body),
            headers: &headers,
            trace_conversation: None,
        };
        let joined = self.grouping.join(&exchange.path, body, &carried);
        if joined.started {
            self.sessions.push(Session {
                previous: None,
                previous_at: None,
                previous_prompt: None,
                turns: 0,
                record: None,
                record_bytes: 0,
                record_part: 0,
                last_seen: 0,
            });
        }
        joined.session
    }

    /// Forgets the least recently seen sessions past [`LIVE_SESSIONS`]: their previous request,
    /// tokens and open record file.
    pub(super) fn forget_idle(&mut self) {
        while self.live > LIVE_SESSIONS {
            let Some((index, oldest)) = self
                .sessions
                .iter_mut()
                .enumerate()
                .filter(|(_, session)| session.previous.is_some())
                .min_by_key(|(_, session)| session.last_seen)
            else {
                return;
            };
            // Its next request starts a new session: it is no longer a candidate.
            self.grouping.forget(index);
            oldest.previous = None;
            oldest.previous_at = None;
            oldest.previous_prompt = None;
            oldest.record = None;
            self.live -= 1;
        }
    }
}
