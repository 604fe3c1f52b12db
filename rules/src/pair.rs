//! The pair of turns rules look at, and the questions they ask of it.

use std::collections::HashSet;

use kvlint_core::diff::{Change, Divergence, RenderedRequest, change_between, part_at};
use kvlint_render::render::Rendered;
use kvlint_request::path::PartPath;
use kvlint_request::request::{Part, Request};

/// Two consecutive turns where the later one does not extend the earlier: what rules see.
pub struct TurnPair<'a> {
    /// Index of the later turn.
    pub index: usize,
    pub previous: &'a Request,
    pub current: &'a Request,
    pub previous_rendered: &'a Rendered,
    pub current_rendered: &'a Rendered,
    pub divergence: &'a Divergence,
}

impl<'a> TurnPair<'a> {
    /// The part of the later turn where the divergence is: the content part it is named
    /// after when this turn has one, else what is rendered at the divergence.
    pub fn current_part(&self) -> Option<&'a Part> {
        content_part_named(self.current, &self.divergence.part)
            .or_else(|| self.current_part_at_divergence())
    }

    fn current_side(&self) -> RenderedRequest<'a> {
        RenderedRequest {
            request: self.current,
            rendered: self.current_rendered,
        }
    }

    fn previous_side(&self) -> RenderedRequest<'a> {
        RenderedRequest {
            request: self.previous,
            rendered: self.previous_rendered,
        }
    }

    fn current_part_at_divergence(&self) -> Option<&'a Part> {
        part_at(self.current_side(), self.divergence.rendered_byte)
    }

    /// The part of the earlier turn where the divergence is, found the same way.
    pub fn previous_part(&self) -> Option<&'a Part> {
        content_part_named(self.previous, &self.divergence.part)
            .or_else(|| self.previous_part_at_divergence())
    }

    fn previous_part_at_divergence(&self) -> Option<&'a Part> {
        part_at(self.previous_side(), self.divergence.rendered_byte)
    }

    /// What changed inside the diverging content part, when both turns have it: the part
    /// this turn diverges in, or, where this turn has only scaffolding there (its message
    /// ends), the earlier turn's part.
    pub fn change(&self) -> Option<Change<'a>> {
        let content = |part: &&Part| !part.kind.is_structural();
        let same = |parts: &'a [Part], like: &Part| {
            parts
                .iter()
                .find(|part| part.path == like.path && part.kind == like.kind)
        };
        let (previous, current) = match self.current_part().filter(content) {
            Some(current) => (same(&self.previous.parts, current)?, current),
            None => {
                let previous = self.previous_part().filter(content)?;
                (previous, same(&self.current.parts, previous)?)
            }
        };
        Some(change_between(&previous.text, &current.text))
    }

    /// The earlier turn's content parts after the one the divergence is in.
    fn previous_later_parts(&self) -> &'a [Part] {
        let parts = &self.previous.parts;
        let first_later = self
            .previous_part()
            .and_then(|part| {
                parts
                    .iter()
                    .position(|candidate| std::ptr::eq(candidate, part))
            })
            .map_or(parts.len(), |position| position + 1);
        &parts[first_later..]
    }

    /// What the earlier turn had from the divergence on, as texts: the changed text of the
    /// diverging part (or the whole part when this turn has none like it), then every later
    /// content part.
    pub fn previous_tail(&self) -> Vec<&'a str> {
        let mut tail = Vec::new();
        match (self.change(), self.previous_part()) {
            (Some(change), _) => tail.push(change.before),
            (None, Some(part)) if !part.kind.is_structural() => tail.push(&*part.text),
            _ => {}
        }
        tail.extend(
            self.previous_later_parts()
                .iter()
                .filter(|part| !part.kind.is_structural())
                .map(|part| &*part.text),
        );
        tail
    }

    /// This turn's rendered text from the divergence on.
    pub fn current_tail_text(&self) -> &'a str {
        self.current_rendered
            .text
            .get(self.divergence.rendered_byte..)
            .unwrap_or_default()
    }

    /// Whether content the earlier turn had after the divergence is sent again in this turn
    /// and must be recomputed. When it is not, the earlier turn's tail was volatile and is
    /// simply dropped: the recommended placement for per-turn content.
    pub fn recomputes_kept_content(&self) -> bool {
        // A change to what a server-kept conversation follows (its instructions, tools)
        // recomputes that whole conversation.
        if self.current.continues_on_server()
            || self
                .change()
                .is_some_and(|change| has_content(change.kept_suffix))
        {
            return true;
        }
        let previous = &self.previous;
        let current = &self.current;
        let divergence_part = self.current_part().map_or(0, |part| {
            current
                .parts
                .iter()
                .position(|candidate| std::ptr::eq(candidate, part))
                .unwrap_or(0)
        });
        let current_later: HashSet<&str> = current.parts[divergence_part..]
            .iter()
            .filter(|part| !part.kind.is_structural())
            .map(|part| &*part.text)
            .collect();
        let previous_last_message = previous.messages.len().checked_sub(1);
        let current_last_message = current.messages.len().checked_sub(1);
        self.previous_later_parts()
            .iter()
            .filter(|part| !part.kind.is_structural() && has_content(&part.text))
            .filter(|part| current_later.contains(&*part.text))
            .any(|part| {
                // A trailing note sent again as the newest message is a moved tail, not kept
                // history: it was at the end before and is at the end again.
                let moved_tail =
                    part.message.is_some() && part.message == previous_last_message && {
                        current
                            .parts
                            .iter()
                            .rev()
                            .find(|candidate| candidate.text == part.text)
                            .is_some_and(|candidate| {
                                candidate.message.is_some()
                                    && candidate.message == current_last_message
                            })
                    };
                !moved_tail
            })
    }

    /// Tokens the earlier turn had past the divergence point.
    pub fn tokens_lost(&self) -> usize {
        self.previous_rendered
            .tokens
            .len()
            .saturating_sub(self.divergence.token)
    }
}

fn content_part_named<'a>(request: &'a Request, path: &PartPath) -> Option<&'a Part> {
    request
        .parts
        .iter()
        .find(|part| !part.kind.is_structural() && &part.path == path)
}

/// Whether a text holds something a reader would call content: a word, not punctuation.
fn has_content(text: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric())
        .any(|word| word.chars().count() >= 2)
}
