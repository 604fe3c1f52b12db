// What the test Worker does with the package, and what the test does with it in Node on the
// native module, for the two to be compared: a conversation of a few turns with a tool call,
// each body observed by a guard, then planted mistakes (a timestamp written into the system
// prompt, the tools reordered); its answer is what the guard and `check` said.
export function scenario({ Conversation, Guard, check }) {
  const conversation = new Conversation();
  conversation.addStatic("You are a careful coding agent. Read files before editing them.");
  conversation.addTool({ type: "function", function: { name: "read_file", parameters: { type: "object" } } });
  conversation.addTool({ type: "function", function: { name: "run_tests", parameters: { type: "object" } } });
  const guard = new Guard();
  const bodies = [];
  const observed = [];
  const observe = (body) => {
    bodies.push(body);
    observed.push(guard.observe(body).findings);
  };
  conversation.pushUser("Where is the parser?");
  observe(conversation.toOpenAIChat("gpt-4o"));
  conversation.pushAssistant("", [{ id: "call_1", name: "read_file", arguments: { path: "src/parser.rs" } }]);
  conversation.pushToolResult("call_1", "fn parse(line: &str) -> Result<Line, Error> { … }");
  observe(conversation.toOpenAIChat("gpt-4o"));
  conversation.pushAssistant("It is src/parser.rs.");
  conversation.pushUser("Fix its off-by-one.");
  const body = conversation.toOpenAIChat("gpt-4o");
  observe(body);
  const stamped = structuredClone(body);
  stamped.messages[0].content += " Now: 2026-12-03T05:00:00Z.";
  observe(stamped);
  const reordered = structuredClone(body);
  reordered.tools.reverse();
  guard.expectBreak();
  observe(reordered);
  return { observed, counters: guard.counters, checked: check(bodies), routingKey: conversation.routingKey };
}
