"""summarizing-memory.har: LangGraph's "How to add summary of the conversation history"."""

from . import BreakpointCache, Recording, compact, ident, long_prompt
from .providers import anthropic_call


SUMMARY_SOURCE = "https://langchain-ai.github.io/langgraph/how-tos/memory/add-summary-conversation-history/"

SPORTS_OPENING = (
    "You are CourtSide, the assistant of a basketball fan app. You chat with fans about their "
    "favourite NBA teams and players, remember what they tell you about themselves during the "
    "conversation, and look up schedules and standings with your tools."
)
SPORTS_RULES = [
    "Use get_team_schedule whenever the fan asks when a team plays next, against whom, or where, and never guess a date or an opponent.",
    "Use get_standings whenever the fan asks about a team's record, its place in the conference or the playoff picture.",
    "Call the fan by the name they gave you, and remember their favourite team and players for the rest of the conversation.",
    "Be warm and enthusiastic about the fan's team without disparaging other teams or their fans.",
    "Give dates in the fan's terms, such as 'Friday, December 4', and tip-off times in Eastern Time with the time zone named.",
    "Keep answers to two or three sentences unless the fan asks for detail.",
    "When you cite history, such as championships or records, keep to well-established facts and say 'as of this season' for anything that can change.",
    "Do not give betting advice or odds, and do not predict injuries or trades.",
    "If a tool returns an error or no games, say so and suggest checking again later.",
    "Ask at most one follow-up question in an answer, and only when it helps the fan.",
]
SPORTS_SYSTEM = long_prompt(SPORTS_OPENING, "Guidelines:", SPORTS_RULES)

SUMMARIZER_OPENING = (
    "You summarize conversations between a basketball fan and the CourtSide assistant, so that "
    "the assistant can continue the conversation from your summary instead of the full history."
)
SUMMARIZER_RULES = [
    "Write the summary in the third person, in plain prose, in no more than five sentences.",
    "Keep the facts the fan told about themselves: their name, their favourite teams and players, and what they like about them.",
    "Keep every question the fan asked that was answered, with the answer's key fact, and every question still open.",
    "Keep figures, dates and names exactly as they appeared in the conversation.",
    "Leave out greetings, thanks, small talk and the assistant's enthusiasm.",
    "Do not add facts that were not in the conversation, and do not answer any question yourself.",
    "If an earlier summary is given, extend it with the new messages rather than starting again.",
    "Do not address the fan or the assistant; write only the summary.",
    "Mention the tools the assistant used only when their results matter for what comes next.",
    "Prefer short sentences that the assistant can quote back to the fan if asked.",
]
SUMMARIZER_SYSTEM = long_prompt(SUMMARIZER_OPENING, "Rules:", SUMMARIZER_RULES)

SPORTS_TOOLS = [
    {
        "name": "get_team_schedule",
        "description": "Returns the upcoming games of an NBA team: for each game the date, the tip-off time in Eastern Time, the opponent, whether it is a home or away game, and the arena. Use it for any question about when or where a team plays.",
        "input_schema": {
            "type": "object",
            "properties": {
                "team": {"type": "string", "description": "The team's full name, e.g. Boston Celtics."},
                "days_ahead": {
                    "type": "integer",
                    "description": "How many days ahead to look, from 1 to 30. Defaults to 7.",
                },
            },
            "required": ["team"],
        },
    },
    {
        "name": "get_standings",
        "description": "Returns the current standings of an NBA conference: for each team its wins, losses, winning percentage, games behind the leader and current streak.",
        "input_schema": {
            "type": "object",
            "properties": {
                "conference": {
                    "type": "string",
                    "enum": ["East", "West"],
                    "description": "The conference.",
                }
            },
            "required": ["conference"],
        },
    },
]

SUMMARY_TEXT = (
    "The fan introduced himself as Bob and asked the assistant to confirm his name, which it did. "
    "Bob is a Boston Celtics fan. He likes how much they win; the assistant noted that the Celtics "
    "have won 18 NBA championships, the most of any franchise, including the 2024 title."
)


