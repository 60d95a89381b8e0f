"""Issue 44: the emergency recogniser's question path, the cue net (bot/dialog/emergency_cues.py,
bot/data/emergency_cues.toml): danger cues per kind over Kiwi lemmas that only ever ask."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from bot.dialog.emergency import EmergencyDataError, EmergencyRules
from bot.dialog.emergency_cues import CUES_PATH, QuestionCues
from bot.dialog.emergency_eval import load_cases

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from eval_emergency import ordinary_turns  # noqa: E402


@pytest.fixture(scope="module")
def rules() -> EmergencyRules:
    return EmergencyRules.load()


@pytest.fixture(scope="module")
def cues(rules) -> QuestionCues:
    assert rules.question_cues is not None
    return rules.question_cues


def said(rules: EmergencyRules, text: str) -> str:
    assert rules.lemmas is not None
    return rules.lemmas.standard(text)


# Written for this test, in words no table or rule holds.
@pytest.mark.parametrize(("text", "kind"), [
    ("가스레인지 쪽에서 냄새가 심하게 나고 머리가 지끈거려요", "gas"),
    ("식당 앞에서 어떤 남자가 낫을 들고 손님들 쪽으로 걸어가요", "crime"),
])
def test_a_danger_without_its_decisive_fact_gets_at_least_the_question(rules, text, kind) -> None:
    v = rules.classify(text)  # the question path's, or a rule's that learned it since
    assert v is not None and v.kind.name == kind, text


@pytest.mark.parametrize(("text", "kind"), [
    ("할아버지가 명치가 조이는 것 같다면서 식은땀을 줄줄 흘리세요", "medical"),
    ("엄마가 숨이 가쁘다고 하시더니 입술이 퍼렇게 변했어요", "medical"),
    ("할머니가 화장실 락스를 드셨어요 지금 토하세요", "medical"),
    ("누가 현관 자물쇠를 드라이버로 쑤시고 있어요 지금 저 혼자예요", "crime"),
    ("공원에서 남자가 깨진 병을 들고 사람들한테 달려들어요", "crime"),
    ("할아버지가 기억이 오락가락하시는데 새벽에 나가셔서 아직 안 들어오셨어요", "missing_child"),
    ("윗집 베란다에서 시커먼 연기가 막 나와요", "fire"),
    ("가스레인지 쪽에서 냄새가 심하게 나고 머리가 지끈거려요", "gas"),
    ("선생님 우리 반 애가 급식 먹다가 목을 잡고 말을 못 해요", "medical"),  # 급식 was what she was doing
    ("아빠가 숨 쉬는 게 이상해요 드르렁 하다가 멈췄다가 해요", "medical"),
])
def test_the_cues_alone_name_the_kind(rules, cues, text, kind) -> None:
    assert cues.classify(said(rules, text)) == kind, text


@pytest.mark.parametrize("text", [
    "가스레인지 교체 지원 사업 신청하려고요",  # a service asked about
    "작년에 아버지가 쓰러지셔서 장애 등록하려고요",  # the past
    "드라마에서 할아버지가 말을 못 하고 쓰러지던데 그게 뇌졸중이에요",  # a story on a screen
    "애가 연락이 안 돼서 걱정했는데 도서관에 있었대요",  # a worry that ended well
    "가슴이 터질 것 같이 기뻐요 당첨됐어요",  # a figure of speech
    "사람이 너무 많아서 숨 막혀요",
    "우리 엄마는 당뇨가 있어서 발이 저리시대요 발 관리 교실 있나요",  # a condition someone lives with
    "급식 메뉴에 땅콩이 들어가나요",
])
def test_an_ordinary_turn_with_danger_words_is_not_asked(rules, cues, text) -> None:
    assert cues.classify(said(rules, text)) is None, text


# Round 4: concepts by meaning, each in words no table holds (the old cue net asked about none of them).
@pytest.mark.parametrize(("text", "kind"), [
    ("할아버지가 어디로 가셨는지 아무도 몰라요 치매가 있으세요 지금 밤이에요", "missing_child"),  # whereabouts
    ("우리 애가 물약을 주스인 줄 알고 한 병 다 마셨어요", "medical"),  # swallowed by mistake
    ("공구로 작업하다가 손가락을 깊게 베였어요 피가 안 멈춰요", "medical"),  # a wound on a body part
    ("편의점에 누가 칼 들고 들어와서 돈 내놓으라고 해요", "crime"),  # money demanded
    ("그냥 여기서 뛰어내리면 편할 것 같아요 지금 옥상이에요", "suicide"),  # a thought said as a hypothetical
    ("노인 일자리 신청하려고 전화했는데 혀가 자꾸 꼬이고 왼팔에 힘이 안 들어가요", "medical"),  # the request came first
    ("민원은 아니고요 지금 누가 현관 도어락을 계속 누르고 있어요 저 혼자예요", "crime"),  # a denied topic, a lock forced
    ("지하 주차장에 물이 무릎까지 들어찼어요 차 문이 안 열려요", "rescue"),  # rising water, no way out
    ("창고 벽이 무너져서 형이 밑에 깔렸어요", "rescue"),  # buried
    ("엘리베이터에 갇혔어요", "rescue"),  # shut in
    ("놀이터 그네 사이에 애 머리가 껴서 안 빠져요", "rescue"),  # a body part caught
    ("엄마가 미안하다는 쪽지를 두고 나갔는데 전화가 꺼져 있어요", "suicide"),  # a farewell, then gone
    ("윗집에서 우당탕 소리랑 여자가 살려 달라는 비명이 계속 들려요", "crime"),  # screams heard
    ("누가 우리 집 다용도실 창문으로 기어 올라오고 있어요", "crime"),  # a stranger coming in
    ("중학생 아들이 학원 끝날 시간이 한참 지났는데 휴대폰이 꺼져 있어요", "missing_child"),  # out of contact
    ("누나가 가족 단톡방에 그동안 고마웠다는 글을 남기고 휴대폰을 껐어요", "suicide"),  # a farewell left, a phone off
    ("캠핑카 안에서 번개탄을 피워 놓고 사람이 누워 있어요", "suicide"),  # a means lit, someone inside
    ("냄비에 끓던 물을 동생이 엎어서 팔에 물집이 잡히고 껍질이 벗겨졌어요", "medical"),  # a burn
    ("손주가 할머니 혈압약을 사탕인 줄 알고 몇 알 먹었어요", "medical"),  # 줄 알 is the pair's own word here
    ("시장 골목에서 외할아버지를 놓쳤는데 사람이 많아서 안 보여요 치매가 있으세요", "missing_child"),  # lost in a crowd
])
def test_round_4_concepts_get_the_kinds_question(rules, cues, text, kind) -> None:
    assert cues.classify(said(rules, text)) == kind, text


@pytest.mark.parametrize("text", [
    "택배 아직 안 왔는데 어디 있는지 모르겠어요",  # a thing, not someone, whereabouts unknown
    "손목 보호대 어디서 사요",
    "돈 내는 곳이 어디예요",
    "아이가 없는 집도 지원 받을 수 있나요",
    "죽으면 편할 것 같다는 노래 가사 제목이 뭐예요",
    "방탈출 카페에 갇혀 있는 게임 예약하려고요",
    "직원이 전화를 안 받아요",  # out of contact, but no one of the family
    "공포 영화에서 비명 지르는 장면 촬영 허가 받아야 하나요",
    "딸이 학교에서 체육복을 잃어버렸대요 분실물 보관하는 데 있어요",  # a thing lost, no one missing
    "화가 나서 속에서 불이 나요 공사가 석 달째예요",  # a figure of speech
    "친구가 오늘 생일이라 고마웠다고 카톡 보냈어요",  # thanks for an occasion
    "우리 애가 학교에 안 가려고 해요",  # a refusal, no one missing
    "아파트 담벼락이 무너질 것 같은데 보수 신청 어디에 해요",
])
def test_round_4_concepts_leave_ordinary_turns_alone(rules, cues, text) -> None:
    assert cues.classify(said(rules, text)) is None, text


@pytest.mark.parametrize("text", [
    "부엌에서 불이 나서 연기가 가득한데 엄마가 숨을 못 쉬고 쓰러졌어요",
    "안방에서 불길이 올라오는데 할아버지가 다리를 다쳐서 못 걸으세요",
])
def test_the_cause_is_asked_about_before_the_harm_it_did(rules, cues, text) -> None:
    assert cues.classify(said(rules, text)) == "fire", text
    assert dataclasses.replace(cues, prefer=()).classify(said(rules, text)) == "medical"  # the harm weighs more


@pytest.mark.parametrize("text", [
    "다용도실에서 가스 냄새가 심하게 나는데 식구들이 다 머리가 아프고 애가 토해요",
    "연탄 때는 방에서 자고 나니 둘 다 머리가 깨질 것 같고 어지러워서 못 일어나요",
])
def test_a_gas_with_people_falling_ill_gets_the_gas_question(rules, cues, text) -> None:
    assert cues.classify(said(rules, text)) == "gas", text


STRUCTURE = """
threshold = 4
core = 2

