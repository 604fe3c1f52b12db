"""bedrock-stream-switch.har: the AWS SDK examples' Converse tool-use demo (weather tool)."""

from datetime import timedelta

from . import BreakpointCache, Recording, compact, ident, long_prompt, tokens, uuid


BEDROCK_SOURCE = (
    "https://github.com/awsdocs/aws-doc-sdk-examples/tree/main/python/example_code/"
    "bedrock-runtime/cross-model-scenarios/tool_use_demo"
)

# tool_use_demo.py's SYSTEM_PROMPT, as the demo sends it (leading and trailing newline kept).
WEATHER_DEMO_PROMPT = """
You are a weather assistant that provides current weather data for user-specified locations using only
the Weather_Tool, which expects latitude and longitude. Infer the coordinates from the location yourself.
If the user provides coordinates, infer the approximate location and refer to it in your response.
To use the tool, you strictly apply the provided tool specification.

- Explain your step-by-step process, and give brief updates before each step.
- Only use the Weather_Tool for data. Never guess or make up information. 
- Repeat the tool use for subsequent requests if necessary.
- If the tool errors, apologize, explain weather is unavailable, and suggest other options.
- Report temperatures in °C (°F) and wind in km/h (mph). Keep weather reports concise. Sparingly use
  emojis where appropriate.
- Only respond to weather queries. Remind off-topic users of your purpose. 
- Never claim to search online, access external data, or use tools besides Weather_Tool.
- Complete the entire process until you have all required data before sending the complete response.
"""

WEATHER_RULES = [
    "Pass latitude and longitude to the Weather_Tool as decimal strings with two decimals, north and east positive, south and west negative.",
    "When a place name is ambiguous, such as Paris in France or Paris in Texas, pick the best-known place and say which one you chose.",
    "Read the weathercode field of the tool's answer as a WMO weather interpretation code and describe it in plain words, never as a bare number.",
    "Give the time of the observation from the tool's current_weather.time field and say that it is in UTC unless the tool names another timezone.",
    "Convert every temperature from °C to °F with one decimal, and every wind speed from km/h to mph with one decimal, and show both units.",
    "Describe the wind direction with a compass point, such as west-southwest for 247 degrees, and keep the degrees in parentheses.",
    "When the user compares two places, fetch both with the Weather_Tool, even when one was fetched earlier in the conversation, because conditions change.",
    "Keep each report to a short list of temperature, wind and conditions, followed by one sentence of practical advice.",
    "Never forecast: the Weather_Tool returns current conditions only, so decline questions about tomorrow or next week and say why.",
    "If the tool returns an error object instead of weather_data, say that the weather is unavailable for now and suggest trying again in a few minutes.",
]

WEATHER_SYSTEM = long_prompt(WEATHER_DEMO_PROMPT, "Weather reporting guidelines:", WEATHER_RULES)

# weather_tool.py's get_tool_spec().
WEATHER_TOOL = {
    "toolSpec": {
        "name": "Weather_Tool",
        "description": "Get the current weather for a given location, based on its WGS84 coordinates.",
        "inputSchema": {
            "json": {
                "type": "object",
                "properties": {
                    "latitude": {
                        "type": "string",
                        "description": "Geographical WGS84 latitude of the location.",
                    },
                    "longitude": {
                        "type": "string",
                        "description": "Geographical WGS84 longitude of the location.",
                    },
                },
                "required": ["latitude", "longitude"],
            }
        },
    }
}


def open_meteo(latitude, longitude, elevation, time, temperature, windspeed, direction, code):
    """Open-Meteo's answer to `?current_weather=true`, as weather_tool.py wraps it."""
    return {
        "weather_data": {
            "latitude": latitude,
            "longitude": longitude,
            "generationtime_ms": 0.05698204040527344,
            "utc_offset_seconds": 0,
            "timezone": "GMT",
            "timezone_abbreviation": "GMT",
            "elevation": elevation,
            "current_weather_units": {
                "time": "iso8601",
                "interval": "seconds",
                "temperature": "°C",
                "windspeed": "km/h",
                "winddirection": "°",
                "is_day": "",
                "weathercode": "wmo code",
            },
            "current_weather": {
                "time": time,
                "interval": 900,
                "temperature": temperature,
                "windspeed": windspeed,
                "winddirection": direction,
                "is_day": 1,
                "weathercode": code,
            },
        }
    }


def bedrock_segments(body):
    """Converse's blocks in prompt order; a cachePoint marks the block before it."""
    segments = []

    def add(blocks, render):
        for block in blocks:
            if "cachePoint" in block:
                if segments:
                    text, _ = segments[-1]
                    segments[-1] = (text, True)
                continue
            segments.append((render(block), False))

    add(body["toolConfig"]["tools"], compact)
    add(body["system"], lambda block: block["text"])
    for message in body["messages"]:
        add(message["content"], lambda block, role=message["role"]: f"<|{role}|>" + compact(block))
    return segments


