"""Issue 44: the emergency recogniser's grammar over lemmas, its question cues, and the per-family evaluation
(bot/dialog/emergency_grammar.py, bot/dialog/emergency_cues.py, bot/data/emergency_grammar.toml,
bot/data/emergency_cues.toml, bot/dialog/emergency_eval.py, scripts/eval_emergency.py --summary)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.dialog.emergency import EmergencyDataError, EmergencyRules
from bot.dialog.emergency_eval import NONE, family_failures, family_scores, load_cases, mismatches
from bot.dialog.emergency_grammar import Grammar, analyse
from bot.dialog.policy import AskModel, DialogPolicy, Speak
from bot.dialog.state import DialogState
from tests.conftest import ROOT

TRAINING = ROOT / "bench" / "emergency_training.toml"


@pytest.fixture(scope="module")
def rules() -> EmergencyRules:
    return EmergencyRules.load()


@pytest.fixture(scope="module")
def regex_only() -> EmergencyRules:
    return EmergencyRules.load(nets=False)  # the recogniser before issue 44


# Described, not named: sentences written for this test (in no table), one or two a family.
FAMILIES = [
    ("stroke", "medical", "장인어른이 갑자기 발음이 뭉개지고 왼팔을 못 드세요"),
    ("stroke", "medical", "어머님이 말씀이 어눌해지시더니 오른쪽 다리를 질질 끄세요"),
    ("febrile seizure", "medical", "조카가 열이 펄펄 나는데 눈이 뒤집히고 몸을 떨어요"),
    ("heart", "medical", "사장님이 가슴을 움켜잡고 식은땀을 흘리세요"),
    ("choking", "medical", "할아버지가 떡이 목에 걸려서 얼굴이 새파래요"),
    ("poison", "medical", "네 살 아들이 화장실 세정제를 마셨어요"),
    ("poison", "medical", "할머니가 드링크 병에 든 제초제를 드셨어요"),
    ("unresponsive", "medical", "형이 아무리 깨워도 눈을 안 떠요"),
    ("door", "crime", "혼자 있는데 모르는 남자가 현관 손잡이를 계속 돌려요"),
    ("weapon", "crime", "마트에서 어떤 남자가 과도를 휘두르고 있어요"),
    ("strangled", "crime", "남편이 제 목을 졸랐어요 지금 현관 밖에 있어요"),
    ("screams", "crime", "싸우는 소리가 나고 비명이 들려요"),
    ("screams mid-request", "crime", "주차 딱지 문의하려는데 밖에서 누가 살려 달라고 소리쳐요"),
    ("child out of contact", "missing_child", "아들이 학원 끝나고 네 시간째 전화기가 꺼져 있어요"),
    ("elder wandering", "missing_child", "치매 있는 장모님이 새벽에 나가셔서 어디 계신지 몰라요"),
    ("farewell", "suicide", "오빠가 가족들한테 그동안 고마웠다고 문자 보내고 연락이 안 돼요"),
    ("charcoal", "suicide", "주차장에 세워 둔 차 안에서 번개탄을 피우고 사람이 누워 있어요"),
    ("fire", "fire", "거실 커튼이 활활 타요"),
    ("carbon monoxide", "gas", "연탄가스 때문인지 식구들이 머리가 깨질 것 같대요"),
    ("trapped", "rescue", "승강기가 멈췄는데 우리 딸이 안에 혼자 있어요"),
    ("dialect", "medical", "우리 막내가 세정제를 마셔부렀어라"),  # Kiwi reads it once 부렀어라 is rewritten
]

# The same words in harmless uses, also new.
NEAR_MISSES = [
    "말이 어눌하신 어르신도 무인 민원 발급기를 쓸 수 있나요",
    "아이 열이 삼십팔 도인데 해열제 어디서 받아요",
    "가슴이 답답해 죽겠어요 민원이 처리가 안 돼서요",
    "세정제 리필 매장 어디 있어요",
    "농약 살포 날짜 알려 주세요",
    "도어락 설치비 지원 사업 신청하려고요",
    "칼갈이 트럭 언제 와요",
    "작년에 누가 우리 집 문을 따려고 했었는데 방범창 지원 되나요",
    "계단이 미끄러워서 누가 굴러떨어질까 봐 걱정돼요",
    "드라마에서 누가 살려 달라고 소리치는 장면이 무서웠어요",
    "유서 쓰기 체험 프로그램 있나요",
    "캠핑장에서 숯불 피워도 돼요",
    "애가 휴대폰을 잃어버렸어요",
    "엘리베이터 점검은 언제 끝나요",
]


@pytest.mark.parametrize(("family", "kind", "text"), FAMILIES, ids=[f"{f}: {t}" for f, k, t in FAMILIES])
def test_the_grammar_escalates_a_described_emergency(rules, regex_only, family, kind, text) -> None:
    v = rules.classify(text)
    assert v is not None and v.kind.name == kind and v.sure, (family, v)
    assert Grammar.load().classify(text) is not None  # the grammar alone finds it


def test_the_regex_net_alone_missed_most_of_them(regex_only) -> None:
    # The recogniser before issue 44: most of these got no verdict or only a question.
    escalated = [t for _, k, t in FAMILIES if (v := regex_only.classify(t)) and v.sure and v.kind.name == k]
    assert len(escalated) <= len(FAMILIES) // 4, escalated


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_not_escalated(rules, text) -> None:
    v = rules.classify(text)
    assert v is None or not v.sure, (text, v.rule if v else None)
    assert Grammar.load().classify(text) is None


@pytest.mark.parametrize("text", [
    "당신 잘리게 해 줄게",  # a job lost, no limb: 잘리 needs a part of the body
    "아이가 연락이 안 돼서 걱정했는데 도서관에 있었대요",  # a worry that ended well
    "딸이 전화를 안 받아서 걱정했는데 친구 집에 있었대요",
])
def test_a_threat_to_a_job_and_a_worry_that_ended_well_are_quiet(rules, text) -> None:
    assert rules.classify(text) is None


def test_before_a_topic_change_the_turn_was_an_aside(rules) -> None:
    # [context].aside: only what follows "그건 그렇고" is read; a danger after it still escalates.
    assert rules.classify("영화에서 강도가 칼 들고 협박하던데 무섭더라고요 그건 그렇고 도서관 몇 시까지 해요") is None
    v = rules.classify("도서관 시간 물어보려다가요 그건 그렇고 지금 옆집에서 불길이 치솟아요")
    assert v is not None and v.kind.name == "fire" and v.sure


def test_a_grammar_rule_that_overrides_wins_over_the_regex_kind(rules) -> None:
    # The regex reads a fistful of pills as a suicide; the grammar read who took them: a toddler.
    v = rules.classify("두 살 아기가 할머니 수면제를 한 움큼 먹었어요")
    assert v is not None and v.kind.name == "medical" and v.sure, v
    v = rules.classify("수면제를 한 움큼 먹었어요")  # an adult: still the crisis line
    assert v is not None and v.kind.name == "suicide"


def test_what_was_being_done_is_no_topic_that_holds_a_rule_back(rules) -> None:
    # 뉴스 (the news) holds a rule back as a topic ("뉴스에서 봤는데"), not as what the father was doing.
    v = rules.classify("뉴스 보다가 아빠가 갑자기 말을 못 하시고 팔을 못 드세요")
    assert v is not None and v.kind.name == "medical" and v.sure, v
    # a cause that explains it away still does (고기 굽다가: the smoke was the cooking)
    v = rules.classify("고기 굽다가 연기 때문에 경보기가 울렸는데 바로 껐어요 과태료 나오나요")
    assert v is None or not v.sure, v


def test_a_finger_cut_off_still_escalates(rules) -> None:
    v = rules.classify("작업하다가 손가락이 잘렸어요")
    assert v is not None and v.kind.name == "medical" and v.sure


def test_the_endings_are_read() -> None:
    def show(text: str) -> list[str]:
        return [("!" if m.negated else "") + m.form + ("~" if m.unreal else "") for m in analyse(text)]

    assert "!쉬" in show("숨을 안 쉬어요") and "!쉬" in show("숨을 쉬지 못해요") and "!움직이" in show("팔이 움직이지 않아요")
    assert "드시" in show("농약을 잘못 드셨어요")  # 잘못: by mistake, not "could not"
    assert "나~" in show("불이 나면 어디로 가요") and "나~" in show("불이 났었던 집") and "넘어지~" in show("넘어졌을 때")
    assert "떨어지~" in show("굴러떨어질까 봐 걱정돼요") and "구르~" in show("굴러떨어질까 봐 걱정돼요")
    assert "쓰러지~" in show("쓰러지신 뒤로 요양보호사를 써요") and "먹~" in show("먹을 수 있는 세제")
    assert "!쉬" in show("숨을 쉴 수가 없어요")
    assert "마다" in show("윗집이 밤마다 싸워요") and "처럼" in show("유서처럼 긴 민원을 올렸어요")
    # The ending after a derivational 하 says how the root is meant (어눌해도: even if; 온전치 못하: not).
    assert "어눌~" in show("말이 어눌해도 은행 볼 수 있어요") and "!온전" in show("정신이 온전치 못하세요")


@pytest.mark.parametrize(("text", "kind"), [
    ("할아버지가 갑자기 헐떡이세요", "medical"), ("우리 애가 연락이 안 돼요", "missing_child"),
])
def test_one_danger_word_said_of_someone_gets_the_question(rules, regex_only, text, kind) -> None:
    assert regex_only.classify(text) is None  # the regex net said nothing: the model answered
    v = rules.classify(text)
    assert v is not None and v.kind.name == kind and not v.sure and v.rule.startswith("grammar:")


def test_the_decisive_fact_escalates_wherever_it_stands(rules) -> None:
    for text in ("번호 좀 알려 주세요 아 그리고 지금 애가 락스를 마셨어요",
                 "애가 락스를 마셨어요 근데 번호 좀 알려 주세요"):
        v = rules.classify(text)
        assert v is not None and v.kind.name == "medical" and v.sure, text


def test_the_question_cues_only_ask() -> None:
    text = "식당 앞에서 어떤 남자가 낫을 들고 손님들 쪽으로 걸어가요"  # no regex rule holds; it reads like an emergency
    assert EmergencyRules.load(cues=None, nets=False).classify(text) is None
    cues_only = EmergencyRules.load()
    cues_only.lemmas = None  # the question path alone after the regex net, whatever the grammar learns
    cues_only.learned = None  # ... and no second opinion that would escalate it
    v = cues_only.classify(text)
    assert v is not None and v.kind.name == "crime" and not v.sure and v.rule == "like:crime"


def test_a_turn_like_an_emergency_gets_the_question_not_the_model(rules) -> None:
    from bot.call.assets import DialogAssets
    from bot.config import load_config

    assets = DialogAssets.load(load_config())  # the shipped policy, with the shipped rules
    assert assets.emergency is not None
    assets.emergency.lemmas = None  # the question path answers, whatever the grammar learns
    assets.emergency.learned = None  # ... with no second opinion
    p = DialogPolicy(shortcuts=assets.shortcuts, canned=assets.canned, intake=assets.intake, can_transfer=True,
                     emergency=assets.emergency)
    said = p.decide("식당 앞에서 어떤 남자가 낫을 들고 손님들 쪽으로 걸어가요", DialogState())
    assert isinstance(said, Speak) and not isinstance(said, AskModel)
    assert said.sentences == (rules.kinds["crime"].question,) and said.escalation is None


def test_every_table_still_passes(rules) -> None:
    for table in ("emergency_table.toml", "emergency_families.toml"):  # each row's verdict, sure or unsure
        cases = load_cases(ROOT / "bench" / table, set(rules.kinds))
        assert mismatches(rules, cases) == [], table
    # The training table: every emergency escalated, no near miss escalated, few asked about.
    scores = family_scores(rules, load_cases(TRAINING, set(rules.kinds)))
    total = scores["all"]
    assert family_failures(scores) == [] and total.escalated == total.emergencies and total.held == total.near_misses
    assert total.quiet >= 0.9 * total.near_misses


def test_the_training_table_covers_the_issues_families() -> None:
    cases = load_cases(TRAINING)
    families = {c.family for c in cases}
    assert len(families) >= 12 and all(c.family for c in cases)
    assert sum(c.expect != NONE for c in cases) >= 150 and sum(c.expect == NONE for c in cases) >= 150


# --- per-family evaluation and --summary -------------------------------------------------------------

SMALL = """
[[case]]
text = "애가 락스를 마셨어요"
expect = "suicide"
family = "poison"
accept = ["medical"]

