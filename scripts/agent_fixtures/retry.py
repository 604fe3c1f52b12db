"""retry-after-overload.har: Anthropic's customer service agent cookbook, with the Python
SDK's automatic retries."""

from . import BreakpointCache, Recording, compact, ident, long_prompt
from .providers import anthropic_call


RETRY_SOURCE = "https://github.com/anthropics/anthropic-cookbook/blob/main/tool_use/customer_service_agent.ipynb"
SDK_RETRIES = "https://github.com/anthropics/anthropic-sdk-python#retries"

SUPPORT_OPENING = (
    "You are a customer service assistant for Acme Co., an online shop for widgets and gadgets. "
    "You help customers look up their account details, check on their orders and cancel orders "
    "on their behalf, using only the tools you are given."
)

SUPPORT_RULES = [
    "Use get_customer_info whenever the customer asks about the name, email address or phone number on file, and quote the values exactly as the tool returns them.",
    "Use get_order_details before you say anything about an order's product, quantity, price or status, even if the customer tells you what they think it is.",
    "Use cancel_order only when the customer has clearly asked for a cancellation of a specific order ID, and confirm the order ID in your answer.",
    "Customer IDs look like C1 and order IDs look like O1; if the customer gives an ID in another form, ask them to check it before calling a tool.",
    "If a tool returns 'Customer not found' or 'Order not found', say so plainly and ask the customer to double-check the ID; never invent details.",
    "Keep answers short and friendly: one or two sentences with the facts the customer asked for, then offer further help only when it is natural.",
    "Never reveal one customer's details to another conversation, and never repeat details the customer did not ask for.",
    "Prices are in US dollars with two decimals; say 'Processing' and 'Shipped' exactly as the order status is returned.",
    "An order that has already shipped can still be cancelled through cancel_order, but tell the customer that a return may be needed once it arrives.",
    "Think about which tool the request needs before you answer, but do not show your reasoning to the customer; show only the result.",
]

SUPPORT_SYSTEM = long_prompt(SUPPORT_OPENING, "Guidelines:", SUPPORT_RULES)

# The cookbook's tools, as defined in its "Define the client-side tools" step.
SUPPORT_TOOLS = [
    {
        "name": "get_customer_info",
        "description": "Retrieves customer information based on their customer ID. Returns the customer's name, email, and phone number.",
        "input_schema": {
            "type": "object",
            "properties": {
                "customer_id": {
                    "type": "string",
                    "description": "The unique identifier for the customer.",
                }
            },
            "required": ["customer_id"],
        },
    },
    {
        "name": "get_order_details",
        "description": "Retrieves the details of a specific order based on the order ID. Returns the order ID, product name, quantity, price, and order status.",
        "input_schema": {
            "type": "object",
            "properties": {
                "order_id": {
                    "type": "string",
                    "description": "The unique identifier for the order.",
                }
            },
            "required": ["order_id"],
        },
    },
    {
        "name": "cancel_order",
        "description": "Cancels an order based on the provided order ID. Returns a confirmation message if the cancellation is successful.",
        "input_schema": {
            "type": "object",
            "properties": {
                "order_id": {
                    "type": "string",
                    "description": "The unique identifier for the order to be cancelled.",
                }
            },
            "required": ["order_id"],
        },
    },
]


def support_body(messages):
    return compact(
        {
            "max_tokens": 4096,
            "messages": messages,
            "model": "claude-sonnet-4-5-20250929",
            "system": [
                {"type": "text", "text": SUPPORT_SYSTEM, "cache_control": {"type": "ephemeral"}}
            ],
            "tools": SUPPORT_TOOLS,
        }
    )


