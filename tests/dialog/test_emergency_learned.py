"""Issue 44: the emergency recogniser's learned net (bot/dialog/emergency_learned.py,
bot/data/emergency_learned.npz, scripts/train_emergency_net.py): it asks, escalates alone only where
nearly certain, reads what the grammar reads, and its weights are the ones the script makes from
today's tables."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from bot.core.digest import sha256_file
from bot.core.kiwi import load_kiwi
from bot.dialog import emergency_learned
from bot.dialog.emergency import DEFAULT_PATH, EmergencyDataError, EmergencyRules
from bot.dialog.emergency_learned import LEARNED_PATH, NONE, Anchors, LearnedNet, LearnedNetError, features, train

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from train_emergency_net import ORDINARY, TRAINING  # noqa: E402

# Written for this test: a few turns per class, and fresh turns in other words of the same meanings.
ROWS = [
    ("아버지가 가슴을 움켜쥐고 식은땀을 흘리세요", "medical"),
    ("엄마가 가슴이 조인다고 하면서 숨을 헐떡여요", "medical"),
    ("할아버지 가슴이 아프다고 주저앉으셨어요 땀범벅이에요", "medical"),
    ("남편이 갑자기 가슴 통증으로 식은땀을 줄줄 흘려요", "medical"),
    ("아들이 학원 끝났는데 전화기가 꺼져 있고 안 와요", "missing_child"),
    ("딸이 학교 끝나고 연락이 안 되고 휴대폰이 꺼져 있어요", "missing_child"),
    ("초등학생 아이가 몇 시간째 연락이 안 돼요 전화기 꺼졌어요", "missing_child"),
    ("우리 애가 집에 안 왔는데 휴대폰도 꺼져 있어요", "missing_child"),
    ("음식물 쓰레기 수거 요일이 언제예요", NONE),
    ("주차 위반 과태료 납부는 어디서 해요", NONE),
    ("여권 재발급 서류가 뭐예요", NONE),
    ("가슴 검진 예약은 보건소에서 하나요", NONE),
    ("아이 학원 차량 시간이 바뀌었나요", NONE),
    ("휴대폰 요금 감면 신청하려고요", NONE),
    ("작년에 아버지가 가슴 수술하셨는데 의료비 지원 되나요", NONE),
    ("도서관 운영 시간 알려 주세요", NONE),
]
CLASSES = [NONE, "medical", "missing_child"]


def fit(rows=ROWS, **kw) -> LearnedNet:
    return train(rows, CLASSES, threshold=0.5, min_syllables=6, **kw)


def test_training_is_seeded_and_learns_meanings_from_rows():
    net = fit()
    assert np.array_equal(net.weights, fit().weights)  # the same rows give the same file
    assert net.classify("어머니가 가슴을 부여잡고 식은땀을 흘리고 계세요") == "medical"
    assert net.classify("아이가 학교 끝났는데 전화가 꺼져 있어요 연락이 안 돼요") == "missing_child"
    assert net.classify("쓰레기 수거 요일 알려 주세요") is None


def test_the_weights_are_the_mean_of_several_pass_orders():
    """One pass order's weights on a turn between two groups of rows follow the rows it met last (with L
    and M, one order asked a crime question on a worry that ended well, another held it): ``orders``
    fits the rows once per seeded order and averages the weights."""
    one, other, both = fit(seed=0), fit(seed=1), fit(seed=0, orders=2)
    assert not np.allclose(one.weights, other.weights)  # the order of the rows moves the weights
    assert np.allclose(both.weights, (one.weights + other.weights) / 2, atol=1e-6)
    assert np.array_equal(both.weights, fit(seed=0, orders=2).weights)  # still seeded
    assert both.classify("어머니가 가슴을 부여잡고 식은땀을 흘리고 계세요") == "medical"


def test_a_short_turn_is_left_to_the_rules():
    net = fit()
    assert net.classify("가슴 식은땀") is None  # under six syllables: too little to read


def test_weights_round_trip_and_bad_files_name_the_file(tmp_path):
    net = fit(sources=[("bench/x.toml", "ab" * 32)], confirm=0.75)
    path = tmp_path / "net.npz"
    net.save(path)
    back = LearnedNet.load(path, {"medical", "missing_child"})
    assert back.classes == net.classes and back.sources == net.sources and back.confirm == 0.75
    assert back.classify("어머니가 가슴을 부여잡고 식은땀을 흘리고 계세요") == "medical"
    with pytest.raises(LearnedNetError, match="are not kinds"):
        LearnedNet.load(path, {"medical"})
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip")
    with pytest.raises(LearnedNetError, match="broken.npz"):
        LearnedNet.load(broken)


# Round 22: collapses said with one verb, and ordinary turns; a fresh turn says it with a neighbour (주저앉다).
FALLS = [("할머니가 쓰러지셨어요 의식이 없어요", "medical"), ("아버지가 방에서 쓰러지셨어요 빨리 와 주세요", "medical"),
         ("남편이 화장실에서 쓰러졌어요 숨만 쉬어요", "medical"), ("엄마가 부엌에서 쓰러졌는데 안 일어나요", "medical"),
         ("음식물 쓰레기 수거 요일이 언제예요", NONE), ("주차 위반 과태료 납부는 어디서 해요", NONE),
         ("여권 재발급 서류가 뭐예요", NONE), ("도서관 운영 시간 알려 주세요", NONE), ("마당 공사 허가는 어디서 받아요", NONE),
         ("할아버지 기초연금 신청하려고요", NONE), ("경로당 점심 시간이 바뀌었나요", NONE), ("분리수거 날짜 알려 주세요", NONE)]


def falls_net(anchors: Anchors | None) -> LearnedNet:
    return train(FALLS, [NONE, "medical"], threshold=0.75, min_syllables=6, anchors=anchors)


def test_a_word_the_rows_never_had_reads_as_the_anchor_near_it():
    anchors = Anchors.of([text for text, kind in FALLS if kind != NONE], min_rows=2)
    assert anchors.names == ("쓰러지/VV",)  # the verb of every collapse; no other word stands in two
    fresh = "할아버지가 마당에서 털썩 주저앉으셨어요"
    assert "k:쓰러지/VV" in features(fresh, anchors)
    assert falls_net(anchors).classify(fresh) == "medical"
    assert falls_net(None).classify(fresh) is None  # its characters alone do not reach the question
    assert falls_net(anchors).classify("할아버지가 마당 공사 허가 받으셨어요") is None


def test_a_word_kiwi_does_not_know_is_no_anchor_and_has_no_neighbours():
    """Kiwi gives an unknown word its tag's empty placeholder id: every unknown word would sit at one place."""
    anchors = Anchors.of(["아이가 에피펜을 찾아요 쓰러졌어요"] * 3, min_rows=2)
    assert "에피펜/NNP" not in anchors.names and "쓰러지/VV" in anchors.names
    assert not {f for f in features("홈캠에 어버버 에피펜", anchors) if f.startswith("k:")}


