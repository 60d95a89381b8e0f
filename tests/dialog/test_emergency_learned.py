"""Issue 44: the emergency recogniser's learned question net (bot/dialog/emergency_learned.py,
bot/data/emergency_learned.npz, scripts/train_emergency_net.py): it only ever asks, it reads what the
grammar reads, and its weights are the ones the script makes from today's tables."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from bot.core.digest import sha256_file
from bot.dialog.emergency import DEFAULT_PATH, EmergencyDataError, EmergencyRules
from bot.dialog.emergency_learned import LEARNED_PATH, NONE, LearnedNet, LearnedNetError, train

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


def test_a_short_turn_is_left_to_the_rules():
    net = fit()
    assert net.classify("가슴 식은땀") is None  # under six syllables: too little to read


def test_weights_round_trip_and_bad_files_name_the_file(tmp_path):
    net = fit(sources=[("bench/x.toml", "ab" * 32)])
    path = tmp_path / "net.npz"
    net.save(path)
    back = LearnedNet.load(path, {"medical", "missing_child"})
    assert back.classes == net.classes and back.sources == net.sources
    assert back.classify("어머니가 가슴을 부여잡고 식은땀을 흘리고 계세요") == "medical"
    with pytest.raises(LearnedNetError, match="are not kinds"):
        LearnedNet.load(path, {"medical"})
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip")
    with pytest.raises(LearnedNetError, match="broken.npz"):
        LearnedNet.load(broken)


def test_a_broken_weights_file_beside_the_rules_stops_the_load(tmp_path):
    shutil.copy(DEFAULT_PATH, tmp_path / "emergency.toml")
    (tmp_path / LEARNED_PATH.name).write_bytes(b"\x00" * 10)
    with pytest.raises(EmergencyDataError, match=LEARNED_PATH.name):
        EmergencyRules.load(tmp_path / "emergency.toml")


def test_the_net_only_asks(tmp_path):
    """Beside the regex rules alone, a turn only the net reads gets the kind's question, never the number."""
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
    assert not any("heldout_f" in n or "heldout_g" in n for n in expected)  # read once, never trained on