def summarizing_memory():
    recording = Recording(
        "summarizing-memory.har",
        "2026-12-01T17:00:00",
        "an agent with a system prompt and tools; after 4 turns a summarizer call (another "
        "system prompt, no tools) carries the conversation with the summary request last; the "
        "agent then continues with the summary as a second system block and the last exchange",
    )
    recording.session("agent")
    recording.session("summarizer", parent="agent")
    cache = BreakpointCache()
    model = "claude-sonnet-4-5-20250929"
    agent_system = [{"type": "text", "text": SPORTS_SYSTEM, "cache_control": {"type": "ephemeral"}}]

    def agent_body(messages, system=agent_system):
        return compact(
            {
                "max_tokens": 1024,
                "messages": messages,
                "model": model,
                "system": system,
                "tools": SPORTS_TOOLS,
            }
        )

    def text(value):
        return [{"type": "text", "text": value}]

    # The how-to's conversation: "hi! I'm bob", "what's my name?", "i like the celtics!",
    # "i like how much they win".
    turns = [
        ("hi! I'm bob", "Hi Bob, welcome to CourtSide! I can help with NBA schedules, standings and anything else about your favourite teams. Who do you root for?"),
        ("what's my name?", "Your name is Bob."),
        ("i like the celtics!", "Great choice, Bob! The Boston Celtics are one of the NBA's most storied franchises, with a deep roster and a passionate fan base at TD Garden. Do you have a favourite player?"),
        ("i like how much they win", "That's easy to love! The Celtics have won 18 NBA championships, the most of any franchise, including the 2024 title, and they are usually near the top of the Eastern Conference. Winning is part of the team's identity."),
    ]
    messages = []
    times = [0.0, 18.4, 43.9, 71.2]
    for (question, answer), at in zip(turns, times):
        messages = messages + [{"role": "user", "content": question}]
        anthropic_call(recording, cache, "agent", "main-turn", at, agent_body(messages), text(answer), "end_turn")
        messages = messages + [{"role": "assistant", "content": answer}]

    # summarize_conversation: the messages so far and "Create a summary of the conversation
    # above:", under the summarizer's own system prompt, without tools.
    summarizer = compact(
        {
            "max_tokens": 1024,
            "messages": messages + [{"role": "user", "content": "Create a summary of the conversation above:"}],
            "model": model,
            "system": SUMMARIZER_SYSTEM,
        }
    )
    anthropic_call(recording, cache, "summarizer", "side-call", 75.6, summarizer, text(SUMMARY_TEXT), "end_turn")

    # The agent goes on with the summary after its own system prompt, the last two messages
    # kept (the how-to's `messages[:-2]` deleted) and the new user message.
    compacted_system = agent_system + [
        {"type": "text", "text": f"Summary of conversation earlier: {SUMMARY_TEXT}"}
    ]
    schedule_id = "toolu_01" + ident("summary/schedule", 22)
    kept = messages[-2:] + [{"role": "user", "content": "when do they play next?"}]
    asked = [
        {"type": "text", "text": "Let me check the Celtics' schedule for you, Bob."},
        {
            "type": "tool_use",
            "id": schedule_id,
            "name": "get_team_schedule",
            "input": {"team": "Boston Celtics", "days_ahead": 7},
        },
    ]
    anthropic_call(recording, cache, "agent", "compaction", 112.5, agent_body(kept, compacted_system), asked, "tool_use")
    schedule = {
        "team": "Boston Celtics",
        "games": [
            {"date": "2026-12-04", "tipoff_et": "19:30", "opponent": "New York Knicks", "home": True, "arena": "TD Garden"},
            {"date": "2026-12-06", "tipoff_et": "18:00", "opponent": "Milwaukee Bucks", "home": False, "arena": "Fiserv Forum"},
        ],
    }
    kept = kept + [
        {"role": "assistant", "content": asked},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": schedule_id, "content": compact(schedule)}],
        },
    ]
    anthropic_call(
        recording, cache, "agent", "tool-round-trip", 116.8, agent_body(kept, compacted_system),
        text("The Celtics play next on Friday, December 4, at 7:30 PM ET, hosting the New York Knicks at TD Garden. Two days later, on Sunday, December 6, they visit the Milwaukee Bucks at 6:00 PM ET."),
        "end_turn",
    )
    return recording
