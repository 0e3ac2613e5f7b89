"""Persona lint: warnings about profiles that are valid but likely to make a poor simulated user.

`Profile.errors()` refuses what cannot be simulated; the lint flags what can be simulated but weakens the
reward signal. Each warning names the field (in the file's own names for RLVER/SAGE records, e.g.
first_talk) and the problem, with the threshold it crossed:

- hidden need leaked: a sentence of the persona, or the first line, says the hidden need. Flagged only when
  both hold: embedding similarity to the hidden need >= LEAK_SIMILARITY (the lab's offline sentence model,
  simulator.llm.embedding, on the texts with English pronouns made neutral) and at least
  LEAK_MIN_SHARED shared content words (English words of 4+ letters outside a stop list; Chinese character
  triples once stop words are cut out). The background is not checked: the released scenes end with the
  hidden intention on purpose.
- first line too long (FIRST_LINE_MAX_WORDS words, FIRST_LINE_MAX_CHARS Chinese characters) or asking more
  than FIRST_LINE_MAX_QUESTIONS questions.
- no reaction to replies that fit / miss the need: the background has no line (with the next one) naming a
  reply together with a fit (resp. miss) word from the small lists FIT_WORDS / MISS_WORDS, and extra has no
  fit_examples (resp. miss_examples).
- personality or traits contradicting the speaking style: the explicit word lists STYLE_CLASHES and
  PERSONALITY_CLASHES, matched in the persona's speaking-style section (the whole persona if it has none);
  a style word after a negation ("never shouts", "不喜欢拐弯抹角") does not count.
- language mismatch: a text field written in another script than the profile's language (share of Chinese
  characters among letters, see `script_language`).
- near-duplicates in the set: embedding similarity of persona + background >= DUPLICATE_SIMILARITY and at
  least DUPLICATE_MIN_OVERLAP of their content words shared.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from simulator.personas.bounds import quote
from simulator.personas.io import RLVER_FIELD_OF
from simulator.personas.profile import Profile

Embed = Callable[[list[str]], np.ndarray]  # texts -> unit-norm rows, e.g. embedding.embed_sync

LEAK_SIMILARITY = 0.7
LEAK_MIN_SHARED = 2
DUPLICATE_SIMILARITY = 0.9
DUPLICATE_MIN_OVERLAP = 0.5  # Jaccard share of content words of persona + background
DUPLICATE_HEAD = 120  # words (or Chinese characters) of persona and of background embedded for duplicates
FIRST_LINE_MAX_WORDS = 40
FIRST_LINE_MAX_CHARS = 60
FIRST_LINE_MAX_QUESTIONS = 2
CHECKED_TEXT = ("persona", "background", "hidden_need", "first_line", "explicit_goal")

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff"
_EN_STOP = set("""about above after again against also always another anything away back because been before
being below between both cannot could does doing down during each else even ever every from further have having
here into itself just know like make more most much must need needs never only other others over really rather
same should since some someone something still such than that their them then there these they thing things
this those through today very want wants what when where which while will with without would your yours
yourself instead actually person people feel feels""".split())
_ZH_STOP = re.compile("你|的|了|是|在|地|和|与|希望|对方|事件|想要|认为|自己|没有|进行|什么")
_NEGATED = re.compile(r"(\b(not|never|rarely|seldom|no|without)\W+(\w+\W+)?|([不没无]|回避|避免)\w{0,3})$")
_PRONOUNS = [(re.compile(rf"\b({words})\b", re.IGNORECASE), neutral) for words, neutral in
             (("i|you|she|he", "they"), ("me|him", "them"), ("my|your|his|her", "their"), ("i'm|you're", "they're"))]

# Words that mark a line of the background as a reaction to the other person's reply, and its direction.
REPLY_WORDS = ("repl", "respon", "answer", "the other person", "someone", "if they", "npc", "回复", "回应", "对方")
FIT_WORDS = ("fit", "match", "rise", "relax", "calm", "open up", "opens up", "soften", "warm", "lift", "better",
             "贴合", "符合", "上升", "提升", "正面", "释然", "放松", "好转", "改善")
MISS_WORDS = ("miss", "fall", "drop", "shut down", "shuts down", "withdraw", "worse", "frustrat", "irritat",
              "defensive", "偏离", "下降", "降低", "负面", "不符", "失望", "生气", "不满", "沮丧")
# (trait words, speaking-style words that contradict them): a small explicit list, English and Chinese.
STYLE_CLASHES: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
    (("shy", "timid", "quiet", "reserved", "introvert", "withdrawn", "内向", "害羞", "沉默寡言", "怯懦", "高冷"),
     ("loud", "talkative", "chatty", "boisterous", "overshares", "rambles", "健谈", "话多", "滔滔不绝", "口若悬河")),
    (("calm", "patient", "gentle", "composed", "沉稳", "耐心", "温和"),
     ("shouts", "yells", "explodes", "screams", "hot-tempered", "暴躁", "大吼", "咆哮", "破口大骂")),
    (("optimistic", "cheerful", "upbeat", "乐观", "开朗"), ("gloomy", "pessimistic", "bleak", "悲观", "消极")),
    (("direct", "blunt", "frank", "straightforward", "直率"),
     ("evasive", "beats around the bush", "拐弯抹角", "含糊其辞", "支支吾吾")),
    (("humble", "modest", "谦逊", "谦虚"), ("brags", "boasts", "arrogant", "炫耀", "吹嘘", "自夸")),
]
PERSONALITY_CLASHES: dict[str, tuple[str, ...]] = {
    "negative": ("cheerful", "upbeat", "optimistic", "乐观", "开朗"),
    "passive": ("assertive", "domineering", "bossy", "takes charge", "强势", "咄咄逼人"),
    "avoidant": ("confrontational", "overshares", "opens up at once", "直面冲突"),
}
_STYLE_HEAD = re.compile(r"^\W*(speaking style|说话风格|说话方式)\W*", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class LintWarning:
    """One warning: the Profile field (or "extra.KEY") and what is wrong with it."""

    field: str
    problem: str

    def to_dict(self, fmt: str = "lab") -> dict[str, str]:
        return {"field": rlver_field(self.field) if fmt == "rlver" else self.field, "problem": self.problem}


def rlver_field(name: str) -> str:
    """The key an RLVER/SAGE record uses for a Profile field (extra keys sit at the top level there)."""
    if name.startswith("extra."):
        return name[6:]
    return RLVER_FIELD_OF.get(name, f"lab.{name}")


# ---------------------------------------------------------------- text helpers
def _has_cjk(text: str) -> bool:
    return re.search(f"[{_CJK}]", text) is not None


def script_language(text: str) -> str:
    """"zh" when Chinese characters are at least a quarter of the letters, "en" for Latin text, "" when
    the text has fewer than 6 letters (too short to tell)."""
    cjk = len(re.findall(f"[{_CJK}]", text))
    latin = len(re.findall(r"[A-Za-z]", text))
    if cjk + latin < 6:
        return ""
    return "zh" if cjk >= 0.25 * (cjk + latin) else "en"


def content_words(text: str) -> set[str]:
    """English words of 4+ letters outside the stop list (a final "s" dropped) and, for Chinese, the
    character triples of what is left once the stop words are cut out."""
    words = {w[:-1] if w.endswith("s") and len(w) > 4 else w for w in re.findall(r"[a-z']{4,}", text.lower())}
    words = {w.strip("'") for w in words if w.strip("'") not in _EN_STOP}
    for run in re.findall(f"[{_CJK}]+", _ZH_STOP.sub("|", text)):
        words.update(run[i:i + 3] for i in range(len(run) - 2))
    return words


def sentences(text: str) -> list[str]:
    return [s.strip(" *-#\t") for s in re.split(r"(?<=[.!?。！？])\s*|\n", text) if s.strip(" *-#\t")]


def neutral_pronouns(text: str) -> str:
    """English pronouns made third-person plural ("I want" -> "they want"): a first line in the first person
    and a hidden need in the second or third say the same thing, and the sentence model should see that."""
    for pattern, neutral in _PRONOUNS:
        text = pattern.sub(neutral, text)
    return text


def _length(text: str) -> tuple[int, str, int]:
    """(length, unit, limit) of a first line: Chinese characters or words."""
    if _has_cjk(text):
        return len(re.findall(f"[{_CJK}]", text)), "Chinese characters", FIRST_LINE_MAX_CHARS
    return len(text.split()), "words", FIRST_LINE_MAX_WORDS


def _mentions(text: str, word: str) -> bool:
    """`word` occurs in `text` (lowercase), not right after a negation; English words on word boundaries."""
    for m in re.finditer(re.escape(word) if _has_cjk(word) else rf"\b{re.escape(word)}", text):
        if not _NEGATED.search(text[max(0, m.start() - 30):m.start()]):
            return True
    return False


def speaking_style(persona: str) -> str:
    """The persona's speaking-style section(s) (up to the next bullet heading), or the whole persona."""
    parts = []
    for m in _STYLE_HEAD.finditer(persona):
        rest = persona[m.end():]
        stop = re.search(r"\n\s*\*\s", rest)
        parts.append(rest[:stop.start()] if stop else rest)
    return "\n".join(parts) if parts else persona