[[cue]]
name = "whereabouts"
kinds = ["missing_child"]
weight = 2
words = ["어디 가 모르"]

[[cue]]
name = "child"
kinds = ["missing_child"]
weight = 1
words = ["아들"]

[[cue]]
name = "now"
kinds = ["*"]
weight = 1
words = ["지금"]

[[cue]]
name = "request"
kinds = ["*"]
weight = -3
lead = true
words = ["신청", "어디"]

[[cue]]
name = "forced"
kinds = ["crime"]
weight = 3
words = ["현관"]
near = ["따/VV"]
window = 3

[[cue]]
name = "thought"
kinds = ["suicide"]
weight = 4
unreal = true
words = ["뛰어내리 편하"]
"""


def structure(tmp_path: Path, text: str = STRUCTURE) -> QuestionCues:
    path = tmp_path / "cues.toml"
    path.write_text(text, encoding="utf-8")
    return QuestionCues.load(path, {"missing_child", "crime", "suicide"})


def test_a_word_of_the_danger_is_no_ordinary_word(tmp_path: Path) -> None:
    # 어디 is a request word, but here it is part of "where he went, nobody knows" (without `lead`, so
    # that only the containment can let it go).
    unled = STRUCTURE.replace("lead = true\n", "")
    assert structure(tmp_path, unled).classify("지금 아들이 어디 갔는지 몰라요") == "missing_child"
    assert structure(tmp_path, unled.replace('"어디 가 모르"', '"가 모르"')).classify("지금 아들이 어디 갔는지 몰라요") is None


def test_a_request_before_the_danger_holds_nothing_back_and_after_it_does(tmp_path: Path) -> None:
    net = structure(tmp_path)
    assert net.classify("신청하려고 했는데 지금 아들이 어디 갔는지 몰라요") == "missing_child"
    assert net.classify("지금 아들이 어디 갔는지 몰라요 신청하려고요") is None
    assert structure(tmp_path, STRUCTURE.replace("lead = true\n", "")).classify(
        "신청하려고 했는데 지금 아들이 어디 갔는지 몰라요") is None


def test_a_pair_cue_counts_only_with_its_partner_near(tmp_path: Path) -> None:
    net = structure(tmp_path)
    assert net.classify("지금 누가 현관을 따고 있어요") == "crime"
    assert net.classify("지금 현관 앞 화분에 꽃이 예쁘게 피어서 사진 찍고 열매도 땄어요") is None  # too far apart
    assert net.classify("지금 현관이 더러워요") is None  # no forcing act


def test_a_thought_said_as_a_hypothetical_counts_only_where_the_cue_says_so(tmp_path: Path) -> None:
    assert structure(tmp_path).classify("뛰어내리면 편할 것 같아요") == "suicide"
    assert structure(tmp_path, STRUCTURE.replace("unreal = true\n", "")).classify("뛰어내리면 편할 것 같아요") is None


@pytest.mark.parametrize(("text", "kind"), [
    ("누게가 우리 집 대문 자물쇠를 막 끊젠 햄수다 나 혼차 이수다", "crime"),
    ("우리 아시가 학교 끝낭 여태 안 왐수다 전화도 꺼졋수다", "missing_child"),
    ("바당에서 사름이 떠밀려 가멍 손 흔들엄수다", "rescue"),
])
def test_jeju_endings_are_read_after_the_cues_own_rewrites(rules, cues, text, kind) -> None:
    assert cues.classify(said(rules, text)) == kind, text
    assert dataclasses.replace(cues, dialect=()).classify(text) is None  # Kiwi alone: unknown nouns


def test_a_request_said_before_the_danger_holds_nothing_back(rules, cues) -> None:
    danger = "식당 앞에서 어떤 남자가 낫을 들고 손님들 쪽으로 걸어가요"
    assert cues.classify(said(rules, "음식물 쓰레기 수거 문의인데요 근데 지금 " + danger)) == "crime"
    # The same request after the danger: the turn is about the request.
    assert cues.classify(said(rules, danger + " 음식물 쓰레기 수거 문의요")) is None


def test_the_question_path_never_escalates(rules) -> None:
    cases = [c for t in ("t3", "t4") for c in load_cases(ROOT / "bench" / f"emergency_training_{t}.toml", set(rules.kinds))]
    verdicts = [rules.classify(c.text) for c in cases]
    asked = [v for v in verdicts if v is not None and v.rule.startswith("like:")]
    # Only where the learned net reads the same kind (two nets that share no rule) is the question skipped.
    assert asked and not any(v.sure for v in asked if not v.rule.endswith("+learned"))


def test_the_lines_ordinary_turns_get_no_emergency_question(rules) -> None:
    texts = ordinary_turns()
    assert len(texts) > 700
    asked = [t for t in texts if (v := rules.classify(t)) is not None and v.rule.startswith("like:")]
    assert asked == []


# --- the file ------------------------------------------------------------------------------------

GOOD = """
threshold = 3
core = 2
turns = ["근데"]

