//! Harmony, the prompt format of gpt-oss: what vLLM renders a gpt-oss request into instead of
//! its chat template (oss-harmony 0.0.11, the fork of openai-harmony vLLM 0.32 installs;
//! `src/encoding.rs`, `Render<Message>` and the content renderers, `src/chat.rs` for the
//! defaults).
//!
//! A message is `<|start|>{role}` + its header (channel, recipient, content type) +
//! `<|message|>` + its content + `<|end|>` (`<|call|>` for an assistant message to a tool).
//! Every piece of text between two formatting tokens is encoded on its own, as ordinary text
//! (`encode_ordinary`): a `<|end|>` inside a message's text is text, not the token. The
//! vocabulary is `o200k_harmony`: `o200k_base` with Harmony's formatting tokens.

mod typescript;

use std::sync::Arc;

use serde_json::Value;

use crate::tokenize::{Chunk, Tokenizer, Tokens};

/// A formatting token of Harmony's `o200k_harmony` encoding, and its id
/// (`tiktoken_ext/public_encodings.rs`, `Encoding::O200kHarmony::special_tokens`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Token {
    Start,
    Message,
    End,
    Call,
    Channel,
    Constrain,
}

impl Token {
    pub fn text(self) -> &'static str {
        match self {
            Self::Start => "<|start|>",
            Self::Message => "<|message|>",
            Self::End => "<|end|>",
            Self::Call => "<|call|>",
            Self::Channel => "<|channel|>",
            Self::Constrain => "<|constrain|>",
        }
    }

    pub fn id(self) -> u32 {
        match self {
            Self::Start => 200_006,
            Self::Message => 200_008,
            Self::End => 200_007,
            Self::Call => 200_012,
            Self::Channel => 200_005,
            Self::Constrain => 200_003,
        }
    }
}

impl Token {
    const ALL: [Token; 6] = [
        Self::Start,
        Self::Message,
        Self::End,
        Self::Call,
        Self::Channel,
        Self::Constrain,
    ];
}

/// Whether the tokenizer is gpt-oss's (`o200k_harmony`): it has Harmony's formatting tokens,
/// with their ids.
pub fn is_harmony_tokenizer(tokenizer: &Tokenizer) -> bool {
    Token::ALL
        .iter()
        .all(|token| tokenizer.added_token_id(token.text()) == Some(token.id()))
}

/// One piece of a rendered prompt: a formatting token, or text encoded on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Token(Token),
    Text(String),
}

impl Piece {
    /// The piece as text: a formatting token's, or the text itself.
    pub fn text(&self) -> &str {
        match self {
            Self::Token(token) => token.text(),
            Self::Text(text) => text,
        }
    }
}

/// The text of a run of pieces.
pub fn text_of(pieces: &[Piece]) -> String {
    pieces.iter().map(Piece::text).collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Developer => "developer",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

/// A Harmony message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub role: Role,
    /// The author's name: for a tool's message, the tool (`functions.get_weather`).
    pub name: Option<String>,
    pub content: Vec<Content>,
    pub channel: Option<String>,
    pub recipient: Option<String>,
    pub content_type: Option<String>,
}

impl Message {
    pub fn new(role: Role, content: Content) -> Self {
        Self {
            role,
            name: None,
            content: vec![content],
            channel: None,
            recipient: None,
            content_type: None,
        }
    }

    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Self::new(role, Content::Text(text.into()))
    }

    pub fn on_channel(mut self, channel: &str) -> Self {
        self.channel = Some(channel.to_owned());
        self
    }

    pub fn to(mut self, recipient: String) -> Self {
        self.recipient = Some(recipient);
        self
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    Text(String),
    System(SystemContent),
    Developer(DeveloperContent),
}

/// The system message's content: `SystemContent::default()` with what the server sets.
#[derive(Clone, Debug, PartialEq)]
pub struct SystemContent {
    pub model_identity: String,
    pub reasoning_effort: ReasoningEffort,
    /// `Current date: …`, where the server writes the day the request came in.
    pub conversation_start_date: Option<String>,
}

impl SystemContent {
    /// Harmony's defaults: ChatGPT's identity, a 2024-06 knowledge cutoff, medium reasoning,
    /// the three channels required.
    pub fn new() -> Self {
        Self {
            model_identity: "You are ChatGPT, a large language model trained by OpenAI.".into(),
            reasoning_effort: ReasoningEffort::Medium,
            conversation_start_date: None,
        }
    }
}

impl Default for SystemContent {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningEffort {
    Low,
    Medium,
    High,
}

/// A developer message's content: instructions and the function tools.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeveloperContent {
    pub instructions: Option<String>,
    pub function_tools: Vec<ToolDescription>,
}

/// A function tool as Harmony declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDescription {
    pub name: String,
    pub description: String,
    pub parameters: Option<Value>,
}

impl ToolDescription {
    /// The tool's declaration in the `functions` namespace: its description as comments, then
    /// its TypeScript type.
    pub fn declaration(&self) -> String {
        let mut lines: Vec<String> = self
            .description
            .lines()
            .map(|line| format!("// {line}"))
            .collect();
        lines.push(match &self.parameters {
            Some(parameters) => format!(
                "type {} = (_: {}) => any;\n",
                self.name,
                typescript::typescript(parameters, "")
            ),
            None => format!("type {} = () => any;\n", self.name),
        });
        lines.join("\n")
    }
}

