"""bot/dialog/shortcuts.py and the shipped shortcuts.toml."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.config import LLMConfig
from bot.dialog.domain import load_domain
from bot.dialog.shortcuts import Shortcut, ShortcutError, ShortcutMatcher, load_shortcuts, normalize
from tests.conftest import ROOT

SHORTCUTS_FILE = ROOT / LLMConfig().shortcuts_file
DOMAIN_FILE = ROOT / LLMConfig().domain_file


@pytest.fixture(scope="module")
def matcher() -> ShortcutMatcher:
    return load_shortcuts(SHORTCUTS_FILE, load_domain(DOMAIN_FILE))


CASES_FILE = ROOT / "tests" / "data" / "shortcut_cases.tsv"


def read_cases(path: Path = CASES_FILE) -> list[tuple[str, str | None, str]]:
    """(expected rule name or "model", context or None, utterance) rows of the routing table."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#") or line.startswith("expect\t"):
            continue
        expect, context, utterance = line.split("\t")
        rows.append((expect, None if context == "-" else context, utterance))
    return rows


CASES = read_cases()


@pytest.mark.parametrize("expect, context, utterance", CASES)
def test_routing_table(matcher: ShortcutMatcher, expect: str, context: str | None, utterance: str) -> None:
    sc = matcher.match(utterance, context)
    got = sc.name if sc else "model"
    assert got == expect, f"{utterance!r} -> {normalize(utterance)!r} in {context}: {got}, expected {expect}"


# Regional endings and colloquial phrasings, with near misses, one dialect per row (issue 33).
DIALECT_FILE = ROOT / "tests" / "data" / "shortcut_dialect_cases.tsv"
DIALECTS = ("chungcheong", "gyeongsang", "jeolla")