[concept]
blaze = ["불길", "@smoke"]

[[cue]]
name = "blaze"
kinds = ["fire"]
weight = 2
words = ["@blaze"]

[[cue]]
name = "now"
kinds = ["*"]
weight = 1
words = ["지금"]

[[cue]]
name = "service"
kinds = ["*"]
weight = -3
words = ["신청"]
"""


def test_a_cue_file_may_name_the_grammars_concepts(tmp_path: Path) -> None:
    path = tmp_path / "cues.toml"
    path.write_text(GOOD, encoding="utf-8")
    net = QuestionCues.load(path, {"fire"}, grammar=CUES_PATH.parent / "emergency_grammar.toml")
    assert net.classify("지금 시커먼 연기가 올라와요") == "fire"  # 시커멓 is one of the grammar's @smoke
    assert net.classify("시커먼 연기가 올라와요") is None  # 2 < 3
    assert net.classify("지금 시커먼 연기 신청") is None  # a service
    assert net.classify("신청하려다가 근데 지금 시커먼 연기가 올라와요") == "fire"  # the request came first


@pytest.mark.parametrize(("change", "message"), [
    (("threshold = 3", "threshold = 3\nmargin = 1"), "unknown key"),
    (('kinds = ["fire"]', 'kinds = ["flood"]'), "'flood' is not a kind"),
    (('words = ["@blaze"]', 'words = ["@blazes"]'), "concept 'blazes' is not defined"),
    (("weight = 2", "weight = 0"), r"cue\[0\]\.weight"),
    (("core = 2", "core = 2\ndialect = [['(', 'x']]"), r"dialect\[0\]: bad regex"),
    (("core = 2", 'core = 2\nprefer = [["fire", "flood"]]'), "'flood' is not a kind"),
    (("core = 2", 'core = 2\nprefer = [["fire", "gas", "flames"]]'), "'flames' is not the name of a"),
    (('weight = 2\nwords = ["@blaze"]', 'weight = 2\nwords = ["@blaze"]\nnear = "지금"'), r"cue\[0\]\.near"),
])
def test_a_bad_cue_file_is_refused_with_its_key(tmp_path: Path, change, message) -> None:
    path = tmp_path / "cues.toml"
    path.write_text(GOOD.replace(*change), encoding="utf-8")
    with pytest.raises(EmergencyDataError, match=message):
        EmergencyRules.load(cues=path)


# Round 5: the decisive fact's kind. A word that is part of another kind's longer danger phrase, or one of
# a pair's own two words, counts not for its own kind.
SIDE_WORD = """
threshold = 3