# ---------------------------------------------------------------- checks of one profile
def first_line_warnings(p: Profile) -> list[LintWarning]:
    out = []
    if not p.first_line.strip():
        return out
    n, unit, limit = _length(p.first_line)
    if n > limit:
        out.append(LintWarning("first_line", f"is {n} {unit}; an opening line should be at most {limit}"))
    questions = len(re.findall(r"[?？]+", p.first_line))
    if questions > FIRST_LINE_MAX_QUESTIONS:
        out.append(LintWarning("first_line", f"asks {questions} questions; at most {FIRST_LINE_MAX_QUESTIONS}"))
    return out


def reaction_warnings(p: Profile) -> list[LintWarning]:
    lines = [s.lower() for s in re.split(r"[\n。]", p.background) if s.strip()]
    # a reaction may put its heading and its text on two lines: look at each line with the next one
    pairs = [a + " " + b for a, b in zip(lines, lines[1:] + [""])]
    reply_lines = [s for s in pairs if any(w in s for w in REPLY_WORDS)]
    out = []
    for kind, words in (("fit", FIT_WORDS), ("miss", MISS_WORDS)):
        described = any(any(w in s for w in words) for s in reply_lines)
        if not described and not p.extra.get(f"{kind}_examples"):
            out.append(LintWarning("background", f"describes no reaction to replies that {kind} the hidden need "
                                                 f"(and there are no {kind}_examples)"))
    return out


