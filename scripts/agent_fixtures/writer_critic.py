"""writer-critic.har: LangGraph's Reflection tutorial."""

from . import PrefixCache, Recording, long_prompt
from .providers import lc_assistant, lc_system, lc_user, openai_call


REFLECTION_SOURCE = "https://langchain-ai.github.io/langgraph/tutorials/reflection/reflection/"

# The tutorial's two prompts, verbatim, each followed by the application's own guidance.
GENERATE_PROMPT = (
    "You are an essay assistant tasked with writing excellent 5-paragraph essays."
    " Generate the best essay possible for the user's request."
    " If the user provides critique, respond with a revised version of your previous attempts."
)
REFLECT_PROMPT = (
    "You are a teacher grading an essay submission. Generate critique and recommendations for the user's submission."
    " Provide detailed recommendations, including requests for length, depth, style, etc."
)

WRITER_RULES = [
    "Write exactly five paragraphs: an introduction that ends with a thesis, three body paragraphs that each defend one reason, and a conclusion.",
    "Give the essay a title on its first line, followed by a blank line, and no other headings.",
    "Open each body paragraph with a topic sentence that names its reason in plain words, then support it with evidence from the text.",
    "Quote the book briefly and accurately, and name the translation when you quote a translated work.",
    "Prefer concrete scenes and characters from the book to general claims about it.",
    "Vary sentence length and openings, and avoid mechanical signposts such as 'First', 'Second' and 'Third' at the start of every paragraph.",
    "When you revise after critique, keep what the critique praised, address every recommendation you agree with, and return the whole revised essay, not a list of changes.",
    "Do not comment on the essay or the critique before or after the essay: return the essay only.",
    "Aim for a reader of about twelve to fourteen years old: clear words, no jargon, and explanations for any literary term you use.",
    "End the conclusion with a sentence that looks forward rather than one that only restates the thesis.",
]

CRITIC_RULES = [
    "Begin with a one-line grade from A to F, then the strengths of the submission in two or three sentences.",
    "Comment on each of the five paragraphs in order, naming what works and what should change.",
    "Make every recommendation specific and actionable: say what to add, cut or move, and where.",
    "Ask for a length in words when the essay is too short or too long for its argument, and explain why.",
    "Ask for more depth when a paragraph rests on a single example or on a claim without evidence from the text.",
    "Comment on style: sentence variety, transitions between paragraphs, repeated words and the tone for the intended reader.",
    "Check every quotation against the book and ask for the translation and chapter to be named.",
    "Flag claims about the present day that need evidence or softer wording, such as statements about children and screens.",
    "End with a numbered list of no more than six recommendations, the most important first.",
    "Do not rewrite the essay yourself; the writer revises it from your critique.",
]

WRITER_SYSTEM = long_prompt(GENERATE_PROMPT, "House style for every essay:", WRITER_RULES)
CRITIC_SYSTEM = long_prompt(REFLECT_PROMPT, "Grading rubric:", CRITIC_RULES)

ESSAY_TOPIC = "Write an essay on why the little prince is relevant in modern childhood"

ESSAY_V1 = """Why The Little Prince Still Matters to Children Today

Antoine de Saint-Exupéry published The Little Prince in 1943, yet the small traveller from asteroid B-612 still finds his way into children's bedrooms and classrooms. A child today grows up among tablets, timetables and constant noise, which might seem far removed from a boy who looks after a single rose. This essay argues that the book remains relevant to modern childhood because it defends imagination, teaches how friendships are made, and gives children words for loneliness and loss.

First, the book defends imagination against the narrowing pressure of adult expectations. The narrator's drawing of a boa constrictor digesting an elephant, which every grown-up mistakes for a hat, is a moment many children recognise. In an age of tests and tightly scheduled afternoons, the story tells young readers that seeing things differently is a strength, not a mistake.

Second, the story shows how friendships are made. The fox explains that taming means to establish ties, and that it takes patience and time. For children whose social lives increasingly happen through screens, the fox's lesson that we become responsible for what we have tamed offers a model of friendship that no number of followers can replace.

Third, the book gives children a language for loneliness and loss. The prince leaves his planet, misses his rose, and finally departs in a way many readers experience as a death. Rather than hiding sadness, the story lets children feel it in a safe setting and talk about it with the adults who read it with them.

In conclusion, The Little Prince remains relevant to modern childhood because it protects imagination, explains friendship as patient care, and treats sorrow honestly. Its grown-ups, absorbed in numbers and their own importance, look remarkably like the busy world children meet today, which is why the prince's questions still deserve to be asked."""

