"""Issue 44, third round: the grammar's new structure (bot/dialog/emergency_grammar.py).

Signs of one picture (`some` / `least`), a rule marked ``overrides`` winning among the grammar's own
rules, and what the speaker means to do ("+죽": 죽을래요, 먹을라고). Sentences written for these tests,
in no table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.dialog.emergency import EmergencyRules
from bot.dialog.emergency_grammar import Grammar, GrammarError, GrammarRule, analyse, respace


@pytest.fixture(scope="module")
def rules() -> EmergencyRules:
    return EmergencyRules.load()


def _grammar(tmp_path: Path, text: str) -> Grammar:
    path = tmp_path / "g.toml"
    path.write_text(text, encoding="utf-8")
    return Grammar.load(path)


SIGNS = """
[concept]
face = ["얼굴 일그러지"]
sight = ["눈 !보이"]
gait = ["비틀거리"]

[[rule]]
kind = "medical"
name = "picture"
some = ["face", "sight", "gait"]
least = 2
"""


def test_any_two_signs_of_a_picture_match_and_one_does_not(tmp_path: Path) -> None:
    grammar = _grammar(tmp_path, SIGNS)
    assert grammar.classify("얼굴이 일그러지고 눈이 안 보인대요") is not None
    assert grammar.classify("눈이 안 보이고 비틀거려요") is not None
    assert grammar.classify("얼굴이 일그러졌어요") is None  # one sign alone
    assert grammar.classify("비틀거리는 걸음으로 걸어요") is None


def test_least_must_fit_the_signs(tmp_path: Path) -> None:
    with pytest.raises(GrammarError, match="least"):
        _grammar(tmp_path, SIGNS.replace("least = 2", "least = 4"))
    with pytest.raises(GrammarError, match="all"):
        _grammar(tmp_path, SIGNS.replace('some = ["face", "sight", "gait"]\nleast = 2\n', ""))


@pytest.mark.parametrize("text", [
    "삼촌이 갑자기 얼굴이 한쪽으로 일그러지고 한쪽 눈이 안 보인대요",  # face and sight
    "아버님이 말이 뒤죽박죽 섞여 나오고 비틀거리세요",  # speech and gait
    "엄마가 머리가 깨질 것 같다더니 한쪽 눈이 안 보인대요",  # headache and sight
])
def test_a_stroke_told_by_any_two_of_its_signs_escalates(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and verdict.kind.name == "medical" and verdict.sure, verdict


ORDER = """
[concept]
weapon = ["흉기"]
stab = ["찌르"]
blood = ["피 많이"]

[[rule]]
kind = "medical"
name = "bleeding"
all = ["blood"]

[[rule]]
kind = "crime"
name = "stabbing"
all = ["weapon", "stab"]
overrides = true
"""


def test_a_rule_that_overrides_wins_over_an_earlier_grammar_rule(tmp_path: Path) -> None:
    grammar = _grammar(tmp_path, ORDER)
    hit = grammar.classify("어떤 남자가 흉기로 사람을 찔렀어요 피가 많이 나요")
    assert hit is not None and hit.name == "crime.stabbing"
    hit = grammar.classify("넘어져서 피가 많이 나요")
    assert hit is not None and hit.name == "medical.bleeding"


def test_a_weapon_used_on_someone_who_bleeds_is_a_crime(rules: EmergencyRules) -> None:
    verdict = rules.classify("시장 골목에서 웬 남자가 흉기로 상인을 찌르고 있어요 피가 많이 나요")
    assert verdict is not None and verdict.kind.name == "crime" and verdict.sure, verdict



def _escalates_as(rules: EmergencyRules, text: str, kind: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and verdict.sure and verdict.kind.name == kind, (text, verdict and verdict.rule)


def _not_escalated(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    assert verdict is None or not verdict.sure, (text, verdict and verdict.rule)


def _grammar_reads(rules: EmergencyRules, text: str) -> GrammarRule | None:
    """The lemma grammar's own hit for ``text`` (no regex net, no learned net), or None."""
    assert rules.lemmas is not None
    return rules.lemmas.classify(rules.standard(text))


def _grammar_escalates_by(rules: EmergencyRules, text: str, rule: str) -> None:
    hit = _grammar_reads(rules, text)
    assert hit is not None and hit.sure and hit.name.endswith(rule), hit and hit.name

def _will(text: str, form: str) -> bool:
    return next(m for m in analyse(text) if m.form == form).will


def test_what_the_speaker_means_to_do_is_read_from_the_ending() -> None:
    assert _will("약을 다 먹고 죽을래요", "죽")
    assert _will("이제 먹을라고요", "먹")
    assert _will("다리에서 뛰어내릴 거예요", "뛰어내리")
    assert _will("오늘 다 끝낼게요", "끝내")
    assert not _will("다리에서 뛰어내릴 것 같아요", "뛰어내리")  # how it looks, not what is meant
    assert not _will("배고파서 죽을 것 같아요", "죽")
    assert not _will("약을 먹었어요", "먹")


