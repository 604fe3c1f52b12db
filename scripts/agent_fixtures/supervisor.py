"""supervisor-trailing-instruction.har: LangGraph's multi-agent supervisor tutorial."""

from . import PrefixCache, Recording, compact, ident, long_prompt
from .providers import lc_system, lc_user, openai_call


SUPERVISOR_SOURCE = "https://langchain-ai.github.io/langgraph/tutorials/multi_agent/agent_supervisor/"

MEMBERS = ["researcher", "coder"]
OPTIONS = ["FINISH"] + MEMBERS

SUPERVISOR_OPENING = (
    f"You are a supervisor tasked with managing a conversation between the following workers: {MEMBERS}."
    " Given the following user request, respond with the worker to act next. Each worker will perform a"
    " task and respond with their results and status. When finished, respond with FINISH."
)
SUPERVISOR_TRAILING = (
    f"Given the conversation above, who should act next? Or should we FINISH? Select one of: {OPTIONS}"
)
SUPERVISOR_RULES = [
    "Send work that needs facts from the web, such as figures, dates, names or recent events, to the researcher.",
    "Send work that needs calculation, data analysis, code or a chart to the coder, together with the figures the researcher has already found.",
    "Never send the coder a task whose inputs have not been found yet; send the researcher first.",
    "Send one worker at a time and wait for their result before choosing the next one.",
    "Read each worker's result before routing again: if it answers the user's request completely, respond with FINISH.",
    "If a worker reports that they could not complete their task, send the task to the same worker once more, then to the other worker if it fits, then FINISH.",
    "Do not answer the user's request yourself and do not add commentary: choose the next worker with the route function only.",
    "A request with several parts is finished only when every part has been answered by a worker's result.",
    "Workers see the whole conversation, so you do not need to restate the user's request when you route to them.",
    "Prefer the shortest sequence of workers that answers the request; do not route to a worker whose result would repeat one already given.",
]
SUPERVISOR_SYSTEM = long_prompt(SUPERVISOR_OPENING, "Routing rules:", SUPERVISOR_RULES)

RESEARCHER_RULES = [
    "Search with the tavily_search_results_json tool before you state any figure, date or fact that could have changed since your training.",
    "Prefer primary sources, such as government statistics offices and official publications, to news articles and aggregators.",
    "For economic figures, give the value, its unit, the year or quarter it refers to, and the source that published it.",
    "When sources disagree, report the most authoritative figure and mention the disagreement in one sentence.",
    "Do not do any math: report the figures you found and leave calculations to the coder.",
    "Write your result as a short report of a few sentences that the supervisor and the other workers can use directly.",
    "Name each source by its publisher and give its URL in parentheses after the figure it supports.",
    "If a search returns nothing useful, refine the query once with more specific terms before reporting that the figure is unavailable.",
    "Never invent a source or a figure; if you are unsure, say so.",
    "Keep search queries short and specific, naming the place, the measure and the year.",
]
CODER_RULES = [
    "Use the Python_REPL tool for every calculation, however simple, and print the values you report.",
    "Take input figures only from the conversation; if a figure you need is missing, say so instead of assuming it.",
    "Keep units consistent: convert every figure to the same unit before computing, and state the unit in your result.",
    "Round reported results to a sensible precision, usually three significant figures for economic data, and say that you rounded.",
    "Write short, readable code with descriptive variable names, and no code that reads or writes files or uses the network.",
    "When asked for a chart, use matplotlib, label both axes and give the chart a title.",
    "Report the result in one or two sentences after the tool has run, repeating the inputs you used.",
    "If the code raises an error, fix it and run it again before reporting.",
    "Do not search for information yourself; the researcher finds the inputs.",
    "Never print secrets, environment variables or the contents of the file system.",
]
RESEARCHER_SYSTEM = long_prompt("You are a web researcher.", "Research rules:", RESEARCHER_RULES)
CODER_SYSTEM = long_prompt(
    "You may generate safe python code to analyze data and generate charts using matplotlib.",
    "Coding rules:",
    CODER_RULES,
)

ROUTE_TOOL = {
    "type": "function",
    "function": {
        "name": "route",
        "description": "Select the next role.",
        "parameters": {
            "title": "routeSchema",
            "type": "object",
            "properties": {"next": {"title": "Next", "anyOf": [{"enum": OPTIONS}]}},
            "required": ["next"],
        },
    },
}
TAVILY_TOOL = {
    "type": "function",
    "function": {
        "name": "tavily_search_results_json",
        "description": "A search engine optimized for comprehensive, accurate, and trusted results. Useful for when you need to answer questions about current events. Input should be a search query.",
        "parameters": {
            "properties": {"query": {"description": "search query to look up", "type": "string"}},
            "required": ["query"],
            "type": "object",
        },
    },
}
PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "Python_REPL",
        "description": "A Python shell. Use this to execute python commands. Input should be a valid python command. If you want to see the output of a value, you should print it out with `print(...)`.",
        "parameters": {
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
            "type": "object",
        },
    },
}

SUPERVISOR_REQUEST = "Find the latest GDP of New York and California, then calculate the average"

