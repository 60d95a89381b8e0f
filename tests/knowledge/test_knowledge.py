"""The FAQ / department lookup: data file checks, retrieval on the shipped data, directory replies."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.dialog.domain import load_domain
from bot.knowledge import (
    Department,
    Knowledge,
    KnowledgeDataError,
    KnowledgeOptions,
    directory_reply,
    load_directory,
    load_faq,
    render_facts,
)
from bot.knowledge.evaluate import evaluate, load_eval_set
from tests.conftest import ROOT

FAQ = ROOT / "bot/data/faq.toml"
DIRECTORY = ROOT / "bot/data/directory.toml"
EVAL = ROOT / "bench/faq_eval.toml"


@pytest.fixture(scope="module")
def knowledge() -> Knowledge:
    # Module scope: the default (hybrid) retriever loads Kiwi's model, about 1.5 s.
    return Knowledge.load(FAQ, DIRECTORY)


def ids(found) -> list[str]:
    return [entry.id for entry, _ in found.hits]


# --- the shipped data -------------------------------------------------------------------------


def test_shipped_files_load_with_enough_entries():
    faq = load_faq(FAQ)
    directory = load_directory(DIRECTORY)
    assert len(faq) >= 60
    assert 15 <= len(directory.departments) <= 20
    assert all(entry.keywords and entry.answer for entry in faq)


def test_faq_categories_are_domain_categories():
    categories = load_domain(ROOT / "bot/data/domain.toml").category_names
    load_faq(FAQ, categories)  # raises on an unknown category


# --- validation: every error names the file and the line --------------------------------------

GOOD_FAQ = """\
# comment
[[faq]]
id = "faq-doc-001"
category = "certificates"
question = "등본은 어디서 떼나요?"
keywords = ["등본"]
answer = "행정복지센터에서 발급합니다."

[[faq]]
id = "faq-doc-002"
category = "certificates"
question = "초본은요?"
keywords = ["초본"]
answer = "초본도 행정복지센터에서 발급합니다."
"""

GOOD_DIRECTORY = """\
[ask]
words = ["전화번호"]

[[department]]
id = "dept-clean"
name = "청소행정과"
aliases = ["청소과"]
phone = "031-120-2310"
hours = "평일 오전 9시부터 오후 6시까지"
handles = ["쓰레기"]
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(loader, path: Path, *args) -> KnowledgeDataError:
    with pytest.raises(KnowledgeDataError) as info:
        loader(path, *args)
    return info.value


def test_good_small_files_load(tmp_path):
    assert [e.id for e in load_faq(write(tmp_path, "faq.toml", GOOD_FAQ))] == ["faq-doc-001", "faq-doc-002"]
    assert load_directory(write(tmp_path, "dir.toml", GOOD_DIRECTORY)).departments[0].phone == "031-120-2310"


def test_invalid_toml_names_file_and_line(tmp_path):
    path = write(tmp_path, "faq.toml", GOOD_FAQ.replace('question = "초본은요?"', 'question = "초본은요?'))
    error = load_error(load_faq, path)
    assert str(error).startswith(f"{path}:12: invalid TOML")
    assert isinstance(error, ValueError)


def test_duplicate_id_points_at_the_second_id_line(tmp_path):
    path = write(tmp_path, "faq.toml", GOOD_FAQ.replace("faq-doc-002", "faq-doc-001"))
    error = load_error(load_faq, path)
    assert str(error) == f"{path}:10: duplicate id 'faq-doc-001' (first used on line 3)"
    assert (error.path, error.line) == (path, 10)


def test_missing_field_points_at_the_entry(tmp_path):
    path = write(tmp_path, "faq.toml", GOOD_FAQ.replace('answer = "초본도 행정복지센터에서 발급합니다."\n', ""))
    assert str(load_error(load_faq, path)) == f"{path}:9: entry is missing 'answer'"


def test_unknown_key_points_at_its_line(tmp_path):
    path = write(tmp_path, "faq.toml", GOOD_FAQ.replace('keywords = ["초본"]', 'keyword = ["초본"]'))
    assert str(load_error(load_faq, path)).startswith(f"{path}:13: unknown key 'keyword'")


def test_wrong_type_and_long_answer_point_at_their_lines(tmp_path):
    path = write(tmp_path, "faq.toml", GOOD_FAQ.replace('keywords = ["초본"]', 'keywords = "초본"'))
    assert str(load_error(load_faq, path)).startswith(f"{path}:13: 'keywords' must be a list")
    path = write(tmp_path, "faq.toml", GOOD_FAQ.replace("초본도 행정복지센터에서", "초본도 " * 80))
    assert str(load_error(load_faq, path)).startswith(f"{path}:14: answer of faq-doc-002 is")


def test_unknown_category_is_rejected_when_categories_are_given(tmp_path):
    path = write(tmp_path, "faq.toml", GOOD_FAQ.replace('category = "certificates"\nquestion = "초본', 'category = "paperwork"\nquestion = "초본'))
    assert str(load_error(load_faq, path, ["certificates"])) == f"{path}:11: unknown category 'paperwork' in faq-doc-002"


