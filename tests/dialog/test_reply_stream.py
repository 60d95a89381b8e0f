"""bot/reply_stream.py: streamed reply extraction, turn parsing, sentence splitting."""

from __future__ import annotations

import json
import random

import pytest

from bot.dialog.reply_stream import KoreanSentenceSplitter, ReplyFieldExtractor, TurnParseError, parse_turn

TURN = {
    "reply": "네, 확인해 드릴게요. 어느 위치인가요?",
    "intent": "report_problem",
    "category": "roads",
    "location": None,
    "time": None,
    "flow": "continue",
}

REPLIES = [
    "네, 확인해 드릴게요. 어느 위치인가요?",
    '그분이 "접수됐다"고 하셨어요.',
    "경로는 C:\\temp\\a 입니다.",
    "첫 줄.\n둘째 줄.\t탭.",
    "이모지 😀 와 한자 漢字, 그리고 é.",
    "슬래시 a/b 와 역슬래시-따옴표 \\\" 조합.",
    "제어 문자 \b\f\r 포함.",
    "{\"reply\": \"가짜\"} 라는 글자도 그냥 글입니다.",
    "1.5배, 15,000원, 120번.",
    "가",
]


def documents() -> list[tuple[str, str]]:
    """(json text, expected reply) pairs: several field orders, nestings and serializations."""
    docs: list[tuple[str, str]] = []
    for reply in REPLIES:
        objs = [
            dict(TURN, reply=reply),
            {"intent": "other", "reply": reply, "flow": "end"},
            {"intent": "other", "category": "none", "location": "시청", "time": None, "flow": "end", "reply": reply},
            {"meta": {"reply": "중첩 가짜", "x": [1, {"reply": "더 깊은 가짜"}]}, "reply": reply},
            {"list": [{"reply": "배열 안 가짜"}, "\"reply\": \"가짜\""], "note": '"reply": "가짜"', "reply": reply},
            {"nums": [1.5, -2e3, True, False, None], "reply": reply, "after": {"reply": "뒤 가짜"}},
        ]
        for obj in objs:
            docs.append((json.dumps(obj, ensure_ascii=False), reply))
            docs.append((json.dumps(obj, ensure_ascii=True), reply))
            docs.append((json.dumps(obj, ensure_ascii=False, indent=2), reply))
            docs.append((json.dumps(obj, ensure_ascii=True, separators=(",", ":")), reply))
    return docs


DOCS = documents()


def feed_all(chunks: list[str]) -> tuple[str, ReplyFieldExtractor, list[str]]:
    ex = ReplyFieldExtractor()
    outs = [ex.feed(c) for c in chunks]
    return "".join(outs), ex, outs


def random_chunks(text: str, rng: random.Random, max_len: int = 7) -> list[str]:
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, max_len)
        out.append(text[i : i + n])
        i += n
    return out


def test_many_documents() -> None:
    assert len(DOCS) >= 200


@pytest.mark.parametrize("text, reply", DOCS[::3] + DOCS[1::7])
def test_whole_document(text: str, reply: str) -> None:
    got, ex, _ = feed_all([text])
    assert got == reply
    assert ex.done and ex.reply == reply
    assert ex.finish() == json.loads(text)


def test_char_by_char_all_documents() -> None:
    for text, reply in DOCS:
        got, ex, outs = feed_all(list(text))
        assert got == reply, text
        assert ex.done
        assert all(len(o) <= 2 for o in outs)  # at most one character (or a surrogate pair) per char


def test_random_chunking_all_documents() -> None:
    rng = random.Random(1234)
    for text, reply in DOCS:
        for _ in range(5):
            got, ex, _ = feed_all(random_chunks(text, rng))
            assert got == reply, text
            assert ex.done


@pytest.mark.parametrize(
    "text, reply",
    [
        (r'{"reply": "a\"b\\c\/d\ne\tf\u00e9\ud83d\ude00g"}', 'a"b\\c/d\ne\tfé😀g'),
        (r'{"reply":"\u0041\u00410\uAC00"}', "AA0가"),
        (r'{"reply": "\b\f\r"}', "\b\f\r"),
        (r'{"x": "\"reply\": \"no\"", "reply": "\\\"yes\\\""}', '\\"yes\\"'),
    ],
)
def test_escapes_split_at_every_position(text: str, reply: str) -> None:
    assert json.loads(text)["reply"] == reply
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1):
            got, ex, _ = feed_all([text[:i], text[i:j], text[j:]])
            assert got == reply, (i, j)
            assert ex.done


def test_only_top_level_reply_counts() -> None:
    text = '{"a": {"reply": "no"}, "b": [{"reply": "no"}], "reply": "yes", "c": {"reply": "no"}}'
    assert feed_all([text])[0] == "yes"