def style_warnings(p: Profile) -> list[LintWarning]:
    style = speaking_style(p.persona).lower()
    out = []
    for trait in p.traits:
        t = trait.lower()
        for trait_words, clash_words in STYLE_CLASHES:
            if any(_mentions(t, w) for w in trait_words):
                hit = next((w for w in clash_words if _mentions(style, w)), None)
                if hit:
                    out.append(LintWarning("traits", f"trait {quote(trait, 40)} contradicts the speaking style "
                                                     f"({hit!r} in persona)"))
                    break
    hit = next((w for w in PERSONALITY_CLASHES.get(p.personality, ()) if _mentions(style, w)), None)
    if hit:
        out.append(LintWarning("personality", f"{p.personality!r} contradicts the speaking style ({hit!r} in persona)"))
    return out


def language_warnings(p: Profile) -> list[LintWarning]:
    names = {"en": "English", "zh": "Chinese"}
    texts = [(f, getattr(p, f)) for f in CHECKED_TEXT] + [("traits", " ".join(p.traits))]
    return [LintWarning(f, f"is written in {names[lang]} but the profile's language is {p.language}")
            for f, text in texts if (lang := script_language(text)) and lang != p.language and p.language in names]


def leak_candidates(p: Profile) -> list[tuple[str, str, list[str]]]:
    """(field, text, shared words) for the first line and each persona sentence sharing at least
    LEAK_MIN_SHARED content words with the hidden need: the only texts the leak check embeds."""
    need_words = content_words(p.hidden_need)
    texts = [("first_line", s) for s in [p.first_line] if s.strip()] + [("persona", s) for s in sentences(p.persona)]
    shared = [(f, s, sorted(content_words(s) & need_words)) for f, s in texts]
    return [(f, s, w) for f, s, w in shared if len(w) >= LEAK_MIN_SHARED]


def leak_warnings(p: Profile, embed: Embed) -> list[LintWarning]:
    """The first line, and the first persona sentence, that shares the hidden need's content words and is
    embedded within LEAK_SIMILARITY of it."""
    shared = leak_candidates(p)
    if not shared:
        return []
    vecs = embed([neutral_pronouns(t) for t in [p.hidden_need] + [s for _, s, _ in shared]])
    out, seen = [], set()
    for (f, s, words), sim in zip(shared, vecs[1:] @ vecs[0]):
        if sim >= LEAK_SIMILARITY and f not in seen:
            seen.add(f)
            where = "" if f == "first_line" else f" in {quote(s, 60)}"
            out.append(LintWarning(f, f"may reveal the hidden need{where}: similarity {sim:.2f} >= {LEAK_SIMILARITY} "
                                      f"and shared words {', '.join(words[:5])}"))
    return out


