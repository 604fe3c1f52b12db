//! The keys a request carries: which session it belongs to, and which replica should serve
//! it. Each precedence is written once, here, as a table that every reader walks: the
//! recordings' grouping, `kvlint import`, the proxy (its sessions and its balancer), `kvlint
//! probe`, the workload, and the Python package through its native module.
//!
//! | | session key | routing key |
//! |---|---|---|
//! | 1 | header `x-claude-code-session-id` (Claude Code) | header `x-kvlint-routing-key` |
//! | 2 | header `session_id` (Codex) | header `X-SMG-Routing-Key` |
//! | 3 | header `x-session-id` (OpenCode) | body `prompt_cache_key` |
//! | 4 | header `X-Dynamo-Session-ID` (NVIDIA Dynamo) | body `metadata.user_id` |
//! | 5 | a trace's conversation id (`gen_ai.conversation.id`) | body `user` |
//! | 6 | body `metadata.user_id` | body `safety_identifier` |
//! | 7 | body `user` | |
//! | 8 | body `safety_identifier` | |
//! | 9 | body `prompt_cache_key` | |
//! | 10 | header `x-kvlint-routing-key` | |
//! | 11 | header `X-SMG-Routing-Key` | |
//!
//! The first source present wins; an empty string or a value that is not a string counts as
//! absent; header names are compared without regard to case. The session key names what an
//! agent says is its session first, then what a client says is one conversation or one user; the prefix keys come last, since the key
//! the SDK sends covers only the tools and instructions, which every session of an application
//! shares (it routes them to the replica that holds that prefix). The routing key names the
//! prefix first. The session key partitions a recording or a live stream: within one key,
//! requests are still grouped by whether they continue each other ([`crate::grouping`]).
//! Without a routing key, a request is routed by the [`crate::chain`] over its head.
//!
//! Sub-agents name their parent ([`SUB_AGENT_LINKS`]): Claude Code sends its session id on
//! every request and, on a sub-agent's, `x-claude-code-agent-id` (the sub-agent's own id) and
//! `x-claude-code-parent-agent-id` (the agent that spawned it, absent when that is the main
//! agent), so a sub-agent's session key is its session id and agent id together; OpenCode
//! sends `x-session-id` (the sub-agent's own session) and `x-parent-session-id`; NVIDIA Dynamo
//! `X-Dynamo-Session-ID` and `X-Dynamo-Parent-Session-ID`. Sources: Claude Code's gateway
//! protocol (<https://code.claude.com/docs/en/llm-gateway-protocol>) and the feature request
//! that named the two agent headers (anthropics/claude-code#49204); OpenCode's
//! `packages/opencode/src/session/llm.ts` (anomalyco/opencode#12932: `x-session-id` always,
//! `x-parent-session-id` on sub-agent sessions); Dynamo's "Identify Agent Sessions"
//! (<https://docs.nvidia.com/dynamo/dev/agents/identify-agent-sessions>) and
//! `lib/llm/src/protocols/agents.rs` (`AGENT_HEADER_MAPPINGS`, which reads all three agents'
//! headers the same way: a root session header, a child id, a parent id).

use serde_json::Value;

/// The header a gateway or load balancer reads to send a session to the replica that holds
/// its prefix (kvlint's own name; configure your gateway's sticky routing on it).
pub const ROUTING_KEY_HEADER: &str = "x-kvlint-routing-key";

/// The header the SGLang Model Gateway (SMG, formerly the SGLang router) reads as the routing
/// key of its `consistent_hashing` policy: requests with the same key go to the same worker.
pub const SGLANG_ROUTING_KEY_HEADER: &str = "X-SMG-Routing-Key";

