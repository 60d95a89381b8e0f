"""deploy/alerts.yaml and deploy/grafana/voice-bot.json: valid, tested, and only over metrics the server exports."""

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bot.app.server import CallRegistry, create_app
from bot.config import Secrets, load_config
from bot.line.callgate import CallGate
from bot.ops.hatches import escape_hatches
from bot.ops.selftime import SelfTiming
from bot.store.calls import CallLog
from bot.telemetry.latency import TurnRecord
from bot.telemetry.metrics import HATCH_LABELS, ProcessMetrics, hatch_label
from tests.conftest import ROOT

RULES = ROOT / "deploy" / "alerts.yaml"
RULES_TEST = ROOT / "deploy" / "alerts_test.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "voice-bot.json"
FROM_PROMETHEUS = {"up"}  # written by Prometheus itself for every scrape target, not by the bot

# --- promtool -----------------------------------------------------------------------------------


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI_REQUIRE_PROMTOOL"):
            pytest.fail("promtool is not installed (CI_REQUIRE_PROMTOOL=1)")
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return found


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=ROOT)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return out


def test_promtool_checks_the_rules():
    out = _run(_promtool(), "check", "rules", str(RULES))
    assert "SUCCESS" in out


def test_promtool_unit_tests_of_the_rules_pass():
    out = _run(_promtool(), "test", "rules", str(RULES_TEST))
    assert "SUCCESS" in out


# --- the rules' shape ---------------------------------------------------------------------------


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_every_rule_says_how_long_how_bad_and_what_it_means():
    rules = _rules()
    assert len(rules) >= 11
    for r in rules:
        assert "for" in r and r["labels"]["severity"] in ("critical", "warning", "page"), r["alert"]
        assert r["annotations"]["summary"].strip() and len(r["annotations"]["description"]) > 40, r["alert"]


def test_key_alerts_are_unit_tested_and_every_alert_is_in_the_docs():
    tested = {t["alertname"] for case in yaml.safe_load(RULES_TEST.read_text())["tests"] for t in case["alert_rule_test"]}
    assert {"VoiceToVoiceP90OverBudget", "VoiceGreetingSlow", "VoiceEmergencyEscalation", "VoiceNoLiveWorker"} <= tested
    docs = (ROOT / "docs" / "production.md").read_text()
    for r in _rules():
        assert r["alert"] in docs, f"{r['alert']} is not explained in docs/production.md"


# --- metric names: rules and dashboard against what /metrics exports ------------------------------

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless",
             "inf", "nan"}


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (not its functions, keywords, labels or durations)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range and subquery durations ($__rate_interval too)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\boffset\s+-?\w+", " ", expr)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[A-Za-z_:][A-Za-z0-9_:]*", expr):
        if m.group(0).lower() in _KEYWORDS or expr[m.end():].lstrip().startswith("("):
            continue  # a keyword, a function or an aggregation
        names.add(m.group(0))
    return names


def test_the_name_parser_reads_promql():
    assert promql_metric_names(
        'histogram_quantile(0.9, sum by (stage, le) (rate(a_bucket{stage!="x",le=~"1e3"}[$__rate_interval])))'
        ' > on (stage) group_left() max by (stage) (b) or vector(0) unless c offset 5m and absent(up{job="j"} == 1)'
    ) == {"a_bucket", "b", "c", "up"}


def _rule_names() -> set[str]:
    return set().union(*(promql_metric_names(r["expr"]) for r in _rules()))


def _dashboard_exprs() -> list[str]:
    def panels(ps):
        for p in ps:
            yield p
            yield from panels(p.get("panels", []))

    exprs = [t["expr"] for p in panels(json.loads(DASHBOARD.read_text())["panels"]) for t in p.get("targets", [])]
    assert exprs
    return exprs


def _names_in(text: str) -> set[str]:
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def _server_exposition() -> str:
    """The operations listener's /metrics of a server built in process (no models, no calls)."""
    db = Path(tempfile.mkdtemp(prefix="alerts-")) / "calls.db"
    config = load_config(overrides=["server.public_host='voice.example.org'", "server.qa_page=false",
                                    f"records.url='sqlite:///{db}'", "tts.require_provider='cpu'"])
    tts = SimpleNamespace(session_providers={"text_encoder": ["CPUExecutionProvider"],
                                             "vector_estimator": ["CUDAExecutionProvider", "CPUExecutionProvider"]},
                          fallback_active=True, is_standin=False)
    timing = SelfTiming({"stt_ms": 300.0}, previous={"stt_ms": 280.0})  # what serve's self-timing exports
    models = SimpleNamespace(tts=tts, whisper=SimpleNamespace(device="cpu"), self_timing=timing)
    records = CallLog.open(config)
    try:
        app = create_app(config, Secrets("AC" + "0" * 32, "token", "EMPTY"), models, records=records)
        resp = TestClient(app.state.admin_app).get("/metrics")
        assert resp.status_code == 200
        return resp.text
    finally:
        records.writer.close()