def bedrock_stream_switch():
    recording = Recording(
        "bedrock-stream-switch.har",
        "2026-12-01T09:00:00",
        "one tool-using Converse conversation; the application switches from converse to "
        "converse-stream after its second request",
    )
    recording.session("weather assistant")
    cache = BreakpointCache()
    model = "anthropic.claude-sonnet-4-5-20250929-v1:0"
    base = f"https://bedrock-runtime.us-east-1.amazonaws.com/model/{model}"
    system = [{"text": WEATHER_SYSTEM}, {"cachePoint": {"type": "default"}}]
    tool_config = {"tools": [WEATHER_TOOL]}
    inference = {"maxTokens": 2048, "temperature": 0.5}

    berlin_id = "tooluse_" + ident("bedrock/berlin", 22)
    paris_id = "tooluse_" + ident("bedrock/paris", 22)
    turns = [
        # (operation, at, new messages, answer content, stop reason)
        (
            "converse",
            0.0,
            [{"role": "user", "content": [{"text": "What's the weather like in Berlin right now?"}]}],
            [
                {
                    "text": "I'll check the current weather in Berlin for you.\n\nStep 1: Berlin, Germany lies at about 52.52° N, 13.41° E, so I'll ask the Weather_Tool for the conditions at those coordinates."
                },
                {
                    "toolUse": {
                        "toolUseId": berlin_id,
                        "name": "Weather_Tool",
                        "input": {"latitude": "52.52", "longitude": "13.41"},
                    }
                },
            ],
            "tool_use",
        ),
        (
            "converse",
            3.2,
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "toolResult": {
                                "toolUseId": berlin_id,
                                "content": [
                                    {
                                        "json": open_meteo(
                                            52.52, 13.419998, 38.0, "2026-12-01T09:00", 3.4, 14.8, 247, 3
                                        )
                                    }
                                ],
                            }
                        }
                    ],
                }
            ],
            [
                {
                    "text": "Step 2: I received the current conditions from the Weather_Tool.\n\n☁️ Berlin, Germany (52.52° N, 13.41° E), at 09:00 UTC:\n- Temperature: 3.4 °C (38.1 °F)\n- Wind: 14.8 km/h (9.2 mph) from the west-southwest (247°)\n- Conditions: overcast (WMO code 3)\n\nIt's a cold, grey morning, so a warm coat is a good idea if you're heading out."
                }
            ],
            "end_turn",
        ),
        (
            "converse-stream",
            41.5,
            [
                {
                    "role": "user",
                    "content": [{"text": "How about Paris? Is it warmer there than in Berlin?"}],
                }
            ],
            [
                {
                    "text": "Let me compare the two cities.\n\nStep 1: Paris, France lies at about 48.86° N, 2.35° E. I'll fetch its current weather with the Weather_Tool and compare it with the Berlin report above."
                },
                {
                    "toolUse": {
                        "toolUseId": paris_id,
                        "name": "Weather_Tool",
                        "input": {"latitude": "48.86", "longitude": "2.35"},
                    }
                },
            ],
            "tool_use",
        ),
        (
            "converse-stream",
            45.9,
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "toolResult": {
                                "toolUseId": paris_id,
                                "content": [
                                    {
                                        "json": open_meteo(
                                            48.86, 2.3500004, 43.0, "2026-12-01T09:00", 8.1, 11.2, 212, 61
                                        )
                                    }
                                ],
                            }
                        }
                    ],
                }
            ],
            [
                {
                    "text": "Step 2: I have the Paris conditions from the Weather_Tool.\n\n🌧️ Paris, France (48.86° N, 2.35° E), at 09:00 UTC:\n- Temperature: 8.1 °C (46.6 °F)\n- Wind: 11.2 km/h (7.0 mph) from the south-southwest (212°)\n- Conditions: slight rain (WMO code 61)\n\nYes: Paris is 4.7 °C (8.5 °F) warmer than Berlin right now, with lighter wind, but it is raining there, so take an umbrella rather than a heavy coat."
                }
            ],
            "end_turn",
        ),
    ]
    messages = []
    for index, (operation, at, new, answer, stop) in enumerate(turns):
        messages.extend(new)
        body = {
            "system": system,
            "messages": messages,
            "toolConfig": tool_config,
            "inferenceConfig": inference,
        }
        text = compact(body)
        uncached, read, written = cache.usage(bedrock_segments(body))
        output = tokens(compact(answer))
        usage = {
            "inputTokens": uncached,
            "outputTokens": output,
            "totalTokens": uncached + output + read + written,
            "cacheReadInputTokens": read,
            "cacheWriteInputTokens": written,
        }
        latency = 1400 + 310 * index
        request_id = uuid(f"bedrock/{index}/request")
        headers = [
            ("Content-Type", "application/json"),
            (
                "User-Agent",
                "Boto3/1.40.45 md/Botocore#1.40.45 ua/2.1 os/linux#6.8.0-49-generic md/arch#x86_64 "
                "lang/python#3.12.8 md/pyimpl#CPython m/Z,b,D cfg/retry-mode#legacy Botocore/1.40.45",
            ),
            (
                "X-Amz-Date",
                (recording.start + timedelta(seconds=at)).strftime("%Y%m%dT%H%M%SZ"),
            ),
            ("amz-sdk-invocation-id", uuid(f"bedrock/{index}/invocation")),
            ("amz-sdk-request", "attempt=1; max=4"),
        ]
        if operation == "converse":
            response = compact(
                {
                    "metrics": {"latencyMs": latency},
                    "output": {"message": {"role": "assistant", "content": answer}},
                    "stopReason": stop,
                    "usage": usage,
                }
            )
            mime = "application/json"
        else:
            # The event stream's last event (`:event-type metadata`), its JSON payload as text;
            # the binary framing and the earlier events (the answer) are left out.
            response = compact({"metrics": {"latencyMs": latency}, "usage": usage})
            mime = "application/vnd.amazon.eventstream"
        recording.add(
            "weather assistant",
            "main-turn" if index % 2 == 0 else "tool-round-trip",
            at,
            f"{base}/{operation}",
            headers,
            text,
            200,
            response,
            mime=mime,
            response_headers=[("x-amzn-RequestId", request_id)],
            wait=latency + 40,
        )
        messages = messages + [{"role": "assistant", "content": answer}]
    return recording
