"""Record a real Inspect AI eval log of a multi-turn tool-using agent.

Two uses:

1. As an Inspect task file (run by the real `inspect` CLI against a
   llama-server that speaks the OpenAI chat-completions API):

     LLAMA_BASE_URL=http://127.0.0.1:PORT/v1 LLAMA_API_KEY=none \
       inspect eval scripts/inspect_eval_log.py@agent \
         --model openai-api/llama/tiny --temperature 0 --max-tokens 8 \
         --log-model-api --log-format eval --log-dir OUT_DIR

   Each sample has a system message, one tool (`lookup`) and makes
   three model calls: `generate` runs three times with a new user turn
   between calls, so every request extends the one before it.
   `--log-model-api` is needed: by default Inspect keeps `call` (the raw
   request) only for the first few calls. The same run as JSON, with the
   `events_data` pools kept as a native `--log-format json` run writes
   them (a plain `inspect log convert` inlines them instead):

     inspect log convert LOG.eval --to json --output-dir DIR --stream 2

2. As the ground-truth reader (no server needed):

     python scripts/inspect_eval_log.py --expected OUT.jsonl LOG.eval

   Reads the log with inspect_ai's own `read_eval_log(...,
   resolve_attachments=True)`, which expands `events_data` pools
   (`call.call_refs` / `input_refs`) and `attachment://` references,
   and writes each model event's `call.request` as one JSON line, in
   sample order then event order.
"""

import argparse
import json
import sys

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageUser
from inspect_ai.solver import Generate, TaskState, solver, system_message, use_tools
from inspect_ai.tool import tool


@tool
def lookup():
    async def execute(key: str) -> str:
        """Look up a value by key.

        Args:
          key: The key to look up.

        Returns:
          The stored value.
        """
        return f"value-of-{key}: 42"

    return execute


# user turns appended after the first and second model calls
FOLLOW_UPS = [
    "Use the lookup tool for the key 'alpha'.",
    "Now look up 'beta' as well.",
]


@solver
def three_turns():
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        for follow_up in [*FOLLOW_UPS, None]:
            # one model call per generate (tool calls, if any, are run
            # once and their results appended, without another call)
            state = await generate(state, tool_calls="single")
            if follow_up is not None:
                state.messages.append(ChatMessageUser(content=follow_up))
        return state

    return solve


@task
def agent():
    return Task(
        dataset=[
            Sample(id="s1", input="What is stored under 'alpha'?", target="42"),
            Sample(id="s2", input="Find the value for 'gamma'.", target="42"),
        ],
        solver=[
            system_message("You are a terse assistant. Use the lookup tool when asked."),
            use_tools(lookup()),
            three_turns(),
        ],
        message_limit=20,
    )


def write_expected(log_path: str, out_path: str) -> None:
    from inspect_ai.event import ModelEvent
    from inspect_ai.log import read_eval_log

    log = read_eval_log(log_path, resolve_attachments=True)
    lines = []
    for sample in log.samples or []:
        calls = 0
        for event in sample.events:
            if not isinstance(event, ModelEvent):
                continue
            if event.call is None:
                raise SystemExit(f"sample {sample.id}: model event without call")
            call = event.call
            if call.call_refs:
                raise SystemExit(f"sample {sample.id}: unresolved call_refs")
            messages = call.request.get("messages")
            if not messages:
                raise SystemExit(f"sample {sample.id}: empty request messages")
            lines.append(json.dumps(call.request))
            calls += 1
        print(f"sample {sample.id}: {calls} model calls", file=sys.stderr)
    with open(out_path, "w") as out:
        for line in lines:
            out.write(line + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--expected", required=True, help="JSONL to write")
    parser.add_argument("log", help=".eval or .json log to read")
    args = parser.parse_args()
    write_expected(args.log, args.expected)