/// The header xAI routes a conversation's requests to one server by ("The x-grok-conv-id HTTP
/// header routes requests with the same conversation ID to the same server. Since cache
/// entries are stored per-server, this maximizes your cache hit rate.",
/// <https://docs.x.ai/developers/advanced-api-usage/prompt-caching/maximizing-cache-hits>,
/// read 2026-12-07): a conversation's id, so a session key.
pub const XAI_CONVERSATION_HEADER: &str = "x-grok-conv-id";

/// The headers coding agents and serving frameworks name their session in: Claude Code's,
/// Codex's, OpenCode's, NVIDIA Dynamo's.
pub const AGENT_SESSION_HEADERS: [&str; 4] = [
    "x-claude-code-session-id",
    "session_id",
    "x-session-id",
    "X-Dynamo-Session-ID",
];

/// How one agent names a sub-agent's session and its parent's, in its headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubAgentLink {
    /// The session header (one of [`AGENT_SESSION_HEADERS`]).
    pub session: &'static str,
    /// A sub-agent's own id within that session, when the agent sends one (Claude Code): the
    /// session key is then the session id and this id together.
    pub agent: Option<&'static str>,
    /// The parent's id: a session id, or (with [`Self::agent`]) an agent id within the same
    /// session, the session itself when absent.
    pub parent: &'static str,
}

/// The sub-agent links of the agents that send them: Claude Code's, OpenCode's, Dynamo's.
pub const SUB_AGENT_LINKS: [SubAgentLink; 3] = [
    SubAgentLink {
        session: AGENT_SESSION_HEADERS[0],
        agent: Some("x-claude-code-agent-id"),
        parent: "x-claude-code-parent-agent-id",
    },
    SubAgentLink {
        session: AGENT_SESSION_HEADERS[2],
        agent: None,
        parent: "x-parent-session-id",
    },
    SubAgentLink {
        session: AGENT_SESSION_HEADERS[3],
        agent: None,
        parent: "X-Dynamo-Parent-Session-ID",
    },
];

/// Where a key can be read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// A request header.
    Header(&'static str),
    /// The conversation id of the trace span a request was rebuilt from.
    TraceConversation,
    /// A string in the body, at this JSON pointer.
    Body(&'static str),
}

/// Which session a request belongs to, first source first.
pub const SESSION_KEY: [KeySource; 12] = [
    KeySource::Header(AGENT_SESSION_HEADERS[0]),
    KeySource::Header(AGENT_SESSION_HEADERS[1]),
    KeySource::Header(AGENT_SESSION_HEADERS[2]),
    KeySource::Header(AGENT_SESSION_HEADERS[3]),
    KeySource::Header(XAI_CONVERSATION_HEADER),
    KeySource::TraceConversation,
    KeySource::Body("/metadata/user_id"),
    KeySource::Body("/user"),
    KeySource::Body("/safety_identifier"),
    KeySource::Body("/prompt_cache_key"),
    KeySource::Header(ROUTING_KEY_HEADER),
    KeySource::Header(SGLANG_ROUTING_KEY_HEADER),
];

/// Which replica should serve a request, first source first.
pub const ROUTING_KEY: [KeySource; 6] = [
    KeySource::Header(ROUTING_KEY_HEADER),
    KeySource::Header(SGLANG_ROUTING_KEY_HEADER),
    KeySource::Body("/prompt_cache_key"),
    KeySource::Body("/metadata/user_id"),
    KeySource::Body("/user"),
    KeySource::Body("/safety_identifier"),
];

/// The body fields OpenAI combines with the hash of a prompt's first tokens to pick the
/// machine that serves it, first source first: `prompt_cache_key`, and `user`, which it
/// replaces ("Cache Routing", https://developers.openai.com/api/docs/guides/prompt-caching).
/// Without either, requests that share a prefix may land on machines that do not hold it.
pub const OPENAI_CACHE_ROUTING_KEY: [KeySource; 2] = [
    KeySource::Body("/prompt_cache_key"),
    KeySource::Body("/user"),
];

/// What a request carries that keys are read from. Every field may be missing: a recorded
/// body has no headers, a header alone has no body.
#[derive(Clone, Copy, Default)]
pub struct Carried<'a> {
    pub body: Option<&'a Value>,
    /// The request's headers, name and value (names in any case).
    pub headers: &'a [(&'a str, &'a str)],
    pub trace_conversation: Option<&'a str>,
}

