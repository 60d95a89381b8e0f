"""bot/dialog/domain.py and the shipped domain.toml / prompt.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.config import LLMConfig
from bot.dialog.domain import (
    EMERGENCY_FIELD,
    FIELDS,
    SOURCE_FIELD,
    Choice,
    Domain,
    DomainError,
    load_domain,
    render_slots,
    render_system_prompt,
)
from tests.conftest import ROOT

DOMAIN_FILE = ROOT / LLMConfig().domain_file
PROMPT_FILE = ROOT / LLMConfig().prompt_file

EXPECTED_INTENTS = [
    "report_problem", "ask_info", "request_document", "check_status", "transfer",
    "greeting", "thanks_goodbye", "repeat", "other",
]  # fmt: skip
EXPECTED_CATEGORIES = [
    "roads", "illegal_parking", "noise", "waste", "street_lights", "water", "sewage",
    "certificates", "welfare", "transport", "general_info", "none",
]  # fmt: skip
HANGUL = re.compile(r"[가-힣]")


@pytest.fixture(scope="module")
def domain() -> Domain:
    return load_domain(DOMAIN_FILE)


def valid_turn(**over):
    turn = {
        "reply": "네, 확인해 드릴게요.",
        "intent": "report_problem",
        "category": "roads",
        "location": "시청역 3번 출구",
        "time": None,
        "flow": "continue",
    }
    turn.update(over)
    return turn


# --- data file ----------------------------------------------------------------------------------


def test_shipped_domain_names(domain: Domain) -> None:
    assert domain.intent_names == EXPECTED_INTENTS
    assert domain.category_names == EXPECTED_CATEGORIES
    assert domain.flow_names == ["continue", "end", "new_topic"]


def test_every_choice_has_korean_label_and_description(domain: Domain) -> None:
    for choice in (*domain.intents, *domain.categories, *domain.flows):
        assert HANGUL.search(choice.label), choice
        assert HANGUL.search(choice.description), choice


# --- schema -------------------------------------------------------------------------------------


def test_schema_emergency_then_reply_first_and_strict(domain: Domain) -> None:
    schema = domain.response_schema(120)
    # The emergency flag must be known before a sentence of the reply is spoken (it replaces it).
    assert list(schema["properties"]) == ["emergency", "reply", "intent", "category", "location", "time", "flow"]
    assert list(schema["properties"]) == [EMERGENCY_FIELD, *FIELDS]
    assert schema["type"] == "object"
    assert schema["required"] == [EMERGENCY_FIELD, *FIELDS]
    assert schema["properties"]["emergency"] == {
        "type": "string", "enum": ["none", "fire", "gas", "medical", "rescue", "crime", "missing_child", "suicide"]}
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["reply"] == {"type": "string", "minLength": 1, "maxLength": 120}
    assert props["intent"] == {"type": "string", "enum": EXPECTED_INTENTS}
    assert props["category"] == {"type": "string", "enum": EXPECTED_CATEGORIES}
    assert props["flow"] == {"type": "string", "enum": ["continue", "end", "new_topic"]}
    assert props["location"] == {"type": ["string", "null"]}
    assert props["time"] == {"type": ["string", "null"]}
    json.dumps(schema)  # serializable


def test_schema_is_a_fresh_copy(domain: Domain) -> None:
    a = domain.response_schema(100)
    a["properties"]["intent"]["enum"].append("bogus")
    assert "bogus" not in domain.response_schema(100)["properties"]["intent"]["enum"]
    assert "bogus" not in domain.intent_names


def test_schema_rejects_bad_max(domain: Domain) -> None:
    with pytest.raises(ValueError):
        domain.response_schema(0)


def test_response_format_openai(domain: Domain) -> None:
    rf = domain.response_format("openai", 160)
    assert rf == {
        "type": "json_schema",
        "json_schema": {"name": "turn", "schema": domain.response_schema(160), "strict": True},
    }


def test_response_format_llama_cpp(domain: Domain) -> None:
    assert domain.response_format("llama_cpp", 80) == {"type": "json_object", "schema": domain.response_schema(80)}


def test_response_format_unknown_dialect(domain: Domain) -> None:
    with pytest.raises(ValueError, match="dialect"):
        domain.response_format("anthropic", 160)  # type: ignore[arg-type]


def test_response_format_matches_config_default(domain: Domain) -> None:
    cfg = LLMConfig()
    rf = domain.response_format(cfg.dialect, cfg.reply_max_chars)
    assert rf["json_schema"]["schema"]["properties"]["reply"]["maxLength"] == cfg.reply_max_chars


# --- validate -----------------------------------------------------------------------------------


def test_validate_accepts_valid(domain: Domain) -> None:
    assert domain.validate(valid_turn()) == []
    assert domain.validate(valid_turn(location=None, time="어제 밤")) == []
    assert domain.validate(valid_turn(reply="가" * 160), reply_max_chars=160) == []


@pytest.mark.parametrize(
    "turn, fragment",
    [
        (valid_turn(reply=""), "reply: empty"),
        (valid_turn(reply=None), "reply: expected a string, got null"),
        (valid_turn(reply=3), "reply: expected a string, got number"),
        (valid_turn(intent="complain"), "intent: 'complain' is not one of"),
        (valid_turn(intent=None), "intent: expected a string, got null"),
        (valid_turn(category="parks"), "category: 'parks' is not one of"),
        (valid_turn(flow="stop"), "flow: 'stop' is not one of"),
        (valid_turn(flow=True), "flow: expected a string, got boolean"),
        (valid_turn(location=5), "location: expected a string or null, got number"),
        (valid_turn(time=["오늘"]), "time: expected a string or null, got array"),
        (valid_turn(time={"when": "오늘"}), "time: expected a string or null, got object"),
        (valid_turn(extra="x"), "extra: unexpected property"),
        ({k: v for k, v in valid_turn().items() if k != "flow"}, "flow: missing"),
        ({k: v for k, v in valid_turn().items() if k != "location"}, "location: missing"),
    ],
)
def test_validate_errors(domain: Domain, turn, fragment: str) -> None:
    errors = domain.validate(turn)
    assert any(fragment in e for e in errors), errors


def test_validate_reply_length_only_when_asked(domain: Domain) -> None:
    turn = valid_turn(reply="가" * 161)
    assert domain.validate(turn) == []
    assert domain.validate(turn, reply_max_chars=160) == ["reply: 161 characters, more than 160"]


@pytest.mark.parametrize("obj", [None, "text", [], 3])
def test_validate_non_object(domain: Domain, obj) -> None:
    errors = domain.validate(obj)
    assert len(errors) == 1 and errors[0].startswith("turn: expected an object")


def test_validate_collects_several_errors(domain: Domain) -> None:
    errors = domain.validate({"reply": "", "intent": "x", "bogus": 1})
    assert len(errors) >= 6  # 4 missing + unexpected + empty + bad intent


# --- loader errors ------------------------------------------------------------------------------

GOOD = """
[[intents]]
name = "a"
label = "에이"
[[categories]]
name = "none"
label = "없음"
"""


def test_load_minimal_uses_default_flows(tmp_path: Path) -> None:
    p = tmp_path / "d.toml"
    p.write_text(GOOD, encoding="utf-8")
    d = load_domain(p)
    assert d.intents == (Choice("a", "에이", ""),)
    assert d.flow_names == ["continue", "end", "new_topic"]


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[[intents]\n", "invalid TOML"),
        (GOOD + "[[intents]]\nname = 'a'\nlabel = 'x'\n", "duplicate name 'a'"),
        (GOOD + "[[intents]]\nname = 'Bad-Name'\nlabel = 'x'\n", "snake_case"),
        (GOOD + "[[intents]]\nname = 'b'\n", "intents[1].label: missing"),
        (GOOD + "[[intents]]\nname = 'b'\nlabel = 'x'\ncolor = 'red'\n", "unknown key 'color'"),
        (GOOD + "[[flows]]\nname = 'continue'\nlabel = '계속'\n", "lacks ['end', 'new_topic']"),
        (GOOD + "[extra]\nx = 1\n", "unknown table 'extra'"),
        ("[[categories]]\nname = 'none'\nlabel = 'x'\n", "intents: missing"),
    ],
)
def test_load_errors(tmp_path: Path, text: str, fragment: str) -> None:
    p = tmp_path / "d.toml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(DomainError) as e:
        load_domain(p)
    assert fragment in str(e.value)


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DomainError, match="not found"):
        load_domain(tmp_path / "nope.toml")


# --- prompt -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template() -> str:
    return PROMPT_FILE.read_text(encoding="utf-8")


def test_template_has_placeholders(template: str) -> None:
    body = re.sub(r"<!--.*?-->", "", template, flags=re.S)
    for name in ("{intents}", "{categories}", "{slots}", "{flows}"):
        assert body.count(name) == 1, name
    assert body.rstrip().endswith("{slots}")  # last: the prefix before it stays cacheable


def test_render_fills_placeholders(template: str, domain: Domain) -> None:
    text = render_system_prompt(template, domain, {"location": "시청역 3번 출구 앞", "time": None})
    for name in ("{intents}", "{categories}", "{slots}", "{flows}"):
        assert name not in text
    assert "<!--" not in text and "render_system_prompt" not in text  # the comment is gone
    for c in (*domain.intents, *domain.categories, *domain.flows):
        assert f"- {c.name}: {c.label}" in text
    assert "- 위치: 시청역 3번 출구 앞" in text
    assert "시간:" not in text.split("# 지금까지 파악한 정보")[-1]  # None slots are left out
    assert text.rstrip().endswith("- 위치: 시청역 3번 출구 앞")


def test_render_keeps_json_braces(template: str, domain: Domain) -> None:
    text = render_system_prompt(template, domain, {})
    assert '{"emergency": "none", "reply": ' in text and text.count('"flow": ') >= 3


def test_render_prefix_is_stable_across_slots(template: str, domain: Domain) -> None:
    a = render_system_prompt(template, domain, {})
    b = render_system_prompt(template, domain, {"location": "중앙로", "time": "오늘 아침", "category": "noise"})
    marker = "# 지금까지 파악한 정보"
    assert a.split(marker)[0] == b.split(marker)[0]
    assert a.split(marker)[0].count("\n") > 20  # the cacheable prefix is most of the prompt


def test_render_slots(domain: Domain) -> None:
    assert render_slots(domain, {}) == "- 아직 없음"
    assert render_slots(domain, None) == "- 아직 없음"
    assert render_slots(domain, {"location": "  ", "time": None}) == "- 아직 없음"
    assert render_slots(domain, {"category": "noise", "intent": "report_problem", "time": "밤 11시"}) == (
        "- 분야: 소음 (noise)\n- 용건: 민원 신고 (report_problem)\n- 시간: 밤 11시"
    )
    assert render_slots(domain, {"phone": "010"}) == "- phone: 010"


def test_render_with_plain_template(domain: Domain) -> None:
    out = render_system_prompt("I={intents}\nS={slots}\n{other} {\"a\": 1}", domain, {"time": "지금"})
    assert out.startswith("I=- report_problem: 민원 신고. ")
    assert "S=- 시간: 지금" in out
    assert '{other} {"a": 1}' in out


def test_prompt_examples_are_valid_turns(template: str, domain: Domain) -> None:
    examples = [json.loads(line) for line in template.splitlines() if line.startswith('{"emergency"')]
    assert 3 <= len(examples) <= 5
    assert {ex["emergency"] for ex in examples} > {"none"}  # one example flags an emergency
    for ex in examples:
        assert list(ex) == [EMERGENCY_FIELD, *FIELDS, SOURCE_FIELD]  # the order the schema asks for
        assert domain.validate(ex, reply_max_chars=LLMConfig().reply_max_chars) == [], ex
    assert {ex["flow"] for ex in examples} == {"continue", "end", "new_topic"}


def test_prompt_examples_follow_the_style_rules(template: str) -> None:
    for line in template.splitlines():
        if line.startswith('{"emergency"'):
            reply = json.loads(line)["reply"]
            assert reply[-1] in ".?!", reply
            assert not re.search(r"[*#\-•\n]", reply), reply


def test_emergency_field_is_validated_and_optional(domain: Domain) -> None:
    turn = {"reply": "네.", "intent": "other", "category": "none", "location": None, "time": None, "flow": "continue"}
    assert domain.validate(turn) == []  # older scripted turns carry no flag
    assert domain.validate({"emergency": "none", **turn}) == []
    assert domain.validate({"emergency": "rescue", **turn}) == []
    assert domain.validate({"emergency": "earthquake", **turn}) == [
        "emergency: 'earthquake' is not one of " + repr(domain.emergency_names)]


def test_emergencies_are_listed_in_the_prompt(template: str, domain: Domain) -> None:
    out = render_system_prompt(template, domain)
    assert "- none: 해당 없음" in out and "- rescue: 구조. " in out and "{emergencies}" not in out


def test_a_domain_file_cannot_name_none_as_an_emergency(tmp_path: Path) -> None:
    text = (ROOT / "bot" / "data" / "domain.toml").read_text(encoding="utf-8")
    path = tmp_path / "domain.toml"
    path.write_text(text + '\n[[emergencies]]\nname = "none"\nlabel = "없음"\n', encoding="utf-8")
    with pytest.raises(DomainError, match="implied"):
        load_domain(path)