def profile_warnings(p: Profile, embed: Embed) -> list[LintWarning]:
    """Every check of one profile on its own (no comparison with other profiles)."""
    return (leak_warnings(p, embed) + first_line_warnings(p) + reaction_warnings(p) + style_warnings(p)
            + language_warnings(p))


# ---------------------------------------------------------------- checks across a set
def _head(text: str, n: int) -> str:
    if _has_cjk(text):
        return text[:n * 2]
    return " ".join(text.split()[:n])


def duplicate_text(p: Profile) -> str:
    """What near-duplicates are compared on: the start of the persona and of the background (the sentence
    model reads 256 tokens, so both get a share)."""
    return _head(p.persona, DUPLICATE_HEAD) + "\n" + _head(p.background, DUPLICATE_HEAD)


def duplicate_warnings(profiles: Sequence[Profile], embed: Embed,
                       others: Sequence[Profile] = ()) -> dict[str, list[LintWarning]]:
    """id -> a warning per profile (of `profiles` or `others`) whose persona + background is within
    DUPLICATE_SIMILARITY of its own and shares DUPLICATE_MIN_OVERLAP of its content words (the sentence
    model is English: on Chinese texts of one template its similarity alone is high for unrelated stories).
    `others` are compared with, but not warned about."""
    pool = list(profiles) + [o for o in others if o.id not in {p.id for p in profiles}]
    out: dict[str, list[LintWarning]] = {p.id: [] for p in profiles}
    if len(pool) < 2:
        return out
    vecs = embed([duplicate_text(p) for p in pool])
    sims = vecs[:len(profiles)] @ vecs.T
    words: dict[int, set[str]] = {}
    for i, p in enumerate(profiles):
        for j in np.argsort(-sims[i]):
            if sims[i, j] < DUPLICATE_SIMILARITY:
                break
            if j == i:
                continue
            a = words.setdefault(i, content_words(p.persona + "\n" + p.background))
            b = words.setdefault(j, content_words(pool[j].persona + "\n" + pool[j].background))
            overlap = len(a & b) / max(1, len(a | b))
            if overlap >= DUPLICATE_MIN_OVERLAP:
                out[p.id].append(LintWarning("persona", f"persona and background are a near-duplicate of "
                                                        f"{quote(pool[j].id, 60)}: similarity {sims[i, j]:.2f} >= "
                                                        f"{DUPLICATE_SIMILARITY} and {overlap:.0%} shared words >= "
                                                        f"{DUPLICATE_MIN_OVERLAP:.0%}"))
    return out


def default_embed() -> Embed:
    from simulator.llm.embedding import embed_sync

    return embed_sync


def _batched(embed: Embed, texts: list[str]) -> Embed:
    """`embed` with every text of `texts` encoded up front in one batch and remembered: the checks then ask
    for a few texts at a time without paying a model call each."""
    rows = dict(zip(texts, embed(texts))) if texts else {}

    def lookup(wanted: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(wanted) if t not in rows]
        if missing:
            rows.update(zip(missing, embed(missing)))
        return np.stack([rows[t] for t in wanted])

    return lookup


def lint_profiles(profiles: Iterable[Profile], embed: Optional[Embed] = None,
                  others: Sequence[Profile] = ()) -> dict[str, list[LintWarning]]:
    """id -> warnings for each profile, near-duplicates looked for among `profiles` and `others` (e.g. the
    stored set when linting one edited profile)."""
    profiles = list(profiles)
    texts: list[str] = []
    for p in profiles:
        candidates = leak_candidates(p)
        if candidates:
            texts += [neutral_pronouns(t) for t in [p.hidden_need] + [s for _, s, _ in candidates]]
    if len(profiles) + len(others) > 1:
        texts += [duplicate_text(p) for p in [*profiles, *others]]
    embed = _batched(embed or default_embed(), list(dict.fromkeys(texts)))
    dups = duplicate_warnings(profiles, embed, others)
    return {p.id: profile_warnings(p, embed) + dups[p.id] for p in profiles}