impl<'a> Carried<'a> {
    /// A body without headers.
    pub fn body(body: &'a Value) -> Self {
        Self {
            body: Some(body),
            ..Self::default()
        }
    }

    /// Headers without a body.
    pub fn headers(headers: &'a [(&'a str, &'a str)]) -> Self {
        Self {
            headers,
            ..Self::default()
        }
    }

    /// The value of one source, when present and a non-empty string.
    pub fn get(&self, source: KeySource) -> Option<String> {
        let value = match source {
            KeySource::Header(name) => self
                .headers
                .iter()
                .find(|(header, _)| header.eq_ignore_ascii_case(name))
                .map(|(_, value)| (*value).to_owned()),
            KeySource::TraceConversation => self.trace_conversation.map(str::to_owned),
            KeySource::Body(pointer) => self
                .body?
                .pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        value.filter(|value| !value.is_empty())
    }

    /// The first source of `table` present, with its value.
    pub fn first(&self, table: &[KeySource]) -> Option<(KeySource, String)> {
        table
            .iter()
            .find_map(|source| Some((*source, self.get(*source)?)))
    }

    /// The session key ([`SESSION_KEY`]); a Claude Code sub-agent's is its session id and its
    /// agent id ([`SUB_AGENT_LINKS`]).
    pub fn session_key(&self) -> Option<String> {
        self.session_source().map(|(_, key)| key)
    }

    /// The session key with the source it was read from.
    pub fn session_source(&self) -> Option<(KeySource, String)> {
        let (source, key) = self.first(&SESSION_KEY)?;
        let agent = self
            .link(source)
            .and_then(|link| self.get(KeySource::Header(link.agent?)));
        Some(match agent {
            Some(agent) => (source, format!("{key}/{agent}")),
            None => (source, key),
        })
    }

    /// The session key of the session that spawned this one, when the request names it
    /// ([`SUB_AGENT_LINKS`]): comparable with [`Self::session_key`] of the parent's requests.
    pub fn parent_session_key(&self) -> Option<String> {
        let (source, key) = self.first(&SESSION_KEY)?;
        let link = self.link(source)?;
        let parent = self.get(KeySource::Header(link.parent));
        match link.agent {
            // A Claude Code sub-agent: its parent is an agent of the same session, or the
            // session's main agent when no parent agent is named.
            Some(agent) => {
                self.get(KeySource::Header(agent))?;
                Some(parent.map_or_else(|| key.clone(), |parent| format!("{key}/{parent}")))
            }
            None => parent.filter(|parent| *parent != key),
        }
    }

    fn link(&self, source: KeySource) -> Option<&'static SubAgentLink> {
        SUB_AGENT_LINKS
            .iter()
            .find(|link| source == KeySource::Header(link.session))
    }

    /// The routing key ([`ROUTING_KEY`]).
    pub fn routing_key(&self) -> Option<String> {
        self.first(&ROUTING_KEY).map(|(_, key)| key)
    }
}

/// The session a request belongs to, from its body and its headers as a language binding
/// holds them (name, value): [`Carried::session_key`], `""` when it carries none.
pub fn session_key_of(body: &Value, headers: &[(String, String)]) -> String {
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let carried = Carried {
        body: Some(body),
        headers: &headers,
        trace_conversation: None,
    };
    carried.session_key().unwrap_or_default()
}