def test_anchors_round_trip_and_a_net_of_another_kiwi_model_is_refused(tmp_path, monkeypatch):
    anchors = Anchors.of([text for text, kind in FALLS if kind != NONE], min_rows=2)
    path = tmp_path / "net.npz"
    falls_net(anchors).save(path)
    back = LearnedNet.load(path)
    assert back.anchors is not None and back.anchors.names == anchors.names and back.anchors.ids == anchors.ids
    assert back.anchors.table and back.anchors.near(load_kiwi().tokenize("주저앉았어요")[0].id) == ("k:쓰러지/VV",)
    with monkeypatch.context() as m:  # a call reads the table the file carries: no similarity is measured
        m.setattr(load_kiwi(), "morpheme_similarity", None)
        assert back.classify("할아버지가 마당에서 털썩 주저앉으셨어요") == "medical"
    falls_net(None).save(tmp_path / "plain.npz")
    assert LearnedNet.load(tmp_path / "plain.npz").anchors is None
    monkeypatch.setattr(emergency_learned, "kiwi_model", lambda: "0.99.0")  # another model's ids mean other words
    with pytest.raises(LearnedNetError, match=r"net.npz: made with kiwipiepy_model .* 0.99.0 is installed"):
        LearnedNet.load(path)


def test_a_broken_weights_file_beside_the_rules_stops_the_load(tmp_path):
    shutil.copy(DEFAULT_PATH, tmp_path / "emergency.toml")
    (tmp_path / LEARNED_PATH.name).write_bytes(b"\x00" * 10)
    with pytest.raises(EmergencyDataError, match=LEARNED_PATH.name):
        EmergencyRules.load(tmp_path / "emergency.toml")