[[case]]
text = "할머니가 제초제를 드셨어요"
expect = "medical"
family = "poison"

[[case]]
text = "애가 비누를 만졌어요"
expect = "medical"
family = "poison"

[[case]]
text = "농약 살포 일정 알려 주세요"
expect = "none"
family = "poison"

[[case]]
text = "가스 냄새가 나는 것 같기도 하고 아닌 것 같기도 해요"
expect = "gas"
family = "smell"

[[case]]
text = "불이 났어요"
expect = "none"
family = "lights"
"""


def test_family_scores_count_accepted_kinds_and_questions(rules, tmp_path: Path) -> None:
    table = tmp_path / "small.toml"
    table.write_text(SMALL, encoding="utf-8")
    cases = load_cases(table, set(rules.kinds))
    assert cases[0].accept == ("medical",) and cases[0].family == "poison"
    scores = family_scores(rules, cases)
    poison, smell, lights, total = scores["poison"], scores["smell"], scores["lights"], scores["all"]
    assert (poison.emergencies, poison.escalated, poison.asked, poison.near_misses, poison.held) == (3, 2, 2, 1, 1)
    assert (smell.escalated, smell.asked) == (0, 1)  # hedged: asked
    assert (lights.held, lights.quiet) == (0, 0)  # a false escalation
    assert (total.emergencies, total.escalated, total.asked, total.near_misses) == (4, 2, 3, 2)
    failed = family_failures(scores)
    assert any(f.startswith("poison: escalated 67%") for f in failed) and any("near misses held" in f for f in failed)


def test_summary_prints_figures_never_rows(tmp_path: Path) -> None:
    table = tmp_path / "small.toml"
    table.write_text(SMALL, encoding="utf-8")
    script = [sys.executable, str(ROOT / "scripts" / "eval_emergency.py"), "--summary", "--table"]
    run = subprocess.run([*script, str(table)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout
    assert "poison" in run.stdout and "smell" in run.stdout and "cost per turn" in run.stdout
    for text in ("락스", "제초제", "비누", "농약", "같기도", "불이"):
        assert text not in run.stdout + run.stderr  # a held-out row is never shown
    good = tmp_path / "good.toml"
    good.write_text('[[case]]\ntext = "불이 났어요"\nexpect = "fire"\nfamily = "fire"\n\n'
                    '[[case]]\ntext = "가로등 불이 안 들어와요"\nexpect = "none"\nfamily = "fire"\n', encoding="utf-8")
    ok = subprocess.run([*script, str(good)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "all goals met" in ok.stdout, ok.stdout


@pytest.mark.parametrize(("row", "message"), [
    ('expect = "fire"\naccept = ["flood"]', "accept 'flood' is not a kind"),
    ('expect = "none"\naccept = ["fire"]', "a 'none' case accepts no kind"),
    ('expect = "fire"\nfamily = 3', "family"),
])
def test_a_bad_row_names_the_key(rules, tmp_path: Path, row: str, message: str) -> None:
    table = tmp_path / "bad.toml"
    table.write_text(f'[[case]]\ntext = "불이 났어요"\n{row}\n', encoding="utf-8")
    with pytest.raises(EmergencyDataError, match=message):
        load_cases(table, set(rules.kinds))


def test_a_bad_grammar_file_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "emergency.toml").write_text((ROOT / "bot/data/emergency.toml").read_text(encoding="utf-8"),
                                             encoding="utf-8")
    (tmp_path / "emergency_grammar.toml").write_text(
        '[concept]\nfire = ["불"]\n\n[[rule]]\nkind = "fire"\nname = "x"\nall = ["fire", "smoke"]\n', encoding="utf-8")
    with pytest.raises(EmergencyDataError, match=r"rule\[0\].all: concept 'smoke' is not defined"):
        EmergencyRules.load(tmp_path / "emergency.toml")
    (tmp_path / "emergency_grammar.toml").write_text(
        '[concept]\nfire = ["불"]\n\n[[rule]]\nkind = "flood"\nname = "x"\nall = ["fire"]\n', encoding="utf-8")
    with pytest.raises(EmergencyDataError, match="kind 'flood' is not a kind"):
        EmergencyRules.load(tmp_path / "emergency.toml")


def test_one_kiwi_per_process() -> None:
    from bot.core.kiwi import load_kiwi
    from bot.knowledge import text

    assert text.load_kiwi is load_kiwi and load_kiwi() is load_kiwi()


# --- the model's net (plumbing): a server URL, or the laptop model -------------------------------------


def test_summary_with_a_model_server_adds_the_model_column(tmp_path: Path) -> None:
    from bot.testing.fake_llm import FakeLLM
    from bot.testing.responders import default_responder

    def responder(body: dict) -> dict:
        return default_responder(body) | {"emergency": "medical" if "비누" in body["messages"][-1]["content"] else "none"}

    table = tmp_path / "small.toml"
    table.write_text(SMALL, encoding="utf-8")
    script = [sys.executable, str(ROOT / "scripts" / "eval_emergency.py"), "--summary", "--table", str(table)]
    with FakeLLM(responder=responder, first_token_delay=0.0, token_delay=0.0) as fake:
        run = subprocess.run([*script, "--llm", fake.base_url], capture_output=True, text=True, timeout=120)
    assert "+model" in run.stdout and "비누" not in run.stdout
    poison = next(line for line in run.stdout.splitlines() if line.startswith("poison"))
    assert poison.split()[-2:] == ["3/3", "100%"], poison  # the model caught the one the rules left


def test_the_local_model_not_installed_is_not_judged(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is not None:
        pytest.skip("llama-cpp-python is installed here: the script then starts the real child")
    table = tmp_path / "small.toml"
    table.write_text(SMALL, encoding="utf-8")
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "eval_emergency.py"), "--summary", "--table",
                          str(table), "--llm", "local"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "NOT JUDGED" in run.stderr and "scripts/setup.sh --local-llm" in run.stderr
