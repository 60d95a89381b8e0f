"""The grammar's readings of its compound verbs are kept across starts (bot/dialog/emergency_grammar.py
``StemCache``): a second start asks Kiwi about none of them and reads every turn the same."""

from __future__ import annotations

import json

import pytest

from bot.dialog import emergency_grammar as grammar_module
from bot.dialog.emergency import EmergencyRules

TURNS = ["할머니가 계단에서 굴러떨어졌어요", "아이가 없어졌어요 놀이터에서", "가스 냄새가 나요", "주차 문의인데요"]


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A process that has read no stems yet, its cache file in ``tmp_path``; counts Kiwi's stem readings."""
    path = tmp_path / "cache" / "emergency_stems.json"
    monkeypatch.setattr(grammar_module, "STEMS_PATH", path)
    asked: list[str] = []
    analyse = grammar_module.analyse

    def counted(text: str):
        asked.append(text)
        return analyse(text)

    monkeypatch.setattr(grammar_module, "analyse", counted)

    def start() -> EmergencyRules:
        monkeypatch.setattr(grammar_module, "_STEMS", {})
        asked.clear()
        return EmergencyRules.load()

    return path, asked, start


def _read(rules: EmergencyRules) -> list:
    return [rules.classify(t) for t in TURNS]


def test_a_second_start_reads_the_stems_from_the_cache_and_the_same_verdicts(fresh):
    path, asked, start = fresh
    first = start()
    analysed = len(asked)
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert analysed > 1000 and len(saved["stems"]) >= 1000
    assert saved["key"].startswith("kiwipiepy ")
    assert {k: tuple(map(tuple, v)) for k, v in saved["stems"].items()} == grammar_module._STEMS
    assert saved["stems"]["굴러떨어지"] == [["구르", "VV"], ["떨어지", "VV"]]  # a compound verb, as Kiwi reads it

    again = start()
    assert asked == []  # every word the grammar and the cue net read came from the file
    assert _read(again) == _read(first)


def test_a_cache_of_another_kiwi_or_code_or_a_damaged_one_is_read_again(fresh):
    path, asked, start = fresh
    start()
    analysed = len(asked)
    data = json.loads(path.read_text(encoding="utf-8"))
    wrong = {form: [["틀", "VV"], ["리", "VV"]] for form in data["stems"]}
    path.write_text(json.dumps({"key": "kiwipiepy 0.1 another", "stems": wrong}), encoding="utf-8")
    start()
    assert len(asked) == analysed  # another key: nothing taken from it
    assert json.loads(path.read_text(encoding="utf-8"))["key"] == data["key"]  # and written anew

    path.write_text('{"key": "' + data["key"] + '", "stems": [1, 2', encoding="utf-8")  # cut off
    start()
    assert len(asked) == analysed


def test_an_unwritable_cache_costs_nothing_but_the_time(fresh, monkeypatch, tmp_path):
    _, asked, start = fresh
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the folder would be")
    monkeypatch.setattr(grammar_module, "STEMS_PATH", blocked / "emergency_stems.json")
    rules = start()
    assert len(asked) > 1000 and rules.classify("가스 냄새가 나요") is not None
    assert list(tmp_path.glob("not-a-dir*")) == [blocked]