CRITIQUE_1 = """Grade: B

Strengths: the essay has a clear thesis with three distinct reasons, a sensible five-paragraph structure, and a conclusion that ties the book's grown-ups to the present day. The tone suits a young reader.

Introduction: the opening sets the scene well. The contrast between tablets and a single rose is effective; keep it. The thesis is clear but could preview why these three reasons matter now rather than in any era.

Paragraph 2 (imagination): it rests on one example, the drawing of the boa constrictor. Add a second from the grown-ups' planets, for example the businessman who counts stars he believes he owns, to show what the book thinks happens to imagination when it is lost.

Paragraph 3 (friendship): the fox is the right choice, but the paragraph paraphrases his most famous lines. Quote them briefly and name the translation. The claim about screens needs softer wording or an example; as written it reads as an assumption.

Paragraph 4 (loss): this is the most moving paragraph and the thinnest. Explain how the rose and the prince's departure help a child grieve, and mention what the adult reader can do with the child.

Conclusion: it restates the thesis almost word for word. End with a forward-looking sentence: what should a child, or a parent, do after closing the book?

Style: three body paragraphs open with 'First', 'Second' and 'Third'. Replace these with transitions that carry the argument from one reason to the next.

Recommendations:
1. Lengthen the essay to about 550 to 650 words, giving the added length to paragraphs 2 and 4.
2. Give each body paragraph a second example from the book.
3. Quote the fox directly and name the translation you quote.
4. Support or soften the claim about children and screens.
5. Replace the 'First, Second, Third' signposts with real transitions.
6. Rewrite the last sentence of the conclusion so that it looks forward."""

ESSAY_V2 = """Why The Little Prince Still Matters to Children Today

Antoine de Saint-Exupéry published The Little Prince in 1943, yet the small traveller from asteroid B-612 still finds his way into children's bedrooms and classrooms. A child today grows up among tablets, timetables and constant noise, which might seem far removed from a boy who looks after a single rose. The distance is smaller than it looks: the book defends imagination, teaches how friendships are made, and gives children words for loneliness and loss, three things a crowded modern childhood can easily leave out.

The book's first defence is of imagination itself. The narrator's drawing of a boa constrictor digesting an elephant, which every grown-up mistakes for a hat, is a moment many children recognise. The prince's journey then shows what becomes of adults who have lost that way of seeing: the businessman counts five hundred million stars and believes that counting them makes them his, while never once looking at one. In an age of tests and tightly scheduled afternoons, the story tells young readers that seeing things differently is a strength worth keeping.

Imagination is only half of what the prince learns; the fox teaches him the other half, which is how friendship begins. "One runs the risk of weeping a little, if one lets himself be tamed," the fox warns in Katherine Woods's translation, and he explains that taming means "to establish ties" through patience and small daily rituals. His parting lesson, "You become responsible, forever, for what you have tamed," asks more of a friendship than a quick message or a shared video does. Many children now keep in touch through screens, and the fox does not condemn that; he simply reminds them that closeness is built slowly and kept by care.

That care brings sorrow with it, and the book's greatest gift may be that it lets children feel it. The prince misses his rose, regrets leaving her, and finally departs in a way many readers experience as a death. Because the sadness arrives inside a gentle story, a child can feel it safely and ask the questions it raises. Parents and teachers who read the last chapters aloud often find that the book opens conversations about grief that would be hard to begin any other way.

The Little Prince therefore remains relevant to modern childhood because it protects imagination, explains friendship as patient care, and treats sorrow honestly. Its grown-ups, absorbed in numbers and their own importance, look remarkably like the busy world children meet today. The best response is the one the book itself suggests: read it with a child, slowly, and then go outside together and look up at the stars."""