def test_bad_phone_points_at_its_line(tmp_path):
    path = write(tmp_path, "dir.toml", GOOD_DIRECTORY.replace("031-120-2310", "031 120 2310"))
    assert str(load_error(load_directory, path)).startswith(f"{path}:8: phone '031 120 2310' of dept-clean")


def test_one_name_for_two_departments_is_rejected(tmp_path):
    second = GOOD_DIRECTORY.split("\n", 3)[3].replace("dept-clean", "dept-env").replace('name = "청소행정과"', 'name = "환경과"')
    path = write(tmp_path, "dir.toml", GOOD_DIRECTORY + "\n" + second)
    assert str(load_error(load_directory, path)) == f"{path}:15: '청소과' of dept-env is already a name of dept-clean"


def test_missing_file_and_empty_file(tmp_path):
    assert str(load_error(load_faq, tmp_path / "nope.toml")) == f"{tmp_path / 'nope.toml'}:0: file not found"
    assert str(load_error(load_faq, write(tmp_path, "faq.toml", "# nothing\n"))).endswith(":1: no [[faq]] entries")


# --- lookup on the shipped data ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("주민등록 등본 어디서 떼요", "faq-doc-001"),
        ("음 저기 대형 폐기물 버릴려면 어떻게 해요?", "faq-waste-001"),
        ("수도세가 너무 많이 나왔는데요", "faq-water-002"),
        ("거주자 우선주차 신청", "faq-park-003"),
        ("기초 연금 신청 하려구요", "faq-welfare-002"),
    ],
)
def test_lookup_finds_the_entry_first(knowledge, text, expected):
    found = knowledge.lookup(text)
    assert ids(found)[0] == expected
    assert len(found.hits) <= 3 and found.ms >= 0


@pytest.mark.parametrize("text", ["오늘 날씨 어때요", "로또 당첨금 어디서 받아요", "집 근처 맛집 추천 해주세요"])
def test_questions_the_data_does_not_answer_get_no_hits(knowledge, text):
    found = knowledge.lookup(text)
    assert found.hits == []
    assert found.directory_hit is None
    assert render_facts(found.hits) == ""


def test_the_call_topic_breaks_a_tie_on_a_follow_up(knowledge):
    # "수수료는 얼마예요" alone fits the document and the bulky-waste fee entries alike.
    assert ids(knowledge.lookup("수수료는 얼마예요", slots={"category": "waste", "location": None}))[0] == "faq-waste-002"
    assert ids(knowledge.lookup("수수료는 얼마예요", slots={"category": "certificates"}))[0] == "faq-doc-002"


def test_render_facts_gives_id_and_answer_per_line(knowledge):
    found = knowledge.lookup("인감증명서 대리 발급", k=2)
    lines = render_facts(found.hits).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[faq-doc-006] 인감증명서는 본인이 직접 쓴 위임장")


# --- directory ---------------------------------------------------------------------------------


def test_directory_hit_for_a_department_phone_number(knowledge):
    found = knowledge.lookup("청소과 전화번호 알려주세요")
    assert isinstance(found.directory_hit, Department)
    assert found.directory_hit.id == "dept-clean"
    assert directory_reply(found.directory_hit) == (
        "청소행정과 전화번호는 031-120-2310입니다. 운영 시간은 평일 오전 9시부터 오후 6시까지입니다."
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("수도 사업소 번호 좀요", "dept-water"),  # spacing error inside the name
        ("세무과는요 연락처가", "dept-tax"),  # name with a particle
        ("쓰레기 담당하는 부서 전화번호", "dept-clean"),  # no name: the best hit is the department
    ],
)
def test_directory_hit_variants(knowledge, text, expected):
    assert knowledge.lookup(text).directory_hit.id == expected


@pytest.mark.parametrize(
    "text",
    [
        "청소과에서 대형폐기물 가져가나요",  # names a department but asks no number or hours
        "보건소랑 세무과 번호",  # two departments: no single answer
        "주민등록번호 바꾸고 싶어요",  # "번호" but no department
    ],
)
def test_no_directory_hit(knowledge, text):
    assert knowledge.lookup(text).directory_hit is None


# --- the evaluation set ------------------------------------------------------------------------


def test_evaluation_targets_are_met(knowledge):
    questions = load_eval_set(EVAL)
    assert len(questions) >= 80 and sum(not q.answerable for q in questions) >= 12
    result = evaluate(knowledge, questions)
    assert result.hit3_rate >= 0.95, result.misses
    assert result.hit1_rate >= 0.85, result.misses


def test_char_ngram_retriever_needs_no_model():
    # The fallback retriever: same API, no Kiwi.
    knowledge = Knowledge.load(FAQ, DIRECTORY, KnowledgeOptions(retriever="char-ngram"))
    assert ids(knowledge.lookup("종량제 봉투 어디서 사요"))[0] == "faq-waste-005"
    with pytest.raises(ValueError, match="unknown retriever"):
        Knowledge.load(FAQ, DIRECTORY, KnowledgeOptions(retriever="bm42"))
