"""bot/dialog/emergency.py, the shipped bot/data/emergency.toml and its table bench/emergency_table.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.dialog.emergency import DEFAULT_PATH, EmergencyDataError, EmergencyRules
from bot.dialog.emergency_eval import NONE, evaluate, format_table, load_cases, mismatches
from bot.dialog.shortcuts import normalize
from tests.conftest import ROOT

TABLE = ROOT / "bench" / "emergency_table.toml"
FAMILIES = ROOT / "bench" / "emergency_families.toml"  # issue 33: new wordings, three dialects
CASES = load_cases(TABLE) + load_cases(FAMILIES)
NUMBERS = {"fire": "119", "medical": "119", "crime": "112", "missing_child": "112", "gas": "119", "rescue": "119",
           "suicide": "109"}


@pytest.fixture(scope="module")
def rules() -> EmergencyRules:
    return EmergencyRules.load()


@pytest.mark.parametrize("case", CASES, ids=[c.text for c in CASES])
def test_table_case(rules: EmergencyRules, case) -> None:
    v = rules.classify(case.text)
    got = v.kind.name if v else NONE
    assert got == case.expect, f"{case.text!r} -> {normalize(case.text)!r}: {got} ({v.rule if v else '-'})"
    if v is not None:
        assert v.sure == case.sure, f"{case.text!r}: sure={v.sure} by {v.rule}, expected sure={case.sure}"


def test_precision_and_recall_per_kind(rules: EmergencyRules) -> None:
    scores = evaluate(rules, CASES)
    print("\n" + format_table(scores))
    assert set(scores) == set(NUMBERS)
    for name, s in scores.items():
        assert s["recall"] == 1.0, (name, s)
        assert s["precision"] >= 0.98, (name, s)
    assert mismatches(rules, CASES) == []


def test_table_size() -> None:
    assert len(CASES) >= 150
    assert sum(c.expect == NONE for c in CASES) >= len(CASES) / 2
    for name in NUMBERS:
        assert sum(c.expect == name for c in CASES) >= 10, name
    assert load_cases(TABLE, set(NUMBERS))  # every expect is a kind or "none"
    families = load_cases(FAMILIES, set(NUMBERS))
    assert len(families) >= 60
    assert sum(c.expect == NONE for c in families) >= sum(c.expect != NONE for c in families)


@pytest.mark.parametrize("text", [
    "복도 불이 계속 꺼져 있어요", "가로등 불이 안 들어와요", "불 좀 켜 주세요",
    "119 구급차가 불법주차 때문에 골목에 못 들어와요", "지난달 불탄 정자는 언제 고쳐요",
    "작년에 화재 난 건물 철거는 언제 하나요", "더워 죽겠는데 냉방 지원 되나요", "배고파 죽겠어요", "웃겨 죽겠네",
    "죽을 것 같이 배고파요", "가스 요금이 너무 많이 나왔어요", "가스 점검 언제 와요", "소방서 전화번호 알려 주세요",
    "불법 투기", "불편해요", "불만", "불량", "폭발적으로 늘었어요", "애가 학교 끝나고 놀이터가 위험해요",
    "경찰서 위치가 어디예요", "112에 신고했는데 처리됐는지", "", "네", "여보세요?",
])
def test_named_near_misses_are_not_emergencies(rules: EmergencyRules, text: str) -> None:
    assert rules.classify(text) is None, rules.classify(text)


def test_negative_context_leaves_the_rest_of_the_utterance(rules: EmergencyRules) -> None:
    # 불 as a light is blanked out; the fire later in the same turn is still found.
    v = rules.classify("가로등 불이 안 들어와서 전화했는데 지금 옆 건물에 불이 났어요")
    assert v is not None and v.kind.name == "fire" and v.sure
    v = rules.classify("작년에 불났던 곳인데 지금 또 불이 났어요")
    assert v is not None and v.kind.name == "fire" and v.sure


def test_a_hedge_makes_a_sure_hit_unsure(rules: EmergencyRules) -> None:
    assert rules.classify("불이 났어요").sure
    v = rules.classify("불이 났어요 아닐 수도 있는데")
    assert v.kind.name == "fire" and not v.sure and v.rule == "fire.sure[0]"


def test_kinds_numbers_and_sentences(rules: EmergencyRules) -> None:
    assert {n: k.number for n, k in rules.kinds.items()} == NUMBERS
    for name, kind in rules.kinds.items():
        assert kind.name == name
        assert kind.number in kind.sentences[0], name
        assert 1 <= len(kind.sentences) <= 2, name
        assert kind.question.endswith("?"), name
        assert kind.ends_call is False, name
    assert "도시가스" in rules.kinds["gas"].sentences[0]
    suicide = " ".join(rules.kinds["suicide"].sentences)
    assert "24시간" in suicide and "듣고 있을게요" in suicide


# --- bad data ------------------------------------------------------------------------------------

MINIMAL = """
[macros]
fire_word = ['불', '화재']