[[cue]]
name = "weapon"
kinds = ["crime"]
weight = 4
words = ["병"]

[[cue]]
name = "poison_bottle"
kinds = ["suicide"]
weight = 3
words = ["농약 병"]

[[cue]]
name = "fall"
kinds = ["crime"]
weight = 4
words = ["떨어지/VV"]

[[cue]]
name = "pit"
kinds = ["missing_child"]
weight = 3
words = ["구멍"]
near = ["떨어지/VV"]
window = 3
"""


def test_a_word_inside_another_kinds_danger_phrase_is_a_side_word(tmp_path: Path) -> None:
    net = structure(tmp_path, SIDE_WORD)
    assert net.classify("농약 병을 들고 나갔어요") == "suicide"  # not a bottle as a weapon
    assert net.classify("병을 들고 나갔어요") == "crime"  # said alone, the word keeps its kind
    assert net.classify("아들이 구멍으로 떨어졌어요") == "missing_child"  # one of the pair's own words
    assert net.classify("아들이 계단에서 떨어졌어요") == "crime"


def test_a_phrase_holds_only_its_own_words_not_those_said_between_them(tmp_path: Path) -> None:
    # 병 ... 농약 (two words between) is the phrase's; 마시, said between its words, is no part of it
    net = structure(tmp_path, SIDE_WORD.replace('words = ["농약 병"]', 'words = ["병 농약"]') + """