def _turn(index: int, v2v_s: float, **fields) -> TurnRecord:
    t = 1000.0 + index * 10
    return TurnRecord("CA1", index, speech_end=t, vad_stop=t + 0.2, stt_done=t + 0.4, turn_end=t + 0.3,
                      llm_request=t + 0.4, llm_first_token=t + 0.5, first_sentence=t + 0.6, tts_first_audio=t + 0.7,
                      first_audio_out=t + v2v_s, **fields)


def _process_exposition() -> str:
    """ProcessMetrics and CallGate after one finished call: the series that only exist once labelled."""
    metrics = ProcessMetrics(load_config().latency)
    metrics.call_started()
    metrics.call_finished([TurnRecord("CA1", 0, route="greeting"),
                           _turn(1, 0.9, route="llm", llm_calls=1),
                           _turn(2, 2.5, route="error", llm_calls=2),
                           _turn(3, 0.8, route="rule", escalation="119")])
    metrics.call_transferred("desk")
    body, _ = metrics.render(loop_lag={"n": 10, "p50_ms": 0.4, "p99_ms": 3.0, "max_ms": 5.0}, records_pending=0)
    registry = CollectorRegistry()
    CallGate(CallRegistry(), max_calls=1, token_ttl_secs=60, registry=registry).refuse("max_calls")
    # The line's day figures, as /metrics sets them from the records (tests/store/test_service.py).
    from bot.store.service import DayFigures
    from bot.telemetry.service_metrics import ServiceGauges

    day = DayFigures(dt.date(2026, 12, 1), calls=2, resolved=1, v2v_p90_ms=900.0)
    day.emergencies["119"], day.languages["ko"], day.tickets["noise"], day.ends["abusive"] = 1, 2, 1, 1
    day.emergency_kinds["fire"] = 1
    ServiceGauges(registry).set_days({"today": day})
    return body.decode() + generate_latest(registry).decode()


@pytest.fixture(scope="module")
def exported() -> set[str]:
    return _names_in(_server_exposition()) | _names_in(_process_exposition())


def test_every_metric_in_the_rules_is_exported(exported):
    used = _rule_names()
    assert {"voice_stage_latency_ms_bucket", "voice_escalations_total", "voice_onnx_provider_ok"} <= used
    assert used - exported - FROM_PROMETHEUS == set()


def test_every_metric_on_the_dashboard_is_exported(exported):
    used = set().union(*(promql_metric_names(e) for e in _dashboard_exprs()))
    assert "voice_stage_latency_ms_bucket" in used and "voice_active_calls" in used
    assert used - exported - FROM_PROMETHEUS == set()


def test_the_dashboard_shows_per_stage_percentiles_from_the_histogram():
    exprs = _dashboard_exprs()
    for q in ("0.5", "0.9", "0.99"):
        assert any(e.startswith(f"histogram_quantile({q},") and "by (stage, le)" in e
                   and "voice_stage_latency_ms_bucket" in e for e in exprs), q


# --- the new series, as the server sets them ----------------------------------------------------


def test_the_server_exports_providers_hatches_budgets_and_the_records_queue():
    text = _server_exposition()
    assert 'voice_onnx_provider_ok{session="text_encoder"} 1.0' in text
    assert 'voice_onnx_provider_ok{session="vector_estimator"} 0.0' in text
    assert 'voice_escape_hatch{hatch="tts_fallback_active"} 1.0' in text
    assert 'voice_escape_hatch{hatch="stt_cpu"} 1.0' in text
    assert 'voice_stage_budget_ms{stage="voice_to_voice"} 1200.0' in text
    assert 'voice_stage_budget_ms{stage="greeting"} 500.0' in text  # VoiceGreetingSlow's line
    assert "voice_records_queue_pending 0.0" in text
    assert 'voice_transfers_total{to="desk"} 0.0' in text and "voice_dead_air_turns_total 0.0" in text


def test_a_finished_call_counts_dead_air_and_transfers():
    text = _process_exposition()
    assert "voice_dead_air_turns_total 1.0" in text  # the 2.5 s turn; 0.9 s and 0.8 s are not dead air
    assert 'voice_transfers_total{to="desk"} 1.0' in text
    assert 'voice_escalations_total{number="119"} 1.0' in text
    assert 'voice_turns_total{route="error"} 1.0' in text


def test_every_escape_hatch_has_its_own_short_label():
    secrets = Secrets(None, None, "EMPTY")
    tts = SimpleNamespace(fallback_active=True, is_standin=True, session_providers={"s": ["CPUExecutionProvider"]})
    everything = ["twilio.validate_signature=false", "server.qa_page=true", "llm.server_enforce_eager=true",
                  "tts.providers=['cpu']", "tts.allow_fallback=true"]
    hatches = (escape_hatches(load_config(overrides=[*everything, "stt.device='cpu'"]), tts_engine=tts,
                              whisper_engine=SimpleNamespace(is_fixed_delay=True, model_path="x"), secrets=secrets)
               + escape_hatches(load_config(overrides=["stt.device='cpu'"]))
               + escape_hatches(load_config(overrides=["stt.device='cuda'"]),
                                whisper_engine=SimpleNamespace(device="cpu")))
    labels = {hatch_label(h) for h in hatches}
    assert labels == {label for _, label in HATCH_LABELS}, hatches
