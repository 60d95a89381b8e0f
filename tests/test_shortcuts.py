"""bot/dialog/shortcuts.py and the shipped shortcuts.toml."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.config import LLMConfig
from bot.dialog.domain import load_domain
from bot.dialog.shortcuts import Shortcut, ShortcutError, ShortcutMatcher, load_shortcuts, normalize

ROOT = Path(__file__).resolve().parent.parent
SHORTCUTS_FILE = ROOT / LLMConfig().shortcuts_file
DOMAIN_FILE = ROOT / LLMConfig().domain_file


@pytest.fixture(scope="module")
def matcher() -> ShortcutMatcher:
    return load_shortcuts(SHORTCUTS_FILE, load_domain(DOMAIN_FILE))


POSITIVE = [
    # greeting
    ("여보세요", "greeting"),
    ("안녕하세요", "greeting"),
    ("안녕하세요.", "greeting"),
    ("여보세요 안녕하세요", "greeting"),
    ("네 여보세요", "greeting"),
    ("예, 여보세요?", "greeting"),
    ("여보세요? 여보세요?", "greeting"),
    ("여보세요여보세요", "greeting"),
    ("안녕하십니까", "greeting"),
    ("여보세요 잘 들리세요?", "hearing_check"),
    ("제 말 들리시나요?", "hearing_check"),
    # thanks / goodbye
    ("감사합니다", "thanks_goodbye"),
    ("감사 합니다.", "thanks_goodbye"),
    ("네, 감사합니다!", "thanks_goodbye"),
    ("네 감사합니다", "thanks_goodbye"),
    ("예 예 고맙습니다", "thanks_goodbye"),
    ("고맙습니다", "thanks_goodbye"),
    ("수고하세요", "thanks_goodbye"),
    ("수고하셨습니다~", "thanks_goodbye"),
    ("끊을게요", "thanks_goodbye"),
    ("이만 끊겠습니다", "thanks_goodbye"),
    ("안녕히 계세요", "thanks_goodbye"),
    ("됐어요 감사합니다", "thanks_goodbye"),
    ("네 알겠습니다 수고하세요", "thanks_goodbye"),
    ("아 네 감사합니다 안녕히 계세요", "thanks_goodbye"),
    ("감사합니다 감사합니다", "thanks_goodbye"),
    ("정말 감사합니다…", "thanks_goodbye"),
    ("네 들어가세요", "thanks_goodbye"),
    # repeat
    ("다시 말씀해 주세요", "repeat"),
    ("다시말씀해주세요", "repeat"),
    ("다시 한번 말씀해 주시겠어요?", "repeat"),
    ("죄송한데 다시 한 번 말씀해 주시겠어요?", "repeat"),
    ("한 번 더 얘기해 주세요", "repeat"),
    ("뭐라고요?", "repeat"),
    ("네? 뭐라고요?", "repeat"),
    ("뭐라고 하셨어요?", "repeat"),
    ("잘 못 들었어요", "repeat"),
    ("잘 안 들려요", "repeat"),
    ("잘 못 들었는데 다시요", "repeat"),
    ("다시요?", "repeat"),
    ("네?", "repeat_short"),
    ("예?", "repeat_short"),
    ("뭐요?", "repeat_short"),
    # transfer
    ("상담원 연결해 주세요", "transfer"),
    ("상담원 연결해주세요.", "transfer"),
    ("상담원이랑 통화하고 싶어요", "transfer"),
    ("사람 바꿔 주세요", "transfer"),
    ("직원 연결", "transfer"),
    ("담당자한테 좀 연결해 주시겠어요?", "transfer"),
    ("상담원 연결 부탁드립니다", "transfer"),
    ("그냥 상담원이요", "transfer"),
    ("저 직원분이랑 직접 통화할 수 있을까요", "transfer"),
    ("상담사 바꿔 주시겠어요?", "transfer"),
]

NEGATIVE = [
    "안녕하세요 쓰레기 수거 문의드리려고요",
    "감사합니다 그런데 하나 더 물어볼게요",
    "여보세요 거기 시청이죠",
    "네",
    "네.",
    "예",
    "네 네 네",
    "아니요",
    "아니요 괜찮습니다",
    "알겠습니다",
    "됐어요",
    "괜찮아요",
    "뭐",
    "다시 신고하려고요",
    "다시 말씀드리면 가로등이 꺼졌어요",
    "상담원이 불친절했어요",
    "직원이 전화를 안 받아요",
    "사람이 다쳤어요",
    "사람이 쓰러져 있어요",
    "연결해 주세요",
    "안 들려요 소음이 너무 심해서요",
    "가로등이 안 켜져요",
    "감사 인사 드리려고 전화했어요 직원분이 친절하셔서요",
    "수고하세요 라고 말했는데 대답이 없었어요",
    "뭐라고 써야 해요",
    "",
    "   ",
    "...",
    "?",
]


@pytest.mark.parametrize("utterance, name", POSITIVE)
def test_positive(matcher: ShortcutMatcher, utterance: str, name: str) -> None:
    sc = matcher.match(utterance)
    assert sc is not None, f"{utterance!r} -> {normalize(utterance)!r} matched nothing"
    assert sc.name == name


@pytest.mark.parametrize("utterance", NEGATIVE)
def test_negative(matcher: ShortcutMatcher, utterance: str) -> None:
    sc = matcher.match(utterance)
    assert sc is None, f"{utterance!r} -> {normalize(utterance)!r} matched {sc}"


def test_table_sizes() -> None:
    assert len(POSITIVE) + len(NEGATIVE) >= 30


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
    for s in matcher.shortcuts:
        assert s.reply[-1] in ".?!" and s.category == "none"
        assert isinstance(s, Shortcut)


def test_match_speed(matcher: ShortcutMatcher) -> None:
    utterances = [u for u, _ in POSITIVE] + NEGATIVE + ["가" * 200]
    n = 0
    start = time.perf_counter()
    for _ in range(20):
        for u in utterances:
            matcher.match(u)
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


@pytest.mark.parametrize(
    "extra, fragment",
    [
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\npatterns = ['(']\n", "bad regex"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\npatterns = ['a b']\n", "whitespace"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\npatterns = ['${nope}']\n", "unknown macro"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\npatterns = []\n", "patterns must be"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\nflow = 'new_topic'\npatterns = ['a']\n", "flow"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = 'a.'\naction = 'hangup'\npatterns = ['a']\n", "action"),
        ("[[rules]]\nname = 'x'\nintent = 'greeting'\nreply = ''\npatterns = ['a']\n", "reply must be"),
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


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ShortcutError, match="not found"):
        load_shortcuts(tmp_path / "nope.toml")