[[cue]]
name = "drank"
kinds = ["missing_child"]
weight = 4
words = ["마시"]
""")
    assert net.classify("병을 들고 마신 농약이에요") == "missing_child"


# Round 5 concepts, in words no table holds (the round-4 cue net asked none of them, or another kind's question).
@pytest.mark.parametrize(("text", "kind"), [
    ("아가가 불덩이인데 갑자기 몸을 뒤로 젖혀요", "medical"),  # a fever, not a fire
    ("아버지가 농약 한 병 들고 밭에 나가시면서 이제 간다고 하셨어요", "suicide"),  # a poison's bottle, not a weapon
    ("조카가 공사장 구덩이로 떨어졌는데 밑에서 부르는 소리가 나요", "rescue"),  # in a pit, not a fall
    ("냉동창고 문이 닫혀서 직원 한 명이 안에 있어요", "rescue"),  # shut in
    ("아버지가 형제들한테 인사 전화 다 돌리시고 약을 모아 놓으셨어요", "suicide"),  # the last acts
    ("언니가 다음 생에 보자고 카톡 남겼어요 요즘 우울증 치료 중이에요", "suicide"),  # a low mood is no background
    ("할아버지가 밤 따러 갔다가 말벌 떼한테 쏘였어 온몸이 벌겋고 숨을 몰아쉬어", "medical"),  # stung
    ("현관 체인 걸어 놨는데 틈으로 손이 쑥 들어와서 체인을 풀려고 해요", "crime"),  # a hand through the gap
    ("할머니 문자에 손주 경기함 빨리 와 라고만 있어요", "medical"),  # a child's fit, texted
])
def test_round_5_concepts_get_the_kinds_question(rules, cues, text, kind) -> None:
    assert cues.classify(said(rules, text)) == kind, text


@pytest.mark.parametrize("text", [
    "엘리베이터 정기 점검 날짜가 언제예요",
    "차가 물웅덩이에 빠져서 세차비 보상 받을 수 있어요",
    "공사장에서 해머 소리가 밤까지 나요",
    "애가 축구 경기 하는데 경기장 주차 되나요",  # a game the child plays, not a fit
    "보도 턱이 높아서 할머니들이 넘어지실까 걱정이에요 낮춰 주세요",  # a fall worried about
])
def test_round_5_concepts_leave_ordinary_turns_alone(rules, cues, text) -> None:
    assert cues.classify(said(rules, text)) is None, text


# Round 5: ordinary turns the round-4 cue net asked about, in words no table holds.
@pytest.mark.parametrize("text", [
    # 지금 after the story turns back to the request, not toward a danger (no danger follows it)
    "재작년에 아들이 락스를 삼켜서 병원 갔었는데 그때 보험 청구 서류 지금 떼도 되나요",
    "현관 번호키가 고장 나서 문이 안 열려요 수리 기사님 번호 좀 주세요 저 지금 밖에 있어요",  # locked out
    "할아버지가 길을 자꾸 잃으셔서 배회 감지기 신청하려고요",  # a habit
    "손주가 잠깐 안 보였는데 금방 찾았어요 놀이터 CCTV 설치 건의해요",  # found again
    "이민 가는 언니가 마지막 인사라며 편지를 남기고 갔어요 허전하네요",  # a parting of ordinary life
    "아들이 입대하면서 엄마 잘 지내라고 편지를 남겼어요",
])
def test_round_5_a_story_a_habit_or_a_parting_is_not_asked(rules, cues, text) -> None:
    assert cues.classify(said(rules, text)) is None, text


def test_a_turn_of_the_talk_turns_only_toward_a_danger_after_it(tmp_path: Path) -> None:
    net = structure(tmp_path, 'turns = ["지금"]\n' + STRUCTURE.replace("lead = true\n", ""))
    assert net.classify("신청하려고 했는데 지금 아들이 어디 갔는지 몰라요") == "missing_child"
    # the danger before the turn word and none after it: the talk went back to the request
    assert net.classify("아들이 어디 갔는지 몰라서 신청하는데 지금 물어봐도 돼요") is None


PREFER = """
threshold = 3
prefer = [["crime", "missing_child", "assault"]]