def read_dialect_cases(path: Path = DIALECT_FILE) -> list[tuple[str, str | None, str, str]]:
    """(expected rule name or "model", context or None, dialect, utterance) rows."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#") or line.startswith("expect\t"):
            continue
        expect, context, dialect, utterance = line.split("\t")
        rows.append((expect, None if context == "-" else context, dialect, utterance))
    return rows


DIALECT_CASES = read_dialect_cases()


@pytest.mark.parametrize("expect, context, dialect, utterance", DIALECT_CASES)
def test_dialect_table(matcher: ShortcutMatcher, expect: str, context: str | None, dialect: str, utterance: str) -> None:
    sc = matcher.match(utterance, context)
    got = sc.name if sc else "model"
    assert got == expect, f"[{dialect}] {utterance!r} -> {normalize(utterance)!r} in {context}: {got}, expected {expect}"


def test_dialect_table_covers_each_dialect_with_near_misses() -> None:
    assert {d for _, _, d, _ in DIALECT_CASES} == {*DIALECTS, "standard"}
    positives = [c for c in DIALECT_CASES if c[0] != "model"]
    assert len(DIALECT_CASES) >= 60 and 0.4 <= len(positives) / len(DIALECT_CASES) <= 0.7
    for dialect in DIALECTS:
        rows = [c for c in DIALECT_CASES if c[2] == dialect]
        assert {"thanks_goodbye", "repeat", "transfer", "model"} <= {c[0] for c in rows}, dialect
        assert sum(c[0] == "model" for c in rows) >= 5, dialect


def test_table_sizes() -> None:
    negatives = [c for c in CASES if c[0] == "model"]
    assert len(CASES) >= 150 and len(negatives) >= 30
    acts = {c[0] for c in CASES}
    assert acts >= {"greeting", "thanks_goodbye", "repeat", "transfer", "confirm_yes", "confirm_no", "model"}


def test_politely_rephrased_repeat_is_a_shortcut(matcher: ShortcutMatcher) -> None:
    for u in ("한 번만 더 천천히 말씀해 주실래요?", "다시 한번 말해줄래요", "다시 말씀해주실 수 있나요"):
        assert matcher.match(u).name == "repeat", u


def test_confirmation_rules_only_in_their_context(matcher: ShortcutMatcher) -> None:
    assert matcher.match("네") is None
    assert matcher.match("네", "confirmation").action == "confirm_yes"
    assert matcher.match("아니요", "confirmation").action == "confirm_no"
    assert matcher.match("아니요") is None
    # Rules without a context still match in one, and another context sees no confirmation rule.
    assert matcher.match("감사합니다", "confirmation").name == "thanks_goodbye"
    assert matcher.match("네", "other") is None


def test_context_rules_are_checked_first(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(
        RULE + "[[rules]]\nname = 'yes'\ncontext = 'confirmation'\nintent = 'other'\n"
        "action = 'confirm_yes'\nreply = ''\npatterns = ['안녕']\n",
        encoding="utf-8",
    )
    m = load_shortcuts(p)
    assert m.match("안녕").name == "hi"
    assert m.match("안녕", "confirmation").name == "yes"
    assert [s.name for s in m.shortcuts] == ["hi", "yes"]  # every rule, empty replies included


@pytest.mark.parametrize(
    "raw, norm",
    [
        ("다시 말씀해 주세요.", "다시말씀해주세요"),
        ("네, 감사합니다!", "네감사합니다"),
        ("예 예 예", "네"),
        ("네 예 넵", "네"),
        ("여보세요? 여보세요?", "여보세요"),
        ("아, 음… 감사합니다~", "감사합니다"),
        ("ＯＫ 감사합니다！", "ok감사합니다"),
        ("Hello  World", "helloworld"),
        ("15,000원", "15000원"),
        ("", ""),
    ],
)
def test_normalize(raw: str, norm: str) -> None:
    assert normalize(raw) == norm


def test_shortcut_fields(matcher: ShortcutMatcher) -> None:
    by_name = {s.name: s for s in matcher.shortcuts}
    assert set(by_name) >= {"greeting", "thanks_goodbye", "repeat", "repeat_short", "transfer"}
    g, bye, rep, tr = by_name["greeting"], by_name["thanks_goodbye"], by_name["repeat"], by_name["transfer"]
    assert (g.intent, g.flow, g.action) == ("greeting", "continue", "none")
    assert (bye.intent, bye.flow, bye.action) == ("thanks_goodbye", "end", "none")
    assert (rep.intent, rep.flow, rep.action) == ("repeat", "continue", "repeat")
    assert (tr.intent, tr.flow, tr.action) == ("transfer", "continue", "transfer")
    assert tr.reply == "상담원에게 연결해 드리겠습니다. 잠시만 기다려 주세요."
    yes, no = by_name["confirm_yes"], by_name["confirm_no"]
    assert (yes.intent, yes.flow, yes.action, yes.reply) == ("other", "continue", "confirm_yes", "")
    assert (no.intent, no.flow, no.action, no.reply) == ("other", "continue", "confirm_no", "")
    for s in matcher.shortcuts:
        assert isinstance(s, Shortcut) and s.category == "none"
        assert s.reply == "" if s.action.startswith("confirm_") else s.reply[-1] in ".?!"


def test_match_speed(matcher: ShortcutMatcher) -> None:
    utterances = [u for _, _, u in CASES] + [u for *_, u in DIALECT_CASES] + ["가" * 200, "다시" * 50 + "말씀해", "네" + "맞아요" * 40 + "요"]
    n = 0
    start = time.perf_counter()
    for _ in range(20):
        for u in utterances:
            matcher.match(u, "confirmation")
            n += 1
    per_ms = (time.perf_counter() - start) * 1000 / n
    print(f"\nshortcut match: {per_ms * 1000:.1f} us per utterance over {n} calls")  # target < 5 ms


# --- loader -------------------------------------------------------------------------------------

RULE = """
[macros]
hi = '(?:안녕|하이)'
[[rules]]
name = "hi"
intent = "greeting"
reply = "안녕하세요."
patterns = ['${hi}+']
"""


def test_macro_and_defaults(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(RULE, encoding="utf-8")
    m = load_shortcuts(p)
    sc = m.match("안녕 하이!")
    assert sc == Shortcut("hi", "안녕하세요.", "greeting", "continue", "none", "none")
    assert m.match("안녕 친구") is None


def test_first_rule_wins(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(
        RULE + "[[rules]]\nname = 'hi2'\nintent = 'greeting'\nreply = '두번째.'\npatterns = ['안녕']\n",
        encoding="utf-8",
    )
    assert load_shortcuts(p).match("안녕").name == "hi"


def test_macros_may_be_lists_and_use_other_macros(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_text(
        "[macros]\nend = ['요', '습니다']\nthanks = '감사(?:해${end}|합니다)'\n"
        "[[rules]]\nname = 't'\nintent = 'thanks_goodbye'\nreply = '네.'\npatterns = ['${thanks}']\n",
        encoding="utf-8",
    )
    m = load_shortcuts(p)
    assert m.match("감사해요").name == "t" and m.match("감사합니다").name == "t"
    assert m.match("감사해") is None


@pytest.mark.parametrize(
    "extra, fragment",
    [
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\npatterns = ['(']\n", "bad regex"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\npatterns = ['a b']\n", "whitespace"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\npatterns = ['${nope}']\n", "unknown macro"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\npatterns = []\n", "patterns: must be"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\nflow = 'new_topic'\npatterns = ['a']\n", "flow"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\naction = 'hangup'\npatterns = ['a']\n", "action"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = ''\npatterns = ['a']\n", "reply: must be"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = ' '\naction = 'repeat'\npatterns = ['a']\n", "reply: must be"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\ncontext = 'menu'\npatterns = ['a']\n", "context"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\nrejects_question = 1\npatterns = ['a']\n", "rejects_question"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\npatterns = ['a']\nprio = 1\n", "unknown key"),
        ("[[rules]]\nname = 'hi'\nintent = 'greeting'\nreply = 'a.'\npatterns = ['a']\n", "duplicate"),
        ("[[rules]]\nname = 'x'\nintent = 'chitchat'\nreply = 'a.'\npatterns = ['a']\n", "not in the domain"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\ncategory = 'parks'\nreply = 'a.'\npatterns = ['a']\n", "not in the domain"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\nrequires_question = 'yes'\npatterns = ['a']\n", "requires_question"),
        ("[[rules]\n", "invalid TOML"),
    ],
)
def test_load_errors(tmp_path: Path, extra: str, fragment: str) -> None:
    p = tmp_path / "s.toml"
    p.write_text(RULE + extra, encoding="utf-8")
    with pytest.raises(ShortcutError) as e:
        load_shortcuts(p, load_domain(DOMAIN_FILE))
    assert fragment in str(e.value)


@pytest.mark.parametrize(
    "macros, fragment",
    [("a = '${a}'", "refers to itself"), ("a = '${b}'\nb = '${a}'", "refers to itself"),
     ("a = 'x y'", "without spaces"), ("a = []", "list of regexes"), ("a = '${nope}'", "unknown macro")],
)
def test_bad_macros(tmp_path: Path, macros: str, fragment: str) -> None:
    p = tmp_path / "s.toml"
    p.write_text(f"[macros]\n{macros}\n", encoding="utf-8")
    with pytest.raises(ShortcutError, match=fragment):
        load_shortcuts(p)


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ShortcutError, match="not found"):
        load_shortcuts(tmp_path / "nope.toml")