/// The conversation rendered for the model's next message, as
/// `render_conversation_for_completion` renders it (without dropping analysis messages: the
/// caller decides) followed by `<|start|>assistant`.
pub fn render_for_completion(messages: &[Message]) -> Vec<Piece> {
    let has_function_tools = messages.iter().any(|message| {
        message.content.iter().any(|content| {
            matches!(content, Content::Developer(developer) if !developer.function_tools.is_empty())
        })
    });
    let mut pieces = Vec::new();
    for message in messages {
        render_message(message, has_function_tools, &mut pieces);
    }
    pieces.push(Piece::Token(Token::Start));
    pieces.push(Piece::Text(Role::Assistant.as_str().into()));
    pieces
}

/// The prompt's text and its tokens: each formatting token its id, each text encoded on its
/// own by `text_tokenizer` (`o200k_base`, which never parses special tokens).
pub fn encode(pieces: &[Piece], text_tokenizer: &Tokenizer) -> (String, Tokens) {
    let mut text = String::new();
    let mut tokens = Tokens::default();
    for piece in pieces {
        let chunk = match piece {
            Piece::Token(token) => Arc::new(Chunk {
                ids: vec![token.id()],
                starts: vec![0],
            }),
            Piece::Text(piece) => text_tokenizer.encode_piece(piece),
        };
        tokens.push_piece(chunk, text.len());
        text.push_str(piece.text());
    }
    (text, tokens)
}

/// `Render<Message>`: the header in Harmony's order (a commentary message names its channel
/// before its recipient, others after), the content, the closing token.
fn render_message(message: &Message, has_function_tools: bool, pieces: &mut Vec<Piece>) {
    let text = |pieces: &mut Vec<Piece>, text: String| pieces.push(Piece::Text(text));
    pieces.push(Piece::Token(Token::Start));
    match (&message.role, &message.name) {
        (Role::Tool, name) => text(pieces, name.clone().unwrap_or_default()),
        (role, name) => {
            text(pieces, role.as_str().into());
            if let Some(name) = name {
                text(pieces, format!(":{name}"));
            }
        }
    }
    let recipient = message
        .recipient
        .as_ref()
        .filter(|recipient| *recipient != "all");
    let channel_first = message.channel.as_deref() == Some("commentary");
    if !channel_first && let Some(recipient) = recipient {
        text(pieces, format!(" to={recipient}"));
    }
    if let Some(channel) = &message.channel {
        pieces.push(Piece::Token(Token::Channel));
        text(pieces, channel.clone());
    }
    if channel_first && let Some(recipient) = recipient {
        text(pieces, format!(" to={recipient}"));
    }
    if let Some(content_type) = &message.content_type {
        text(pieces, " ".into());
        pieces.push(Piece::Token(Token::Constrain));
        let rest = content_type
            .strip_prefix(Token::Constrain.text())
            .unwrap_or(content_type);
        if !rest.is_empty() {
            text(pieces, rest.to_owned());
        }
    }
    pieces.push(Piece::Token(Token::Message));
    for content in &message.content {
        let rendered = match content {
            Content::Text(content) => content.clone(),
            Content::System(system) => render_system(system, has_function_tools),
            Content::Developer(developer) => render_developer(developer),
        };
        text(pieces, rendered);
    }
    let end = if message.role == Role::Assistant && message.recipient.is_some() {
        Token::Call
    } else {
        Token::End
    };
    pieces.push(Piece::Token(end));
}

/// `Render<SystemContent>`: identity, cutoff and date; reasoning effort; the channels.
fn render_system(system: &SystemContent, has_function_tools: bool) -> String {
    let mut top = vec![
        system.model_identity.clone(),
        "Knowledge cutoff: 2024-06".to_owned(),
    ];
    if let Some(date) = &system.conversation_start_date {
        top.push(format!("Current date: {date}"));
    }
    let effort = match system.reasoning_effort {
        ReasoningEffort::Low => "low",
        ReasoningEffort::Medium => "medium",
        ReasoningEffort::High => "high",
    };
    let mut channels = "# Valid channels: analysis, commentary, final. Channel must be included \
                        for every message."
        .to_owned();
    if has_function_tools {
        channels.push_str("\nCalls to these tools must go to the commentary channel: 'functions'.");
    }
    [top.join("\n"), format!("Reasoning: {effort}"), channels].join("\n\n")
}

/// `Render<DeveloperContent>`: the instructions, then the `functions` namespace.
fn render_developer(developer: &DeveloperContent) -> String {
    let mut sections = Vec::new();
    if let Some(instructions) = &developer.instructions {
        sections.push("# Instructions".to_owned());
        sections.push(instructions.clone());
    }
    if !developer.function_tools.is_empty() {
        sections.push(functions_section(&developer.function_tools));
    }
    sections.join("\n\n")
}

/// `template_tools_section` for the `functions` namespace alone.
fn functions_section(tools: &[ToolDescription]) -> String {
    let mut lines = vec![
        "## functions\n".to_owned(),
        "namespace functions {\n".to_owned(),
    ];
    lines.extend(tools.iter().map(ToolDescription::declaration));
    lines.push("} // namespace functions".to_owned());
    format!("# Tools\n\n{}", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_and_its_result_render_with_their_headers() {
        let call = Message::text(Role::Assistant, "{}")
            .on_channel("commentary")
            .to("functions.get".into());
        let call = Message {
            content_type: Some("json".into()),
            ..call
        };
        let result = Message {
            name: Some("functions.get".into()),
            ..Message::text(Role::Tool, "42")
                .on_channel("commentary")
                .to("assistant".into())
        };
        assert_eq!(
            text_of(&render_for_completion(&[call, result])),
            "<|start|>assistant<|channel|>commentary to=functions.get <|constrain|>json\
             <|message|>{}<|call|><|start|>functions.get<|channel|>commentary to=assistant\
             <|message|>42<|end|><|start|>assistant"
        );
    }
}