def test_reply_text_inside_other_strings() -> None:
    text = '{"intent": "\\"reply\\": \\"no\\"", "location": "reply", "reply": "yes"}'
    assert feed_all(list(text))[0] == "yes"


def test_key_value_confusion() -> None:
    # A value equal to "reply" is not a key; a key spelled with escapes is.
    assert feed_all(['{"x": "reply", "y": "no", "reply": "yes"}'])[0] == "yes"
    assert feed_all(['{"rep\\u006cy": "yes"}'])[0] == "yes"


def test_whitespace_everywhere() -> None:
    text = '\n  {\n\t"intent" :\t"other" ,\r\n  "reply"   :\n   "yes"  ,"flow":"end"\n}\n'
    assert feed_all(list(text))[0] == "yes"


def test_done_flips_exactly_at_the_closing_quote() -> None:
    text = json.dumps(TURN, ensure_ascii=False)
    close = text.index('"', text.index(TURN["reply"]) + len(TURN["reply"]))
    ex = ReplyFieldExtractor()
    for i, ch in enumerate(text):
        ex.feed(ch)
        assert ex.done == (i >= close), i
    assert ex.started


def test_started_and_partial() -> None:
    ex = ReplyFieldExtractor()
    assert ex.feed('{"reply": "네, 확') == "네, 확"
    assert ex.started and not ex.done
    assert ex.feed("인") == "인"
    assert ex.reply == "네, 확인"
    assert ex.text == '{"reply": "네, 확인'


def test_non_string_reply_is_ignored() -> None:
    got, ex, _ = feed_all(['{"reply": null, "intent": "other"}'])
    assert got == "" and not ex.done and not ex.started
    got, ex, _ = feed_all(['{"reply": {"reply": "no"}, "x": "no"}'])
    assert got == "" and not ex.done


def test_first_reply_only_and_nothing_after_close() -> None:
    got, ex, _ = feed_all(['{"reply": "one", "reply": "two"}', ' {"reply": "three"}'])
    assert got == "one"
    assert ex.feed('"more"') == ""


def test_leading_noise_is_skipped() -> None:
    text = '```json\n{"reply": "yes", "flow": "end"}\n```'
    got, ex, _ = feed_all(list(text))
    assert got == "yes"
    assert ex.finish() == {"reply": "yes", "flow": "end"}


def test_lone_surrogates_become_replacement() -> None:
    assert feed_all([r'{"reply": "a\ud83db"}'])[0] == "a\ufffdb"
    assert feed_all([r'{"reply": "a\ude00b"}'])[0] == "a\ufffdb"
    assert feed_all([r'{"reply": "a\ud83d"}'])[0] == "a\ufffd"
    assert feed_all([r'{"reply": "a\ud83d\ud83d\ude00"}'])[0] == "a\ufffd😀"


def test_never_emits_json_syntax() -> None:
    text = json.dumps({"intent": "other", "reply": "평문", "meta": {"k": "v"}}, ensure_ascii=True)
    _, _, outs = feed_all(list(text))
    assert "".join(outs) == "평문"


def test_finish_with_explicit_text() -> None:
    ex = ReplyFieldExtractor()
    assert ex.finish('{"a": 1}') == {"a": 1}


# --- parse_turn ---------------------------------------------------------------------------------


def test_parse_turn_ok() -> None:
    text = json.dumps(TURN, ensure_ascii=False)
    assert parse_turn(text) == TURN
    assert parse_turn("  \n" + text + "\n ") == TURN
    assert parse_turn("```json\n" + text + "\n```") == TURN
    assert parse_turn("<think>\n</think>\n" + text) == TURN


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "no JSON object"),
        ("네, 확인해 드릴게요.", "no JSON object"),
        ('{"reply": "네, 확인', "invalid JSON"),
        ('{"reply": "네", "intent": report_problem}', "invalid JSON"),
        ('{"reply": "네"} 그리고', "unexpected text"),
        ('{"reply": "네"}{"reply": "또"}', "unexpected text"),
    ],
)
def test_parse_turn_errors(text: str, fragment: str) -> None:
    with pytest.raises(TurnParseError) as e:
        parse_turn(text)
    assert fragment in str(e.value)
    assert e.value.text == text
    assert isinstance(e.value, ValueError)


# --- sentence splitting -------------------------------------------------------------------------

