"""Issue 47, part 2: abusive callers are warned, then the call ends; an emergency said with swearing
is an emergency; near misses (tests/data/abuse_cases.tsv) are ordinary turns."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from bot.call.assets import DialogAssets
from bot.call.wiring import make_policy
from bot.config import load_config
from bot.dialog.abusive import AbuseDataError, AbuseRules
from bot.dialog.policy import AskModel, Speak
from bot.dialog.state import DialogState
from bot.tools.chat import run_chat

CASES = Path(__file__).resolve().parent.parent / "data" / "abuse_cases.tsv"
RULES = AbuseRules.load()
CONFIG = load_config()
ASSETS = DialogAssets.load(CONFIG)
POLICY = make_policy(CONFIG, ASSETS)


def _cases() -> list[tuple[str, str]]:
    rows = [line.split("\t") for line in CASES.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]
    assert all(len(r) == 2 for r in rows), [r for r in rows if len(r) != 2]
    return [(expect, text) for expect, text in rows]


@pytest.mark.parametrize(("expect", "text"), _cases(), ids=lambda v: v if len(v) < 14 else None)
def test_each_case_of_the_table_is_answered_as_it_says(expect, text):
    decision = POLICY.decide(text, DialogState())
    if expect == "emergency":
        assert isinstance(decision, Speak) and decision.route == "emergency", decision
    elif expect == "none":
        assert RULES.classify(text) is None
        assert not (isinstance(decision, Speak) and (decision.rule or "").startswith("abusive:")), decision
    else:
        verdict = RULES.classify(text)
        assert verdict is not None and verdict.family == expect, (text, verdict)
        assert isinstance(decision, Speak) and decision.rule == f"abusive:{verdict.rule}"


def test_the_table_covers_every_family_and_its_near_misses():
    kinds = [expect for expect, _ in _cases()]
    assert set(RULES.families) <= set(kinds)
    assert kinds.count("none") >= 30 and kinds.count("emergency") >= 5


def test_a_first_insult_is_warned_and_a_second_ends_the_call_nothing_else_changes():
    state = DialogState(slots={"category": "streetlight", "location": "한빛로 12", "time": None})
    state.intake_open, state.tickets = True, ["20260042"]
    first = POLICY.decide("씨발 왜 이렇게 느려", state)
    assert isinstance(first, Speak) and first.sentences == (ASSETS.canned.abuse_warning,) and first.flow == "continue"
    first.change.apply(state, first.reply)
    assert state.abuse_warned and not state.ended
    between = POLICY.decide("가로등이 아직도 꺼져 있어요", state)
    assert isinstance(between, AskModel)  # an ordinary turn in between is answered as ever
    second = POLICY.decide("이 병신아", state)
    assert isinstance(second, Speak) and second.sentences == (ASSETS.canned.abuse_closing,) and second.flow == "end"
    second.change.apply(state, second.reply)
    assert state.ended and state.end_reason == "abusive"
    # The caller's complaint and ticket are as they were.
    assert state.slots["location"] == "한빛로 12" and state.intake_open and state.tickets == ["20260042"]


def test_the_warning_and_the_closing_are_in_the_callers_language():
    config = load_config(overrides=["line.languages=['ko','en','vi']", "line.language_keys={vi='7'}"])
    assets = DialogAssets.load(config)
    state = DialogState(language="en")
    en = make_policy(config, assets).for_language("en")
    warned = en.decide("shut up you stupid bitch", state)
    assert warned.sentences == (assets.languages["en"].canned.abuse_warning,)
    warned.change.apply(state, warned.reply)
    assert en.decide("what the fuck", state).sentences == (assets.languages["en"].canned.abuse_closing,)
    vi = make_policy(config, assets).for_language("vi").decide("씨발", DialogState(language="vi"))
    assert vi.sentences == (assets.languages["vi"].canned.abuse_warning,)


def test_a_crisis_caller_who_swears_is_not_warned_or_hung_up_on():
    state = DialogState()
    told = POLICY.decide("죽고 싶어요", state)
    told.change.apply(state, told.reply)
    assert state.awaiting and state.awaiting.startswith("crisis:")
    for _ in range(2):
        d = POLICY.decide("씨발 다 귀찮아", state)
        assert not (isinstance(d, Speak) and (d.rule or "").startswith("abusive:"))


def test_a_broken_rule_names_its_file_and_key(tmp_path):
    bad = tmp_path / "abuse.toml"
    bad.write_text("[family.insult]\npatterns = ['씨발(']\n", encoding="utf-8")
    with pytest.raises(AbuseDataError, match=r"abuse\.toml:2: family\.insult\.patterns\[0\]"):
        AbuseRules.load(bad)


async def test_chat_warns_then_ends_with_end_reason_abusive(tmp_path):
    config = load_config(overrides=[f"records.url='sqlite:///{tmp_path / 'calls.db'}'",
                                    "llm.start_without_llm=true", "llm.base_url='http://127.0.0.1:9/v1'"])
    out = io.StringIO()
    assert await run_chat(config, io.StringIO("씨발 뭐야\n이 개새끼야\n가로등 신고요\n"), out) == 0
    warned, ended = (json.loads(line) for line in out.getvalue().splitlines())  # the chat stops at the end
    assert warned["reply"] == ASSETS.canned.abuse_warning and warned["flow"] == "continue"
    assert ended["reply"] == ASSETS.canned.abuse_closing and ended["flow"] == "end"
    assert ended["end_reason"] == "abusive" and ended["llm_calls"] == 0


def _said(path: Path) -> list[str]:
    """The caller's turns of another table: the last column of a .tsv, every `text = "..."` of a .toml."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".tsv":
        return [line.split("\t")[-1] for line in text.splitlines() if "\t" in line and not line.startswith("#")]
    return re.findall(r'(?m)^\s*text\s*=\s*"([^"]+)"', text)


def test_no_turn_of_the_projects_other_tables_is_taken_for_abuse():
    root = CASES.parent.parent.parent
    tables = [root / "tests/data/shortcut_cases.tsv", root / "tests/data/shortcut_dialect_cases.tsv",
              root / "bench/eval_turns.toml", root / "bench/faq_eval.toml", root / "bench/turns.toml"]
    said = [t for table in tables for t in _said(table)]
    assert len(said) > 500
    assert [(t, RULES.classify(t)) for t in said if RULES.classify(t)] == []
