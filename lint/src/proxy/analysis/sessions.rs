//! Which session a request belongs to, and forgetting the sessions idle longest so that
//! memory stays bounded.

use serde_json::Value;

use super::{Analysis, Session};
use crate::proxy::Exchange;
use kvlint_core::render::Rendered;
use kvlint_protocol::key::Carried;

/// Sessions whose previous request is kept to check the next against; past this many, the
/// least recently seen is forgotten (its next request starts over), so that memory stays
/// bounded however many sessions pass.
pub(super) const LIVE_SESSIONS: usize = 1024;

impl Analysis {
    /// The session a request belongs to: among the sessions with the same session key
    /// ([`kvlint_protocol::key::SESSION_KEY`]), the one whose previous request it extends most; a
    /// first turn (one user message, no answer yet) starts a new one.
    pub(super) fn session_for(
        &mut self,
        exchange: &Exchange,
        body: &Value,
        rendered: &Rendered,
    ) -> usize {
        let headers = crate::proxy::forward::header_pairs(&exchange.request_headers);
        let key = Carried {
            body: Some(body),
            headers: &headers,
            trace_conversation: None,
        }
        .session_key()
        .unwrap_or_default();
        let continued = (!kvlint_protocol::key::opens_conversation(body))
            .then(|| {
                self.by_key
                    .get(&key)?
                    .iter()
                    .filter_map(|&index| {
                        let (_, previous) = self.sessions[index].previous.as_ref()?;
                        let shared = previous.tokens.common_prefix_len(&rendered.tokens);
                        (shared > 0).then_some((shared, index))
                    })
                    .max()
                    .map(|(_, index)| index)
            })
            .flatten();
        continued.unwrap_or_else(|| {
            let index = self.sessions.len();
            self.sessions.push(Session {
                key: key.clone(),
                previous: None,
                previous_at: None,
                previous_prompt: None,
                turns: 0,
                record: None,
                record_bytes: 0,
                record_part: 0,
                last_seen: 0,
            });
            self.by_key.entry(key).or_default().push(index);
            index
        })
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
            if let Some(sessions) = self.by_key.get_mut(&oldest.key) {
                sessions.retain(|candidate| *candidate != index);
            }
            oldest.previous = None;
            oldest.previous_at = None;
            oldest.previous_prompt = None;
            oldest.record = None;
            self.live -= 1;
        }
    }
}