def retry_after_overload():
    recording = Recording(
        "retry-after-overload.har",
        "2026-12-01T11:00:00",
        "two conversations of one customer service app (same system prompt and tools), "
        "interleaved; the first one's turn 1 is answered 529 and retried, its turn 2 answered "
        "500 and retried, each retry the byte-identical body with x-stainless-retry-count: 1",
    )
    recording.session("customer C1")
    recording.session("customer with order O2")
    cache = BreakpointCache()

    # Conversation A: the cookbook's first query, then a follow-up answered from the result.
    a_tool = "toolu_01" + ident("retry/a/tool", 22)
    a_user1 = {"role": "user", "content": "Can you tell me the email address for customer C1?"}
    a_answer0 = [
        {"type": "text", "text": "I'll look up customer C1 for you."},
        {"type": "tool_use", "id": a_tool, "name": "get_customer_info", "input": {"customer_id": "C1"}},
    ]
    a_result = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": a_tool,
                "content": "{'name': 'John Doe', 'email': 'john@example.com', 'phone': '123-456-7890'}",
            }
        ],
    }
    a_answer1 = [
        {"type": "text", "text": "The email address for customer C1 (John Doe) is john@example.com."}
    ]
    a_user2 = {"role": "user", "content": "Thanks. And which phone number do you have on file for him?"}
    a_answer2 = [
        {"type": "text", "text": "The phone number on file for John Doe (C1) is 123-456-7890."}
    ]

    # Conversation B: the cookbook's second query, then a cancellation.
    b_tool1 = "toolu_01" + ident("retry/b/tool1", 22)
    b_tool2 = "toolu_01" + ident("retry/b/tool2", 22)
    b_user1 = {"role": "user", "content": "What is the status of order O2?"}
    b_answer0 = [
        {"type": "text", "text": "Let me check order O2."},
        {"type": "tool_use", "id": b_tool1, "name": "get_order_details", "input": {"order_id": "O2"}},
    ]
    b_result1 = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": b_tool1,
                "content": "{'id': 'O2', 'product': 'Gadget B', 'quantity': 1, 'price': 49.99, 'status': 'Processing'}",
            }
        ],
    }
    b_answer1 = [
        {
            "type": "text",
            "text": "Order O2 (1 × Gadget B, $49.99) is currently Processing: it has not shipped yet.",
        }
    ]
    b_user2 = {"role": "user", "content": "Since it hasn't shipped, please cancel order O2 for me."}
    b_answer2 = [
        {"type": "text", "text": "I'll cancel order O2 now."},
        {"type": "tool_use", "id": b_tool2, "name": "cancel_order", "input": {"order_id": "O2"}},
    ]
    b_result2 = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": b_tool2, "content": "True"}],
    }
    b_answer3 = [
        {
            "type": "text",
            "text": "Done: order O2 (Gadget B) has been cancelled. Is there anything else I can help you with?",
        }
    ]

    a = [a_user1]
    b = [b_user1]
    call = anthropic_call
    # A, turn 0.
    call(recording, cache, "customer C1", "main-turn", 0.0, support_body(a), a_answer0, "tool_use")
    a = a + [{"role": "assistant", "content": a_answer0}, a_result]
    # B, turn 0.
    call(recording, cache, "customer with order O2", "main-turn", 3.1, support_body(b), b_answer0, "tool_use")
    b = b + [{"role": "assistant", "content": b_answer0}, b_result1]
    # A, turn 1: overloaded.
    a_turn1 = support_body(a)
    call(recording, cache, "customer C1", "tool-round-trip", 4.0, a_turn1, status=529)
    # B, turn 1, while A's SDK waits to retry.
    call(recording, cache, "customer with order O2", "tool-round-trip", 4.9, support_body(b), b_answer1, "end_turn")
    b = b + [{"role": "assistant", "content": b_answer1}, b_user2]
    # A, turn 1 again: the same bytes, the retry count 1.
    call(recording, cache, "customer C1", "retry", 5.3, a_turn1, a_answer1, "end_turn", retry=1)
    a = a + [{"role": "assistant", "content": a_answer1}, a_user2]
    # B, turn 2.
    call(recording, cache, "customer with order O2", "main-turn", 29.6, support_body(b), b_answer2, "tool_use")
    b = b + [{"role": "assistant", "content": b_answer2}, b_result2]
    # A, turn 2: a server error, then its retry.
    a_turn2 = support_body(a)
    call(recording, cache, "customer C1", "main-turn", 37.2, a_turn2, status=500)
    call(recording, cache, "customer C1", "retry", 38.1, a_turn2, a_answer2, "end_turn", retry=1)
    # B, turn 3.
    call(recording, cache, "customer with order O2", "tool-round-trip", 39.4, support_body(b), b_answer3, "end_turn")
    return recording