@pytest.mark.parametrize("text", [
    "농약을 사다 놨어요 오늘 밤에 먹을라고요",
    "수면제 한 통 다 털어 넣고 죽을래요",
])
def test_a_plan_to_take_a_dose_is_a_crisis(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and verdict.kind.name == "suicide" and verdict.sure, verdict


@pytest.mark.parametrize("text", [
    "배고파서 죽을 것 같아요 근처 식당 알려 주세요",
    "감기약 먹었는데 언제 나을까요",
    "누가 옥상에서 뛰어내렸대요 어제 뉴스에서 봤어요",
])
def test_no_plan_is_no_crisis(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    assert verdict is None or not verdict.sure or verdict.kind.name != "suicide", verdict


@pytest.mark.parametrize("text", ["걷질 못해요", "숨을 쉬지를 못해요", "일어나지도 못해요"])
def test_a_negation_after_a_particle_is_read(text: str) -> None:
    # 지 + a particle + 못 하: the verb before 지 is negated (can't walk), not an unrelated 하.
    verb = next(m for m in analyse(text) if m.tag.startswith("VV"))
    assert verb.negated, analyse(text)


def test_a_worry_that_ended_well_is_an_aside(rules: EmergencyRules) -> None:
    # The story is over (걱정했는데 ... 있었대요): only the request after it is read.
    verdict = rules.classify("딸이 학원 끝나고 연락이 안 돼서 걱정했는데 도서관에 있었대요 청소년 독서 프로그램 신청하려고요")
    assert verdict is None or not verdict.sure, verdict
    # Found in a bad state is no happy ending: the turn is read whole.
    verdict = rules.classify("할머니가 전화를 안 받으셔서 걱정했는데 가 보니 화장실에 쓰러져 있었어요 어떻게 해요")
    assert verdict is not None and verdict.kind.name == "medical" and verdict.sure, verdict
    # A worry that goes on is still read whole.
    verdict = rules.classify("아들이 학원 끝나고 연락이 안 돼서 걱정했는데 아직도 전화기가 꺼져 있어요 밤 열 시예요")
    assert verdict is not None and verdict.kind.name == "missing_child" and verdict.sure, verdict


@pytest.mark.parametrize(("text", "kind"), [
    ("언니가 형부한테 맞아서 울고 있는데 형부가 아직 집에 있어요", "crime"),  # hit, and he is still there
    ("어머니가 갑자기 말이 뒤엉키고 입가로 물이 다 흘러요", "medical"),  # speech and face
    ("제가 지금 대교 위에 있어요 더는 못 버티겠어요", "suicide"),  # a height and despair
])
def test_structures_said_in_new_words_escalate(rules: EmergencyRules, text: str, kind: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and verdict.kind.name == kind and verdict.sure, verdict


# --- round 4: a body part with what it does wrong, as one word; one phrase is one sign -------------

PARTS = """
[concept]
limb = ["팔", "왼팔", "오른손"]
fails = ["!들", "툭 떨어지"]
arm = ["@limb @fails"]
face = ["입 처지"]
drool = ["입 처지", "침 흘리"]

[[rule]]
kind = "medical"
name = "arm"
all = ["arm"]
window = 4

[[rule]]
kind = "medical"
name = "face_and_drool"
some = ["face", "drool"]
least = 2
"""


def test_a_concept_inside_a_word_stands_for_each_of_its_words(tmp_path: Path) -> None:
    grammar = _grammar(tmp_path, PARTS)
    assert grammar.classify("왼팔을 못 들어요") is not None
    assert grammar.classify("오른손이 툭 떨어져요") is not None
    assert grammar.classify("왼팔을 들어요") is None  # not negated
    assert grammar.classify("다리를 못 들어요") is None  # not a part of the concept


def test_one_phrase_listed_under_two_signs_is_one_sign(tmp_path: Path) -> None:
    grammar = _grammar(tmp_path, PARTS)
    assert grammar.classify("입이 처졌어요") is None  # in `face` and in `drool`: still one sign
    assert grammar.classify("입이 처지고 침을 흘려요") is not None


@pytest.mark.parametrize("text", [
    "아버지가 가슴 한가운데를 누가 쥐어짜는 것처럼 아프대요 왼쪽 팔도 저리고 식은땀을 흘려요",  # chest x feeling + distress
    "할아버지가 어디 가셨는지 몰라요 치매가 있으세요",  # whereabouts unknown
    "우리 애가 놀이터에서 없어졌어요 벌써 사십 분째예요",  # gone a while
])
def test_round_four_structures_escalate(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and verdict.sure, text


def test_a_verb_leading_into_a_hypothetical_is_hypothetical(rules: EmergencyRules) -> None:
    verdict = rules.classify("아빠가 갑자기 말을 못 하게 되면 어디로 연락해요")  # 못 하게 되면: if it ever happens
    assert verdict is None or not verdict.sure


def test_a_compound_verb_matches_as_kiwi_splits_it(tmp_path: Path) -> None:
    grammar = _grammar(tmp_path, """
[concept]
gone = ["없어지"]
who = ["아이"]

[[rule]]
kind = "missing_child"
name = "gone"
all = ["who", "gone"]
window = 4
""")
    assert grammar.classify("아이가 없어졌어요") is not None  # Kiwi: 없 + 지
    assert grammar.classify("아이 문제없는지 물어봐요") is None  # 지 here is no auxiliary verb


@pytest.mark.parametrize(("text", "kind"), [
    ("친구가 카톡으로 그동안 고마웠어 잘 지내 하고 프로필을 다 지웠어요", "suicide"),  # 고마웠 read as Kiwi's 고맙
    ("창밖 가스관 타고 누가 올라오고 있어요 저 혼자 자취해요", "crime"),
    ("딸이 방에서 손목을 그었어요 피가 나요", "suicide"),
    ("새벽인데 누가 현관문 손잡이를 계속 돌려요 집에 저랑 애기밖에 없어요", "crime"),  # 밖에: only, not 집에 없어요
    ("삼촌이 차 배기관에 호스를 연결해서 창문으로 넣어 놨어요", "suicide"),
    ("바닷가 바위에서 놀다가 물이 들어와서 고립됐어요 물이 가슴까지 와요", "rescue"),
    ("산에서 내려오다 늪에 발이 빠졌는데 점점 가라앉아요", "rescue"),
    ("폭설에 축사가 주저앉았는데 남편이 안에 있었어요", "rescue"),
    ("폭우로 계곡 건너 캠핑장 손님들이 고립됐어요", "rescue"),  # 계곡 stays 계곡; 손님 as Kiwi splits it
    ("동생이 오토바이 타다 넘어졌는데 머리에서 피가 나고 정신을 못 차려요", "medical"),  # 타: riding, not burning
    ("애가 디퓨저 병 뚜껑 열어서 그 안에 있던 걸 조금 마셨어요", "medical"),
    ("모르는 아저씨가 동생한테 과자 사 준다고 차에 타라고 해요 공원 앞이에요", "crime"),  # a lure, not a car on fire
    ("아내가 내가 없어지면 다들 편할 거라고 하고 나갔어요 연락이 안 돼요", "suicide"),  # a burden, gone
    ("창고 가스통에서 쉬쉬 소리가 나고 냄새가 지독해요", "gas"),
    ("택배 수거 문의하려는데요 지금 수거 트럭에 할머니가 치이셨어요 안 움직이세요", "medical"),  # 수거: the truck, not a topic
    ("현관앞에서누가비번을자꾸눌러요혼자있어요", "crime"),  # 비번 split as 비 + 번 is no rain
    ("애가 경기를 하는데 멈추질 않아요 벌써 삼 분 넘었어요", "medical"),
    ("아버님이 마당에서 쓰러지셨는데 숨을 안 쉬세요", "medical"),
    ("공사하던 아저씨가 전봇대에서 미끄러져서 지금 한 손으로 매달려 있어요", "rescue"),
    ("아파트 앞 배관에서 가스가 허옇게 뿜어져 나와요 쉬익 소리가 커요", "gas"),  # Kiwi: 쉬 + 익
    ("저 지금 혼자 집에 있는데 왼쪽 팔다리가 저릿하더니 힘이 빠져요 그리고 글씨가 겹쳐 보이고 한쪽 눈이 뿌옇게 흐려요", "medical"),
])
def test_round_four_concepts_escalate_as_their_kind(rules: EmergencyRules, text: str, kind: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and verdict.sure and verdict.kind.name == kind, text


def test_a_kitchen_cut_is_no_self_harm(rules: EmergencyRules) -> None:
    verdict = rules.classify("칼질하다 손목을 베었는데 피가 나요")
    assert verdict is None or verdict.kind.name != "suicide"


@pytest.mark.parametrize(("said", "read"), [
    ("하르방이 떨어졍 피 남수다", "할아버지이 떨어져서 피 나요"),  # Jeju
    ("오른짝이 안 움직여라", "오른쪽이 안 움직여라"),  # Jeolla
    ("터질 것 맹키로 아프다꼬예", "터질 것 처럼 아프다고예"),  # Gyeongsang, Jeolla
    ("눈이 도라가써요 바께서", "눈이 돌아가써요 밖에서"),  # the STT's spelling of what it heard
])
def test_dialect_and_heard_spellings_are_read_as_standard(rules: EmergencyRules, said: str, read: str) -> None:
    assert rules.lemmas is not None and rules.lemmas.standard(said) == read


def test_a_light_verbs_hypothetical_is_its_nouns(rules: EmergencyRules) -> None:
    verdict = rules.classify("혹시 애가 열이 나면서 경기를 하면 어디로 가야 해요")  # 경기를 하면: if it ever does
    assert verdict is None or not verdict.sure


@pytest.mark.parametrize("text", [
    "도서관 지금 문 열었어요",  # is the library open now: a door opened is no door forced
    "주민센터 지금 문 열었어요",
    "구청 민원실 지금 문 열었어요",
    "지금 문 열었나요",
])
def test_a_place_open_now_is_no_door_forced(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


# Round 5: who is in which state, which act; the decisive fact's kind over a side word.

@pytest.mark.parametrize("text", [
    "화장실에 애가 갇힌 줄 알았는데 문이 그냥 열렸어요 문고리 수리 신청하려고요",  # believed, then found false
    "정신없이 불날 것 같이 바빠서 그러는데 서류 팩스로 보내도 되나요",  # a likeness
])
def test_a_belief_or_a_likeness_is_no_event(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


def test_what_the_caller_sees_happen_is_an_event() -> None:
    seen = {m.form: m for m in analyse("옆집 남자가 여자 목을 조르고 있는 게 보여요")}
    talked_about = {m.form: m for m in analyse("목을 조르는 게 무슨 죄인가요")}
    assert not seen["조르"].unreal
    assert talked_about["조르"].unreal


@pytest.mark.parametrize(("text", "kind"), [
    # the caller opening the door found a patient: no door forced
    ("친정엄마 집에 가서 문을 열었더니 엄마가 가슴을 부여잡고 엎드려 계세요 숨을 겨우 쉬세요", "medical"),
    # a sting, a swelling and a closing throat: an allergy, not a strangling
    ("꿀벌에 쏘인 남편이 입술이 퉁퉁 붓더니 목이 조인다고 해요", "medical"),
    # a heater burned while people slept: carbon monoxide, not a suicide
    ("할머니 방에 연탄 피우고 주무셨는데 아침에 못 일어나세요 저도 어질어질해요", "gas"),
    # a disability is who the missing child is, not a symptom
    ("자폐가 있는 딸이 마트에서 혼자 나가 버렸어요 말로 대답을 잘 못 해요", "missing_child"),
    # a tool that hurt its user at work: an injury, not an assault
    ("우리 영감이 장작 패다가 도끼에 정강이를 찍었어요 피가 철철 나요", "medical"),
    # a machine that caught someone: a rescue, not an abduction
    ("백화점 에스컬레이터에 할아버지 바짓단이 말려 들어가서 끌려가요", "rescue"),
    # stuck below an edge the callers cannot reach: a rescue, not a fall's injury
    ("등산하다 친구가 벼랑 아래로 미끄러져서 나무에 걸려 있어요 못 올라와요", "rescue"),
    ("정화조 청소하던 인부가 안에 들어갔는데 안 나와요 불러도 대답이 없어요", "rescue"),
    # a farewell, then silence: a suicide, not a missing child
    ("동생이 그동안 고마웠다 나 없어도 잘 살라고 보내고 전화를 안 받아요", "suicide"),
])
def test_round_five_the_decisive_fact_picks_the_kind(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_writhing_in_pain_is_no_fall_from_a_cliff(rules: EmergencyRules) -> None:
    verdict = rules.classify("산에서 딴 버섯을 먹은 애가 배가 아프다고 데굴데굴 굴러요")
    assert verdict is None or verdict.kind.name != "rescue", verdict.rule


def test_a_feelings_hyperbole_is_no_intent_to_die() -> None:
    said = analyse("오늘 운동회 때문에 애들이 떨려 죽겠대요 운동장 개방 시간이 어떻게 돼요")
    assert all(m.unreal for m in said if m.form == "죽")  # so nervous, not a plan (here Kiwi reads 죽 as a verb)
    plan = next(m for m in analyse("저 뛰어내려 죽을 거예요") if m.form == "죽")
    assert not plan.unreal and plan.will


@pytest.mark.parametrize(("text", "kind"), [
    ("편의점인데 어떤 할아버지가 집 주소를 모르시고 자꾸 아내 찾으러 간다고 하세요", "missing_child"),  # found, lost
    ("베란다 청소하면서 락스랑 세제를 섞어 뿌렸는데 남편이 토하고 숨이 차대요", "medical"),  # fumes breathed
    ("산길에서 발을 헛디뎌서 비탈 중간 나무에 걸려 있어요 못 올라가요 해가 지고 있어요", "rescue"),  # the caller, stranded
    ("물류창고에서 철제 선반이 쓰러져서 삼촌이 밑에 깔렸어요 둘이 들어도 안 들려요 못 빼요", "rescue"),  # cannot be freed
])
def test_round_five_states_said_without_the_usual_words(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_a_need_is_no_event(rules: EmergencyRules) -> None:
    verdict = rules.classify("열쇠를 잃어버려서 현관 자물쇠를 잘라야 할 것 같은데 열쇠 업체 번호 있나요")  # 잘라야: must, not did
    assert verdict is None or not verdict.sure, verdict.rule
    assert next(m for m in analyse("자물쇠를 잘라야 해요") if m.form == "자르").unreal


@pytest.mark.parametrize(("text", "kind"), [
    # shut in by the one who beats her: a crime, not a rescue from a stuck door
    ("남자친구가 또 때린다고 동생이 화장실에 갇혀 있대요 문자로 왔어요", "crime"),
    # sleepers who do not wake in a room that smells: carbon monoxide
    ("펜션 방에서 자고 일어났는데 남편이 안 일어나요 방에 이상한 냄새가 나요", "gas"),
])
def test_round_five_who_shut_them_in_and_why_they_do_not_wake(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_a_smell_after_sleep_alone_is_no_gas_escalation(rules: EmergencyRules) -> None:
    verdict = rules.classify("어젯밤에 자고 일어났더니 방에서 이상한 냄새가 나요 환기구 점검 신청이요")
    assert verdict is None or not verdict.sure, verdict.rule


def test_fine_before_is_no_fine_now(rules: EmergencyRules) -> None:
    """괜찮다더니 지금 ...: a "fine" that was only before holds nothing back (괜찮아요 now still does)."""
    verdict = rules.classify("야구공에 머리를 맞은 아들이 처음엔 괜찮다더니 지금 헛소리를 하고 눈동자가 이상해요")
    assert verdict is not None and verdict.sure and verdict.kind.name == "medical", verdict and verdict.rule
    verdict = rules.classify("아이가 넘어져서 머리를 부딪혔는데 지금은 괜찮아요 병원 가야 하나요")
    assert verdict is None or not verdict.sure, verdict.rule


def test_jeju_mistaken_medicine_escalates(rules: EmergencyRules) -> None:
    """잘못 as one word (Kiwi: 잘못/MAG) with a swallowing verb, in Jeju (드셔신디, 없수다)."""
    verdict = rules.classify("하르방이 약을 잘못 드셔신디 토햄수다 정신이 없수다")
    assert verdict is not None and verdict.sure and verdict.kind.name == "medical", verdict and verdict.rule


@pytest.mark.parametrize(("text", "kind"), [
    ("요양보호사인데요 어르신 댁에 왔더니 어르신이 바닥에 누워 계시고 불러도 눈만 깜빡이세요 말을 못 하세요", "medical"),
    ("하수구 청소하던 아저씨가 맨홀 안에서 쓰러졌어요 가스 냄새가 나요", "rescue"),  # down a pit, whatever the gas
    ("언니가 이 세상에 미련 없다고 하고 약통을 들고 화장실에 들어가서 문을 잠갔어요", "suicide"),
])
def test_round_five_probes_written_here_escalate_as_their_kind(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize(("text", "kind"), [
    ("할머니 혼자 사시는 집인데 안에서 문을 안 열어 주시고 전화도 안 받으세요 티비 소리만 나요", "rescue"),
    ("동생이 자기 물건을 다 나눠주고 오늘 밤이 마지막이라고 했어요", "suicide"),
    ("어머니가 아버지 산소에 가서 따라가겠다고 하시고 휴대폰을 끄셨어요", "suicide"),
    ("아파트 복도 창문을 열고 어떤 학생이 밖을 내려다보면서 울고 있어요 신발이 벗겨져 있어요", "suicide"),
    ("아파트 공사장 비계에서 인부 한 명이 안전줄에 매달려서 대롱대롱해요", "rescue"),
])
def test_round_five_more_probes_escalate_as_their_kind(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    "혼자 사시는 어머니가 전화를 안 받으세요 마트 가셨나 봐요 문도 안 열어 주시네요 복지관 번호요",  # no sign inside
    "혼자 사는데 택배 기사가 문 열어 달라는데 안 열었어요 전화도 안 받았어요",  # the caller chose not to
])
def test_one_living_alone_who_did_not_answer_is_no_rescue_without_a_sign_inside(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize("text", [
    "치매 있는 아버지가 주간보호센터 차량 타고 나가셨어요 센터 이용료 감면 되나요",  # a service asked for
    "친구가 이사 가면서 그동안 고마웠다고 문자 보냈어요 송별회 장소 추천해 주세요",  # a send-off
    "창고 선반이 넘어져서 박스가 깔렸는데 혼자 못 들어요 치우는 업체 있나요",  # no one under it
    "편의점 야간인데 누가 유리문을 망치로 치고 있어요 금이 가고 있어요",  # 있어요+금이: no 요금 read across words
])
def test_round_five_near_misses_of_the_new_rules_are_not_escalated(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    if text.startswith("편의점"):
        assert verdict is not None and verdict.sure, verdict and verdict.rule
    else:
        assert verdict is None or not verdict.sure, (text, verdict.rule)


def test_someone_yelling_that_a_person_is_dying_mid_request_escalates(rules: EmergencyRules) -> None:
    verdict = rules.classify("주민등록등본 떼려고 하는데요 어 잠깐만요 밖에서 누가 사람 죽는다고 고래고래 소리 질러요")
    assert verdict is not None and verdict.sure and verdict.kind.name == "crime", verdict and verdict.rule
    verdict = rules.classify("애들이 게임하면서 사람 죽는다고 소리 질러요 피시방 소음 민원이요")  # a game, a noise complaint
    assert verdict is None or not verdict.sure, verdict.rule


# --- round 6: structure read from the endings, in words written here (not H's or I's) ---------------


def _unreal(text: str, form: str) -> bool:
    return any(m.unreal for m in analyse(text) if m.form == form)


@pytest.mark.parametrize(("text", "form"), [
    ("락스를 마신 기분이에요", "마시"),  # a feeling likened to an event
    ("감옥에 갇혀 지내는 느낌이에요", "갇히"),  # through the serial verb too
    ("인터폰 눌러도 아무도 안 와요", "오"),  # nobody came: no one's state
    ("연기 나서 신고했던 건 해결됐어요", "나"),  # the cause of what happened before
])
def test_likeness_nobody_and_a_past_cause_are_no_event(text: str, form: str) -> None:
    assert _unreal(text, form), analyse(text)


@pytest.mark.parametrize(("text", "form"), [
    ("락스를 마셨어요", "마시"),
    ("아이가 안 와요", "오"),
    ("연기 나서 신고했어요", "나"),
])
def test_the_same_verbs_said_plainly_are_events(text: str, form: str) -> None:
    assert not _unreal(text, form), analyse(text)


@pytest.mark.parametrize("text", [
    "락스를 마신 기분이에요 민원 답변이 왜 이렇게 늦어요",
    "감옥에 갇혀 지내는 느낌이라 휴가 신청서 양식 좀 알려 주세요",
    "조카가 장난감 칼로 싸움 놀이하다가 칼을 잃어버렸어요 어디서 다시 사요",  # a toy's fight
    "연기 나서 신고했던 건 소방관이 와서 다 정리했어요 출동 확인서 받을 수 있나요",
])
def test_round_six_near_misses_are_quiet(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    assert verdict is None, (text, verdict and verdict.rule)


def test_people_inside_a_stopped_ride_that_nobody_answers_are_not_missing(rules: EmergencyRules) -> None:
    verdict = rules.classify("놀이기구가 멈췄는데 직원을 불러도 아무도 안 와요 위에 아이랑 할아버지가 타고 있어요")
    assert verdict is not None and verdict.kind.name == "rescue", verdict and verdict.rule


def test_a_passer_by_said_with_던_leaves_the_cause_before_it_an_event() -> None:
    assert not _unreal("벽이 무너져서 지나가던 학생이 깔렸어요", "무너지")


@pytest.mark.parametrize(("text", "kind"), [
    # whatever is held and then swung at someone is a weapon, and the assault decides over the injury
    ("편의점에서 어떤 손님이 소화기를 들고 직원한테 휘두르고 있어요 직원이 쓰러졌어요", "crime"),
    ("옆 테이블 남자가 맥주잔을 쥐고 친구 얼굴을 내리쳤어요 피가 나요", "crime"),
    # pills gone near a small child: a swallowing nobody saw, not a child gone missing
    ("식탁에 둔 감기약이 몇 알 사라졌어요 네 살 딸이 자꾸 졸려해요", "medical"),
])
def test_round_six_decisive_facts_pick_the_kind(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    "골프채 들고 스윙 연습하다가 허리를 삐끗했어요 한의원 어디 있어요",
    "약국에서 산 영양제가 다 떨어져서 없어졌어요 다섯 살 애 먹일 비타민 추천해 주세요",
])
def test_round_six_near_misses_of_the_new_rules_are_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize("text", [
    # a school year names the child and gives the age; a night away from home is late (the grammar itself)
    "고등학교 일학년 딸이 어제 저녁에 학원 간다고 나가서 지금까지 안 들어왔어요",
    "초등학교 사학년인데 학원 버스에서 내렸다는데 집에 안 왔어요 벌써 해가 졌어요",
])
def test_round_six_a_child_named_by_school_year_out_overnight_is_missing(rules: EmergencyRules, text: str) -> None:
    hit = _grammar_reads(rules, text)
    assert hit is not None and hit.sure and hit.kind == "missing_child", (text, hit)


def test_round_six_a_head_bleeding_with_the_person_down_escalates(rules: EmergencyRules) -> None:
    verdict = rules.classify("자전거랑 부딪힌 할아버지가 머리에서 피 흘리고 길에 누워 계세요")
    assert verdict is not None and verdict.sure and verdict.kind.name == "medical", verdict and verdict.rule


def test_a_fright_told_as_over_takes_its_cause_with_it() -> None:
    assert _unreal("동생이 어젯밤에 안 들어와서 놀랐는데 친구 집에서 잤대요", "들어오")
    assert not _unreal("동생이 어젯밤에 안 들어와서 놀랐어요", "들어오")


def test_fumes_with_the_sickness_they_cause_are_gas_over_the_sickness(rules: EmergencyRules) -> None:
    verdict = rules.classify("펜션에서 자고 일어났는데 일행들이 다 어지러워하고 친구 하나가 토하면서 축 처져 있어요 보일러가 이상해요")
    assert verdict is not None and verdict.sure and verdict.kind.name == "gas", verdict and verdict.rule


# Round 7: the grammar's reading vetoes a regex hit (bot/dialog/emergency.py: EmergencyRules._vetoed).
@pytest.mark.parametrize(("text", "why"), [
    ("뇌졸중으로 재작년에 쓰러지셨던 어머니 요양 등급 갱신하려고요", "unreal"),  # a noun hit takes its verb's reading
    ("할머니가 길을 잃으셨다가 파출소에서 연락 왔어요 모시러 가요 인식표 어디서 해요", "ended"),
    ("피가 철철 나는 공포영화 상영 시간 알려주세요", "story"),
    ("총 맞고 피가철철나는 게임 청소년이 해도 되나요", "story"),
    ("요즘 토론 열기가 불타오르네요 구민회관 대관 문의요", "figure"),
    ("상사가 잘라버린다고 협박해요 노무사 상담 돼요", "figure"),
    ("팀장님이 고소하겠다고 협박하고 있어요 법률 상담 받을 수 있나요", "figure"),
    ("누가 차 유리를 깨고 갔어요 그저께요 블랙박스 영상 제출 어디로 해요", "past"),
])
def test_a_regex_hit_the_grammar_reads_as_no_event_now_is_asked_not_escalated(
        rules: EmergencyRules, text: str, why: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and not verdict.sure, verdict and verdict.rule
    assert verdict.rule.endswith(f"-{why}"), verdict.rule  # the regex net's own hit, vetoed


def test_a_figure_of_speech_holds_the_grammar_flames_back_too(rules: EmergencyRules) -> None:
    verdict = rules.classify("응원 열기에 불이 붙었어요 경기장 주차 되나요")
    assert verdict is None or not verdict.sure, verdict.rule


@pytest.mark.parametrize("text", [
    "어머니가 쓰러지셨어요",
    "창고에 불이 붙었어요",
    "모르는 남자가 유리를 깨고 들어왔어요",
    "영화 보다가 남편이 쓰러졌어요",  # what he was doing is no story on a screen
    "누가 문을 깨고 들어왔어요 어젯밤에요 지금 거실에 있어요",  # a day gone by, and now
    "전 남편이 죽여버리겠다고 협박해요 지금 문 앞이에요",  # a threat of harm
    "저 지금 이십층 베란다에 나와 있어요 그냥 뛰어내리면 다 끝날 것 같아요",  # a thought is suicide's danger
])
def test_the_same_regex_hits_said_as_now_still_escalate(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and verdict.sure, verdict and verdict.rule


def test_against_reads_the_hit_where_it_stands_in_the_turn(rules: EmergencyRules) -> None:
    grammar = rules.lemmas
    assert grammar is not None
    # 불러도 (even when called) is the concession, not the predicate of the hit's last word (대답 ... 없어요).
    assert grammar.against("엄마가 불러도 대답이 없어요", "불러도대답이없") is None
    assert grammar.against("엄마가 불러도 대답이 없어요", "불러도대답") is None
    assert grammar.against("작년에 쓰러지셨던 아버지", "쓰러지") == "unreal"
    assert grammar.against("어젯밤부터 애가 안 들어와요", "애가안들어와") is None  # since last night is now
    assert grammar.against("불이 났어요", "화재") is None  # a hit the analysis cannot find: nothing against it


@pytest.mark.parametrize("text", [
    "해수욕장 절벽 위 경고판이 떨어져 있어서 다시 세워 주세요",  # a fixture fell, nobody did
    "하수 펌프가 고장 나서 마당에 물이 고여요 수리 요청이요",  # a pump is no bleeding
    "손이 저려서 수저를 떨어뜨리는데 손목 때문이래요 병원 다니고 있어요 장애 등급 문의요",  # under care for it
])
def test_round_seven_near_misses_of_the_grammar_are_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


def test_a_taped_room_with_a_burning_smell_is_charcoal_over_nobody_answering(rules: EmergencyRules) -> None:
    verdict = rules.classify("언니 방문 틈에 청테이프가 붙어 있고 안에서 뭔가 타는 냄새가 나요 불러도 대답이 없어요")
    assert verdict is not None and verdict.sure and verdict.kind.name == "suicide", verdict and verdict.rule


@pytest.mark.parametrize(("text", "kind"), [
    # "I feel I will die" beside a partner dragging her: fear of him, not a will to die
    ("오늘은 진짜 죽을 거 같아요 남자친구가 저를 방에서 끌고 다녔어요 아직 집에 있어요", "crime"),
    # her own leg dragged is a gait, not someone dragged off
    ("할머니가 한쪽 다리를 질질 끌고 걸으시다가 주저앉으셨어요 입이 한쪽으로 돌아갔어요", "medical"),
    # a note with an apology, its writer gone: a farewell, not a child out of contact
    ("아내 차에서 쪽지가 나왔는데 미안해 애들 잘 부탁해 이렇게 써 있어요 아내는 아침에 나갔고 휴대폰이 꺼졌대요", "suicide"),
    ("동생이 모글 졸랐어요 지금 숨이 잘 안 쉬어져요 동생은 아직 방에 있어요", "crime"),  # 모글: 목을, misheard
    ("애가 경기하다가 눈이 위로 돌아가서 안 돌아와요 삼 분 넘었어요", "medical"),  # the eyes do not come back, not the child
])
def test_round_seven_the_decisive_fact_picks_the_kind(rules: EmergencyRules, text: str, kind: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and verdict.sure and verdict.kind.name == kind, verdict and verdict.rule


def test_someone_with_a_weapon_and_a_person_stabbed_is_a_crime(rules: EmergencyRules) -> None:
    verdict = rules.classify("남자가 칼 들고 있어요 주차장에서 사람 찔렸어요 피가 많이 나요")
    assert verdict is not None and verdict.sure and verdict.kind.name == "crime", verdict and verdict.rule
    slipped = rules.classify("엄마가 김장하다가 칼에 손이 찔렸어요 피가 좀 나요 반창고 붙였어요")
    assert slipped is None or slipped.kind.name != "crime", slipped.rule  # a knife that slipped at work


def test_a_child_who_swallowed_an_elders_medicine_is_poisoned_and_a_child_tending_it_is_not(
        rules: EmergencyRules) -> None:
    verdict = rules.classify("아들이 할아버지 수면제를 한 줌 먹었어요 방금요 눈이 풀려요")
    assert verdict is not None and verdict.sure and verdict.kind.name == "medical", verdict and verdict.rule
    assert verdict.rule == "grammar:medical.child_took_an_elders_medicine"
    tends = rules.classify("딸이 할머니 혈압약 드실 시간 맞춰서 챙겨 드려요 칭찬해 주세요")
    assert tends is None or not tends.sure, tends.rule


@pytest.mark.parametrize("text", [
    "별일 아닐 수도 있는데요 아버지가 갑자기 쓰러지셨어요 말이 어눌하세요",  # modesty before the facts
    "손녀가 할머니 수면제를 삼켰어요 몇 알인지 모르겠어요",  # a detail unknown, not a doubt
])
def test_modesty_and_an_unknown_detail_are_no_hedge(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and verdict.sure, verdict and verdict.rule
    assert not rules.classify("불이 났어요 아닐 수도 있는데").sure  # a doubt about the fact still asks


@pytest.mark.parametrize("text", [
    "아까 왔던 남자가 또 왔어요 문에 드릴을 대고 있어요 저 혼자 있어요",  # a drill at the door is forcing it
    "현관문 손잡이가 돌아가요 밖에서 누가 돌리고 있어요 아내는 출장 갔어요",  # away on a trip, no locksmith called out
])
def test_a_door_forced_while_the_caller_is_alone_is_read_by_the_grammar(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and verdict.sure and verdict.rule == "grammar:crime.door_forced", verdict and verdict.rule
    assert rules.classify("열쇠를 잃어버려서 출장 열쇠 불렀는데 문 여는 데 얼마예요") is None


def test_people_shut_in_by_a_blaze_are_a_fire(rules: EmergencyRules) -> None:
    verdict = rules.classify("컨테이너 숙소 불 불 타요 동료가 안에서 자고 있어요 문 안 열려요")
    assert verdict is not None and verdict.sure and verdict.kind.name == "fire", verdict and verdict.rule
    stuck = rules.classify("화장실 문이 고장 나서 아이가 안에 갇혔어요 문이 안 열려요")
    assert stuck is not None and stuck.sure and stuck.kind.name == "rescue", stuck and stuck.rule


# --- Round 8 (issue 44): the structure behind L's and M's misses. Sentences written for these tests.

@pytest.mark.parametrize(("text", "kind"), [
    ("아 이 가 세 제 를 마 셨 어 요 토 해 요", "medical"),
    ("할 머 니 가 말 이 어 눌 하 고 팔 이 안 올 라 가 요", "medical"),
    ("물 에 사 람 이 빠 졌 어 요 안 나 와 요", "rescue"),
])
def test_a_turn_written_one_syllable_at_a_time_is_read_as_words(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_respace_leaves_hesitations_and_ordinary_turns_alone() -> None:
    assert respace("가 슴 이 너 무 아 파 요") == "가슴이 너무 아파요"
    for text in ("어 그 저 민원 어 접수 하 려 고 요", "불 꺼진 가로등 신고하려고요", "저 그 아 네 맞아요"):
        assert respace(text) == text


@pytest.mark.parametrize("text", [
    "트럭이 옆으로 넘어지면서 아저씨가 그 밑에 깔렸어요",
    "삼촌이 전화했는데 시골 사는 할아버지가 쓰러진 냉장고 밑에 깔려 계시대요 겨우 전화를 받으셨대요",  # relayed, not "found"
])
def test_a_person_pinned_under_a_weight_is_a_rescue(rules: EmergencyRules, text: str) -> None:
    _escalates_as(rules, text, "rescue")


@pytest.mark.parametrize(("text", "kind"), [
    ("일곱 살짜리가 태권도 끝나고 집에 안 들어왔어요 두 시간 됐어요", "missing_child"),
    ("어머니가 기억이 흐려지셔서 예전 살던 집 찾아간다고 나가셨는데 전화를 안 받으세요 밤 열 시예요", "missing_child"),
    ("삼촌이 방금 통화하다가 제초제 마셨다고 하고 전화를 끊었어요", "medical"),
    ("옆집 할아버지가 마당 바닥에 누워 계시고 옆에 살충제 통이 열려 있어요", "medical"),
])
def test_round_eight_the_decisive_fact_picks_the_kind(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    "창고 선반 밑에 깔린 서류를 못 찾겠어요 문서 재발급 돼요",
    "아들이 여섯 살인데 한 시간째 밥을 안 먹어요 편식 상담 받을 수 있나요",
    "바닥에 누워서 농약 살포 일정표 보고 있는데 언제 뿌려요",
    "걱정했는데 전화했더니 친구 집에 계시대요 그런데 경로당 프로그램 문의요",
])
def test_round_eight_near_misses_are_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize(("text", "kind"), [
    ("공사장 집수정에 들어간 작업자가 안 나와요 밑에서 불러도 대답이 없어요", "rescue"),
    ("할아버지가 트랙터 끌고 나가셨는데 둑 아래 트랙터가 뒤집혀 있고 사람이 안 보여요", "rescue"),
    ("아버지가 헛간에 밧줄을 매달아 둔 걸 봤는데 지금 헛간 문을 안에서 잠그셨어요", "suicide"),
    ("옆집 현관에 유서라고 쓴 쪽지가 붙어 있는데 초인종 눌러도 대답이 없어요", "suicide"),
    ("어떤 아저씨가 다리 난간 바깥쪽에 서서 다가오지 말라고 소리쳐요", "suicide"),
    ("할머니가 베란다 난간에 다리를 내놓고 이제 그만 가고 싶다고 하세요", "suicide"),
])
def test_round_eight_who_is_where_in_which_state_picks_the_kind(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    "돌아가신 어머니 유서 때문에 상속 상담 받고 싶은데 대답이 없어서 다시 전화했어요",
    "다리 난간 페인트가 벗겨져서 보기 흉해요 이제 필요 없는 현수막도 떼 주세요",
    "창고 문이 안에서 잠겨서 안 열려요 줄 매달아 둔 짐은 어떻게 빼요 열쇠공 불러야 하나요",
])
def test_round_eight_near_misses_of_the_frames_are_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


def test_a_poison_swallowed_by_someone_else_is_medical_and_of_oneself_stays_suicide(rules: EmergencyRules) -> None:
    _escalates_as(rules, "삼촌이 방금 통화하다가 제초제 마셨다고 하고 전화를 끊었어요", "medical")
    _escalates_as(rules, "농약을 마셨어요", "suicide")


@pytest.mark.parametrize("text", [
    "응급처치 수업에서 얼굴 처짐 팔 힘 빠짐 같은 뇌졸중 신호를 배웠는데 교재 어디서 사요",
    "승강장 안내판에 심정지 시 행동요령이 떨어져 나갔어요 다시 붙여 주세요",
    "돌아가신 할머니 유서에 집 얘기가 있어서 상속 등기 어떻게 해요",
    "아기 체온계 들어 있는 선물 꾸러미를 아직 못 받았어요",
])
def test_a_danger_named_as_what_is_taught_posted_or_left_is_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize("text", [
    "수업 중에 학생이 갑자기 쓰러졌어요 얼굴이 처지고 팔에 힘이 없어요",
    "체육 수업 하다가 애가 쓰러졌는데 숨을 안 쉬어요",
])
def test_a_class_that_was_only_where_it_happened_still_escalates(rules: EmergencyRules, text: str) -> None:
    _escalates_as(rules, text, "medical")


@pytest.mark.parametrize(("text", "kind"), [
    ("아내가 끓는 물을 저한테 끼얹었어요 다리가 데었어요 지금 거실에 있어요", "crime"),  # who did it, not the burn
    ("누나가 코피를 흘리면서 우리 집으로 도망 왔어요 매형이 따라와서 문 밖에 있어요", "crime"),
    ("배달하다 미끄러져서 아저씨가 오토바이에 깔렸어요", "rescue"),  # lifted off, not only treated
    ("새벽에 다용도실에서 쉭 하는 소리가 계속 나고 냄새가 나서 창문 열었어요 머리가 어지러워요", "gas"),
])
def test_round_eight_wrong_kinds_are_read_by_who_did_it_and_what_holds_them(
        rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_a_pain_likened_to_a_blow_is_no_assault(rules: EmergencyRules) -> None:
    verdict = rules.classify("가슴을 누가 꾹 밟고 있는 것처럼 아파요")
    assert verdict is None or not (verdict.sure and verdict.kind.name == "crime"), verdict.rule


def test_someone_forcing_a_way_in_now_is_a_crime_whoever_calls(rules: EmergencyRules) -> None:
    _escalates_as(rules, "요양보호사인데 누가 베란다 방충망을 찢고 들어오려고 해요", "crime")
    fixing = rules.classify("수리 기사님이 고장 난 도어락을 뜯고 들어오려고 하는데 비용이 얼마예요")
    assert fixing is None or not fixing.sure, fixing.rule


@pytest.mark.parametrize("text", ["남편이 지금 제 팔을 비틀고 있어요", "골목에서 남자애들이 한 애를 둘러싸고 주먹으로 배를 치고 있어요"])
def test_a_body_part_and_a_blow_said_as_now_is_an_assault(rules: EmergencyRules, text: str) -> None:
    _escalates_as(rules, text, "crime")


@pytest.mark.parametrize("text", ["어제 남편이 팔을 비틀었는데 상담 받을 곳 있나요", "주먹으로 책상을 쳐서 손이 아파요",
                                  "권투 체육관에서 주먹으로 샌드백 치는 소리가 시끄러워요"])
def test_a_blow_of_yesterday_or_on_a_thing_is_no_assault_now(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    assert verdict is None or not (verdict.sure and verdict.kind.name == "crime"), verdict.rule


def test_a_sleeper_in_a_running_car_who_does_not_wake_is_the_fumes(rules: EmergencyRules) -> None:
    _escalates_as(rules, "눈 쌓인 주차장에서 시동 걸어 놓고 잠든 아빠가 흔들어도 안 일어나요", "gas")


@pytest.mark.parametrize(("text", "kind"), [
    ("저 혼자 있는데 누가 현관 비번을 계속 눌러요 벌써 열 번째예요 누구냐고 물어도 대답을 안 해요", "crime"),
    ("휴대폰 충전기에서 불꽃이 튀더니 커튼이 타요 저 열 살이에요 물 부어도 안 꺼져요", "fire"),
])
def test_ten_counted_is_no_fever(rules: EmergencyRules, text: str, kind: str) -> None:
    # Kiwi reads 열 before a counter as the numeral ten; the fever is the noun
    _escalates_as(rules, text, kind)


def test_a_fever_with_its_figure_is_a_fever(rules: EmergencyRules) -> None:
    _escalates_as(rules, "아기가 열 39.8 인데 방금 몸이 경직되고 깨워도 안 깨요", "medical")


@pytest.mark.parametrize("text", ["경로당 프로그램 물어보려고 했는데 손주가 전화로 할머니가 부엌에서 쓰러져서 안 일어난다고 울어요",
                                  "아내가 영상통화로 애를 보여주는데 애가 축 늘어져서 입술이 보라색이에요"])
def test_a_call_on_the_phone_is_no_brazier(rules: EmergencyRules, text: str) -> None:
    # 전화로, 통화로: "by phone" holds the letters of 화로 (a charcoal brazier), a gas rule's fuel
    _escalates_as(rules, text, "medical")


def test_a_stranger_who_drank_is_no_poison_taken_unknowingly(rules: EmergencyRules) -> None:
    # 모르는 아저씨가 ... 먹고 held the words of 모르고 먹었어요 (swallowed without knowing)
    _escalates_as(rules, "모르는 아저씨가 술 먹고 우리 집을 자기 집이라고 비번을 막 누르고 문을 흔들어요 혼자 있는데 무서워요", "crime")
    _escalates_as(rules, "할아버지가 음료수인 줄 알고 농약을 드셨어요", "medical")


def test_a_farewell_and_a_burning_smell_behind_the_door_is_a_suicide(rules: EmergencyRules) -> None:
    # a burning smell alone is the fire's question; with a farewell left at the door it is charcoal lit to die
    _escalates_as(rules, "삼촌 원룸 문 앞에 미안하다는 편지가 붙어 있고 문틈으로 타는 냄새가 나요", "suicide")
    _escalates_as(rules, "누나가 어제 나한테 통장 비밀번호를 알려줬는데 오늘 누나 방에서 숯 타는 냄새가 나요", "suicide")


def test_who_entrusts_the_children_is_no_child_out_of_contact(rules: EmergencyRules) -> None:
    # 애들 잘 부탁한다 then silence: the one who left is the one in danger, not the children
    _escalates_as(rules, "아내가 아침에 애들 잘 부탁한다고 하고 나가서 전화가 꺼져 있어요", "suicide")


def test_two_nets_against_one_pick_the_kind(rules: EmergencyRules) -> None:
    # "불러도 대답이 없어요" is the regex net's unconscious person (medical); the grammar reads a child who
    # is gone, and the learned net reads it so too: the child is looked for, not resuscitated
    text = "놀이터에서 놀던 손녀가 갑자기 안 보여요 다섯 살이에요 불러도 대답이 없어요"
    verdict = rules.classify(text)
    assert verdict is not None and verdict.sure and verdict.kind.name == "missing_child", verdict
    assert verdict.rule.endswith("/two-nets")
    alone = EmergencyRules.load(learned_net=False).classify(text)  # one net against one: the regex stands
    assert alone is not None and alone.kind.name == "medical", alone


@pytest.mark.parametrize(("text", "kind"), [
    # locked in by a broken handle: trapped, not a break-in
    ("원룸 욕실 문손잡이가 부서져서 제가 안에 갇혔어요 두 시간째 못 나가요", "rescue"),
    # a foot still held by a machine is a rescue, whatever bleeds (freed and bleeding: below)
    ("애 발이 에스컬레이터에 끼었어요 안 빠져요 멈추긴 했는데 피가 나요", "rescue"),
    # a sickle (낫) carried after people, and someone who bleeds already
    ("장터에서 어떤 놈이 낫을 들고 사람을 쫓아가부러요 피 흘린 사람도 있어라", "crime"),
    # smoke from a locked room and a letter left: charcoal lit to die
    ("형 방문이 잠겨 있는데 문틈으로 연기가 새어 나오고 식탁에 편지가 있어요", "suicide"),
    # a game lost in a PC room is what they were doing, no story on a screen
    ("PC방에서 게임 지고 화난 사람이 커터칼을 꺼내서 옆 사람을 위협해요", "crime"),
])
def test_round_eighteen_structures_pick_their_kind(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_a_game_s_own_story_is_still_a_story(rules: EmergencyRules) -> None:
    _not_escalated(rules, "게임에서 캐릭터가 칼로 사람을 찔렀어요 너무 잔인해요")


def test_a_hand_freed_from_a_machine_and_bleeding_is_the_bleeding(rules: EmergencyRules) -> None:
    # guards the rule of a hand still held (held_in_a_machine): freed, the caller needs the ambulance's words
    _escalates_as(rules, "공장 기계에 손이 끼었다가 빠졌는데 피가 많이 나요", "medical")


def test_a_normal_reading_is_no_summit(rules: EmergencyRules) -> None:
    # 정상 is "normal" as well as a mountain's summit: a stroke told beside a normal blood pressure went to
    # the mountain rescue's words
    _escalates_as(rules, "혈압 재 보니 정상인데 아버지가 말을 못 알아들으시고 한쪽 팔다리를 못 움직이세요", "medical")
    _escalates_as(rules, "등산하다가 산 정상 부근에서 남편이 발목을 다쳐서 못 움직여요", "rescue")


@pytest.mark.parametrize(("text", "kind"), [
    # pills taken by mistake, said with 실수로 apart from the verb: a poisoning, not a crisis line's call
    ("제가 실수로 아내 수면제를 두 번 먹었어요 지금 눈이 자꾸 감겨요", "medical"),
    # a bottleful swallowed and the one who took it slurring: 119 now, whatever led to it
    ("하숙생이 수면제를 한 통 다 먹었대요 지금 말이 꼬이고 자꾸 졸려해요", "medical"),
    # struck by someone and down: an assault (the medical nets hear only the fall)
    ("엄마가 외삼촌한테 맞고 쓰러져서 안 일어나요", "crime"),
    # a broken bottle held up at someone: a weapon, not a drink taken by mistake
    ("술 먹고 깨진 소주병을 든 아저씨가 점원을 위협하고 있어요", "crime"),
    # a crushing pain likened to a foot on the chest (거 같아요): no one is beating the caller
    ("누가 가슴을 밟고 서 있는 거 같아요 숨이 안 쉬어져요", "medical"),
    # a farewell (다시는 안 온다) and a phone no one answers
    ("누나가 다시는 안 올 거라고 문자 보내고 전화를 안 받아요", "suicide"),
    # a fever that will not come down (열이 안 내려요) is no child who never got off the bus
    ("아들이 해열제를 먹었는데 두 시간째 열이 안 내리고 몸이 굳어요", "medical"),
])
def test_round_nineteen_structures_pick_their_kind(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_a_wound_tied_by_a_helper_is_no_one_confined(rules: EmergencyRules) -> None:
    verdict = rules.classify("할아버지가 낫에 손을 베여서 피가 나는데 할머니가 수건으로 묶고 있어요")
    assert verdict is not None and verdict.kind.name == "medical", verdict and verdict.rule


@pytest.mark.parametrize(("text", "kind"), [
    ("수면제를 한 통 다 먹었어요 이제 다 끝내고 싶어요 말이 꼬여요", "suicide"),  # the wish said: the crisis line
    ("엄마가 주사 맞고 쓰러졌어요 숨을 잘 못 쉬어요", "medical"),  # a shot, not a blow
    ("남편이 저를 의자에 묶어 놓고 나갔어요 못 움직여요", "crime"),  # tied up: still confined
])
def test_round_nineteen_rules_leave_their_neighbours(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    "강에 사람이 빠졌다고 했는데 제가 잘못 봤어요 마네킹이 떠내려간 거였어요 다들 괜찮아요",
    "아들이 칼에 찔렸다고 했던 거 제가 말을 잘못했어요 종이에 손가락 베인 거예요 밴드 붙이고 놀고 있어요",
])
def test_a_report_taken_back_and_all_well_is_asked_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)
    assert rules.hedged(text)


@pytest.mark.parametrize(("text", "kind"), [
    ("정정할게요 세 살이 아니라 다섯 살이에요 지금 경련해요 눈이 돌아갔어요", "medical"),  # a detail corrected
    ("아까 괜찮다고 했던 거 아니에요 지금 숨을 안 쉬어요", "medical"),  # the all-clear is what is taken back
    ("다친 데 없다고 했던 거 정정할게요 괜찮은 줄 알았는데 다리에서 피가 계속 나요 뼈가 보여요", "medical"),
])
def test_a_correction_toward_the_danger_still_escalates(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize(("text", "kind"), [
    # a smoker's cigarette set the sofa alight: 담배 after 술 마시고 is smoked, not swallowed
    ("아버지가 막걸리 드시고 담배 피우다 떨어뜨려서 지금 소파가 타고 있어요", "fire"),
    # a beast's blow (뒷발, 뿔) is no assault, whoever was struck
    ("소가 뒷발로 차서 남편이 배를 맞고 쓰러졌어요 배가 딱딱해요", "medical"),
    ("염소가 뿔로 받아서 아들이 가슴을 맞고 쓰러졌어요 숨을 헐떡여요", "medical"),
    # a child who ran after a cat follows no one into death
    ("딸이 고양이 따라간다고 나갔는데 두 시간째 안 들어오고 전화도 꺼져 있어요 아홉 살이에요", "missing_child"),
    # a gas bottle kicked loose and hissing: the leak, not a beating
    ("손님이 취해서 가스통을 발로 찼는데 호스가 빠져서 쉬익 소리가 나요", "gas"),
])
def test_round_twenty_one_structures_pick_their_kind(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_a_drunk_partner_s_kicks_are_still_a_beating(rules: EmergencyRules) -> None:
    _escalates_as(rules, "남편이 술 먹고 저를 발로 차고 때려서 쓰러졌어요 아직 집에 있어요", "crime")


@pytest.mark.parametrize(("text", "kind"), [
    ("아빠가 술 먹고 엄마를 막 패요 엄마가 쓰러져서 안 일어나요", "crime"),  # 패다 is a blow too
    ("아버지가 살 맛이 없다면서 밧줄을 들고 산에 간다고 나가셨어요", "suicide"),  # 살 맛이 없다: despair
    ("우리 양반이 장작 패다가 도끼에 발등을 찍었어요 피가 철철 나요", "medical"),  # chopping wood is no blow
])
def test_blows_despair_and_chores_read_as_said(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize(("text", "kind"), [
    # a wrist or thigh cut still bleeding is 119's wound, not a crime's blade nor only the suicide line's talk
    ("동생이 커터칼로 손목을 그었는데 피가 계속 나요", "medical"),
    ("아들이 방에서 자해를 했어요 피가 멈추질 않아요", "medical"),
    ("작업하다가 깨진 유리에 허벅지를 베었는데 피가 철철 나요", "medical"),
    # the neighbours: another person's arm cut is a crime; a wish to die or a farewell beside the cut, the suicide line
    ("강도가 칼로 점원 팔을 그었어요 피가 나요 아직 칼 들고 있어요", "crime"),
    ("손목을 그었어요 피가 많이 나요 이제 다 끝내고 싶어요", "suicide"),
    ("언니가 손목을 그었는데 피가 안 멈춰요 유서도 써 놨어요", "suicide"),
])
def test_a_cut_still_bleeding_is_a_wound_unless_a_wish_to_die_is_said(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize(("text", "kind"), [
    # 열이 나가 (the dialect's fever rising) is no vulnerable child going out
    ("발달장애 있는 딸이 열이 나가 해열제를 먹였는데 지금 경기를 하고 눈이 뒤집어졌어요", "medical"),
    # struck by a firework's debris, not by a hand
    ("폭죽 파편에 맞은 사람이 있어요 머리에서 피가 나요", "medical"),
    # a train's door holding a child's bag as the train leaves: a rescue, not someone dragged off
    ("전철 문에 아들 가방이 끼었는데 문이 닫히고 열차가 떠나려고 해요 애가 끌려가요", "rescue"),
    # the neighbours: a child who opened the door and went out is still gone; a woman dragged off, a crime
    ("자폐 있는 열한 살 딸이 현관문 열고 나갔어요 신발도 안 신었어요", "missing_child"),
    ("남자가 여자를 억지로 끌고 가요 여자가 살려달라고 해요", "crime"),
])
def test_a_fever_debris_and_a_train_door_read_as_what_they_are(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_someone_fallen_onto_the_tracks_is_a_rescue_whatever_was_asked_before(rules: EmergencyRules) -> None:
    _escalates_as(rules, "교통카드 충전 물어보려다가요 지금 할아버지 한 분이 선로로 떨어지셨어요 열차 들어온대요", "rescue")


@pytest.mark.parametrize("text", [
    "휴대폰이 선로로 떨어졌는데 어떻게 찾아요",  # a thing, not a person
    "선로에 떨어진 사람 구한 역무원 칭찬하고 싶어요",  # a thanks: it is over
    "어제 선로에 사람이 떨어졌다는 뉴스 봤어요",
    "선로에 떨어진 사람 안전하게 구조됐대요 다행이에요",  # the relief: it is over
])
def test_a_thing_on_the_tracks_a_thanks_or_the_news_is_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize(("text", "kind"), [
    # a cry for help from a shut place is someone trapped: 119's rescue, not a crime
    ("하수구 공사하는 데 맨홀 안에서 살려 달라는 소리가 나요", "rescue"),
    ("헬스장 샤워실 문이 고장 나서 안에서 누가 도와달라고 문을 두드려요", "rescue"),
    # the neighbour: a woman crying for help as a man drags her off is still a crime
    ("골목에서 여자가 살려 달라고 소리쳐요 남자가 끌고 가요", "crime"),
])
def test_a_cry_for_help_from_a_shut_place_is_a_rescue(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    "화장실 문이 고장 났어요 고쳐 주세요",
    "우물 옆에서 애들이 살려 달라고 장난치면서 놀아요 시끄러워요",
])
def test_a_broken_door_or_children_playing_by_a_well_is_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize(("text", "kind"), [
    # a small thing a child can swallow gone while the child plays, with a sign in the throat or stomach
    ("세 살 아들이 자석 가지고 놀았는데 하나가 없어졌어요 배를 아파하고 토하려고 해요", "medical"),
    ("아기가 동전 가지고 놀다가 하나가 안 보여요 자꾸 캑캑거리고 침을 흘려요", "medical"),
    # the neighbour: the child gone with a toy is still a child gone
    ("애가 건전지 든 장난감 가지고 나갔는데 애가 없어졌어요", "missing_child"),
])
def test_a_small_thing_gone_in_play_with_a_sign_is_swallowed(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_a_battery_gone_with_no_child_is_not_escalated(rules: EmergencyRules) -> None:
    _not_escalated(rules, "리모컨 건전지가 없어졌는데 어디서 사요")


def test_a_farewell_streamed_live_with_a_blade_is_now_not_a_video(rules: EmergencyRules) -> None:
    _escalates_as(rules, "동생이 유튜브 방송 켜 놓고 지금 손목 긋겠다고 칼 들고 있어요", "suicide")


@pytest.mark.parametrize("text", [
    "유튜브에서 손목 긋는 장면 보고 애가 무섭대요",  # a video watched stays a video
    "유튜브 영상에서 칼 들고 협박하는 거 봤어요 신고해야 하나요",
])
def test_a_video_watched_on_youtube_is_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize(("text", "kind"), [
    # the children entrusted in a note left behind, and the one who wrote it gone: a farewell, not a missing adult
    ("아빠 카톡 프로필에 아이들 잘 부탁한다는 글이 올라왔고 아빠가 없어졌어요 차도 없어요", "suicide"),
    ("누나 일기장에 아이들 잘 부탁한다는 글이 있고 누나가 집에 없어요", "suicide"),
])
def test_children_entrusted_in_a_note_and_the_writer_gone_is_a_farewell(rules: EmergencyRules, text: str,
                                                                        kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_children_entrusted_for_a_business_trip_is_not_escalated(rules: EmergencyRules) -> None:
    _not_escalated(rules, "애들 잘 부탁한다고 친정엄마한테 맡기고 출장 갔어요 돌봄 서비스 신청하려고요")


@pytest.mark.parametrize(("text", "kind"), [
    # ash falling in the yard is the fire's sign, not somebody's fall
    ("뒷산 불길이 이쪽으로 내려와요 연기 때문에 눈을 못 뜨겠고 재가 마당에 막 떨어져요", "fire"),
    # the neighbour: a grandmother fallen with ash blowing by is still a fall
    ("할머니가 마당에서 넘어지셨는데 못 일어나세요 옆에서 낙엽 태우던 재가 날려요", "medical"),
])
def test_ash_falling_from_a_fire_is_no_fall(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize(("text", "kind"), [
    # modesty before the facts (별건 아닐 수도 있는데요) is no doubt about them
    ("별건 아닐 수도 있는데요 남편이 갑자기 말이 어눌해지고 한쪽 팔에 힘이 없어요", "medical"),
    # the danger said as going on, and a service asked after it: the danger is now
    ("바쁘신데 죄송해요 옆집 남자가 골프채를 들고 우리 문을 내리치고 있어요 방범창 지원 신청은 어디서 해요", "crime"),
    ("죄송한데요 아버지가 아까부터 말을 못 하시고 오른쪽 팔다리를 못 움직이세요 보건소 예약은 어디로 해요", "medical"),
])
def test_a_hedged_caller_with_a_danger_going_on_is_escalated(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    "별건 아닐 수도 있는데 누가 현관문을 여는 것 같기도 하고 바람 소리인지 잘 모르겠어요",  # a real doubt stays one
    "작년에 남편이 갑자기 말이 어눌해져서 입원했었어요 지금은 괜찮고 재활 프로그램 신청하려고요",  # over
])
def test_a_doubt_or_a_danger_that_is_over_is_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize("text", [
    "안녕하세요 바다에서 수영하던 친구가 안 보여요",
    "미안합니다 바다에서 낚시하던 남편이 안 보여요 배도 없어요",
])
def test_a_greeting_or_an_apology_that_opens_the_call_is_no_farewell(rules: EmergencyRules, text: str) -> None:
    verdict = rules.classify(text)
    assert verdict is not None and verdict.kind.name == "rescue", (text, verdict and verdict.rule)


@pytest.mark.parametrize("text", [
    "엄마한테 미안하다고 문자 보내고 동생이 바다로 나갔어요 연락이 안 돼요",
    "미안해요 그동안 고마웠다는 문자 남기고 아빠가 없어졌어요",  # the apology of a note, said first
])
def test_a_farewell_with_its_apology_is_still_one(rules: EmergencyRules, text: str) -> None:
    _escalates_as(rules, text, "suicide")


def test_charcoal_bought_to_grill_meat_is_no_dose(rules: EmergencyRules) -> None:
    _not_escalated(rules, "번개탄 사서 캠핑장에서 삼겹살 구워 먹으려고요 번개탄 파는 곳 있어요")


def test_charcoal_and_pills_meant_to_be_taken_is_still_a_dose(rules: EmergencyRules) -> None:
    _escalates_as(rules, "형이 번개탄이랑 수면제 사 와서 다 먹겠대요", "suicide")


@pytest.mark.parametrize(("text", "kind"), [
    # modesty that opens the call (별일 아닌데, 괜찮을 것 같긴 한데) is said to the line: nothing was resolved
    ("별일 아닌데 고등학생 아들이 어제 저녁에 축구하러 나가서 아직 안 들어왔어요 핸드폰도 꺼져 있어요", "missing_child"),
    ("괜찮을 것 같긴 한데 고등학생 아들이 어제 저녁에 축구하러 나가서 아직 안 들어왔어요 핸드폰도 꺼져 있어요", "missing_child"),
    ("별일 아닌데요 치매 있는 할머니가 아침에 시장 가신다고 나가셨는데 여섯 시간째 안 오세요 전화도 안 받으세요", "missing_child"),
])
def test_modesty_that_opens_the_call_resolves_nothing(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    "아들이 학교 끝나고 아직 안 들어왔는데 방금 연락 됐어요 괜찮대요 학원 차량 문의요",
    "별일 없었어요 아들이 친구 집에 있다가 들어왔어요 학원 차량 시간 문의요",
    "별일 아니었어요 할머니가 시장에서 길을 잃으셨다가 경찰이 모셔다 주셨어요",
])
def test_a_worry_that_ended_well_is_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


def test_a_lock_that_rusted_and_broke_is_no_break_in(rules: EmergencyRules) -> None:
    text = "베란다 창문 잠금장치가 녹슬어서 부서졌는데 누가 들어온 건 아니에요 고쳐 주는 데 있어요"
    assert rules.classify(text) is None, rules.classify(text).rule


def test_a_rusted_window_guard_torn_open_by_someone_is_still_a_break_in(rules: EmergencyRules) -> None:
    _escalates_as(rules, "혼자 있는데 누가 녹슨 방범창을 뜯고 들어오려고 해요", "crime")


# --- round 24 (AT: callers not at the scene; AU: people on duty) -----------------------------------------
@pytest.mark.parametrize(("text", "kind"), [
    # 차 that fills (연기가 차고 있어요) is no car: smoke filling a home, not a sealed car
    ("주방 쪽이 뿌옇게 연기가 차고 있어요 할머니가 전화를 안 받으세요", "fire"),
    # a farewell's apology relayed, then the pills: a suicide, not a child's poisoning
    ("형이 문자로 애들한테 미안하다고 전해 달래요 방금 약 다 먹었대요", "suicide"),
    # over a bridge's railing (넘어가, one verb for Kiwi): a suicide, not a climber in danger
    ("대교 위에서 어떤 여자가 난간을 넘어가고 있어요", "suicide"),
    # pushed into a car while struggling (발버둥 치): taken away, not hit by a car
    ("모르는 남자가 우리 애를 차에 강제로 태웠어요 애가 발버둥 쳤어요", "missing_child"),
    # pills taken and a letter there (편지가 있어요): a suicide, not an overdose alone
    ("할머니가 모아둔 수면제를 다 드신 것 같고 베개 옆에 편지가 있어요", "suicide"),
    # decreased consciousness and lips gone blue (파래지, as Kiwi reads it), said in a carer's words
    ("현장 작업자가 쓰러진 건 아닌데 의식 저하 상태입니다", "medical"),
    ("할아버지 입술이 파래지셨고 숨을 몰아쉬세요", "medical"),
    # alone at work (저만 남았어요, in the shop) and the door kicked
    ("사무실에 저만 남았는데 누가 사무실 문을 발로 차고 있어요", "crime"),
    ("가게에 혼자 있는데 어떤 남자가 가게 문을 계속 발로 차고 있어요", "crime"),
])
def test_second_hand_and_on_duty_reports_are_escalated_as_what_they_are(rules: EmergencyRules, text: str,
                                                                         kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_riding_to_the_last_stop_burns_nothing(rules: EmergencyRules) -> None:
    verdict = rules.classify("치매 할아버지가 종점까지 타고 오셨다가 산 쪽으로 가셨대요")  # 타고 오셨다가: rode
    assert verdict is not None and verdict.kind.name == "missing_child", verdict and verdict.rule


@pytest.mark.parametrize("text", [
    # a danger relayed, then its end relayed (무사히 내려왔대요, 데리고 오셨대요)
    "남편이 산에서 길 잃었다고 문자 보냈었는데 방금 무사히 내려왔대요 표지판 좀 고쳐 주세요",
    "할머니가 마트에서 애를 잃어버렸다고 전화하셨는데 십 분 만에 직원분이 데리고 오셨대요 미아 방송 문의요",
    # a game or a role the cry or the fit belonged to
    "분리수거 문의인데요 윗집에서 살려주세요 소리가 나는데 아 애들이 술래 놀이 하는 거예요",
    "소방 훈련 때 제가 경련하는 역할을 맡았는데 신고 연습도 해야 하나요",
])
def test_a_danger_relayed_as_over_or_played_is_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize("text", [
    "어제 킥보드에 불난 거요 소방차가 와서 다 껐고요 잔해 치워 주세요",  # put out: not even asked
    "박스 쌓아 둔 게 와르르 무너졌네요 사람은 없어요 치워 주세요",  # nobody there
])
def test_a_fire_put_out_or_a_collapse_with_no_one_is_not_even_asked(rules: EmergencyRules, text: str) -> None:
    assert rules.classify(text) is None, rules.classify(text).rule


@pytest.mark.parametrize("text", [
    # a field trip (현장체험학습) is where the child went missing, not a training or a show (체험: 안전 체험관)
    "현장체험학습 갔던 아들이 안 보인대요 선생님들이 한 시간째 찾고 있대요",
    "담임인데요 현장체험학습 중에 학생 하나가 안 보여요 삼십 분째 연락이 안 돼요",
])
def test_a_child_missing_on_a_field_trip_is_escalated(rules: EmergencyRules, text: str) -> None:
    _escalates_as(rules, text, "missing_child")


def test_a_field_trip_form_is_no_emergency(rules: EmergencyRules) -> None:
    assert rules.classify("현장 체험 학습 신청서는 어디서 받아요") is None


# --- round 25 (AV: seasons, weather and holidays; AW: the emergency asked as a question) --------------------
@pytest.mark.parametrize(("text", "kind"), [
    # a resolution only asked for (찾아 주실 수 있어요) or a need (어떻게 해야 돼요) resolves nothing
    ("여덟 살 아들이 학원 끝나고 밤 열 시인데도 안 와요 전화도 꺼져 있어요 어떻게 해야 돼요", "missing_child"),
    ("지적 장애가 있는 동생이 혼자 나가서 안 들어와요", "missing_child"),  # 지적 장애 as Kiwi reads it (지 적)
    ("아들이 케이블카 타고 올라갔는데 안 내려와요 삼십 분 넘었어요", "missing_child"),
    ("아들이 낯선 사람 차를 탔대요 지금 전화를 안 받아요", "missing_child"),
    # stuck in the throat, no sound: choking, not asked
    ("할머니가 인절미가 목에 걸렸는데 소리를 못 내세요", "medical"),
    # a head hit with its bad signs on a mountain or in a valley: the ambulance's, not a cliff rescue
    ("계곡에서 미끄러진 아이가 바위에 머리를 찧어서 피가 나고 자꾸 토해요", "medical"),
    ("산에서 굴러떨어진 친구가 머리를 부딪혔는데 피가 나고 의식이 오락가락해요", "medical"),
    # pushing a car (차를 밀다가) is no assault
    ("차를 밀다가 아버지가 쓰러지셨는데 숨을 안 쉬세요", "medical"),
    # charcoal briquettes at a shut room's door and smoke from it: lit to die, not a fire
    ("펜션 옆방 문틈으로 연기가 나오는데 문 앞에 번개탄 포장지가 있어요", "suicide"),
    # two men trading blows (치고받) with a bat: a crime, not only an injury
    ("주차장에서 야구방망이 든 남자 둘이 치고받고 있어요 피가 나요", "crime"),
])
def test_seasonal_and_asked_emergencies_are_escalated_as_what_they_are(rules: EmergencyRules, text: str,
                                                                       kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    # 만약 ... 면: every word of the clause is the hypothetical, not only its last verb
    "만약에 할아버지가 쓰러져서 의식이 없으면 뭐부터 해야 돼요",
    "만약에 아이가 세제를 삼켜서 숨을 못 쉬면 어떻게 해야 돼요",
    # a trial's verdict (판결) is after the fact
    "몇 달 전에 골목에서 칼 휘두른 남자 판결 나왔나요 제가 증인이었거든요",
    # briquettes to grill (고기 굽는데): no farewell
    "번개탄으로 고기 굽는데 연기가 너무 나요 환기 어떻게 해요",
])
def test_what_ifs_trials_and_grills_are_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize("text", [
    "만약 민원이면 죄송한데요 지금 아버지가 쓰러져서 숨을 안 쉬어요",  # after the clause's 면
    "만약을 대비해서 전화드렸는데요 지금 할머니가 쓰러지셔서 숨을 안 쉬세요",  # 만약을 대비해: just in case, no clause
])
def test_a_danger_after_a_what_if_clause_still_escalates(rules: EmergencyRules, text: str) -> None:
    _escalates_as(rules, text, "medical")


def test_a_lift_that_held_the_caller_and_was_opened_is_no_trapped_rule(rules: EmergencyRules) -> None:
    """갇혔다가 열어 주셔서 나왔어요: a state said as ended (`freed = true`); one still shut in still escalates."""
    rule = rules.lemmas.classify("승강기에 십 분쯤 갇혔다가 관리 아저씨가 열어 주셔서 나왔어요 점검 기록 볼 수 있어요")
    assert rule is None or not rule.sure, rule and rule.name
    _escalates_as(rules, "엘리베이터에 갇혔는데 아직 안 열려요 숨이 답답해요", "rescue")


FREED = """
[concept]
lift = ["엘리베이터"]
shut = ["갇히"]

[[rule]]
kind = "rescue"
name = "lift"
all = ["lift", "shut"]
freed = true
"""


def test_a_freed_rule_reads_a_state_said_as_ended_as_no_match(tmp_path: Path) -> None:
    grammar = _grammar(tmp_path, FREED)
    assert grammar.classify("엘리베이터에 갇혔어요") is not None
    assert grammar.classify("엘리베이터에 갇혔다가 나왔어요") is None
    assert _grammar(tmp_path, FREED.replace("freed = true\n", "")).classify("엘리베이터에 갇혔다가 나왔어요")
    with pytest.raises(GrammarError, match="freed"):
        _grammar(tmp_path, FREED.replace("freed = true", 'freed = "yes"'))


# --- round 26 (AX: money and disputes; AY: apartment life) ---------------------------------------------------
@pytest.mark.parametrize(("text", "kind"), [
    # 내리다가 ... 말을 못 하고: getting out of a car, then speech gone (no one kept from getting off: 내리지 말라고)
    ("주차장에서 아내가 차에서 내리다가 갑자기 말을 못 하고 왼쪽 팔을 못 움직여요", "medical"),
    # a throat tight after shrimp: an allergy, not a strangling
    ("아들이 새우튀김 먹더니 목이 조인다고 해요 숨소리가 쌕쌕거려요", "medical"),
    # the throat held by the one who drank (목을 잡고 괴로워하세요): a poisoning, not an assault
    ("아버지가 생수병에 담긴 락스를 드시고 목을 잡고 괴로워하세요", "medical"),
    # 떨어지기 직전: about to fall from where he hangs, not fallen
    ("아파트 옥상 배관에 남자가 매달려 있어요 떨어지기 직전이에요", "rescue"),
])
def test_money_and_apartment_emergencies_are_escalated_as_what_they_are(rules: EmergencyRules, text: str,
                                                                        kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_a_visit_announced_is_no_break_in(rules: EmergencyRules) -> None:
    _not_escalated(rules, "추심원이 방문하겠다고 문자가 왔는데 밤 열 시 넘어서 오는 것도 되나요")  # 방문하다: no room's door


def test_a_death_told_as_its_cause_is_not_even_asked(rules: EmergencyRules) -> None:
    assert rules.classify("어머니가 뇌출혈로 돌아가셔서 사망신고 하려고요") is None


def test_a_gas_valve_that_will_not_close_is_no_break_in(rules: EmergencyRules) -> None:
    verdict = rules.classify("집 가스레인지 밸브가 안 잠겨요 냄새가 자꾸 나서 창문 열어놨어요")
    assert verdict is not None and verdict.kind.name == "gas", verdict and verdict.rule


@pytest.mark.parametrize(("text", "kind"), [
    # a phishing loss or a phishing gang is where the danger came from, not who told of it
    ("보이스피싱 당한 걸 알고 어머니가 갑자기 가슴을 움켜쥐고 쓰러지셨어요 숨을 안 쉬세요", "medical"),
    ("보이스피싱 일당 같은 남자들이 현관문을 발로 차고 있어요 저 혼자 있어요", "crime"),
    ("피싱 문자로 돈을 다 뺏겼는데 지금 아버지가 쓰러지셔서 숨을 안 쉬세요", "medical"),  # what it did, not said
])
def test_a_danger_beside_a_phishing_scam_is_escalated(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    "보이스피싱 문자에 아들이 납치됐다고 돈을 보내라는데 아들은 학교에 잘 있어요",  # what the message said
    "사기 문자로 딸이 교통사고로 쓰러져서 의식이 없다고 왔는데 딸은 옆에 있어요",
])
def test_a_danger_told_by_a_phishing_message_is_asked_about(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


def test_going_to_die_is_what_the_speaker_means_to_do() -> None:
    assert _will("남자친구가 지금 죽으러 간다고 했어요", "죽")  # 죽으러 가: goes to do it, as 죽으려고
    assert not _will("남자친구가 죽을 것 같대요", "죽")


# --- round 27 (AZ: night and the small hours; BA: sport, leisure and hobbies) -------------------------------
@pytest.mark.parametrize(("text", "kind"), [
    # a child on the bike's back seat (태우고 가다가): the caller's ride, not a child taken away
    ("아이를 자전거 뒤에 태우고 가다가 보니까 애가 열이 펄펄 나고 눈이 돌아가면서 몸을 떨어요", "medical"),
    # a battery swallowed and the throat held: the child's own, not someone grabbing it
    ("가게에서 손님 아이가 뭘 집어먹더니 건전지 같아요 목을 잡고 울어요", "medical"),
    # a window's glass and blood like a fountain: the wound's, not a break-in's
    ("자다 깨 보니 동생이 창문 깨진 유리에 팔을 베어서 피가 분수처럼 나요", "medical"),
    # a fit that goes on and parents out of reach: the fit is the call
    ("아이 봐주는 중인데 애가 열나면서 경련을 계속해요 십 분 넘었어요 부모님이랑 연락이 안 돼요", "medical"),
    # pills saved up and taken together; poison bought and meant for tonight
    ("동생이 그동안 처방받은 약을 다 모아서 먹었대요", "suicide"),
    ("형이 농약을 사 놨다고 이따 마실 거라고 하고 전화를 끊었어요", "suicide"),
    # 미안해 사랑해 sent, then silence
    ("아들이 새벽에 엄마 미안해 사랑해 문자 보내고 전화를 안 받아요 위치가 학교 옥상이에요", "suicide"),
    # a game lost is why he hits, not a story on a screen
    ("남편이 게임하다 져서 화가 나서 저를 때리고 물건을 던져요", "crime"),
    # the caller's trade said first; a named bridge is one word for Kiwi
    ("택시 기사인데요 손님이 한강대교에서 내려 달라더니 난간 위로 올라가고 있어요", "suicide"),
    # what is unknown is the cause or the place, not whether it happens
    ("지진인지 모르겠는데 천장이 내려앉아서 할아버지가 갇혔어요 벽 두드리는 소리가 나요", "rescue"),
    ("친구가 번개탄 피웠다고 그동안 고마웠다고 문자 왔어요 어디 공원 주차장인지 모르겠어요", "suicide"),
])
def test_night_and_leisure_emergencies_are_escalated_as_what_they_are(rules: EmergencyRules, text: str,
                                                                      kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize(("text", "rule"), [
    ("아버지가 화장실에서 나오시다가 한쪽으로 픽 쓰러지시고 말을 못 알아들으세요", "stroke_sudden"),
    # a habit and then now: the beating goes on (Kiwi reads 계세요 as a noun; the grammar reads 계셔요)
    ("할아버지가 할머니를 밤마다 때리시는데 지금도 때리고 계세요", "beaten_still"),
    # a wife with dementia gone for hours, whatever she went out for (연습장 is no story)
    ("치매 걸린 아내가 골프 연습장 간다고 나갔어요 네 시간째 안 와요", "dementia_gone_a_while"),
])
def test_the_grammar_alone_reads_these_night_and_leisure_emergencies(rules: EmergencyRules, text: str,
                                                                    rule: str) -> None:
    _grammar_escalates_by(rules, text, rule)


@pytest.mark.parametrize("text", [
    "할아버지가 잠꼬대로 웅얼웅얼 하시는데 깨우면 멀쩡하세요 수면 클리닉 있나요",  # asleep, not a stroke
    "캠핑장에서 가스 냄새가 잠깐 났는데 밸브 잠그니까 없어졌어요 버너 수리 어디서 해요",  # valve shut, smell gone
])
def test_night_and_leisure_near_misses_are_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


def test_a_fall_brushed_off_is_no_robbery_not_even_asked(rules: EmergencyRules) -> None:
    assert rules.classify("테니스장 예약 문의인데 아까 옆 코트에서 사람이 넘어졌는데 털고 일어나서 괜찮대요") is None


def test_a_smell_or_smoke_that_comes_in_is_no_break_in(rules: EmergencyRules) -> None:
    hit = _grammar_reads(rules, "밤에 아랫집에서 고기 굽는 냄새랑 연기가 베란다로 들어와요 냄새 민원이요")
    assert hit is None or hit.kind != "crime", hit.name


# --- round 28 (BB: travel and lodging; BC: family occasions and life events) ----------------------------------
@pytest.mark.parametrize(("text", "kind"), [
    # a husband with dementia gone when the caller woke
    ("치매 있는 아버지랑 여행 왔는데 펜션에서 자다가 깨 보니 없어요", "missing_child"),
    # a chair brought down on a head, a head banged on a wall: a beating now
    ("피로연에서 손님끼리 싸움 붙었는데 한 명이 의자로 사람 머리를 계속 내려쳐요 피가 나요", "crime"),
    ("모텔 복도에서 남자가 여자 머리를 벽에 박고 있어요", "crime"),
    # a chain being cut by someone who says he delivers: whoever they say they are
    ("혼자 있는데 택배 기사라면서 문을 억지로 열려고 체인을 끊으려 해요", "crime"),
    # a wrong liquid in a baby's formula; a week's pills taken at once
    ("신생아 분유에 식초 원액을 넣은 것 같아요 애가 계속 토해요", "medical"),
    ("할머니가 퇴원하시고 약을 한 봉지씩 챙겨드렸는데 일주일 치를 한꺼번에 다 드셨어요 자꾸 조세요", "medical"),
    # a parent's pills with the children entrusted; charcoal and a letter beside a guest
    ("아내가 수면제를 한 통 다 먹었다고 애들 잘 부탁한다고 전화했어요", "suicide"),
    ("게스트하우스 방에 숯이랑 편지가 있고 손님이 안 일어나요", "suicide"),
    # a child gone ahead to the lodging is a child out of contact, not a farewell
    ("열한 살 아들이 먼저 숙소 간다고 했는데 숙소에 없어요 전화도 안 받아요", "missing_child"),
    # a fever and a fit said in a tourist's English
    ("baby 열이 너무 높고 shaking 해요 호텔이에요 빨리요", "medical"),
])
def test_travel_and_family_emergencies_are_escalated_as_what_they_are(rules: EmergencyRules, text: str,
                                                                      kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    "펜션 청소하시는 분이 락스를 생수병에 담아 두셨어요 위험하다고 건의하려고요",  # no one drank it
    "비행기에 캠핑 칼 들고 타도 되나요 짐에 있어서요",  # asked whether one may carry it
    "터미널인데 방금 애가 없어졌다가 바로 옆에 있었네요 버스 시간표 알려 주세요",  # gone and found at once
    "아이 여권이 여행 중에 없어졌어요 애는 옆에 있어요 재발급 어떻게 해요",  # the passport, not the child
])
def test_travel_and_family_near_misses_are_not_escalated(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize(("text", "rule"), [
    # carried off by the current after a request (요금 ... 저기): the water's, not a cry's crime
    ("캠핑장 요금 문의인데 어 저기 개울에 아이가 빠졌어요 물살에 휩쓸려가요 살려주세요", "swept_away"),
    # a last call said from a cliff is a farewell, not a fall into the sea
    ("싸우고 나간 아내가 바닷가 절벽에서 마지막으로 전화한다고 했어요 파도 소리가 들려요", "last_call_at_the_edge"),
])
def test_the_grammar_alone_reads_these_travel_emergencies(rules: EmergencyRules, text: str, rule: str) -> None:
    _grammar_escalates_by(rules, text, rule)


@pytest.mark.parametrize(("text", "kind"), [
    # a knife held before another act asked about is the danger now, not a question about carrying one
    ("남편이 칼 들고 서 있는데 도망가도 되나요", "crime"),
    # gone and not found (아직 안 돌아왔어요), or found and gone again: no happy ending
    ("애가 마트에서 없어졌다가 아직 안 돌아왔어요 한 시간째예요", "missing_child"),
    ("아이가 없어졌다가 찾았는데 또 없어졌어요 지금 안 돌아왔어요", "missing_child"),
    # the caller forcing a door to reach someone down inside: the ambulance's, not a break-in
    ("할머니가 안에서 쓰러지셨는지 대답이 없어서 문을 억지로 열려고 해요 저 혼자예요", "medical"),
])
def test_round_28s_hedges_and_doors_keep_these_emergencies(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_a_car_swept_away_with_no_one_in_it_is_not_escalated(rules: EmergencyRules) -> None:
    _not_escalated(rules, "주차장 차가 빗물에 떠내려가요 아무도 안 타고 있어요")


def test_something_stuck_on_a_car_is_no_sealed_car(rules: EmergencyRules) -> None:
    _not_escalated(rules, "누가 제 차에 뭘 붙여 놨어요")  # 붙여 놨어요 alone: no window or gap sealed



@pytest.mark.parametrize(("text", "kind"), [
    # a fit that goes on while the child does not answer: the ambulance's, never a missing child's (112)
    ("다섯 살 아들이 열 경기를 하는데 십 분 넘게 계속돼요 불러도 대답이 없어요", "medical"),
    ("우리 애가 경련을 일으켰는데 한참 지나도 안 멈추고 반응이 없어요", "medical"),
    # a boat turned over (뒤집어지) with people in the water
    ("보트가 뒤집어졌어요 친구들 물에 있어요 보트 잡고 있어요", "rescue"),
    # a feverish baby that neither moves nor cries
    ("아기가 열이 많이 나는데 지금 안 움직이고 안 울어요", "medical"),
    # a latch broken off (떨어져 나갔어요) by someone who came back and kicked the door
    ("전에 찾아왔던 사람이 또 와서 문을 차서 걸쇠가 떨어져 나갔어요 지금 들어와요", "crime"),
    # a denial of wishing to die hides nothing that was taken
    ("죽고 싶은 건 아닌데 지금 수면제를 한 통 다 먹었어요", "suicide"),
])
def test_round_29s_readings_escalate_these(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_smoke_told_then_the_corridor_it_fills_is_a_fire(rules: EmergencyRules) -> None:
    _grammar_escalates_by(rules, "기계실에서 연기가 새 나와요 안에 직원들 있는데 통로가 뿌옇게 찼어요",
                          "smoke_filled")


@pytest.mark.parametrize("text", [
    "요즘 너무 지쳐서 상담 좀 받고 싶어요 죽고 싶은 게 아니라 그냥 말할 데가 필요해서요",
    "요즘 외로워서 그래요 죽고 싶은 건 아니고 상담 번호 알려 주세요",
    "제가 없을 때 누가 제 방에 들어왔던데요 룸메이트 친구래요",
])
def test_round_29s_hedges_hold_these(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize(("text", "kind"), [
    # a fist put through a mirror: the wound is the striker's own, the ambulance's (119), not a beating (112)
    ("지적장애 딸이 화가 나서 거울을 주먹으로 쳤는데 손목이 찢어져서 피가 계속 나요", "medical"),
    # a poison taken while the caller was out: the poisoning, not a missing elder (112)
    ("치매 있는 아버지가 제가 잠깐 나간 사이에 모기약을 입에 뿌리셨대요 기침하고 토하세요", "medical"),
    # strapped into a wheelchair (휠체어에 묶인 채로) after a fall: a belt, not someone holding the caller
    ("버스가 급정거해서 넘어졌는데 저 휠체어에 묶인 채로 못 일어나요 기사님이 안 와요", "medical"),
])
def test_round_30s_readings_send_these_to_the_right_number(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize(("text", "kind"), [
    # the hedges of rounds 29-30 hold none of these: a belt a partner will not let go of, an intruder still inside
    ("남편이 저를 차에 가둬 놓고 안전벨트를 못 풀게 해요", "crime"),
    ("저 없을 때 들어온 남자가 아직 작은방에 숨어 있어요", "crime"),
    ("치매 할머니가 세제를 드시고 나가셨는데 한 시간째 안 보여요", "medical"),
])
def test_round_30s_hedges_keep_these_emergencies(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize(("text", "kind"), [
    # watching something (보고 있는데) when it happened is what was going on, as 보다가: no story on a screen
    ("예능 보고 있는데 윗집에서 불이 났어요 연기가 들어와요", "fire"),
    ("드라마 보고 있는데 아버지가 갑자기 가슴을 잡고 쓰러지셨어요", "medical"),
])
def test_what_the_caller_was_watching_when_it_happened_is_no_story(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    # short at a count, whatever the group came back from or how the night went
    "놀이터 갔다가 원에 돌아와서 인원 세 보니까 다섯 살 여자애가 없어요 놀이터에도 없어요",
    "수련회 아침 점호했는데 남학생 세 명이 없어요 밤에 나간 흔적이 있고 전화를 안 받아요",
])
def test_short_at_a_count_is_a_missing_child(rules: EmergencyRules, text: str) -> None:
    _escalates_as(rules, text, "missing_child")
    _grammar_escalates_by(rules, text, "short_at_the_count")  # the grammar's own reading, not the learned net's


def test_short_at_a_count_for_a_known_reason_is_not(rules: EmergencyRules) -> None:
    _not_escalated(rules, "출석 확인했는데 두 명이 없어요 오늘 조퇴했대요")


def test_not_even_a_cough_past_what_is_stuck_is_choking(rules: EmergencyRules) -> None:
    # 기침도 못 해요: the airway is shut; the grammar reads it, not only the learned net
    _grammar_escalates_by(rules, "할아버지가 고기가 목에 걸렸는데 기침도 못 하세요", "choking")


def test_a_burning_smell_and_an_alarm_ringing_is_a_fire(rules: EmergencyRules) -> None:
    _escalates_as(rules, "어디서 타는 냄새가 나는데 잘 모르겠고 아까부터 복도 화재경보기가 계속 울려요", "fire")


def test_work_going_on_when_it_happened_is_read_as_during() -> None:
    # 다가 said short (리모델링하다) and a 던 clause (수리하던 삼촌) are the work going on, not a topic asked about;
    # a quote (잘 있다 하네요, 넣었다 카던데) is neither
    assert next(m for m in analyse("리모델링하다 천장이 내려앉았어요") if m.form == "리모델링").during
    assert next(m for m in analyse("지붕 수리하던 삼촌이 못 내려와요") if m.form == "수리").during
    assert not next(m for m in analyse("선생님께 물어보니 잘 있다 하네요") if m.form == "있").during
    assert not next(m for m in analyse("이웃이 민원 넣었다 카던데") if m.form == "넣").during


@pytest.mark.parametrize(("text", "kind", "rule"), [
    # the repairs going on when it happened hold nothing back, said by the shared topics or a rule's own
    ("지붕 수리하던 삼촌이 지붕 위에서 못 내려와요 다리가 떨려서 꼼짝 못 해요", "rescue", "stranded_on_an_edge"),
    ("치매 있으신 어머니가 보일러 점검 중에 문 열어 놓은 사이 사라지셨어요", "missing_child", "vulnerable_gone"),
    ("이모가 안 보여요 인지가 많이 떨어지신 분이에요", "missing_child", "vulnerable_gone"),
    # a window ledge climbed with the will to end it; a lift basket someone hangs from
    ("동생이 다 끝내겠다고 창틀에 올라섰어요 여기 십이 층이에요", "suicide", "at_an_edge_leaving"),
    ("사다리차 바구니에 기사님이 매달려 계세요 바구니가 기울었어요", "rescue", "hanging"),
    # a door held shut against someone breaking it; a tool aimed at the caller and about to be fired
    ("옆집 아저씨가 술 먹고 문을 부순다고 해요 지금 못 들어오게 막고 있어요", "crime", "holding_the_door"),
    ("작업용 타정기를 저한테 겨누고 쏜다고 해요", "crime", "aimed_at_me"),
    ("깨진 보틀을 휘두르고 있어요", "crime", "weapon_used"),
    # a child neither home nor where the day had them; slurred speech said as a loanword
    ("아들이 학원에도 안 갔고 집에도 안 들어왔어요", "missing_child", "neither_home_nor_there"),
    ("아빠가 갑자기 말이 슬러링 되고 손에 힘이 없대요", "medical", "stroke"),
])
def test_round_31_readings(rules: EmergencyRules, text: str, kind: str, rule: str) -> None:
    _escalates_as(rules, text, kind)
    _grammar_escalates_by(rules, text, rule)


@pytest.mark.parametrize(("text", "kind"), [
    # a poison taken with the will to die said further on: the suicide line's (109, and 119 if hurt)
    ("언니가 농약을 먹었대요 병이 옆에 굴러다니고 아직 말은 하는데 죽으려고 먹었대요", "suicide"),
    ("우리 아들 방에 들어가 보니 시너를 먹고 토하고 있어요 죽고 싶었대요", "suicide"),
    # the try to wake said after the silence
    ("할아버지가 대답을 안 하세요 흔들어도요", "medical"),
    # a tank on the roof is no pit: the worker down beside it is the ambulance's
    ("옥상 물탱크 보던 관리인이 쓰러져서 숨을 안 쉬어요", "medical"),
])
def test_round_31_kinds(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_a_tank_worker_down_inside_is_still_a_rescue(rules: EmergencyRules) -> None:
    _escalates_as(rules, "물탱크 청소하던 아저씨가 탱크 안에서 쓰러졌어요", "rescue")


def test_a_child_neither_home_nor_at_school_but_just_found_is_not_sent(rules: EmergencyRules) -> None:
    _not_escalated(rules, "딸이 학교 안 가고 집에 안 왔다고 선생님 전화 왔는데 방금 찾았어요")


@pytest.mark.parametrize(("text", "kind", "rule"), [
    # a baby seen not breathing; a child asked to mind and no answer since (a farewell, not a child gone)
    ("아기 모니터로 보는데 애기 가슴이 안 움직여요 숨소리도 없어요", "medical", "seen_not_breathing"),
    ("산후우울증 있는 아내가 아기 잘 부탁한다고 문자 보내고 연락이 안 돼요", "suicide", "giving_away"),
    # shown at an edge and then the call cut; a knife shown for a wallet
    ("동생이 다리 난간 끝에 서 있는 사진 보내고 전화를 끊었어요", "suicide", "on_the_edge_then_cut_off"),
    ("편의점 앞에서 어떤 남자가 칼을 보여 주면서 지갑 달래요", "crime", "weapon_shown"),
    # a roommate's own cut behind a locked door: self-harm, no partner who hurt and fled
    ("룸메가 화장실 문 잠그고 손목 그었대요 피가 보인대요 남자친구랑 헤어지고 나서 그래요", "suicide", "self_harm"),
    # swept away while the caller holds the baby: the water, not a little one gone
    ("해수욕장에서 아내가 큰애 구하러 들어갔는데 둘 다 파도에 밀려 가요 저는 아기 안고 있어서 못 들어가요", "rescue", "water"),
])
def test_round_32_readings(rules: EmergencyRules, text: str, kind: str, rule: str) -> None:
    _escalates_as(rules, text, kind)
    _grammar_escalates_by(rules, text, rule)


def test_a_child_unresponsive_and_blue_after_a_fit_is_no_child_gone(rules: EmergencyRules) -> None:
    _escalates_as(rules, "경기하던 아기가 멈췄는데 불러도 반응이 없고 입술이 새파래요 십 분 됐어요", "medical")


@pytest.mark.parametrize("text", [
    # a smell taken for gas that was cooking; a pillow thrown, calmed since; smoke from burnt noodles aired out;
    # a lift someone was stuck in that has opened
    "가스 냄새 나는 것 같았는데 남편이 생선 굽는 거였어요 검침일이 언제예요",
    "아내가 화나서 베개를 벽에 던졌어요 지금은 진정했어요 부부 상담 있나요",
    "재활용 봉투 문의요 잠깐만요 남친이 라면 태워서 연기 나는데 창문 열었어요 불은 아니에요",
    "엘리베이터에 갇혔다고 동생이 전화 왔는데 방금 문 열렸대요 승강기 점검은 어디에 말해요",
])
def test_round_32_near_misses(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


def test_a_child_called_for_with_no_response_for_half_an_hour_is_still_gone(rules: EmergencyRules) -> None:
    # only lips gone blue hold the child-gone rule back: 불러도 반응이 없어요 is said of a child called for, too
    _grammar_escalates_by(rules, "놀이터에서 애가 안 보여요 아무리 불러도 반응이 없어요 삼십 분 넘었어요", "child_vanished_a_while")


@pytest.mark.parametrize(("text", "kind", "rule"), [
    # a wrist cut with a wish not to live said: her own cut; a poison drunk beside a note wishing to die
    ("딸이 손목을 칼로 그었어요 피가 많이 나요 살기 싫다고 해요", "suicide", "self_harm"),
    ("아빠가 농약을 마시고 쓰러졌어요 옆에 죽고 싶다고 쓴 쪽지가 있어요", "suicide", "will_die"),
    # a business that failed is no program asked about: a railing sat on with the will to stop living
    ("할아버지가 옥상 난간에 앉아서 사업 망했다고 이제 그만 살겠대요", "suicide", "means_to_die"),
    # a child's eyes rolled up with a fever; a stroke beside a fridge
    ("애가 갑자기 털썩 주저앉더니 눈이 위로 올라갔어요 몸이 불덩이예요", "medical", "febrile_seizure"),
    ("냉장고 옮기던 아저씨가 갑자기 말이 안 나오고 왼팔이 안 올라가요", "medical", "stroke"),
    # a spray that caught fire is a fire, not a weapon
    ("도색 부스에서 스프레이 뿌리다 불이 붙었어요 방 안에 시너 통도 있어요", "fire", "flames"),
])
def test_round_33_readings(rules: EmergencyRules, text: str, kind: str, rule: str) -> None:
    _escalates_as(rules, text, kind)
    _grammar_escalates_by(rules, text, rule)


def test_a_farewell_thanks_and_going_in_peace_is_read_by_the_grammar(rules: EmergencyRules) -> None:
    _grammar_escalates_by(rules, "학원 선생님한테 감사했어요 이제 편하게 갈게요 라고 문자가 왔어요", "farewell_message")


def test_a_car_door_kicked_last_week_is_no_door_forced(rules: EmergencyRules) -> None:
    _not_escalated(rules, "주차장에서 누가 차 문을 발로 찼다고 블랙박스 영상 확인하려면 어디에 요청해요 지난주 일이에요")


@pytest.mark.parametrize("text", [
    # a review quoted; a cat stuck where no person is
    "치킨이 너무 짜서 죽고 싶다는 댓글이 달렸어요 가게 사장인데 댓글 신고는 어디에 해요",
    "강아지가 담장 틈에 끼어서 못 나와요 사람 말고 강아지요 동물 구조 연락처 있나요",
])
def test_round_33_near_misses(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


def test_a_phones_last_place_is_no_last_word(rules: EmergencyRules) -> None:
    # 위치가 마지막으로 ... 끊겼어요: where the phone was last, not a farewell and a line cut (no suicide)
    text = "학원에 안 왔대요 아이 폰 위치가 마지막으로 공사장 근처에서 끊겼어요"
    _escalates_as(rules, text, "missing_child")
    hit = _grammar_reads(rules, text)
    assert hit is None or hit.kind != "suicide", hit and hit.name


def test_an_elder_called_for_with_no_answer_is_still_gone(rules: EmergencyRules) -> None:
    # 불러도 after the silence is a call for someone gone, not a hand's try to wake (a guard for round 31's regex)
    verdict = rules.classify("할머니가 산책 나가셨는데 안 오세요 전화해도 대답이 없어요 불러도요")
    assert verdict is not None and verdict.kind.name == "missing_child", verdict and verdict.rule


@pytest.mark.parametrize("text", [
    # "do you want to die?" put to the caller is a threat, not a wish to die (a guard for round 33's die_wish)
    "남편이 칼을 휘두르면서 죽고 싶냐고 소리 질러요",
    "남편이 칼로 저를 찔렀어요 죽고 싶냐고 해요",
])
def test_a_threat_put_as_do_you_want_to_die_is_a_crime(rules: EmergencyRules, text: str) -> None:
    _escalates_as(rules, text, "crime")


def test_a_wish_asked_of_someone_is_read_as_no_wish() -> None:
    assert all(m.unreal for m in analyse("죽고 싶냐고 소리 질러요") if m.form in {"죽", "싶"})
    assert not any(m.unreal for m in analyse("죽고 싶다고 했어요") if m.form in {"죽", "싶"})


def test_a_baby_seen_not_breathing_who_was_fine_is_not_sent(rules: EmergencyRules) -> None:
    _not_escalated(rules, "어제 아기 가슴이 안 움직이는 것 같아서 놀랐는데 괜찮았어요")


def test_what_only_seemed_so_before_a_fright_told_as_over_is_read_with_it() -> None:
    morphs = analyse("아기 가슴이 안 움직이는 것 같아서 놀랐는데 괜찮았어요")
    assert next(m for m in morphs if m.form == "움직이").unreal
    assert not next(m for m in analyse("아기 가슴이 안 움직이는 것 같아요") if m.form == "움직이").unreal


# Round 34 (held-out tables BN and BO), in words written for these tests.
@pytest.mark.parametrize(("text", "kind", "rule"), [
    # a shop worker's post said first introduces the caller; 매장 is where the father was lost, no inquiry
    ("마트 직원인데 손님이 치매 아버지를 매장에서 놓쳤대요 이십 분째 찾는데 없어요", "missing_child", "vulnerable_gone"),
    # Kiwi reads 주저앉으셨는데 after another verb as 주저 + 앉
    ("할머니가 숨이 가쁘다고 하시면서 주저앉으셨는데 얼굴이 하얘요", "medical", "breathless_distress"),
    # a partner who struck her waits outside the room
    ("진료실 안에 있는데 남편이 밖에 서서 나오면 가만 안 둔대요 아까도 맞았어요", "crime", "partner_beaten_waiting"),
    # still up on the roof's edge: a height's rescue, not a fall
    ("지붕 고치던 아저씨가 끝에 걸려서 못 움직여요 떨어질 것 같아요", "rescue", "on_a_height"),
    # a bottle brought down on heads is an assault over the one it felled
    ("호프집에서 남자들이 맥주병으로 서로 머리를 치고 있어요 한 명은 쓰러졌어요", "crime", "weapon_blow"),
    # blows nobody can stop
    ("시장 골목에서 어떤 남자가 할머니 뺨을 때리고 밀치는데 아무도 못 말려요", "crime", "assault_unstopped"),
    ("주방 창고에 가스 냄새가 자욱해요", "gas", "leak"),
])
def test_round_34_readings(rules: EmergencyRules, text: str, kind: str, rule: str) -> None:
    _escalates_as(rules, text, kind)
    _grammar_escalates_by(rules, text, rule)


def test_charcoal_bought_and_brought_is_a_plan(rules: EmergencyRules) -> None:
    _escalates_as(rules, "장사 접었어요 번개탄 사다 놨어요 그냥 누가 알아야 할 것 같아서요", "suicide")


@pytest.mark.parametrize("text", [
    # 타 is a ride on a board, not a shop burning; what fell was a mannequin; a head struck in one's own fall
    "손자가 가게 앞에서 킥보드 타다가 친구랑 놀이터 갔대요",
    "손님이 쓰러졌대서 봤더니 마네킹이 넘어진 거더라고요",
    "할아버지가 지팡이 짚고 가시다 넘어져서 머리를 쳤어요",
])
def test_round_34_near_misses(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


def test_nobody_can_stop_it_is_what_goes_on() -> None:
    assert not next(m for m in analyse("아무도 못 말려요") if m.form == "말리").unreal
    assert next(m for m in analyse("아무도 안 와요") if m.form == "오").unreal


# Round 35 (held-out tables BP and BQ), in words written for these tests.
@pytest.mark.parametrize(("text", "kind", "rule"), [
    # Kiwi reads 번개탄 before 냄새 as 번개 + 탄: the smell of a briquette at a sealed door
    ("목욕탕 보일러실 옆방에서 번개탄 냄새가 나고 문틈이 막혀 있어요 안에서 대답이 없어요", "suicide", "sealed_smoke"),
    ("하숙방에 들어가 보니 번개탄이랑 빈 약 봉투가 있고 동생이 안 깨어나요", "suicide", "briquette_and_no_waking"),
    # Kiwi reads 두통 as 두 + 통; a carbon monoxide alarm ringing is the fumes' sign
    ("찜질방 매점인데 손님들이 두통이랑 어지럼증을 호소하고 일산화탄소 경보기가 울려요", "gas", "carbon_monoxide"),
    # a towel on a heater that caught fire is a fire, not a room sealed with towels; a lighter lit where it caught
    ("헬스장 샤워실 히터에 수건을 올려놔서 불이 났어요 연기가 꽉 찼어요", "fire", "smoke_and_burning"),
    ("미용실인데 손님이 스프레이 옆에서 라이터를 켰는데 확 불이 붙었어요 의자가 타고 있어요", "fire", "flames"),
    # 불 켜도 되나요 asks about a light switch, no flame
    ("식당 가스 배관에서 냄새가 진동해요 이층까지 올라와요 불 켜도 되나요", "gas", "leak"),
    # went in, looked for everywhere, not there: gone, not shut in
    ("딸이 목욕탕 탈의실 간다고 들어갔는데 이십 분째 안 나와요 탈의실 다 뒤졌어요", "missing_child", "not_where_they_went"),
])
def test_round_35_readings(rules: EmergencyRules, text: str, kind: str, rule: str) -> None:
    _escalates_as(rules, text, kind)
    _grammar_escalates_by(rules, text, rule)


def test_a_fire_alarms_fault_is_no_fire_to_the_grammar(rules: EmergencyRules) -> None:
    # The grammar's reading only: the learned net alone still escalates this wording (seen in round 35, left).
    hit = _grammar_reads(rules, "기숙사 화재경보기가 또 오작동이에요 연기 하나 없는데 계속 울려요")
    assert hit is None or hit.kind != "fire", hit.name


@pytest.mark.parametrize("text", [
    "마사지실 손님이 방 안에서 문 잠그고 안 나온다고 했는데 알고 보니 자고 계셨어요",
])
def test_round_35_near_misses(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize(("text", "kind"), [
    # guards: a baby found not breathing is no child gone; "알고 보니" before worse news takes nothing back
    ("아기방에 들어가 봤는데 숨소리가 없어요 가슴이 안 움직여요", "medical"),
    ("할머니가 방에서 안 나오셔서 자는 줄 알았는데 알고 보니 자고 계신 게 아니라 의식이 없으세요", "medical"),
])
def test_round_35_guards(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


# Round 36 (held-out tables BR and BS), in words written for these tests.
@pytest.mark.parametrize(("text", "kind"), [
    # a screen followed by a live channel (게임 보이스챗, 게임 채팅) carries a real person now: no story on a screen
    ("게임 보이스챗으로 같이 하던 동생이 갑자기 숨을 못 쉬겠다더니 쿵 하고 조용해요", "medical"),
    ("게임 채팅에서 알게 된 사람 만나러 간 아들이 밤까지 안 들어오고 폰이 꺼져 있어요", "missing_child"),
    # 보고 있었는데, 게임하더니: what the person was doing when it began, as 보다가
    ("옆에서 유튜브 보고 있었는데 동생이 없어졌어요 아무리 찾아도 없어요", "missing_child"),
    ("딸이 게임하더니 갑자기 경련하고 눈이 돌아갔어요", "medical"),
    # 일부러 is no dialect 부러 (해부러 -> 해 버려): a car driven at someone on purpose is an attack
    ("주차장에서 어떤 남자가 일부러 차로 사람을 들이받고 또 후진해요", "crime"),
    ("아이가 새우 먹고 입술이 붓더니 숨을 쉭쉭 쉬어요", "medical"),
    ("대교 한가운데서 어떤 여자가 난간을 잡고 울고 있어요", "suicide"),
    ("캠핑카에서 히터 틀고 주무시던 엄마가 흔들어도 안 깨요", "gas"),
    ("차 시동 켜 놓고 자던 삼촌이 정신을 못 차려요", "gas"),
])
def test_round_36_readings(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize(("text", "rule"), [
    ("칠 개월 아기가 입술이 파래지고 몸이 흐물흐물해요", "infant_blue_and_floppy"),
    ("아빠가 가슴이 답답하다고 하더니 쿵 소리가 나고 반응이 없어요", "heart_signs"),
    ("유서 같은 카톡을 남기고 형이 수면제를 먹었대요", "note_and_dose"),
])
def test_round_36_grammar_reads(rules: EmergencyRules, text: str, rule: str) -> None:
    _grammar_escalates_by(rules, text, rule)


@pytest.mark.parametrize("text", [
    # nobody who is trapped; a car ridden, not a house burning
    "지하 주차장 엘리베이터 고장 민원인데요 지금 갇힌 사람은 없어요",
    "할머니 모시고 차 타고 가다가 집에 가스 불 끈 게 기억이 안 나요",
])
def test_round_36_near_misses(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


@pytest.mark.parametrize("text", [
    # words said as a prank, those who once tried as a group a service is for, a pet's fit, a found child
    "친구가 죽고 싶다고 장난으로 말해서 혼냈어요 상담 프로그램 있나요",
    "자살 시도자 지원 사업 신청은 어디서 해요",
    "우리 강아지가 산책하다 발작을 해서요 근처 동물병원 알려 주세요",
    "미아 방지 팔찌 나눠 주는 데 있나요 작년에 조카가 없어졌다가 찾았거든요",
])
def test_round_36_quiet_near_misses(rules: EmergencyRules, text: str) -> None:
    assert rules.classify(text) is None


@pytest.mark.parametrize(("text", "kind"), [
    # guards: someone who IS hurt; a person's fit told after a dog's bark; a story inside a game stays a story
    ("다친 사람이 있어요 피가 많이 나요", "medical"),
    ("강아지가 짖어서 나가 보니 할머니가 경련을 하고 계세요", "medical"),
])
def test_round_36_guards(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_round_36_a_game_scene_is_still_a_story(rules: EmergencyRules) -> None:
    _not_escalated(rules, "게임에서 캐릭터가 칼에 찔려 쓰러졌어요")


def test_nobody_who_negates_the_clause() -> None:
    assert next(m for m in analyse("지금 갇힌 사람은 없고요") if m.form == "갇히").negated
    assert not next(m for m in analyse("갇힌 사람이 있어요") if m.form == "갇히").negated
    # 돌았는데 없어: 는데 after a past ending, no relative clause
    assert not next(m for m in analyse("단지를 다 돌았는데 없어") if m.form == "돌").negated


# Round 37 (held-out tables BT and BU), in words written for these tests.
@pytest.mark.parametrize(("text", "kind"), [
    # a knife that slipped while slicing fish is an injury; glue swallowed; soup running from one side of the mouth
    ("엄마가 회 뜨다가 회칼에 손바닥을 찔렸어요 피가 바닥에 흥건해요", "medical"),
    ("딸이 유치원 가방에서 순간접착제를 꺼내 먹었어요", "medical"),
    ("할머니가 밥 드시다가 물이 입 한쪽으로 줄줄 흘러요 입이 비뚤어졌어요", "medical"),
    # shut in with a dose, and a farewell with pills taken in plenty: 109 with the ambulance
    ("아들이 방문 잠그고 수면제를 다 먹었다고 문자가 왔어요 문을 안 열어요", "suicide"),
    ("엄마가 그동안 고마웠다고 하더니 약을 잔뜩 드셨다고 해요", "suicide"),
])
def test_round_37_readings(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize("text", [
    # a report withdrawn (실종 신고 취소): the child is found
    "아까 한 실종 신고 취소하려고요 애 찾았어요",
])
def test_round_37_near_misses(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


def test_a_sound_heard_with_the_lights_off_is_no_fire(rules: EmergencyRules) -> None:
    # fire_broke_out is `ordered`: 불 then 나 (불이 나요), not 소리가 나요 불은 ...
    assert rules.classify("밖에서 무슨 소리가 나요 불은 다 꺼져 있고요 관리실 번호 알려 주세요") is None
    _escalates_as(rules, "부엌에서 불이 났어요 연기가 나요", "fire")


def test_what_was_going_on_meanwhile_is_read_as_during() -> None:
    # 점검하는 사이에, 수리하는 동안: a service that was only going on holds no rule back
    assert next(m for m in analyse("가스 점검하는 사이에 애가 약을 먹었어요") if m.form == "점검").during
    assert next(m for m in analyse("보일러 수리하는 동안 아기가 락스를 마셨어요") if m.form == "수리").during
    assert not next(m for m in analyse("가스 점검 언제 와요") if m.form == "점검").during


def test_an_ordered_rule_needs_its_concepts_in_order(tmp_path: Path) -> None:
    (tmp_path / "g.toml").write_text(
        '[concept]\nflame = ["불"]\nrise = ["나/VV"]\n'
        '[[rule]]\nkind = "fire"\nname = "broke_out"\nall = ["flame", "rise"]\nwindow = 1\nordered = true\n',
        encoding="utf-8")
    grammar = Grammar.load(tmp_path / "g.toml")
    assert grammar.classify("불이 났어요") is not None
    assert grammar.classify("소리가 나요 불은 꺼져 있어요") is None


# Round 38 (held-out tables BV and BW), in words written for these tests.
@pytest.mark.parametrize(("text", "kind"), [
    # a building come down is the backdrop: the danger named in the turn is the kind
    ("집 천장이 무너져서 이모 댁에 와 있는데 아버지가 갑자기 말이 어눌하고 한쪽 팔을 못 드세요", "medical"),
    ("무너진 축대 옆을 지나가는데 아저씨가 가슴을 움켜쥐고 쓰러지셨어요 숨을 안 쉬어요", "medical"),
    # charcoal behind a door nobody answers; a height and a will to follow the dead; the means taken along;
    # a dose with no will to go on
    ("모텔 옆방 문틈으로 숯 타는 냄새가 나는데 아무리 불러도 대답이 없어요", "suicide"),
    ("엄마 돌아가시고 동생이 육교 위에 서 있대요 엄마 따라가겠다고 문자 보냈어요", "suicide"),
    ("삼촌이 제초제 들고 나가셨는데 지금 전화가 꺼져 있어요", "suicide"),
    ("방금 약을 다 먹었어요 이제 더 못 하겠어요 아무것도", "suicide"),
    # a claimed inspection with no card and the door kicked; an intruder through a flooded window
    ("소방 점검 왔다는 사람이 신분증을 안 보여 주면서 문을 발로 차요", "crime"),
    ("반지하가 침수돼서 창문이 깨졌는데 그 창문으로 모르는 남자가 들어왔어요 저 혼자예요", "crime"),
    # a brick that fell and a swing pushed: no one struck anybody
    ("공사장에서 떨어진 벽돌에 아저씨가 머리를 맞고 쓰러졌어요 피가 나요", "medical"),
    ("할아버지가 손자 그네 밀어주시다가 가슴을 잡고 주저앉으셨어요", "medical"),
    # a city gas smell that comes up at once, and a hiss
    ("도로 공사장에서 도시가스 냄새가 확 나고 뭔가 새는 소리가 나요", "gas"),
])
def test_round_38_readings(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


@pytest.mark.parametrize(("text", "kind"), [
    # someone in what came down still wins over the injury named beside it
    ("건물이 무너졌는데 안에 사람이 있어요 피를 흘리고 있어요", "rescue"),
    ("남편이 재떨이로 제 이마를 때렸어요 피가 나요 아직 집에 있어요", "crime"),
])
def test_round_38_guards(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_a_collapse_said_near_a_person_is_tried_last(rules: EmergencyRules) -> None:
    assert rules.lemmas is not None
    assert rules.lemmas.rules[-1].name == "rescue.collapsed"
    assert not rules.lemmas.rules[-1].overrides


def test_pretend_play_is_no_seizure(rules: EmergencyRules) -> None:
    _not_escalated(rules, "애들이 좀비 놀이 한다고 눈 뒤집고 몸을 덜덜 떨어요 요즘 유행이래요")
    _not_escalated(rules, "애들이 유령 놀이 한다고 눈을 뒤집고 부들부들 떠는 흉내를 내요")
    _not_escalated(rules, "아이들이 지진 놀이 한다고 무너진다 하면서 소리 지르고 놀아요")


@pytest.mark.parametrize("text", [
    # 더는 못 하겠어요 is no will to go on without the pills taken; a sauna's kiln smokes by trade
    "지금 옥상에서 방수 작업하는데 더워서 더는 못 하겠어요 몇 시까지 해야 돼요",
    "찜질방 숯가마에서 연기가 좀 나는데 문 두드려도 직원이 대답이 없어요 영업시간 끝났나요",
])
def test_round_38_near_misses(rules: EmergencyRules, text: str) -> None:
    _not_escalated(rules, text)


# Round 39 (held-out tables BY and BZ), in words written for these tests.
@pytest.mark.parametrize(("text", "kind"), [
    # a burial asked for with the pills taken; a trip to church said beside a window forced is no leaving
    ("언니가 약 다 먹었다고 엄마 옆에 묻어 달라고 하고 전화를 끊었어요 말이 점점 느려졌어요", "suicide"),
    ("새벽에 모르는 남자가 베란다 창문을 뜯고 있어요 저 혼자예요 성당 간다고 일어났다가 봤어요", "crime"),
])
def test_round_39_readings(rules: EmergencyRules, text: str, kind: str) -> None:
    _escalates_as(rules, text, kind)


def test_thanks_and_sorry_then_silence_is_a_farewell(rules: EmergencyRules) -> None:
    _grammar_escalates_by(rules, "아들이 고맙고 미안했다고 메시지 보냈는데 지금 전화가 꺼져 있어요 집에도 없어요",
                          "farewell_then_silence")
