//! The routing key of a recorded request: the one it carries ([`kvlint_protocol::key`]: the
//! SDK sends it as `prompt_cache_key`), or the chain ([`kvlint_protocol::chain`]) over the
//! request's head, which a gateway hashes on to send every request of a session to the replica
//! whose cache holds that prefix.

use kvlint_request::request::{PartKind, Request};

use kvlint_protocol::key::Carried;
pub use kvlint_protocol::{
    PrefixChain, PrefixTier, ROUTING_KEY_HEADER, SGLANG_ROUTING_KEY_HEADER, routing_key,
};

/// The routing key of a recorded request: the one its body carries
/// ([`kvlint_protocol::key::ROUTING_KEY`]: `prompt_cache_key`, which the SDK sets to the
/// conversation's key, then a user id), else [`routing_key`] over the request's head.
///
/// The head of a recorded request is what every later turn of its session sends again
/// unchanged: the tool definitions, the system text outside the messages (Anthropic's
/// `system`, the Responses `instructions`) and the first message (a system prompt, or the
/// opening user message when there is none). Settings such as `tool_choice` are left out: an
/// agent may change them between turns, and the key must not move with them.
pub fn request_routing_key(request: &Request) -> String {
    if let Some(key) = Carried::body(&request.body).routing_key() {
        return key;
    }
    let head = request
        .parts
        .iter()
        .filter(|part| !part.kind.is_structural())
        .filter_map(|part| match (part.kind, part.message) {
            (PartKind::Tool, _) => Some((PrefixTier::Tool, &*part.text)),
            (PartKind::System, None) | (_, Some(0)) => Some((PrefixTier::Static, &*part.text)),
            _ => None,
        });
    routing_key(head)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn request(body: Value) -> Request {
        Request::from_body(&body).unwrap()
    }

    #[test]
    fn a_recorded_prompt_cache_key_is_the_routing_key() {
        let body = serde_json::json!({
            "model": "m",
            "prompt_cache_key": "session-7",
            "messages": [{"role": "user", "content": "hi"}],
        });
        assert_eq!(request_routing_key(&request(body)), "session-7");
    }

    #[test]
    fn a_recorded_key_holds_for_the_session_and_ignores_settings() {
        let first = serde_json::json!({
            "model": "m",
            "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {}}}],
            "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}],
        });
        let mut later = first.clone();
        later["tool_choice"] = serde_json::json!("required");
        later["messages"].as_array_mut().unwrap().extend([
            serde_json::json!({"role": "assistant", "content": "hello"}),
            serde_json::json!({"role": "user", "content": "bye"}),
        ]);
        assert_eq!(
            request_routing_key(&request(first.clone())),
            request_routing_key(&request(later))
        );
        let mut other = first.clone();
        other["messages"][0]["content"] = serde_json::json!("Be verbose.");
        assert_ne!(
            request_routing_key(&request(first)),
            request_routing_key(&request(other))
        );
    }
}