SPLITS = [
    ("안녕하세요. 무엇을 도와드릴까요?", ["안녕하세요.", "무엇을 도와드릴까요?"]),
    ("요금은 1.5배입니다. 감사합니다.", ["요금은 1.5배입니다.", "감사합니다."]),
    ("수수료는 15,000원이에요! 네?", ["수수료는 15,000원이에요!", "네?"]),
    ("정말요?! 네.", ["정말요?!", "네."]),
    ("잠시만요… 확인해 볼게요.", ["잠시만요…", "확인해 볼게요."]),
    ("잠시만요... 확인해 볼게요.", ["잠시만요...", "확인해 볼게요."]),
    ("gov.kr 에서 신청하세요.", ["gov.kr 에서 신청하세요."]),
    ("버전 3.14.2를 쓰세요.", ["버전 3.14.2를 쓰세요."]),
    ("확인했습니다.다음으로 넘어갈게요.", ["확인했습니다.", "다음으로 넘어갈게요."]),
    ("네?네.", ["네?", "네."]),
    ("접수되었습니다。감사합니다！", ["접수되었습니다。", "감사합니다！"]),
    ('그렇게 말씀하셨어요." 네.', ['그렇게 말씀하셨어요."', "네."]),
    ("첫째.\n둘째.", ["첫째.", "둘째."]),
    ("  앞 공백.   뒤 공백.  ", ["앞 공백.", "뒤 공백."]),
    ("오후 3시.", ["오후 3시."]),
    ("마침표 없는 짧은 문장", ["마침표 없는 짧은 문장"]),
    ("네 알겠습니다 감사합니다", ["네 알겠습니다 감사합니다"]),  # short: not split
    (
        "네 알겠습니다 시청역 3번 출구 앞 불법 주차 차량을 단속 요청해 드릴게요 담당자가 곧 현장을 확인할 예정이에요",
        ["네 알겠습니다", "시청역 3번 출구 앞 불법 주차 차량을 단속 요청해 드릴게요", "담당자가 곧 현장을 확인할 예정이에요"],
    ),
    (
        "주민등록등본은 가까운 행정복지센터나 정부 누리집에서 발급받으실 수 있어요 신분증을 챙겨 주세요",
        ["주민등록등본은 가까운 행정복지센터나 정부 누리집에서 발급받으실 수 있어요", "신분증을 챙겨 주세요"],
    ),
    ("", []),
]


def run_splitter(chunks: list[str]) -> tuple[list[str], list[str]]:
    sp = KoreanSentenceSplitter()
    pushed: list[str] = []
    for c in chunks:
        pushed += sp.push(c)
    return pushed, sp.flush()


@pytest.mark.parametrize("text, sentences", SPLITS)
def test_split_table(text: str, sentences: list[str]) -> None:
    pushed, rest = run_splitter([text])
    assert pushed + rest == sentences
    assert len(rest) <= 1


@pytest.mark.parametrize("text, sentences", SPLITS)
def test_split_is_chunking_independent(text: str, sentences: list[str]) -> None:
    whole = run_splitter([text])
    assert run_splitter(list(text)) == whole
    rng = random.Random(text)
    for _ in range(10):
        assert run_splitter(random_chunks(text, rng, 9)) == whole


def test_sentence_returned_as_soon_as_complete() -> None:
    sp = KoreanSentenceSplitter()
    assert sp.push("안녕하세요") == []
    assert sp.push(".") == []  # could still be "1.5"-like; the next character decides
    assert sp.push(" ") == ["안녕하세요."]
    assert sp.push("무엇을 도와드릴까요?") == []
    assert sp.push("네") == ["무엇을 도와드릴까요?"]
    assert sp.pending == "네"
    assert sp.flush() == ["네"]
    assert sp.flush() == []


def test_decimal_decided_by_next_char() -> None:
    sp = KoreanSentenceSplitter()
    assert sp.push("값은 3.") == []
    assert sp.push("14입니다.") == []
    assert sp.flush() == ["값은 3.14입니다."]


def test_long_chars_setting_and_reset() -> None:
    sp = KoreanSentenceSplitter(long_chars=5)
    assert sp.push("네 알겠습니다 감사합니다 ") == ["네 알겠습니다", "감사합니다"]
    sp.push("남은 글")
    sp.reset()
    assert sp.flush() == []


def test_extractor_into_splitter() -> None:
    text = json.dumps(dict(TURN, reply="네, 확인해 드릴게요. 1.5킬로미터 앞인가요? 감사합니다!"), ensure_ascii=False)
    ex, sp, out = ReplyFieldExtractor(), KoreanSentenceSplitter(), []
    for chunk in random_chunks(text, random.Random(7), 4):
        out += sp.push(ex.feed(chunk))
        if ex.done:
            out += sp.flush()
    assert out == ["네, 확인해 드릴게요.", "1.5킬로미터 앞인가요?", "감사합니다!"]