def test_the_net_only_asks(tmp_path):
    """Beside the regex rules alone, a turn only a net without ``alone`` reads gets the kind's question,
    never the number."""
    shutil.copy(DEFAULT_PATH, tmp_path / "emergency.toml")
    fit().save(tmp_path / LEARNED_PATH.name)
    rules = EmergencyRules.load(tmp_path / "emergency.toml")
    text = "어머니가 가슴을 부여잡고 식은땀을 흘리고 계세요"
    verdict = rules.classify(text)
    assert verdict is not None and verdict.kind.name == "medical"
    assert not verdict.sure and verdict.rule == "learned:medical"
    assert EmergencyRules.load(tmp_path / "emergency.toml", nets=False).classify(text) is None


def test_the_shipped_weights_are_made_from_todays_tables():
    """A table edited since the weights were made: run scripts/train_emergency_net.py again."""
    net = LearnedNet.load(LEARNED_PATH)
    expected = {str(p.relative_to(ROOT)) for p in [*TRAINING, *ORDINARY]}
    assert {name for name, _ in net.sources} == expected
    stale = [name for name, digest in net.sources if sha256_file(ROOT / name) != digest]
    assert not stale, f"retrain: python scripts/train_emergency_net.py ({stale} changed)"
    assert not any("heldout_by" in n or "heldout_bz" in n for n in expected)  # the held-out tables of the round
    assert {"bench/emergency_heldout_bv.toml", "bench/emergency_heldout_bw.toml"} <= expected  # spent: training now
    assert net.anchors is not None and net.anchors.table  # round 22: it reads each word's nearest anchor


# Written for this test: what the cue net asks about, and a net that reads gas and fire in other words.
SECOND = [
    ("주방에서 가스 냄새가 진동하고 어지러워요", "gas"),
    ("보일러실에서 가스 새는 냄새가 나고 머리가 아파요", "gas"),
    ("가스 밸브 쪽에서 냄새가 심하고 속이 메스꺼워요", "gas"),
    ("부엌에 가스 냄새가 꽉 찼는데 머리가 띵해요", "gas"),
    ("베란다에서 시커먼 연기가 올라와요 타는 냄새가 나요", "fire"),
    ("옆 건물 창문에서 연기가 나고 타는 냄새가 심해요", "fire"),
    ("지하 주차장에 연기가 차고 타는 냄새가 나요", "fire"),
    *[(text, NONE) for text, kind in ROWS if kind == NONE],
    ("가스 요금 고지서가 안 왔어요", NONE),
    ("도시가스 점검 날짜가 언제예요", NONE),
]


def second_opinion(shipped: EmergencyRules) -> EmergencyRules:
    net = train(SECOND, [NONE, "gas", "fire"], threshold=0.6, min_syllables=6, confirm=0.6)
    return dataclasses.replace(shipped, learned=net)


def test_a_cue_question_the_net_reads_the_same_escalates():
    """Two nets that share no rule agree on the kind: the caller hears the number, not a question."""
    shipped = EmergencyRules.load()
    text = "가스레인지 쪽에서 냄새가 심하게 나고 머리가 지끈거려요"
    alone = dataclasses.replace(shipped, learned=None).classify(text)
    assert alone is not None and not alone.sure and alone.rule == "like:gas"
    verdict = second_opinion(shipped).classify(text)
    assert verdict is not None and verdict.sure and verdict.kind.name == "gas"
    assert verdict.rule == "like:gas+learned"


def test_the_second_opinion_never_upgrades_a_regex_question_a_hedge_or_another_kind():
    shipped = EmergencyRules.load()
    rules = second_opinion(shipped)
    vague = rules.classify("타는 냄새가 나요")  # the regex net's question for a vague turn stays one
    assert vague is not None and vague.kind.name == "fire" and not vague.sure
    hedged = rules.classify("가스레인지 쪽에서 냄새가 심하게 나고 머리가 지끈거리는 것 같기도 하고요")
    assert hedged is None or not hedged.sure
    other = train([(t, "fire" if k == "gas" else k) for t, k in SECOND], [NONE, "gas", "fire"], threshold=0.6,
                  min_syllables=6, confirm=0.6)  # a net that reads the gas turns as fire does not second a gas question
    verdict = dataclasses.replace(shipped, learned=other).classify("가스레인지 쪽에서 냄새가 심하게 나고 머리가 지끈거려요")
    assert verdict is not None and not verdict.sure and verdict.kind.name == "gas"


