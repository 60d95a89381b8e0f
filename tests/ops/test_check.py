"""`run_bot.py check` and `llm-command`: budget arithmetic, wheels, the LLM rows, the table, serve's refusal."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

from bot.config import load_config
from bot.ops import preflight as check
from bot.ops.preflight import FAIL, HATCH, NO_GPU, OK, CheckReport
from bot.testing.fake_llm import FakeLLM
from bot.testing.process import free_port
from tests.conftest import ROOT

H200 = ("NVIDIA H200", 143.8e9)


# --- arithmetic -------------------------------------------------------------------------------


def test_weights_are_total_parameters_times_bytes_per_parameter():
    assert check.weight_bytes(35, "bf16") == pytest.approx(70e9)
    assert check.weight_bytes(35, "fp8") == pytest.approx(35e9)
    assert check.weight_bytes(397, "bf16") == pytest.approx(794e9)  # a MoE: TOTAL parameters, not active
    assert check.weight_bytes(7, "int4") == pytest.approx(3.5e9)
    with pytest.raises(ValueError, match="unknown weight dtype"):
        check.weight_bytes(1, "fp6")


def test_kv_cache_is_k_and_v_for_every_token_of_every_sequence():
    # 10 full-attention layers x 2 KV heads x 256 dims x 2 bytes x K,V = 20 KiB per token
    per_token = check.kv_cache_bytes(1, 10, 2, 256, 2)
    assert per_token == 20480
    assert check.kv_cache_bytes(8192 * 32, 10, 2, 256, 2) == per_token * 8192 * 32


def _rows(config, card):
    report = CheckReport()
    check.budget_rows(report, config, card)
    return {r.item: r for r in report.rows}


def test_budget_on_one_card_says_the_headroom():
    rows = _rows(load_config("config.gpu.toml"), H200)
    assert rows["card"].status == OK and "H200" in rows["card"].detail
    llm = rows["vLLM share"]
    assert llm.status == OK and "headroom" in llm.detail
    assert "weights 35.0 GB" in llm.detail and "KV 5.4 GB" in llm.detail
    bot = rows["bot share"]
    assert bot.status == OK and "Whisper" in bot.detail and "TTS" in bot.detail


def test_a_model_that_does_not_fit_says_by_how_much():
    cfg = load_config("config.gpu.toml", ["llm.total_params_b=397", "llm.weight_dtype='bf16'"])
    llm = _rows(cfg, H200)["vLLM share"]
    assert llm.status == FAIL
    # needs 794 + 5.4 KV + 2 runtime = 801.4 GB of 0.55 x 143.8 = 79.1 GB
    assert "OVER by 722.3 GB" in llm.detail and "weights 794.0 GB" in llm.detail


def test_35b_in_bf16_just_fits_in_055_of_an_h200_and_not_in_half():
    bf16 = ["llm.weight_dtype='bf16'"]
    llm = _rows(load_config("config.gpu.toml", bf16), H200)["vLLM share"]
    # 70 weights + 5.4 KV + 2 runtime = 77.4 GB of 0.55 x 143.8 = 79.1 GB
    assert llm.status == OK and "weights 70.0 GB" in llm.detail and "headroom 1.7 GB" in llm.detail
    llm = _rows(load_config("config.gpu.toml", [*bf16, "llm.gpu_memory_utilization=0.5"]), H200)["vLLM share"]
    assert llm.status == FAIL and "OVER by 5.5 GB" in llm.detail


def test_without_a_gpu_the_cpu_config_says_no_gpu_and_the_gpu_config_fails():
    cpu = _rows(load_config(), "NVML: NVML Shared Library Not Found")
    assert {r.status for r in cpu.values()} == {NO_GPU}
    assert "needs 42.4 GB" in cpu["vLLM share"].detail
    gpu = _rows(load_config("config.gpu.toml"), "NVML: NVML Shared Library Not Found")
    assert gpu["card"].status == FAIL and gpu["bot share"].status == FAIL


def test_undeclared_model_size_is_named():
    cfg = load_config(overrides=["llm.total_params_b=0", "llm.kv_layers=0"])
    detail = _rows(cfg, H200)["vLLM share"].detail
    assert "llm.total_params_b" in detail and "llm.kv_layers" in detail


def _safetensors(path, tensors: dict[str, tuple[str, list[int], int]]):
    header, offset = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def test_a_local_model_directory_is_read_instead_of_the_declared_keys(tmp_path):
    model = tmp_path / "hybrid-moe"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "text_config": {"num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                        "hidden_size": 2048, "layer_types": ["linear_attention"] * 3 + ["full_attention"] +
                        ["linear_attention"] * 3 + ["full_attention"],
                        "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128},
        "quantization_config": {"quant_method": "fp8"},
        "torch_dtype": "bfloat16",
    }))  # fmt: skip
    _safetensors(model / "model-00001.safetensors", {"a": ("F8_E4M3", [1000, 1000], 1_000_000),
                                                      "a_scale": ("F32", [1000], 4000)})  # fmt: skip
    cfg = load_config(overrides=[f"llm.model='{model}'", "llm.total_params_b=999"])
    size = check.llm_size(cfg)
    assert size.dtype == "fp8" and size.weight_bytes == 1_004_000 and not size.problems
    assert size.kv == (2, 2, 256)
    assert size.state_bytes_per_seq == 6 * 32 * 128 * 128 * 4
    assert "config.json" in size.source


# --- wheels -----------------------------------------------------------------------------------


def _wheel(config, wheels):
    report = CheckReport()
    check.wheel_rows(report, config, wheels)
    return report.rows[0]


def test_cpu_and_gpu_onnxruntime_together_fail():
    row = _wheel(load_config(), [("onnxruntime", "1.32.0"), ("onnxruntime-gpu", "1.31.1")])
    assert row.status == FAIL and "setup.sh --gpu" in row.detail


def test_tensorrt_required_with_only_the_cpu_wheel_fails_and_the_gpu_wheel_alone_passes():
    gpu = load_config("config.gpu.toml")
    assert _wheel(gpu, [("onnxruntime", "1.32.0")]).status == FAIL
    assert _wheel(load_config(), [("onnxruntime", "1.32.0")]).status == OK


def test_the_installed_wheels_are_read_from_package_metadata():
    assert ("onnxruntime", __import__("onnxruntime").__version__) in check.installed_onnxruntime_wheels()


# --- the LLM server ---------------------------------------------------------------------------


def test_no_server_fails_loudly_with_the_url_and_three_ways_out():
    url = f"http://127.0.0.1:{free_port()}/v1"
    cfg = load_config(overrides=[f"llm.base_url='{url}'", "llm.start_without_llm=false"])
    report = CheckReport()
    check.llm_rows(report, cfg)
    server = report.rows[0]
    assert server.status == FAIL and url in server.detail and server.hatch is None
    notes = "\n".join(report.notes)
    assert url in notes and "vllm serve" in notes and "bot.testing.fake_llm" in notes and "--llm local" in notes
    assert report.blocking == [server]


def test_the_declared_hatch_covers_no_server_but_is_still_a_failure():
    cfg = load_config(overrides=[f"llm.base_url='http://127.0.0.1:{free_port()}/v1'"])
    assert cfg.llm.start_without_llm  # the laptop default
    report = CheckReport()
    check.llm_rows(report, cfg)
    assert report.failures and not report.blocking
    assert report.failures[0].hatch == "llm.start_without_llm"


def test_against_the_fake_server_every_llm_row_passes_with_the_real_schema():
    cfg = load_config()
    with FakeLLM(model=cfg.llm.model, first_token_delay=0.02, token_delay=0.001) as fake:
        cfg = load_config(overrides=[f"llm.base_url='{fake.base_url}'"])
        report = CheckReport()
        probe = check.llm_rows(report, cfg)
        body = fake.requests[0]
    assert [r.status for r in report.rows] == [OK, OK, OK]
    assert probe.first_token_ms is not None and "first token" in report.rows[2].detail
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["reply"]["maxLength"] == cfg.llm.reply_max_chars
    assert "report_problem" in schema["properties"]["intent"]["enum"]


@pytest.mark.parametrize(("mode", "reply", "expect"), [
    ("length", None, "cut off"),
    ("invalid_json", None, "invalid JSON"),
    ("ok", {"reply": "네.", "intent": "no_such_intent", "category": "roads", "location": None, "time": None,
            "flow": "continue"}, "not schema-valid"),
])  # fmt: skip
def test_an_unusable_structured_answer_fails(mode, reply, expect):
    with FakeLLM(model="m", first_token_delay=0.01, token_delay=0.001) as fake:
        fake.script(reply, mode=mode)
        cfg = load_config(overrides=[f"llm.base_url='{fake.base_url}'", "llm.model=m"])
        report = CheckReport()
        check.llm_rows(report, cfg)
    row = report.rows[2]
    assert row.status == FAIL and expect in row.detail


def test_another_model_on_the_server_fails_the_model_row():
    with FakeLLM(model="some-other-model", first_token_delay=0.01) as fake:
        cfg = load_config(overrides=[f"llm.base_url='{fake.base_url}'"])
        report = CheckReport()
        check.llm_rows(report, cfg)
    assert report.rows[1].status == FAIL and "some-other-model" in report.rows[1].detail


# --- llm-command ------------------------------------------------------------------------------


def test_llm_command_is_built_from_the_llm_section():
    cmd = check.llm_command(load_config("config.gpu.toml"))
    line = " ".join(cmd)
    assert cmd[:3] == ["vllm", "serve", "Qwen/Qwen3.5-35B-A3B-FP8"]
    for flag in ("--max-model-len 8192", "--gpu-memory-utilization 0.55", "--max-num-seqs 32",
                 "--enable-prefix-caching", "--port 8000"):  # fmt: skip
        assert flag in line
    i = cmd.index("--structured-outputs-config")
    assert json.loads(cmd[i + 1]) == {"backend": "xgrammar"}
    assert "--enforce-eager" not in cmd
    eager = check.llm_command(load_config("config.gpu.toml", ["llm.server_enforce_eager=true",
                                                               "llm.kv_cache_dtype='fp8'"]))  # fmt: skip
    assert "--enforce-eager" in eager and "--kv-cache-dtype" in eager


# --- the command and serve --------------------------------------------------------------------


def _run(*args, timeout=120):
    return subprocess.run([sys.executable, str(ROOT / "run_bot.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


@pytest.mark.slow  # a subprocess or a real model
def test_check_command_fails_without_a_server_and_passes_against_the_fake(standin_tts_dir):
    tts = f"tts.model_dir='{standin_tts_dir}'"
    out = _run("check", "--set", tts, "--set", f"llm.base_url='http://127.0.0.1:{free_port()}/v1'")
    assert out.returncode == 1, out.stdout + out.stderr[-2000:]
    assert "NO LLM SERVER" in out.stdout and "no GPU" in out.stdout and "Three ways out" in out.stdout
    assert "result: 1 FAILED (LLM server)" in out.stdout
    cfg = load_config()
    with FakeLLM(model=cfg.llm.model, first_token_delay=0.02, token_delay=0.001) as fake:
        out = _run("check", "--set", tts, "--set", f"llm.base_url='{fake.base_url}'")
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    assert "result: all checks passed" in out.stdout
    assert "tts vocoder" in out.stdout and "CPUExecutionProvider" in out.stdout and "silero_vad" in out.stdout


@pytest.mark.slow  # a subprocess or a real model
def test_serve_refuses_to_start_on_a_failed_check_without_a_declared_hatch(whisper_dir, standin_tts_dir):
    out = _run("serve", "--set", f"stt.model='{whisper_dir}'", "--set", f"tts.model_dir='{standin_tts_dir}'",
               "--set", "tts.warmup_lengths=[5]", "--set", "tts.canned_audio=false",
               "--set", f"llm.base_url='http://127.0.0.1:{free_port()}/v1'", "--set", "llm.start_without_llm=false",
               "--set", f"server.port={free_port()}")  # fmt: skip
    assert out.returncode == 1
    assert "startup check failed" in out.stderr and "NO LLM SERVER" in out.stderr
    assert "Traceback" not in out.stderr


def test_hatch_rows_list_the_escape_hatches(standin_tts_dir):
    cfg = load_config(overrides=[f"tts.model_dir='{standin_tts_dir}'", "twilio.validate_signature=false"])
    report = check.run_check(cfg, probe=check.Probe(error="test"), card="no GPU (test)",
                             wheels=[("onnxruntime", "1.32.0")])  # fmt: skip
    hatches = [r.detail for r in report.rows if r.status == HATCH]
    assert any("STAND-IN" in h for h in hatches) and any("validate_signature" in h for h in hatches)


def test_a_hub_model_already_in_the_hugging_face_cache_is_read_from_there(tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--Org--Dense-1B" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps({"num_hidden_layers": 4, "num_attention_heads": 8,
                                                  "num_key_value_heads": 8, "hidden_size": 512,
                                                  "torch_dtype": "bfloat16"}))  # fmt: skip
    _safetensors(snap / "model.safetensors", {"w": ("BF16", [1000, 500], 1_000_000)})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    size = check.llm_size(load_config(overrides=["llm.model='Org/Dense-1B'"]))
    assert size.dtype == "bf16" and size.weight_bytes == 1_000_000 and size.total_params == 500_000
    assert size.kv == (4, 8, 64) and str(snap) in size.source


def _vllm_row(config, cmdline):
    report = CheckReport()
    check.vllm_process_row(report, config, [cmdline])
    return report.rows[0]


def test_a_running_vllm_is_compared_with_llm_command():
    cfg = load_config("config.gpu.toml")
    same = ["/venv/bin/python", "/venv/bin/vllm", *check.llm_command(cfg)[1:]]
    assert _vllm_row(cfg, same).status == OK
    eager = _vllm_row(cfg, [*same, "--enforce-eager"])
    assert eager.status == FAIL and "CUDA graphs OFF" in eager.detail
    drift = _vllm_row(cfg, [x if x != "32" else "64" for x in same])
    assert drift.status == "warn" and "--max-num-seqs 64 (config: 32)" in drift.detail
    other_port = _vllm_row(cfg, [*check.llm_command(cfg)[:3], "--port", "9000"])
    assert other_port.status == "skip"


def test_access_rows_say_whether_records_are_readable_and_where_operations_listen():
    from bot.config import Secrets

    def rows(secrets, *overrides):
        report = CheckReport()
        check.access_rows(report, load_config(overrides=list(overrides)), secrets)
        return {r.item: r for r in report.rows}

    off = rows(Secrets(None, None, "EMPTY"))
    assert off["records API"].status == OK and "404" in off["records API"].detail
    on = rows(Secrets(None, None, "EMPTY", records_api_token="t"))
    assert "Bearer" in on["records API"].detail
    assert "this machine only" in off["operations listener"].detail
    shared = rows(Secrets(None, None, "EMPTY"), "server.admin_port=8765", "server.admin_host='0.0.0.0'")
    assert shared["operations listener"].status == FAIL
