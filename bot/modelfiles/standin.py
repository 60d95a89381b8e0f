"""A small stand-in for the Supertonic 3 model directory, built with the ``onnx`` package.

The real weights live on a model hub that CI and offline machines cannot reach. This module writes a
directory with the real layout, the real tensor names, dtypes and dynamic dimension names, and tiny
random weights, so that everything around the model (loading, providers, text preparation, the
synthesis loop, trimming, resampling, framing, interruption) runs through the same code as in
production. The audio is a buzzing tone, not speech: ``tts.json`` carries ``"standin": true`` so the
server can say so loudly.

Behaviour that the rest of the code relies on is kept plausible:

* ``duration_predictor`` returns about 0.06-0.09 s per non-padding text token (the exact rate
  depends a little on the voice style), plus a pause for punctuation;
* ``vector_estimator`` does one Euler-like step that pulls the latent towards a text-dependent
  target, so the loop converges as the real one does;
* ``vocoder`` returns ``latent_length * 3072`` samples of a non-silent signal (amplitude ~0.3).

Usage::

    python -m bot.modelfiles.standin models/supertonic-standin
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bot.stages.supertonic.files import (
    INDEXER_JSON,
    ONNX_DIR,
    SESSION_NAMES,
    STYLES_DIR,
    TTS_JSON,
    VOICES,
    session_file,
    style_file,
)

# Kept low so the files load with older onnxruntime builds too (e.g. onnxruntime-gpu on a server).
OPSET = 17
IR_VERSION = 8

SAMPLE_RATE = 44100
BASE_CHUNK_SIZE = 512
CHUNK_COMPRESS_FACTOR = 6
LATENT_DIM = 24
LATENT_CHANNELS = LATENT_DIM * CHUNK_COMPRESS_FACTOR  # 144
FRAME_SAMPLES = BASE_CHUNK_SIZE * CHUNK_COMPRESS_FACTOR  # 3072
TEXT_EMB_DIM = 256
STYLE_TTL_SHAPE = (50, 256)
STYLE_DP_SHAPE = (8, 16)

B, T, L = "batch_size", "text_length", "latent_length"

# Characters the stand-in "knows" (the real indexer covers far more; this is what Korean replies need).
_PUNCTUATION = "…·‘’“”「」『』〈〉《》【】〜～、。！？，．：；"


def supported_code_points() -> list[int]:
    """Code points the stand-in indexer maps to a token id, in id order (id 0 is padding)."""
    cps = list(range(0x20, 0x7F))  # ASCII printable, which includes the <ko></ko> tag characters
    cps += list(range(0x1100, 0x1200))  # Hangul conjoining jamo: NFKD splits every syllable into these
    cps += [ord(c) for c in _PUNCTUATION]
    return cps


def _unicode_indexer() -> tuple[list[int], int]:
    indexer = [-1] * 65536
    cps = supported_code_points()
    for i, cp in enumerate(cps, start=1):  # id 0 stays free: padding
        indexer[cp] = i
    return indexer, len(cps) + 1


def _const(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name=name)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           initializers: list[onnx.TensorProto], name: str) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="supertonic-standin",
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def _text_inputs() -> list[onnx.ValueInfoProto]:
    return [
        helper.make_tensor_value_info("text_ids", TensorProto.INT64, [B, T]),
        helper.make_tensor_value_info("text_mask", TensorProto.FLOAT, [B, 1, T]),
    ]


def _duration_predictor(rng: np.random.Generator, vocab: int, token_weight: np.ndarray) -> onnx.ModelProto:
    # duration[b] = max(rate(style) * (sum_t w[id_t] * mask_t - 4), 0.1), where w ~ 1 for letters,
    # 0 for the tag brackets, ~2 for punctuation (a pause); "- 4" discounts the letters of "<ko></ko>".
    # rate(style) = 0.075 + 0.012 * tanh(mean(style_dp)) s per token.
    f32 = np.float32
    inits = [
        _const("tok_w", token_weight.astype(f32)),
        _const("axes_t", np.array([1], np.int64)),
        _const("sq_axes", np.array([1], np.int64)),
        _const("tag_letters", np.array(4.0, f32)),
        _const("min_dur", np.array(0.1, f32)),
        _const("base_rate", np.array(0.075, f32)),
        _const("rate_span", np.array(0.012, f32)),
    ]
    nodes = [
        helper.make_node("Gather", ["tok_w", "text_ids"], ["w"], axis=0),  # [B, T]
        helper.make_node("Squeeze", ["text_mask", "sq_axes"], ["mask_bt"]),  # [B, T]
        helper.make_node("Mul", ["w", "mask_bt"], ["w_masked"]),
        helper.make_node("ReduceSum", ["w_masked", "axes_t"], ["n_tok"], keepdims=0),  # [B]
        helper.make_node("Sub", ["n_tok", "tag_letters"], ["n_spoken"]),
        helper.make_node("ReduceMean", ["style_dp"], ["style_mean"], axes=[1, 2], keepdims=0),  # [B]
        helper.make_node("Tanh", ["style_mean"], ["style_t"]),
        helper.make_node("Mul", ["style_t", "rate_span"], ["rate_d"]),
        helper.make_node("Add", ["rate_d", "base_rate"], ["rate"]),
        helper.make_node("Mul", ["n_spoken", "rate"], ["dur_raw"]),
        helper.make_node("Max", ["dur_raw", "min_dur"], ["duration"]),
    ]
    inputs = _text_inputs()
    inputs.insert(1, helper.make_tensor_value_info("style_dp", TensorProto.FLOAT, [B, *STYLE_DP_SHAPE]))
    outputs = [helper.make_tensor_value_info("duration", TensorProto.FLOAT, [B])]
    return _model(nodes, inputs, outputs, inits, "duration_predictor")


def _text_encoder(rng: np.random.Generator, vocab: int) -> onnx.ModelProto:
    # text_emb = (Embed(ids) @ P + mean_over_rows(style_ttl))^T * mask  -> [B, 256, T]
    f32 = np.float32
    emb_dim = 16
    inits = [
        _const("emb", rng.normal(0, 1, (vocab, emb_dim)).astype(f32)),
        _const("proj", rng.normal(0, 1 / np.sqrt(emb_dim), (emb_dim, TEXT_EMB_DIM)).astype(f32)),
    ]
    nodes = [
        helper.make_node("Gather", ["emb", "text_ids"], ["e"], axis=0),  # [B, T, 16]
        helper.make_node("MatMul", ["e", "proj"], ["h"]),  # [B, T, 256]
        helper.make_node("ReduceMean", ["style_ttl"], ["s"], axes=[1], keepdims=1),  # [B, 1, 256]
        helper.make_node("Add", ["h", "s"], ["hs"]),
        helper.make_node("Transpose", ["hs"], ["hs_t"], perm=[0, 2, 1]),  # [B, 256, T]
        helper.make_node("Mul", ["hs_t", "text_mask"], ["text_emb"]),
    ]
    inputs = _text_inputs()
    inputs.insert(1, helper.make_tensor_value_info("style_ttl", TensorProto.FLOAT, [B, *STYLE_TTL_SHAPE]))
    outputs = [helper.make_tensor_value_info("text_emb", TensorProto.FLOAT, [B, TEXT_EMB_DIM, T])]
    return _model(nodes, inputs, outputs, inits, "text_encoder")


def _vector_estimator(rng: np.random.Generator) -> onnx.ModelProto:
    # target = W_t @ masked_mean_T(text_emb)                       [B, 144, 1]
    # v      = target - x + (1 - 0.5 * (step + 1) / total) * 0.5 * tanh(conv1x1(x))
    # out    = (x + v / total) * latent_mask
    f32 = np.float32
    c = LATENT_CHANNELS
    inits = [
        _const("w_t", rng.normal(0, 1 / np.sqrt(TEXT_EMB_DIM), (c, TEXT_EMB_DIM)).astype(f32)),
        _const("w_x", rng.normal(0, 1 / np.sqrt(c), (c, c, 1)).astype(f32)),
        _const("axes_2", np.array([2], np.int64)),
        _const("one", np.array(1.0, f32)),
        _const("half", np.array(0.5, f32)),
        _const("eps", np.array(1e-6, f32)),
        _const("shape_b11", np.array([-1, 1, 1], np.int64)),
    ]
    nodes = [
        helper.make_node("Mul", ["text_emb", "text_mask"], ["te_m"]),
        helper.make_node("ReduceSum", ["te_m", "axes_2"], ["te_sum"], keepdims=1),  # [B, 256, 1]
        helper.make_node("ReduceSum", ["text_mask", "axes_2"], ["n_t"], keepdims=1),  # [B, 1, 1]
        helper.make_node("Add", ["n_t", "eps"], ["n_t_e"]),
        helper.make_node("Div", ["te_sum", "n_t_e"], ["te_mean"]),
        helper.make_node("MatMul", ["w_t", "te_mean"], ["target"]),  # [B, 144, 1]
        helper.make_node("Sub", ["target", "noisy_latent"], ["pull"]),
        helper.make_node("Conv", ["noisy_latent", "w_x"], ["hx"]),  # [B, 144, L]
        helper.make_node("Tanh", ["hx"], ["thx"]),
        helper.make_node("Add", ["current_step", "one"], ["step1"]),
        helper.make_node("Div", ["step1", "total_step"], ["progress"]),  # [B]
        helper.make_node("Mul", ["progress", "half"], ["p_half"]),
        helper.make_node("Sub", ["one", "p_half"], ["gain"]),
        helper.make_node("Mul", ["gain", "half"], ["gain_h"]),
        helper.make_node("Reshape", ["gain_h", "shape_b11"], ["gain_b"]),  # [B, 1, 1]
        helper.make_node("Mul", ["thx", "gain_b"], ["detail"]),
        helper.make_node("Add", ["pull", "detail"], ["v"]),
        helper.make_node("Reshape", ["total_step", "shape_b11"], ["total_b"]),
        helper.make_node("Div", ["v", "total_b"], ["dv"]),
        helper.make_node("Add", ["noisy_latent", "dv"], ["x_next"]),
        helper.make_node("Mul", ["x_next", "latent_mask"], ["denoised_latent"]),
    ]
    inputs = [
        helper.make_tensor_value_info("noisy_latent", TensorProto.FLOAT, [B, c, L]),
        helper.make_tensor_value_info("text_emb", TensorProto.FLOAT, [B, TEXT_EMB_DIM, T]),
        helper.make_tensor_value_info("style_ttl", TensorProto.FLOAT, [B, *STYLE_TTL_SHAPE]),
        helper.make_tensor_value_info("latent_mask", TensorProto.FLOAT, [B, 1, L]),
        helper.make_tensor_value_info("text_mask", TensorProto.FLOAT, [B, 1, T]),
        helper.make_tensor_value_info("current_step", TensorProto.FLOAT, [B]),
        helper.make_tensor_value_info("total_step", TensorProto.FLOAT, [B]),
    ]
    outputs = [helper.make_tensor_value_info("denoised_latent", TensorProto.FLOAT, [B, c, L])]
    return _model(nodes, inputs, outputs, inits, "vector_estimator")


def _vocoder(rng: np.random.Generator) -> onnx.ModelProto:
    # wav = 0.4 * tanh(((latent^T @ A) @ sin(omega * n)) / 8), flattened to [B, L * 3072]
    f32 = np.float32
    n_basis = 64
    freqs_hz = np.sort(rng.uniform(90.0, 3200.0, n_basis))
    omega = (2 * np.pi * freqs_hz / SAMPLE_RATE).astype(f32).reshape(n_basis, 1)
    inits = [
        _const("a", rng.normal(0, 1 / np.sqrt(LATENT_CHANNELS), (LATENT_CHANNELS, n_basis)).astype(f32)),
        _const("omega", omega),
        _const("n", np.arange(FRAME_SAMPLES, dtype=f32).reshape(1, FRAME_SAMPLES)),
        _const("inv_gain", np.array(1 / 8, f32)),
        _const("amp", np.array(0.4, f32)),
        _const("flat_shape", np.array([0, -1], np.int64)),
    ]
    nodes = [
        helper.make_node("Mul", ["omega", "n"], ["phase"]),  # [64, 3072]
        helper.make_node("Sin", ["phase"], ["basis"]),
        helper.make_node("Transpose", ["latent"], ["lat_t"], perm=[0, 2, 1]),  # [B, L, 144]
        helper.make_node("MatMul", ["lat_t", "a"], ["coef"]),  # [B, L, 64]
        helper.make_node("MatMul", ["coef", "basis"], ["frames"]),  # [B, L, 3072]
        helper.make_node("Mul", ["frames", "inv_gain"], ["frames_s"]),
        helper.make_node("Tanh", ["frames_s"], ["frames_t"]),
        helper.make_node("Mul", ["frames_t", "amp"], ["frames_a"]),
        helper.make_node("Reshape", ["frames_a", "flat_shape"], ["wav_tts"]),
    ]
    inputs = [helper.make_tensor_value_info("latent", TensorProto.FLOAT, [B, LATENT_CHANNELS, L])]
    outputs = [helper.make_tensor_value_info("wav_tts", TensorProto.FLOAT, [B, "wav_length"])]
    return _model(nodes, inputs, outputs, inits, "vocoder")


def _token_weights(rng: np.random.Generator, vocab: int) -> np.ndarray:
    w = 1.0 + rng.uniform(-0.15, 0.15, vocab)
    w[0] = 0.0  # padding
    for i, cp in enumerate(supported_code_points(), start=1):
        ch = chr(cp)
        if ch in "<>/":
            w[i] = 0.0  # tag brackets are not spoken
        elif ch == " ":
            w[i] = 0.3  # a short gap between words
        elif ch in ".!?,;:…。！？，．：；、":
            w[i] = 2.5  # punctuation is a pause
    return w


def _style_json(rng: np.random.Generator, bias: float) -> dict:
    def tensor(shape: tuple[int, int], scale: float, offset: float) -> dict:
        data = np.round(rng.normal(offset, scale, (1, *shape)), 3)
        return {"data": data.tolist(), "dims": [1, *shape], "type": "float32"}

    return {
        "style_ttl": tensor(STYLE_TTL_SHAPE, 0.1, 0.0),
        "style_dp": tensor(STYLE_DP_SHAPE, 0.5, bias),
    }


def build_standin_model(model_dir: Path, seed: int = 0) -> None:
    """Write a stand-in Supertonic model directory (real layout and interface, random weights).

    Args:
        model_dir: Directory to create (``onnx/`` and ``voice_styles/`` go inside). Existing stand-in
            files are overwritten.
        seed: Seed for the random weights; the same seed gives byte-identical files.
    """
    model_dir = Path(model_dir)
    (model_dir / ONNX_DIR).mkdir(parents=True, exist_ok=True)
    (model_dir / STYLES_DIR).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)

    indexer, vocab = _unicode_indexer()
    models = {
        "duration_predictor": _duration_predictor(rng, vocab, _token_weights(rng, vocab)),
        "text_encoder": _text_encoder(rng, vocab),
        "vector_estimator": _vector_estimator(rng),
        "vocoder": _vocoder(rng),
    }
    for name in SESSION_NAMES:
        onnx.save(models[name], str(session_file(model_dir, name)))

    config = {
        "standin": True,
        "note": "A stand-in for Supertonic: random weights, NOT speech. "
        "Run `python run_bot.py models` for the real Supertonic 3 voice.",
        "ae": {"sample_rate": SAMPLE_RATE, "base_chunk_size": BASE_CHUNK_SIZE},
        "ttl": {"chunk_compress_factor": CHUNK_COMPRESS_FACTOR, "latent_dim": LATENT_DIM},
    }
    (model_dir / TTS_JSON).write_text(json.dumps(config, indent=2), encoding="utf-8")
    indexer_json = json.dumps(indexer, separators=(",", ":"))
    (model_dir / INDEXER_JSON).write_text(indexer_json, encoding="utf-8")

    # Each voice gets its own speaking rate through the mean of style_dp (see _duration_predictor).
    biases = np.linspace(-0.8, 0.8, len(VOICES))
    rng.shuffle(biases)
    for voice, bias in zip(VOICES, biases, strict=True):
        style = _style_json(rng, float(bias))
        style_file(model_dir, voice).write_text(json.dumps(style, separators=(",", ":")), encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover - convenience
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "models/supertonic-standin")
    build_standin_model(target)
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    print(f"stand-in Supertonic model written to {target} ({size / 1e6:.2f} MB)")