SEARCH_RESULTS = [
    {
        "url": "https://www.bea.gov/data/gdp/gdp-state",
        "content": "Gross Domestic Product by State and Personal Income by State, 4th Quarter and Year 2024. Current-dollar GDP for 2024: California $4,080.2 billion; Texas $2,694.9 billion; New York $2,284.4 billion; Florida $1,705.6 billion. Real GDP increased in all 50 states and the District of Columbia in 2024.",
    },
    {
        "url": "https://en.wikipedia.org/wiki/List_of_U.S._states_and_territories_by_GDP",
        "content": "The three U.S. states with the highest GDPs were California ($4.080 trillion), Texas ($2.695 trillion), and New York ($2.284 trillion). Overall, in the calendar year 2024, the United States' nominal GDP at current prices totaled $29.017 trillion.",
    },
    {
        "url": "https://www.gov.ca.gov/2025/04/23/california-is-now-the-4th-largest-economy-in-the-world/",
        "content": "California is now the fourth largest economy in the world, with a nominal GDP of more than $4.1 trillion in 2024, according to new data from the U.S. Bureau of Economic Analysis.",
    },
    {
        "url": "https://comptroller.nyc.gov/newsroom/newsletter/new-york-by-the-numbers/",
        "content": "New York State's economy, the third largest among the states, produced $2.28 trillion in goods and services in 2024, according to the Bureau of Economic Analysis.",
    },
]

RESEARCHER_RESULT = (
    "The latest annual figures are for 2024, from the U.S. Bureau of Economic Analysis "
    "(https://www.bea.gov/data/gdp/gdp-state), in current dollars:\n"
    "- California: $4,080.2 billion (about $4.080 trillion)\n"
    "- New York: $2,284.4 billion (about $2.284 trillion)\n"
    "Wikipedia's list of states by GDP and the California governor's office report the same BEA figures."
)
CODER_CODE = "california = 4080.2  # 2024 GDP, billions of current dollars (BEA)\nnew_york = 2284.4\naverage = (california + new_york) / 2\nprint(f\"{average:.1f}\")"
CODER_OUTPUT = "3182.3\n"
CODER_RESULT = (
    "Using the researcher's 2024 BEA figures (California $4,080.2 billion, New York $2,284.4 "
    "billion), the average GDP of the two states is $3,182.3 billion, about $3.18 trillion."
)


def supervisor_trailing_instruction():
    recording = Recording(
        "supervisor-trailing-instruction.har",
        "2026-12-01T15:00:00",
        "a supervisor whose every request ends with the same system instruction, and two "
        "workers (researcher, coder) each handed the conversation so far under their own "
        "instructions and tools",
    )
    recording.session("supervisor")
    recording.session("researcher", parent="supervisor")
    recording.session("coder", parent="supervisor")
    cache = PrefixCache()
    model = "gpt-4o"
    version = "gpt-4o-2024-08-06"
    fingerprint = "fp_cbf1785567"

    def defaults(messages, tools, **more):
        return {"messages": messages, "model": model, "n": 1, "stream": False, "temperature": 0.7, "tools": tools, **more}

    def route(session, kind, at, conversation, choice):
        messages = [lc_system(SUPERVISOR_SYSTEM), *conversation, lc_system(SUPERVISOR_TRAILING)]
        body = defaults(
            messages, [ROUTE_TOOL], tool_choice={"type": "function", "function": {"name": "route"}}
        )
        call_id = "call_" + ident(f"supervisor/{at}", 24)
        answer = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "route", "arguments": compact({"next": choice})},
                }
            ],
        }
        openai_call(recording, cache, session, kind, at, body, answer, "stop", version, fingerprint)

    def worker(session, kind, at, system, tools, messages, answer, finish):
        body = defaults([lc_system(system), *messages], tools)
        openai_call(recording, cache, session, kind, at, body, answer, finish, version, fingerprint)

    def tool_call(seed, name, arguments):
        call_id = "call_" + ident(seed, 24)
        message = {
            "content": None,
            "role": "assistant",
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": compact(arguments)}}
            ],
        }
        return call_id, message

    conversation = [lc_user(SUPERVISOR_REQUEST)]
    route("supervisor", "main-turn", 0.0, conversation, "researcher")

    search_id, search_call = tool_call("researcher/search", "tavily_search_results_json", {"query": "latest GDP of New York and California 2024"})
    worker(
        "researcher", "sub-agent", 1.6, RESEARCHER_SYSTEM, [TAVILY_TOOL], conversation,
        {"role": "assistant", "content": None, "tool_calls": search_call["tool_calls"]}, "tool_calls",
    )
    search_result = {"content": compact(SEARCH_RESULTS), "role": "tool", "tool_call_id": search_id}
    worker(
        "researcher", "tool-round-trip", 5.4, RESEARCHER_SYSTEM, [TAVILY_TOOL],
        conversation + [search_call, search_result],
        {"role": "assistant", "content": RESEARCHER_RESULT}, "stop",
    )
    conversation = conversation + [lc_user(RESEARCHER_RESULT, name="researcher")]
    route("supervisor", "main-turn", 9.8, conversation, "coder")

    code_id, code_call = tool_call("coder/python", "Python_REPL", {"query": CODER_CODE})
    worker(
        "coder", "sub-agent", 11.2, CODER_SYSTEM, [PYTHON_TOOL], conversation,
        {"role": "assistant", "content": None, "tool_calls": code_call["tool_calls"]}, "tool_calls",
    )
    code_result = {"content": CODER_OUTPUT, "role": "tool", "tool_call_id": code_id}
    worker(
        "coder", "tool-round-trip", 14.0, CODER_SYSTEM, [PYTHON_TOOL],
        conversation + [code_call, code_result],
        {"role": "assistant", "content": CODER_RESULT}, "stop",
    )
    conversation = conversation + [lc_user(CODER_RESULT, name="coder")]
    route("supervisor", "main-turn", 17.3, conversation, "FINISH")
    return recording