[kind.fire]
number = "119"
sentences = ["지금 바로 119에 전화해 주세요."]
question = "지금 불이 난 상황인가요?"
sure = ['${fire_word}(?:이|가)?났']
"""


def _load(tmp_path: Path, text: str) -> EmergencyRules:
    path = tmp_path / "emergency.toml"
    path.write_text(text, encoding="utf-8")
    return EmergencyRules.load(path)


def test_minimal_file_loads(tmp_path: Path) -> None:
    rules = _load(tmp_path, MINIMAL)
    assert rules.classify("화재가 났어요").rule == "fire.sure[0]"
    assert rules.kinds["fire"].ends_call is False


@pytest.mark.parametrize("old, new, message", [
    ('number = "119"\n', "", "emergency.toml:5: kind.fire.number: missing"),
    ('number = "119"', 'number = 119', "emergency.toml:6: kind.fire.number: must be a string"),
    ("sure = ['${fire_word}(?:이|가)?났']", "sure = ['불(?:이']", "emergency.toml:9: kind.fire.sure[0]: bad regex '불(?:이'"),
    ("sure = ['${fire_word}(?:이|가)?났']", "sure = ['${nope}났']", "kind.fire.sure[0]: unknown macro ${nope}"),
    ("sure = ['${fire_word}(?:이|가)?났']", "sure = []", "kind.fire.sure: missing"),
    ('question = "지금 불이 난 상황인가요?"', 'question = "?"\ncolour = "red"', "kind.fire.colour: unknown key"),
    ('sentences = ["지금 바로 119에 전화해 주세요."]', 'sentences = ["바로 전화해 주세요."]',
     "kind.fire.sentences: the first sentence must name 119"),
    ('question = "지금 불이 난 상황인가요?"', 'question = "?"\nends_call = "no"', "kind.fire.ends_call: must be true or false"),
    ("[macros]", "[context]\nnegative = ['(']\n[macros]", "context.negative[0]: bad regex '('"),
    ("[macros]", "[extras]\n[macros]", "extras: unknown key"),
    ("[macros]", "[answer]\nmaybe = []\n[macros]", "answer.maybe: unknown key"),
    ("[macros]", "[answer]\nyes = ['(']\n[macros]", "answer.yes[0]: bad regex '('"),
])
def test_bad_data_names_the_key(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in MINIMAL
    with pytest.raises(EmergencyDataError) as e:
        _load(tmp_path, MINIMAL.replace(old, new, 1))
    assert message in str(e.value)


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(EmergencyDataError, match="emergency file not found"):
        EmergencyRules.load(tmp_path / "nope.toml")
    assert DEFAULT_PATH.is_file()


def test_eval_script_fails_under_the_bar(tmp_path: Path) -> None:
    # One near miss the rules call a fire: fire's precision drops under 98 %, so the script exits 1.
    table = tmp_path / "table.toml"
    table.write_text('[[case]]\ntext = "불이 났어요"\nexpect = "none"\n', encoding="utf-8")
    script = [sys.executable, str(ROOT / "scripts" / "eval_emergency.py")]
    bad = subprocess.run([*script, "--table", str(table)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "불이 났어요 | none -> fire" in bad.stdout and "FAIL: fire" in bad.stdout
    good = subprocess.run(script, capture_output=True, text=True, timeout=60)
    assert good.returncode == 0, good.stdout[-3000:]
    assert "rules + the model's flag: not measured" in good.stdout  # never assumed without a model


def test_eval_script_measures_both_nets_with_a_model_server(tmp_path: Path) -> None:
    from bot.testing.fake_llm import FakeLLM
    from bot.testing.responders import default_responder

    missed = "그 사람이 밤에 다시 온대요"  # the rules do not see it; the (fake) model does
    assert EmergencyRules.load().classify(missed) is None

    def responder(body: dict) -> dict:
        said = body["messages"][-1]["content"]
        return default_responder(body) | {"emergency": "crime" if "그 사람" in said else "none"}

    table = tmp_path / "table.toml"
    table.write_text(f'[[case]]\ntext = "{missed}"\nexpect = "crime"\n\n'
                     '[[case]]\ntext = "불이 났어요"\nexpect = "fire"\n\n'
                     '[[case]]\ntext = "가로등이 꺼졌어요"\nexpect = "none"\n', encoding="utf-8")
    script = [sys.executable, str(ROOT / "scripts" / "eval_emergency.py"), "--table", str(table)]
    with FakeLLM(responder=responder, first_token_delay=0.0, token_delay=0.0) as fake:
        run = subprocess.run([*script, "--llm", fake.base_url], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout  # rules alone still miss one: crime recall 0 %
    assert "the model caught 1 of the 1 emergencies the rules missed" in run.stdout
    both = run.stdout.split("rules + the model's flag")[1]
    assert "crime             1    0    0     100.0%  100.0%" in both
    dead = subprocess.run([*script, "--llm", "http://127.0.0.1:9/v1"], capture_output=True, text=True, timeout=120)
    assert dead.returncode == 1 and "NOT JUDGED: 3 model calls failed" in dead.stdout


def test_what_comes_before_geuboda_is_an_aside() -> None:
    """Issue 44 round 4: 그보다 / 그것보다 turns to what matters now; the request before it holds nothing back."""
    rules = EmergencyRules.load()
    verdict = rules.classify("수강 신청 문의인데요 그보다 아들이 학원 마치고 안 와요 전화도 안 받아요")
    assert verdict is not None and verdict.sure and verdict.kind.name == "missing_child"


def test_a_thing_described_as_like_something_is_no_hedge() -> None:
    """번개탄 같은 게 says what a thing looks like; only 것 같은 게 guesses at what happens."""
    rules = EmergencyRules.load()
    verdict = rules.classify("창고 안에 삼촌이 있는데 번개탄 같은 게 피워져 있고 문이 잠겼어요")
    assert verdict is not None and verdict.sure and verdict.kind.name == "suicide"


@pytest.mark.parametrize("text", [
    "공원 안내판이 바람에 쓰러져 있어요 치워 주세요",  # a thing fell over
    "시험 망쳐서 죽고 싶을 만큼 속상했어요 재시험 신청은 어디서 해요",  # hyperbole
    "축구 시합에서 관중이 죽여버리겠다고 소리치던데 응원 소음 민원 되나요",  # sports talk
    "흉기 소지 검문 언제 하는지 뉴스에서 봤는데 우리 동네도 해요",  # a weapon in the news
    "응급처치 강좌 듣고 싶어요 길에 쓰러진 사람 도울 수 있게요",  # a purpose, not an event
    "아들이 학원 끝나고 연락이 안 돼서 놀랐는데 친구랑 라면 먹고 있었대요 학원 버스 시간표 알려 주세요",  # ended well
    "아빠 심장이 두근거려서 병원 다녀왔는데 부정맥은 아니래요 진료비 영수증 어디 내요",  # a visit done
    "가슴이 답답하고 숨이 좀 차요 황사 마스크 나눠 주는 데 있나요",  # dust, a mask handed out
    "친구가 단톡에 먼저 간다고 남기고 학원 갔어요 학원 셔틀 노선이요",  # left for class
    "할머니가 고향 가신다고 버스 타고 나가셨어요 경로 할인 되나요",  # a trip
    "치매 할머니 요양보호사 선생님이 오늘 안 오셨어요 센터 번호요",  # the carer did not come
    "팀장님이 늦으면 죽인다고 농담하셨어요 근로 상담 되나요",  # a joke, as told
    "할머니가 어디 가셨는지 몰라서 전화드렸는데 복지관에 계시대요 복지관 프로그램 알려 주세요",  # found
    "아이가 안 보여서 찾았는데 놀이터 그네 위에 있었어요 놀이터 그늘막 설치해 주세요",  # found
    "모르는 사람이 주는 건 먹지 말라고 가르치는 유괴 예방 수업 있나요",  # a rule taught
    "고등학생 아들 폰이 꺼져 있는데 학교에서 폰 걷는대요 담임 선생님 연락처요",  # a known reason
    "화장실 문이 밖에서 잠기는 구조라 위험해요 고쳐 주세요",  # a repair
    "애가 축구 경기 하는데 경기장 주차 되나요",  # a match, not a fit (escalated at 304bff2)
    "우리 딸이 오늘 배구 경기 해요 체육관 가는 버스 있나요",  # a match
])
def test_round_four_near_misses_are_not_escalated(text: str) -> None:
    verdict = EmergencyRules.load().classify(text)
    assert verdict is None or not verdict.sure, text


@pytest.mark.parametrize("text", [
    "옆집 개가 밤새 짖는데 무서워서 숨도 못 쉬겠어요 소음 민원 넣을게요",  # fear said as breath
    "우리 딸은 열성경련 병력이 있어서 유치원에 알려야 하는데 양식이 있나요",  # a history of fits
    "손주가 용돈 받고 발작 일으킬 정도로 좋아했어요 용돈 통장 만드는 법 알려 주세요",  # a measure of joy
])
def test_round_five_fits_and_breath_said_in_passing_are_not_escalated(text: str) -> None:
    verdict = EmergencyRules.load().classify(text)
    assert verdict is None or not verdict.sure, (text, verdict.rule)


@pytest.mark.parametrize("text", [
    # it turned out harmless: asked at most
    "밤에 누가 현관문을 따는 소리가 나서 나가 봤더니 남편이 열쇠를 잃어버린 거였어요 도어락 교체 지원 되나요",
    "팀장이 죽여버린다는 말을 입에 달고 살아요 노동 상담 어디서 해요",  # a threat said all the time
    "동생이 잠꼬대로 살려 달라고 소리를 질러요 수면 상담 받을 수 있나요",  # in one's sleep
])
def test_round_five_what_turned_out_harmless_is_not_escalated(text: str) -> None:
    verdict = EmergencyRules.load().classify(text)
    assert verdict is None or not verdict.sure, (text, verdict.rule)


def test_round_five_a_service_asked_at_the_end_is_asked_about_first() -> None:
    """The point of the call is the service at its end and nothing is said as happening now: a question, not 119."""
    rules = EmergencyRules.load()
    verdict = rules.classify("헬스장에서 회원이 가슴 아파서 쓰러진 적 있어서요 제세동기 배치 신청하려고요")
    assert verdict is None or not verdict.sure, verdict.rule
    verdict = rules.classify("수도 요금 문의하려는데요 지금 옆집 할아버지가 쓰러져서 숨을 안 쉬세요")  # the danger after it
    assert verdict is not None and verdict.sure and verdict.kind.name == "medical"


def test_round_five_an_inquiry_in_dialect_after_a_blanked_word_is_asked_first() -> None:
    """The service hedge reads the turn after the negatives blanked a word (열경기 하는 아: a trait)."""
    verdict = EmergencyRules.load().classify("열경기 하는 아 있는 집은 예방접종 따로 해야 되는지 물어볼라고예")
    assert verdict is None or not verdict.sure, verdict.rule


@pytest.mark.parametrize(("text", "kind"), [
    ("어머니가 쓰러지셔서 숨을 안 쉬세요 구급차 신청하려고요", "medical"),
    ("친구가 유서를 남기고 연락이 안 돼요 어디에 문의해야 하나요", "suicide"),
    ("가스 냄새가 심하게 나고 머리가 아파요 가스 안전 점검 신청할게요", "gas"),
])
def test_round_five_an_emergency_that_ends_in_a_request_still_escalates(text: str, kind: str) -> None:
    """The service hedge steps aside where the turn asks for help or says a state now (안 쉬세요, 안 돼요)."""
    verdict = EmergencyRules.load().classify(text)
    assert verdict is not None and verdict.sure and verdict.kind.name == kind, (text, verdict and verdict.rule)


@pytest.mark.parametrize("text", [
    "우리 고양이가 베란다 난간에 매달려 있어서 놀랐는데 혼자 내려왔어요",  # an animal at the window
    "애가 칼싸움 놀이하다가 장난감 칼에 맞아서 울어요 놀이터 안전 점검 해주세요",  # a toy knife
    "보이스피싱 전화가 와서 아들이 납치됐다고 했는데 아들은 학교에 잘 있어요 신고는 어디에 해요",  # a phishing call
])
def test_round_five_probes_written_here_are_not_escalated(text: str) -> None:
    verdict = EmergencyRules.load().classify(text)
    assert verdict is None or not verdict.sure, (text, verdict.rule)
