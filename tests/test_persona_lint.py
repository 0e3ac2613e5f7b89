"""Persona lint with the real sentence model: crafted bad profiles give exactly the expected warnings, the
built-in library gives none, and `python -m simulator personas lint` speaks the file's own field names."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import make_sim_profile

from simulator import __main__ as simulator_cli
from simulator.personas import lint
from simulator.personas.builtin import BUILTIN_PROFILES
from simulator.personas.io import profile_to_rlver

ZH_PERSONA = ("* 姓名：李静\n* 年龄：29岁\n* 职业：小学老师\n* 说话风格：\n说话轻声细语，句子很短，常常停顿。")
ZH_BACKGROUND = ("李静的班上有个学生的家长在群里公开指责她偏心，校长让她写一份情况说明。\n"
                 "- NPC的回复贴合隐藏主题（emotion上升）：她会慢慢说出更多细节。\n"
                 "- NPC的回复偏离隐藏主题（emotion下降）：她会沉默，只回答一两个字。")


def kinds(warnings: list[lint.LintWarning]) -> list[tuple[str, str]]:
    """(field, the problem up to its figures) of each warning, in order."""
    return [(w.field, w.problem.split(":")[0]) for w in warnings]


def lint_one(profile) -> list[lint.LintWarning]:
    return lint.lint_profiles([profile])[profile.id]


def test_a_good_profile_has_no_warnings():
    assert lint_one(make_sim_profile()) == []


@pytest.mark.model
def test_hidden_need_said_in_the_first_line_or_the_persona():
    leaky = make_sim_profile(first_line="Honestly I just want someone to sincerely praise what I actually did "
                                        "during this hard year.")
    warnings = lint_one(leaky)
    assert kinds(warnings) == [("first_line", "may reveal the hidden need")]
    assert f">= {lint.LEAK_SIMILARITY}" in warnings[0].problem and "praise" in warnings[0].problem
    leaky = make_sim_profile(persona="Maya, 34, a night nurse. Deep down she wants someone to sincerely praise "
                                     "what she actually did during the hard year.")
    warnings = lint_one(leaky)
    assert [w.field for w in warnings] == ["persona"]
    assert warnings[0].problem.startswith("may reveal the hidden need in 'Deep down she wants someone to")
    # Shared words alone are not a leak: the same words in an unrelated sentence.
    assert lint_one(make_sim_profile(persona="Maya, 34. She would praise the hard year's weather, actually.")) == []


def test_first_line_too_long_or_too_many_questions():
    long_line = " ".join(["word"] * (lint.FIRST_LINE_MAX_WORDS + 5))
    assert [(w.field, w.problem) for w in lint_one(make_sim_profile(first_line=long_line))] == [
        ("first_line", f"is {lint.FIRST_LINE_MAX_WORDS + 5} words; an opening line should be at most "
                       f"{lint.FIRST_LINE_MAX_WORDS}")]
    assert [(w.field, w.problem) for w in lint_one(make_sim_profile(first_line="Why me? Why now? Who decides?"))] == [
        ("first_line", "asks 3 questions; at most 2")]
    assert lint_one(make_sim_profile(first_line="Why me? Why now?")) == []


def test_missing_reactions_to_fitting_and_missing_replies():
    bare = make_sim_profile(extra={})
    assert [(w.field, w.problem) for w in lint_one(bare)] == [
        ("background", "describes no reaction to replies that fit the hidden need (and there are no fit_examples)"),
        ("background", "describes no reaction to replies that miss the hidden need (and there are no miss_examples)")]
    described = make_sim_profile(extra={}, background="Maya was passed over for a promotion.\nReplies that name "
                                                      "what she did calm her; advice makes her shut down.")
    assert lint_one(described) == []
    half = make_sim_profile(extra={"fit_examples": ["You kept that ward running."]})
    assert kinds(lint_one(half)) == [("background", "describes no reaction to replies that miss the hidden need "
                                                    "(and there are no miss_examples)")]


def test_traits_or_personality_contradicting_the_speaking_style():
    persona = "* Name: Maya\n* Speaking style:\nLoud, talkative and cheerful; she rambles.\n* Job: nurse"
    clash = make_sim_profile(persona=persona, traits=["shy", "proud"], personality="negative")
    assert [(w.field, w.problem) for w in lint_one(clash)] == [
        ("traits", "trait 'shy' contradicts the speaking style ('loud' in persona)"),
        ("personality", "'negative' contradicts the speaking style ('cheerful' in persona)")]
    # A negated style word is no clash, and only the speaking-style section counts.
    calm = make_sim_profile(persona="* Hobbies: loud concerts\n* Speaking style:\nShe never shouts, even when hurt.",
                            traits=["calm", "quiet"])
    assert lint_one(calm) == []


def test_fields_in_another_language_than_the_profile():
    mixed = make_sim_profile(language="zh", name="李静", persona=ZH_PERSONA, background=ZH_BACKGROUND,
                             hidden_need="你希望对方真诚地夸奖你在事件中的具体行为", traits=["沉稳", "谨慎"],
                             first_line="I'm fine, just tired of explaining myself to parents.", extra={})
    assert [(w.field, w.problem) for w in lint_one(mixed)] == [
        ("first_line", "is written in English but the profile's language is zh")]
    assert lint.script_language("今天又被家长投诉了 OK") == "zh"
    assert lint.script_language("The parents complained again, 王老师 said.") == "en"
    assert lint.script_language("ok") == ""


@pytest.mark.model
def test_near_duplicates_in_the_set_name_each_other():
    original = BUILTIN_PROFILES[0]
    copied = copy.deepcopy(original)
    copied.id = "maya-copy"
    copied.persona = copied.persona.replace("Maya Chen", "May Chen").replace("34", "35")
    result = lint.lint_profiles([original, copied, BUILTIN_PROFILES[1]])
    assert kinds(result[original.id]) == [("persona", "persona and background are a near-duplicate of 'maya-copy'")]
    assert kinds(result["maya-copy"]) == [("persona", f"persona and background are a near-duplicate of "
                                                      f"'{original.id}'")]
    assert f">= {lint.DUPLICATE_SIMILARITY}" in result["maya-copy"][0].problem
    assert result[BUILTIN_PROFILES[1].id] == []
    # Compared with a stored set (`others`) without being warned about it.
    alone = lint.lint_profiles([copied], others=[original])
    assert list(alone) == ["maya-copy"] and len(alone["maya-copy"]) == 1


@pytest.mark.model
def test_the_builtin_library_has_no_warnings():
    result = lint.lint_profiles(BUILTIN_PROFILES)
    assert len(result) == 32
    assert {pid: ws for pid, ws in result.items() if ws} == {}


@pytest.mark.model
def test_cli_json_on_an_rlver_file_uses_rlver_field_names(tmp_path: Path, capsys):
    good = make_sim_profile(pid="zh-good", language="zh", name="李静", persona=ZH_PERSONA, background=ZH_BACKGROUND,
                            hidden_need="你希望对方真诚地夸奖你在事件中的具体行为", traits=["沉稳", "谨慎"],
                            first_line="今天又被家长投诉了。", extra={})
    bad = copy.deepcopy(good)
    bad.id, bad.persona = "zh-english-player", "A quiet primary-school teacher who answers in few words."
    bad.first_line = "为什么是我？为什么总是我？到底要我怎么做？"
    path = tmp_path / "profiles.jsonl"
    path.write_text("".join(json.dumps(profile_to_rlver(p), ensure_ascii=False) + "\n" for p in (good, bad)),
                    encoding="utf-8")
    assert "player" in path.read_text(encoding="utf-8")
    assert simulator_cli.main(["personas", "lint", str(path), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [{"id": "zh-good", "warnings": []},
                     {"id": "zh-english-player", "warnings": [
                         {"field": "first_talk", "problem": "asks 3 questions; at most 2"},
                         {"field": "player", "problem": "is written in English but the profile's language is zh"}]}]


@pytest.mark.model
def test_cli_table_sets_and_bad_input(tmp_path: Path, capsys):
    assert simulator_cli.main(["personas", "lint", "--set", "builtin:heldout"]) == 0
    assert capsys.readouterr().out.strip() == "8 profile(s), 0 warning(s) in 0 profile(s)"
    assert simulator_cli.main(["personas", "lint", "--set", "builtin:dev"]) == 2
    assert "--set: unknown persona set 'builtin:dev'" in capsys.readouterr().err
    # A file with a bad line: the valid profiles are linted (readable table), the bad line named, exit 1.
    path = tmp_path / "mixed.jsonl"
    lab = make_sim_profile(pid="long-opener", first_line="Why? " * 3).to_dict()
    path.write_text(json.dumps(lab) + "\n{not json\n", encoding="utf-8")
    assert simulator_cli.main(["personas", "lint", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0].split() == ["id", "field", "problem"]
    assert "long-opener  first_line  asks 3 questions; at most 2" in out
    assert out.splitlines()[-1] == "1 profile(s), 1 warning(s) in 1 profile(s)"
    assert "1 problem(s); only the valid lines were linted" in err and "line 2: json" in err


@pytest.mark.model
def test_released_rlver_profiles_lint(shared_data: Path, capsys):
    """The released test set runs through the CLI; its warnings are few (the count is in the README)."""
    assert simulator_cli.main(["personas", "lint", str(shared_data / "rlver" / "test_profile.jsonl"), "--json"]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(results) == 100
    fields = {w["field"] for r in results for w in r["warnings"]}
    assert fields <= {"player", "scene", "first_talk", "cha_group", "main_cha", "task"}
    assert sum(len(r["warnings"]) for r in results) <= 10


@pytest.mark.model
def test_personas_view_functions_on_a_real_store(store):
    from app.views.personas import HEADERS, form_warnings, rows_with_warnings, warnings_markdown
    from simulator.personas import store as persona_store

    persona_store.save_profile(store, make_sim_profile(pid="asks-a-lot", first_line="Why? Why me? Why now?"),
                               create=True)
    persona_store.save_profile(store, make_sim_profile(pid="clean"), create=True)
    listed = rows_with_warnings(store)
    assert HEADERS[-1] == "warnings" and [(r[0], r[-1]) for r in listed] == [("asks-a-lot", "2"), ("clean", "1")]
    # both are near-duplicates of each other (the same persona and background); "asks-a-lot" also asks 3 questions
    warnings = form_warnings(store, persona_store.get_profile(store, "clean"))
    assert kinds(warnings) == [("persona", "persona and background are a near-duplicate of 'asks-a-lot'")]
    text = warnings_markdown(warnings)
    assert text.startswith("**Lint: 1 warning(s)**\n- ⚠ persona: persona and background are a near")  # md-escaped
    assert warnings_markdown([]) == "Lint: no warnings."
