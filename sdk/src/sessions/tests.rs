//! The multiplexer: sessions told apart, bounded, retries, announced breaks.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::{Guard, GuardMode, Renderer};

fn sessions(mode: GuardMode, limits: SessionLimits) -> GuardSessions<Guard> {
    GuardSessions::per_session(move || Ok(Guard::new(Renderer::provider(), mode)), limits)
}

/// A turn of `user`'s session: a system prompt holding `stamp`, then `turns` exchanges.
fn turn(user: &str, stamp: &str, turns: usize) -> Value {
    let mut messages = vec![json!({"role": "system", "content": format!("Run {stamp}.")})];
    for index in 0..turns {
        if index > 0 {
            messages.push(json!({"role": "assistant", "content": format!("Answer {index}")}));
        }
        messages.push(json!({"role": "user", "content": format!("Question {index}")}));
    }
    json!({"model": "m", "user": user, "messages": messages})
}

fn warned(observed: Result<Observed<'_, crate::Observation>, Arc<crate::GuardError>>) -> bool {
    matches!(observed, Ok(Observed::Checked { warn: true, .. }))
}

#[test]
fn the_least_recently_used_session_is_dropped_and_starts_over() {
    let limits = SessionLimits {
        sessions: 2,
        bodies: 3,
    };
    let mut sessions = sessions(GuardMode::Warn, limits);
    for user in ["a", "b"] {
        sessions.observe(turn(user, "1", 2), &[], 0).unwrap();
    }
    // `a` is used again, so `b` is the least recently used when `c` comes.
    assert!(!warned(sessions.observe(turn("a", "1", 3), &[], 0)));
    sessions.observe(turn("c", "1", 2), &[], 0).unwrap();
    assert_eq!(sessions.len(), 2);
    assert!(sessions.guard("b").is_none());
    assert!(!sessions.contains("b") && sessions.contains("c"));
    assert_eq!(sessions.least_recently_used(), Some("a"));
    let kept: Vec<&str> = sessions.guards().map(|(key, _)| key).collect();
    assert_eq!(kept, ["a", "c"]);
    // `b`'s next body has nothing to be compared with: no break, though its stamp moved.
    assert!(!warned(sessions.observe(turn("b", "2", 3), &[], 0)));
    // `a`, kept, is compared: its stamp moved.
    assert!(sessions.guard("a").is_none());
    sessions.observe(turn("a", "1", 3), &[], 0).unwrap();
    assert!(warned(sessions.observe(turn("a", "2", 4), &[], 0)));
    // The latest bodies only.
    let observed: Vec<&str> = sessions.observed().map(|body| body.key.as_str()).collect();
    assert_eq!(observed, ["b", "a", "a"]);
}

#[test]
fn a_retry_of_a_refused_body_is_refused_again_and_of_an_accepted_one_not_observed() {
    let mut sessions = sessions(GuardMode::Error, SessionLimits::default());
    sessions.observe(turn("a", "1", 2), &[], 0).unwrap();
    let refused = turn("a", "2", 3);
    let first = sessions.observe(refused.clone(), &[], 0).unwrap_err();
    let again = sessions.observe(refused.clone(), &[], 1).unwrap_err();
    assert!(Arc::ptr_eq(&first, &again));
    let counters = sessions.guard("a").unwrap().counters().clone();
    assert_eq!((counters.turns, counters.refused_turns), (2, 1));
    // Another body on a retry: not observed.
    let other = sessions.observe(turn("a", "1", 3), &[], 2).unwrap();
    assert!(matches!(other, Observed::Retry));
    assert_eq!(sessions.guard("a").unwrap().counters().turns, 2);
    // Accepted after the refusal: a retry of the refused body is no longer refused.
    sessions.observe(turn("a", "1", 3), &[], 0).unwrap();
    assert!(matches!(
        sessions.observe(refused, &[], 1).unwrap(),
        Observed::Retry
    ));
}

#[test]
fn a_body_that_opens_a_conversation_starts_over_unless_a_break_was_announced() {
    let mut sessions = sessions(GuardMode::Warn, SessionLimits::default());
    sessions.observe(turn("a", "1", 3), &[], 0).unwrap();
    // A new conversation under the same key: a session of its own, numbered.
    let observed = sessions.observe(turn("a", "2", 1), &[], 0).unwrap();
    assert!(matches!(observed, Observed::Checked { body, warn: false } if body.key == "a#1"));
    // Announced (a compaction down to one message): the key's session's break.
    sessions.guard_mut("a").unwrap().expect_break();
    let observed = sessions.observe(turn("a", "3", 1), &[], 0).unwrap();
    assert!(matches!(observed, Observed::Checked { body, warn: false } if body.key == "a"));
    assert_eq!(sessions.guard("a").unwrap().counters().expected_breaks, 1);
    // Its next turn continues it.
    assert!(!warned(sessions.observe(turn("a", "3", 2), &[], 0)));
    assert_eq!(sessions.guard("a").unwrap().counters().turns, 3);
    // Under a key the application names: a new conversation resets the guard, unless a
    // break was announced (a compaction down to one message), the session's break.
    let key = || "chat".to_owned();
    sessions.observe_as(key(), turn("a", "1", 3), 0).unwrap();
    assert!(!warned(sessions.observe_as(key(), turn("a", "2", 1), 0)));
    assert_eq!(
        sessions.guard("chat").unwrap().counters().expected_breaks,
        0
    );
    sessions.observe_as(key(), turn("a", "2", 3), 0).unwrap();
    sessions.guard_mut("chat").unwrap().expect_break();
    assert!(!warned(sessions.observe_as(key(), turn("a", "3", 1), 0)));
    assert_eq!(
        sessions.guard("chat").unwrap().counters().expected_breaks,
        1
    );
}

/// Two users of one agent whose bodies carry no id: their conversations, interleaved, are
/// two sessions (told apart as a recording's are), and an error-mode guard refuses
/// neither; each user's own break is still found.
#[test]
fn two_users_without_ids_are_two_sessions() {
    let mut sessions = sessions(GuardMode::Error, SessionLimits::default());
    let user = |name: &str, stamp: &str, turns: usize| {
        let mut body = turn("", stamp, turns);
        body.as_object_mut().unwrap().remove("user");
        for message in body["messages"].as_array_mut().unwrap().iter_mut().skip(1) {
            let text = format!("{name}: {}", message["content"].as_str().unwrap());
            message["content"] = json!(text);
        }
        body
    };
    for turns in 1..=3 {
        for name in ["ada", "bob"] {
            sessions.observe(user(name, "1", turns), &[], 0).unwrap();
        }
    }
    let keys: Vec<&str> = sessions.guards().map(|(key, _)| key).collect();
    assert_eq!(keys, ["#0", "#1"]);
    assert_eq!(sessions.guard("#1").unwrap().counters().turns, 3);
    // Bob's system prompt dated anew: his session's break, refused.
    assert!(sessions.observe(user("bob", "2", 4), &[], 0).is_err());
    sessions.observe(user("ada", "1", 4), &[], 0).unwrap();
}

#[test]
fn one_guard_serves_every_session_and_the_bounds_hold() {
    let guard = Guard::new(Renderer::provider(), GuardMode::Warn);
    let limits = SessionLimits {
        sessions: 1,
        bodies: 1,
    };
    let mut sessions = GuardSessions::single(guard, limits);
    sessions.observe(turn("a", "1", 2), &[], 0).unwrap();
    sessions.observe(turn("b", "1", 3), &[], 0).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions.observed().len(), 1);
    assert_eq!(sessions.guard("anyone").unwrap().counters().turns, 2);
}