/// Whether a body opens a conversation: one user message and no answer yet (in `messages`,
/// or a Responses `input` of items or a string). A conversation that opens under the key of
/// an earlier one (a prefix key covers only the tools and instructions every session shares)
/// is a new session, not a rewrite of that one.
pub fn opens_conversation(body: &Value) -> bool {
    let items = body.get("messages").or_else(|| body.get("input"));
    let Some(items) = items.and_then(Value::as_array) else {
        return items.is_some_and(Value::is_string);
    };
    let roles = || {
        items.iter().map(|item| {
            item.get("role")
                .or_else(|| item.get("type"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        })
    };
    let users = roles().filter(|role| *role == "user").count();
    let answers = roles()
        .filter(|role| !matches!(*role, "system" | "developer" | "user"))
        .count();
    users == 1 && answers == 0
}

/// Whether a header is one of the tables' headers (the sub-agent links' too): a recorder
/// keeps its value as the conversation the client named.
pub fn is_key_header(name: &str) -> bool {
    let links = SUB_AGENT_LINKS
        .iter()
        .flat_map(|link| link.agent.into_iter().chain([link.parent]));
    SESSION_KEY
        .iter()
        .chain(&ROUTING_KEY)
        .filter_map(|source| match source {
            KeySource::Header(header) => Some(*header),
            _ => None,
        })
        .chain(links)
        .any(|header| header.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_key_follows_its_own_table() {
        let body = json!({
            "user": "ada",
            "metadata": {"user_id": "u-1"},
            "prompt_cache_key": "",
            "messages": [],
        });
        let carried = Carried {
            body: Some(&body),
            headers: &[("accept", "*/*"), ("X-SMG-ROUTING-KEY", "smg-7")],
            trace_conversation: Some("conv-3"),
        };
        // The trace names the session; the header routes it.
        assert_eq!(carried.session_key().as_deref(), Some("conv-3"));
        // An agent's own session header comes before everything else.
        let claude_code = Carried {
            headers: &[
                ("X-Claude-Code-Session-Id", "cc-1"),
                ("x-kvlint-routing-key", "r"),
            ],
            ..carried
        };
        assert_eq!(claude_code.session_key().as_deref(), Some("cc-1"));
        assert_eq!(claude_code.routing_key().as_deref(), Some("r"));
        // xAI's conversation id names the session, before the body's user ids.
        let grok = Carried {
            headers: &[("X-Grok-Conv-Id", "conv-grok")],
            ..Carried::body(&body)
        };
        assert_eq!(grok.session_key().as_deref(), Some("conv-grok"));
        assert_eq!(carried.routing_key().as_deref(), Some("smg-7"));
        let body_only = Carried::body(&body);
        // A user id before a prefix key for the session; an empty `prompt_cache_key` is
        // absent for the route, so the user id is next there too.
        assert_eq!(body_only.session_key().as_deref(), Some("u-1"));
        assert_eq!(
            body_only.first(&ROUTING_KEY),
            Some((KeySource::Body("/metadata/user_id"), "u-1".to_owned()))
        );
        let prefix_keyed = json!({"prompt_cache_key": "p-9", "user": "ada"});
        assert_eq!(
            Carried::body(&prefix_keyed).session_key().as_deref(),
            Some("ada")
        );
        assert_eq!(
            Carried::body(&prefix_keyed).routing_key().as_deref(),
            Some("p-9")
        );
        assert_eq!(Carried::body(&json!({"user": 7})).session_key(), None);
        assert_eq!(Carried::default().routing_key(), None);
    }

    #[test]
    fn a_conversation_opens_with_one_user_message_and_no_answer() {
        let user = json!({"role": "user", "content": "hi"});
        let system = json!({"role": "system", "content": "Be terse."});
        let answer = json!({"role": "assistant", "content": "hello"});
        assert!(opens_conversation(&json!({"messages": [system, user]})));
        assert!(opens_conversation(&json!({"input": "hi"})));
        assert!(!opens_conversation(
            &json!({"messages": [user, answer, user]})
        ));
        assert!(!opens_conversation(&json!({"messages": [system]})));
        // A Responses function call is an answer.
        assert!(!opens_conversation(&json!({"input": [
            user, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]})));
        assert!(!opens_conversation(&json!({"prompt": "hi"})));
    }

    /// Claude Code: the main agent sends its session id alone; a sub-agent adds its agent id,
    /// and its parent agent's when a sub-agent spawned it (the gateway protocol's headers).
    #[test]
    fn claude_code_sub_agents_are_sessions_of_their_own_linked_to_their_parent() {
        let main = [("x-claude-code-session-id", "s-1")];
        let child = [
            ("X-Claude-Code-Session-Id", "s-1"),
            ("x-claude-code-agent-id", "a-7"),
        ];
        let grandchild = [
            ("x-claude-code-session-id", "s-1"),
            ("x-claude-code-agent-id", "a-9"),
            ("x-claude-code-parent-agent-id", "a-7"),
        ];
        let key = |headers| Carried::headers(headers).session_key();
        let parent = |headers| Carried::headers(headers).parent_session_key();
        assert_eq!(key(&main).as_deref(), Some("s-1"));
        assert_eq!(parent(&main), None);
        assert_eq!(key(&child).as_deref(), Some("s-1/a-7"));
        assert_eq!(parent(&child), key(&main));
        assert_eq!(key(&grandchild).as_deref(), Some("s-1/a-9"));
        assert_eq!(parent(&grandchild), key(&child));
    }

    /// Codex: its `session_id` header names the session; it sends no parent link here.
    #[test]
    fn codex_names_its_session_in_its_session_id_header() {
        let headers = [("session_id", "019a-thread"), ("x-kvlint-routing-key", "r")];
        let carried = Carried::headers(&headers);
        assert_eq!(
            carried.session_source(),
            Some((KeySource::Header("session_id"), "019a-thread".to_owned()))
        );
        assert_eq!(carried.parent_session_key(), None);
    }

    /// OpenCode: every request carries its own session's id; a sub-agent's (the task tool's)
    /// adds its parent session's.
    #[test]
    fn opencode_sub_agent_sessions_name_their_parent_session() {
        let main = [("x-session-id", "ses_a")];
        let child = [("X-Session-Id", "ses_b"), ("x-parent-session-id", "ses_a")];
        assert_eq!(
            Carried::headers(&child).session_key().as_deref(),
            Some("ses_b")
        );
        assert_eq!(
            Carried::headers(&child).parent_session_key(),
            Carried::headers(&main).session_key()
        );
        assert_eq!(Carried::headers(&main).parent_session_key(), None);
    }

    /// Dynamo: its own headers come after the agents' (an agent behind a Dynamo frontend keeps
    /// its own id) and link a child to its parent the same way.
    #[test]
    fn dynamo_sessions_name_their_parent_session() {
        let child = [
            ("x-dynamo-session-id", "run-42:researcher"),
            ("X-Dynamo-Parent-Session-ID", "run-42"),
        ];
        let carried = Carried::headers(&child);
        assert_eq!(carried.session_key().as_deref(), Some("run-42:researcher"));
        assert_eq!(carried.parent_session_key().as_deref(), Some("run-42"));
        let itself = [
            ("x-dynamo-session-id", "run-42"),
            ("x-dynamo-parent-session-id", "run-42"),
        ];
        assert_eq!(Carried::headers(&itself).parent_session_key(), None);
    }

    #[test]
    fn key_headers_are_known_in_any_case() {
        assert!(is_key_header("X-KVLINT-ROUTING-KEY"));
        assert!(is_key_header("x-smg-routing-key"));
        assert!(is_key_header("x-dynamo-session-id"));
        assert!(is_key_header("X-Claude-Code-Parent-Agent-Id"));
        assert!(is_key_header("x-claude-code-agent-id"));
        assert!(is_key_header("x-parent-session-id"));
        assert!(is_key_header("x-dynamo-parent-session-id"));
        assert!(!is_key_header("x-request-id"));
    }
}
