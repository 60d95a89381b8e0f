"""`run_bot.py eval`: the shipped turn set, scoring through the real dialog, refusals, the judge on the same server."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from bot.config import load_config
from bot.dialog.domain import load_domain
from bot.dialog.shortcuts import load_shortcuts
from bot.testing.fake_llm import FakeLLM
from bot.testing.keyword_llm import classify, keyword_responder
from bot.testing.process import free_port
from bot.testing.responders import DEFAULT_TURN, schema_of
from bot.tools import eval as ev
from tests.conftest import ROOT


def _args(**kw) -> argparse.Namespace:
    base = {"turns": None, "judge": False, "audio": False, "tts_samples": 0, "fake_llm": False, "json": None,
            "limit": None}  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


def _domain():
    cfg = load_config()
    return cfg, load_domain(cfg.path(cfg.llm.domain_file))


def test_the_shipped_turn_set_has_60_labelled_korean_turns_whose_shortcut_routes_are_right():
    cfg, domain = _domain()
    dialogs = ev.load_turns(ev.DEFAULT_TURNS, domain)
    turns = [t for d in dialogs for t in d]
    assert len(turns) >= 60 and len(dialogs) >= 12
    assert all(t.intent for t in turns)
    assert sum(1 for t in turns if t.slots) >= 15
    shortcuts = load_shortcuts(cfg.path(cfg.llm.shortcuts_file), domain)
    for t in turns:
        hit = shortcuts.match(t.text)
        assert (hit is not None) == (t.route == "shortcut"), t.text
        if hit is not None:
            assert hit.intent == t.intent, t.text


def test_a_bad_turn_file_names_the_entry(tmp_path):
    _, domain = _domain()
    path = tmp_path / "t.toml"
    path.write_text('[[dialogs]]\nid = "x"\nturns = [{ text = "안녕", intent = "complain" }]\n')
    with pytest.raises(ev.EvalError, match=r"t.toml:3: dialogs\[0\].turns\[0\].intent: 'complain' is not one of .* \(dialog x turn 1\)"):
        ev.load_turns(path, domain)


def test_slot_matching_and_character_error_rate():
    assert ev.slot_ok("시청역", "시청역 3번 출구 앞") and not ev.slot_ok("시청역", None)
    assert ev.slot_ok("", None) and not ev.slot_ok("", "어제")
    assert ev.cer("세 시 삼십 분", "세시 삼십분.") == 0.0
    assert ev.cer("가나다라", "가나다") == pytest.approx(0.25)


def test_keyword_responder_answers_turns_and_judge_requests():
    assert classify("불법 주차 신고하려고요")["category"] == "illegal_parking"
    turn = keyword_responder({"messages": [{"role": "user", "content": "가로등이 꺼졌어요"},
                                           {"role": "assistant", "content": "위치를 말씀해 주세요."},
                                           {"role": "user", "content": "행복아파트 정문 앞이요"}],
                              "response_format": {"type": "json_schema", "json_schema": {"schema": {
                                  "properties": {k: {} for k in DEFAULT_TURN}}}}})  # fmt: skip
    assert turn["intent"] == "report_problem" and turn["category"] == "street_lights"
    assert "행복아파트" in turn["location"] and list(turn) == list(DEFAULT_TURN)
    judged = keyword_responder({"response_format": {"type": "json_object", "schema": ev.JUDGE_SCHEMA}})
    assert judged["score"] == 4


def test_eval_against_the_fake_scores_every_turn_and_the_judge_asks_the_same_server(tmp_path, capsys):
    cfg = load_config()
    out_json = tmp_path / "eval.json"
    with FakeLLM(model=cfg.llm.model, responder=keyword_responder, first_token_delay=0.01, token_delay=0.001) as fake:
        cfg = load_config(overrides=[f"llm.base_url='{fake.base_url}'"])
        rc = ev.run_eval(cfg, _args(judge=True, limit=6, json=str(out_json)))
        requests = list(fake.requests)
    report = capsys.readouterr().out
    assert rc == 0, report
    data = json.loads(out_json.read_text())
    turns = data["turns"]
    model_turns = [t for t in turns if t["route"] == "llm"]
    judge_requests = [r for r in requests if "score" in (schema_of(r) or {}).get("properties", {})]
    dialog_requests = [r for r in requests if "reply" in (schema_of(r) or {}).get("properties", {})]
    # Every judgement went to the configured server with the configured model, one per model answer; no other engine.
    assert len(judge_requests) == len(model_turns) > 10
    assert all(r["model"] == cfg.llm.model for r in judge_requests)
    assert len(dialog_requests) == len(model_turns) + 1  # + the reachability probe
    assert all(t["judge_score"] == 4 for t in model_turns)
    for needle in ("intent accuracy", "category accuracy", "slot accuracy", "shortcut hit rate",
                   "LLM calls per turn", "reply length (chars)", "judge (same server)  mean 4.00/5"):  # fmt: skip
        assert needle in report
    assert data["summary"]["failures"] == 0 and data["summary"]["intent"][1] == len(turns)


def test_empty_cut_off_and_schema_invalid_answers_are_failures_never_passes(tmp_path, capsys):
    turns = tmp_path / "t.toml"
    lines = ["길이 파였어요", "시청 앞이요", "쓰레기가 안 치워졌어요", "은행동이요", "가로등이 꺼졌어요", "공원 앞이요",
             "소음이 심해요"]  # fmt: skip
    turns.write_text('[[dialogs]]\nid = "faults"\nturns = [\n' + "".join(
        f'  {{ text = "{t}", intent = "report_problem" }},\n' for t in lines) + "]\n")
    ok = dict(DEFAULT_TURN)
    cfg = load_config()
    with FakeLLM(model=cfg.llm.model, first_token_delay=0.01, token_delay=0.001) as fake:
        fake.script(ok)  # the probe
        fake.script(ok, mode="length")  # cut off
        fake.script(ok)
        fake.script(mode="invalid_json")
        fake.script(ok)
        fake.script({**ok, "reply": "네. " + "가" * 200})  # longer than the schema's maxLength
        fake.script({**ok, "reply": " "})  # blank
        fake.script({**ok, "reply": "네, 접수할게요."})
        cfg = load_config(overrides=[f"llm.base_url='{fake.base_url}'"])
        rc = ev.run_eval(cfg, _args(turns=str(turns), json=str(tmp_path / "e.json")))
    report = capsys.readouterr().out
    data = json.loads((tmp_path / "e.json").read_text())
    causes = [t["failure"] for t in data["turns"]]
    assert rc == 1
    assert causes[0].startswith("cut_off") and causes[2].startswith("invalid_json")
    assert causes[4].startswith("schema") and "more than 160" in causes[4]
    assert causes[5].startswith("empty_reply")
    assert [c is None for c in causes] == [False, True, False, True, False, False, True]
    assert data["summary"]["intent"] == [3, 7]  # failures count as wrong
    assert "failed (not scored, counted wrong)  4" in report


def test_eval_refuses_without_a_server(capsys):
    cfg = load_config(overrides=[f"llm.base_url='http://127.0.0.1:{free_port()}/v1'"])
    assert ev.run_eval(cfg, _args()) == 1
    out = capsys.readouterr().out
    assert "NO LLM SERVER" in out and "Three ways out" in out


def test_tts_round_trip_on_the_stand_in_says_so_instead_of_a_number(standin_tts_dir, whisper_dir):
    cfg = load_config(overrides=[f"tts.model_dir='{standin_tts_dir}'", f"stt.model='{whisper_dir}'"])
    result = ev.tts_round_trip(cfg, whisper=None, sentences=["안녕하세요."])
    assert result["standin"] is True
    text = ev.render(cfg, ev.summarize([]), [], 0, None, result, False, 0.0)
    assert "STAND-IN" in text and "CER" not in text


@pytest.mark.slow  # a subprocess or a real model
def test_eval_command_with_the_in_process_fake(standin_tts_dir, whisper_dir):
    out = subprocess.run([sys.executable, str(ROOT / "run_bot.py"), "eval", "--fake-llm", "--limit", "3",
                          "--no-audio", "--tts-samples", "1", "--set", f"tts.model_dir='{standin_tts_dir}'",
                          "--set", f"stt.model='{whisper_dir}'"], cwd=ROOT, capture_output=True, text=True,
                         timeout=180)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    assert "intent accuracy" in out.stdout and "STAND-IN" in out.stdout


@pytest.mark.slow  # a subprocess or a real model
def test_tts_round_trip_measures_a_real_voice_path(standin_tts_dir, whisper_dir, monkeypatch):
    # The stand-in flag off: the code path of a real voice runs (the noise scores badly, as it should).
    import bot.stages.supertonic as st

    class PretendVoice(st.SupertonicEngine):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.is_standin = False

    monkeypatch.setattr(st, "SupertonicEngine", PretendVoice)
    cfg = load_config(overrides=[f"tts.model_dir='{standin_tts_dir}'", f"stt.model='{whisper_dir}'"])
    result = ev.tts_round_trip(cfg, ev._whisper(cfg), ["3시에 접수됐습니다."])
    assert result["standin"] is False and result["samples"][0]["text"].startswith("세 시")
    assert result["cer_mean"] > 0.5
    assert "TTS round trip CER   mean" in ev.render(cfg, ev.summarize([]), [], 0, None, result, False, 0.0)


@pytest.mark.slow  # a subprocess or a real model
async def test_the_bench_audio_turns_go_through_whisper_then_the_dialog(whisper_dir):
    cfg = load_config()
    with FakeLLM(model=cfg.llm.model, responder=keyword_responder, first_token_delay=0.01, token_delay=0.001) as fake:
        cfg = load_config(overrides=[f"llm.base_url='{fake.base_url}'", f"stt.model='{whisper_dir}'"])
        rows = await ev.audio_turns(cfg, ev.Secrets.from_env(cfg), ev._whisper(cfg), 30.0)
    assert len(rows) == 8 and {r["expected_route"] for r in rows} == {"llm", "shortcut"}
    assert all(r["route"] in ("llm", "shortcut") or r["route"].startswith("no transcript") for r in rows)