def test_a_cue_question_asked_despite_a_story_is_not_seconded():
    """The cue net read a drama and asked anyway (its own cues outweighed the story): a net that reads
    the words as a crime does not turn that doubt into a dispatcher."""
    shipped = EmergencyRules.load()
    screams = [("밖에서 누가 살려 달라고 소리쳐요", "crime"), ("골목에서 여자가 살려 달라고 비명을 질러요", "crime"),
               ("옆집에서 살려 달라는 소리가 계속 나요", "crime"), *[(t, k) for t, k in SECOND if k == NONE]]
    net = train(screams, [NONE, "crime"], threshold=0.6, min_syllables=6, confirm=0.6)
    text = "드라마에서 누가 살려 달라고 소리치는 장면이 무서웠어요"
    said = shipped.standard(text)
    assert shipped.question_cues is not None and shipped.question_cues.doubted(said, "crime")
    assert net.confirms(said, "crime")
    verdict = dataclasses.replace(shipped, learned=net).classify(text)
    assert verdict is None or not verdict.sure


# Round 10: a near miss of table P (read once, training now) that the grammar escalated as a rescue.
STUCK_IN_TRAFFIC = "남편이 출근길에 차가 막혀서 도로에 갇혔다고 하네요 그 구간 공사 언제 끝나요"


def test_an_escalation_the_net_reads_as_an_ordinary_turn_is_asked_instead():
    """The net's doubt: the caller hears the kind's question, not the number; the escalation stands
    without the net, with a net that doubts nothing, and where the turn is too short to judge."""
    shipped = EmergencyRules.load()
    without = dataclasses.replace(shipped, learned=None).classify(STUCK_IN_TRAFFIC)
    assert without is not None and without.sure and without.kind.name == "rescue"
    verdict = shipped.classify(STUCK_IN_TRAFFIC)
    assert verdict is not None and not verdict.sure and verdict.kind.name == "rescue"
    assert verdict.rule == f"{without.rule}-doubted"
    assert shipped.learned is not None and shipped.learned.doubt == pytest.approx(0.999)
    trusting = dataclasses.replace(shipped, learned=dataclasses.replace(shipped.learned, doubt=None))
    assert trusting.classify(STUCK_IN_TRAFFIC) == without
    short = dataclasses.replace(shipped, learned=dataclasses.replace(shipped.learned, doubt_syllables=40))
    assert short.classify(STUCK_IN_TRAFFIC) == without


@pytest.mark.parametrize("text", [
    "119 불러 주세요 사람이 다쳤어요", "미아 신고하려고요", "여보세요 여보세요 사람이 쓰러졌어요 쓰러졌어요",
    # Danger told after an ordinary request: the shortest wording the issue names, and a longer one.
    "쓰레기 수거 요일 물어보려고 했는데요 지금 밖에서 살려 달라는 비명이 들려요",
    "대형폐기물 신청이요 아 밖에 사람 찔렸어요 쓰러졌어요",
])
def test_plain_emergencies_are_never_doubted(text):
    verdict = EmergencyRules.load().classify(text)
    assert verdict is not None and verdict.sure, (text, verdict and verdict.rule)


def test_the_doubt_round_trips_and_a_net_that_never_doubts_says_so(tmp_path):
    net = fit(doubt=0.97)
    net.save(tmp_path / "net.npz")
    assert LearnedNet.load(tmp_path / "net.npz").doubt == pytest.approx(0.97)
    fit().save(tmp_path / "never.npz")
    never = LearnedNet.load(tmp_path / "never.npz")
    assert never.doubt is None and not never.doubts("작년에 아버지가 가슴 수술하셨는데 의료비 지원 되나요 서류가 뭐예요")


def test_the_doubt_never_reaches_a_danger_told_after_the_talk_turns():
    """Four folds of whole tables: the 3 emergencies the doubt would have asked about at 0.999 were all
    told after an ordinary request, past a turn of the talk (근데, 근디, 지금); the request's words outweigh
    the danger's in a bag of words. Even a net that doubts every long turn leaves those escalated; a danger
    said BEFORE the talk turns to a request is still doubted (round 12)."""
    shipped = EmergencyRules.load()
    assert shipped.learned is not None
    doubting = dataclasses.replace(shipped, learned=dataclasses.replace(shipped.learned, doubt=0.0))
    for text in ("아니 우리 아파트 앞 불법 주차 좀 어떻게 해 주세요 매일 그래요 근데 지금 그 차 주인이 경비 아저씨 "
                 "멱살 잡고 벽에 밀어붙이고 있어요 아저씨 코피 나요",
                 "공영주차장 요금 문의 마씸 근디 주차장서 사람이 막 두들겨 맞암수다 피 남수다"):
        verdict = doubting.classify(text)
        assert verdict is not None and verdict.sure and verdict.kind.name == "crime", (text, verdict and verdict.rule)
    for text in (STUCK_IN_TRAFFIC,  # no turn of the talk: asked
                 "여보세요 우리 아이가 두 살 때 열경기를 한 번 했었는데요 지금은 여섯 살이고 괜찮아요 근데 유치원 서류에 "
                 "병력 적는 칸이 있어서 어떻게 써야 하나 해서요"):  # table S: the danger before the turn
        verdict = doubting.classify(text)
        assert verdict is not None and not verdict.sure and verdict.rule.endswith("-doubted"), (text, verdict)
        assert dataclasses.replace(shipped, learned=None).classify(text).sure  # the hand-written nets escalate it