CRITIQUE_2 = """Grade: A-

Strengths: the revision answers almost every recommendation. The businessman gives paragraph 2 the second example it needed, the fox is now quoted and the translation named, and the transitions carry the argument from imagination to friendship to sorrow. The new ending looks forward and is memorable.

Introduction: the added sentence about a crowded modern childhood sharpens the thesis, but the introduction is now the longest paragraph after the body. Cut the second sentence's list to two items.

Paragraph 2 (imagination): strong. Give the chapter of the businessman's planet so that a reader can find it.

Paragraph 3 (friendship): the quotations are accurate and well chosen. The remark about screens is now fair; keep it short.

Paragraph 4 (loss): much better. It would be stronger still with one concrete detail from the last chapters, such as the snake or the prince's promise that the stars will laugh.

Conclusion: the call to read the book with a child works well. 'Modern' appears four times in the essay; vary it.

Recommendations:
1. Trim the introduction by one clause.
2. Name the chapters of the scenes you describe.
3. Add one concrete detail from the final chapters to paragraph 4.
4. Vary the word 'modern'."""

ESSAY_V3 = """Why The Little Prince Still Matters to Children Today

Antoine de Saint-Exupéry published The Little Prince in 1943, yet the small traveller from asteroid B-612 still finds his way into children's bedrooms and classrooms. A child today grows up among screens and timetables, which might seem far removed from a boy who looks after a single rose. The distance is smaller than it looks: the book defends imagination, teaches how friendships are made, and gives children words for loneliness and loss, three things a crowded childhood can easily leave out.

The book's first defence is of imagination itself. The narrator's drawing of a boa constrictor digesting an elephant, which every grown-up mistakes for a hat, is a moment many children recognise. The prince's journey then shows what becomes of adults who have lost that way of seeing: in Chapter XIII the businessman counts five hundred million stars and believes that counting them makes them his, while never once looking at one. In an age of tests and tightly scheduled afternoons, the story tells young readers that seeing things differently is a strength worth keeping.

Imagination is only half of what the prince learns; the fox teaches him the other half, which is how friendship begins. "One runs the risk of weeping a little, if one lets himself be tamed," the fox warns in Chapter XXI of Katherine Woods's translation, and he explains that taming means "to establish ties" through patience and small daily rituals. His parting lesson, "You become responsible, forever, for what you have tamed," asks more of a friendship than a quick message does. The fox does not condemn the ways children keep in touch today; he reminds them that closeness is built slowly and kept by care.

That care brings sorrow with it, and the book's greatest gift may be that it lets children feel it. The prince misses his rose, regrets leaving her, and in the last chapters lets the snake send him home, promising the narrator that all the stars will laugh because he is laughing on one of them. Because the sadness arrives inside a gentle story, a child can feel it safely and ask the questions it raises. Parents and teachers who read these chapters aloud often find that the book opens conversations about grief that would be hard to begin any other way.

The Little Prince therefore remains relevant to children growing up now because it protects imagination, explains friendship as patient care, and treats sorrow honestly. Its grown-ups, absorbed in numbers and their own importance, look remarkably like the busy world children meet every day. The best response is the one the book itself suggests: read it with a child, slowly, and then go outside together and look up at the stars."""


def writer_critic():
    recording = Recording(
        "writer-critic.har",
        "2026-12-01T13:00:00",
        "a writer and a critic (LangGraph's Reflection tutorial): the critic carries the "
        "writer's conversation under wholly other instructions",
    )
    recording.session("writer")
    recording.session("critic", parent="writer")
    cache = PrefixCache()
    model = "gpt-4.1"

    def call(session, kind, at, messages, answer):
        body = {"messages": messages, "model": model, "stream": False}
        openai_call(
            recording,
            cache,
            session,
            kind,
            at,
            body,
            {"role": "assistant", "content": answer},
            "stop",
            "gpt-4.1-2025-04-14",
            "fp_b3f1157249",
        )

    topic = lc_user(ESSAY_TOPIC)
    writer = [lc_system(WRITER_SYSTEM), topic]
    call("writer", "main-turn", 0.0, writer, ESSAY_V1)
    critic = [lc_system(CRITIC_SYSTEM), topic, lc_assistant(ESSAY_V1)]
    call("critic", "sub-agent", 24.7, critic, CRITIQUE_1)
    writer = writer + [lc_assistant(ESSAY_V1), lc_user(CRITIQUE_1)]
    call("writer", "main-turn", 41.3, writer, ESSAY_V2)
    critic = critic + [lc_user(CRITIQUE_1), lc_assistant(ESSAY_V2)]
    call("critic", "main-turn", 69.8, critic, CRITIQUE_2)
    writer = writer + [lc_assistant(ESSAY_V2), lc_user(CRITIQUE_2)]
    call("writer", "main-turn", 86.2, writer, ESSAY_V3)
    return recording