[[cue]]
name = "hurt"
kinds = ["missing_child"]
weight = 4
words = ["피 나"]

[[cue]]
name = "assault"
kinds = ["crime"]
weight = 3
words = ["남편"]
near = ["때리"]
window = 3

[[cue]]
name = "fight_sound"
kinds = ["crime"]
weight = 3
words = ["싸우 소리"]
"""


def test_a_preference_may_hang_on_one_cue(tmp_path: Path) -> None:
    net = structure(tmp_path, PREFER)
    assert net.classify("남편이 때려서 피 나요") == "crime"  # the attacker named: the question about who
    assert net.classify("싸우는 소리 나고 피 나요") == "missing_child"  # the crime cue alone: no preference
    assert structure(tmp_path, PREFER.replace(', "assault"]]', "]]")).classify("싸우는 소리 나고 피 나요") == "crime"


@pytest.mark.parametrize(("text", "kind"), [
    ("형부가 언니를 발로 차고 있어요 언니가 바닥에 쓰러져서 숨을 헐떡여요", "crime"),  # the attacker, then the harm
    ("바다에서 조카가 탄 튜브가 자꾸 멀어져요 안 보여요", "rescue"),  # in the water, then not seen
    ("언니가 수면제를 잔뜩 모아 놨대요 오늘 밤에 다 먹을 거래요", "suicide"),  # the means gathered to be taken
    ("우리 얼라 열이 나가 몸이 뻣뻣해지고 눈이 뒤집혀예", "medical"),  # 열이 나가: a fever, not gone out
])
def test_round_5_the_decisive_facts_kind_is_asked(rules, cues, text, kind) -> None:
    assert cues.classify(said(rules, text)) == kind, text



@pytest.mark.parametrize(("text", "kind"), [
    ("카페에서 어떤 남자가 칼을 꺼내 들었어요", "crime"),  # where it happens is no game
    ("혼자 자취하는데 새벽에 거실에서 발소리가 나고 서랍 뒤지는 소리가 들려요", "crime"),  # sounds inside, alone
    ("아파트 옥상에 올라왔어요 더는 못 살겠어요", "suicide"),
])
def test_round_5_a_place_is_no_topic_and_sounds_inside_are_asked(rules, cues, text, kind) -> None:
    assert cues.classify(said(rules, text)) == kind, text


@pytest.mark.parametrize("text", [
    "동네 놀이터 그네가 비명처럼 삐걱거려요 수리해 주세요",  # a likeness
    "요가 교실에서 다리 찢기 하다가 좀 아팠는데 교실 운영 시간 알려주세요",
])
def test_round_5_a_likeness_or_a_class_is_not_asked(rules, cues, text) -> None:
    assert cues.classify(said(rules, text)) is None, text



@pytest.mark.parametrize(("text", "kind"), [
    ("자폐 있는 아들이 마트에서 순식간에 없어졌어요 말을 못 해서 이름도 못 말해요", "missing_child"),  # a known condition
    ("윗집 베란다에서 검은 연기가 나고 유리창 깨지는 소리가 들려요", "fire"),  # a fire's spot, then the glass
])
def test_round_5_the_signs_a_condition_or_a_fire_explains(rules, cues, text, kind) -> None:
    assert cues.classify(said(rules, text)) == kind, text


# Round 30: a vehicle the water takes with no one in it leaves no one to rescue; one with someone in it does.
def test_no_one_in_what_the_water_carries_off_is_not_asked(rules, cues) -> None:
    assert cues.classify(said(rules, "강변에 세워 둔 트럭이 물에 떠내려가요 사람은 안 타고 있어요")) is None
    assert cues.classify(said(rules, "강변에 세워 둔 트럭이 물에 떠내려가요 안에 사람이 타고 있어요")) == "rescue"