def test_a_long_turn_only_the_net_reads_escalates_where_it_is_nearly_certain(tmp_path):
    """Round 15: no hand-written net reads the turn and the net puts ``alone`` on a kind: the number, not
    the question (rule ``learned:<kind>+alone``). A hedged turn, a turn under ``alone_syllables`` and a
    net without ``alone`` ask."""
    shutil.copy(DEFAULT_PATH, tmp_path / "emergency.toml")  # the regex net only: it reads none of these
    text = "어머니가 가슴을 부여잡고 식은땀을 흘리고 계세요"  # 21 syllables
    net = fit(alone=0.5, alone_syllables=20)
    assert net.scores(text)[net.classes.index("medical")] >= 0.5
    net.save(tmp_path / LEARNED_PATH.name)
    rules = EmergencyRules.load(tmp_path / "emergency.toml")
    assert rules.learned is not None and rules.learned.alone == pytest.approx(0.5)
    assert rules.learned.alone_syllables == 20
    verdict = rules.classify(text)
    assert verdict is not None and verdict.sure and verdict.kind.name == "medical"
    assert verdict.rule == "learned:medical+alone"

    hedged = rules.classify(text + " 그런 것 같기도 하고요")
    assert hedged is not None and not hedged.sure and hedged.rule == "learned:medical"
    longer = dataclasses.replace(rules, learned=dataclasses.replace(rules.learned, alone_syllables=30))
    short = longer.classify(text)
    assert short is not None and not short.sure and short.rule == "learned:medical"
    never = dataclasses.replace(rules, learned=dataclasses.replace(rules.learned, alone=None))
    assert never.classify(text).rule == "learned:medical" and not never.classify(text).sure


def test_the_shipped_net_escalates_a_described_danger_the_hand_written_nets_miss():
    """A missing elder told by what she does and left behind (table AA, round 14), never by the words
    for it: the hand-written nets read nothing; the shipped net escalates alone."""
    text = "할머니가 시장 가셨다가 다섯 시간째 연락이 없어요 요즘 집 가는 길도 헷갈려 하시는데 배회감지기는 충전한다고 빼놓으셨고요"
    shipped = EmergencyRules.load()
    assert shipped.learned is not None
    assert shipped.learned.alone == pytest.approx(0.9999) and shipped.learned.alone_syllables == 20
    assert dataclasses.replace(shipped, learned=None).classify(text) is None
    verdict = shipped.classify(text)
    assert verdict is not None and verdict.sure and verdict.rule == "learned:missing_child+alone"



def test_the_curve_reads_a_fresh_table_per_size_and_refuses_one_the_net_was_trained_on(tmp_path, capsys):
    """--curve: a table in TRAINING read as fresh would flatter the net, so it cannot judge (exit 2)."""
    import train_emergency_net

    rules = EmergencyRules.load(learned_net=False)
    assert train_emergency_net.curve(rules, list(rules.kinds), [], [0], [TRAINING[-1]]) == 2
    assert "cannot judge" in capsys.readouterr().out
    assert train_emergency_net.curve(rules, list(rules.kinds), [], [len(TRAINING) + 1], [tmp_path / "x.toml"]) == 2
    capsys.readouterr()
    table = tmp_path / "fresh.toml"
    table.write_text('[[case]]\ntext = "불이 났어요 연기가 자욱해요"\nexpect = "fire"\nfamily = "fire_and_gas"\n\n'
                     '[[case]]\ntext = "불고기 맛집 좀 알려 주세요"\nexpect = "none"\nfamily = "fire_and_gas"\n',
                     encoding="utf-8")
    assert train_emergency_net.curve(rules, list(rules.kinds), [], [0], [table]) == 0
    assert capsys.readouterr().out.strip() == "K=0   fresh.toml: 1 1/1 100% 1/1 100% 1 1/1 100% 1/1 100%"
