#!/usr/bin/env python3
"""Error rates of the Whisper STT engine on the bench clips, with and without stt.hotwords.

Every turn in bench/turns.toml (its wav, and the text bench/make_audio.sh spoke with espeak-ng) is
transcribed by the bot's guarded ``WhisperEngine.transcribe`` in three settings:

* ``no hotwords``: stt.hotwords = "" (the prompt-echo guard has nothing to compare with);
* ``hotwords, no guard``: the shipped hotwords, the prompt-echo guard off (the bot before it);
* ``hotwords + guard``: the shipped hotwords and the guard (what the bot runs now);

each over the clip as it is (8 kHz PCM) and through G.711 mu-law (what a Twilio call carries).

Figures, over all clips together (total edits / total reference length):

* CER, the main figure for Korean: Levenshtein distance over characters, spaces and
  punctuation removed, so Korean's free spacing ("대형 폐기물" / "대형폐기물") costs nothing;
* WER: the same over space-separated words (punctuation removed); harsh for Korean, where a
  word is a whole 어절 and a missing space makes two words wrong.

A rejected clip (no transcript) counts as all its characters deleted: rejecting an echo of the
hotword list trades a wrong transcript for no transcript (and the bot asks the caller again).

    python scripts/hotword_wer.py
    python scripts/hotword_wer.py --path pcm --json out.json
    python scripts/hotword_wer.py --model models/whisper-base --turns bench/turns.toml
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loguru import logger  # noqa: E402

from bot.config import load_config  # noqa: E402
from bot.core.wav import read_wav, ulaw_round_trip  # noqa: E402
from bot.modelfiles.manifest import ModelMissingError, resolve_whisper_model  # noqa: E402
from bot.stages.whisper import WhisperEngine  # noqa: E402
from bot.tools.eval import edit_distance  # noqa: E402

TURNS = ROOT / "bench" / "turns.toml"
SETTINGS = ("no hotwords", "hotwords, no guard", "hotwords + guard")
PATHS = ("pcm", "ulaw")
_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """Words, lower-cased, punctuation dropped."""
    return _WORD.findall(text.lower())


def chars(text: str) -> list[str]:
    """Characters, spaces and punctuation dropped."""
    return list("".join(words(text)))


def load_turns(path: Path) -> list[dict]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    turns = []
    for t in data["turns"]:
        pcm, rate = read_wav(path.parent / t["wav"])
        turns.append({"id": t["id"], "text": t["text"], "pcm": pcm, "rate": rate})
    return turns


def run_setting(cfg, model: str, min_avg_logprob, setting: str, turns: list[dict], paths) -> dict:
    """Transcribe every turn on every path in one setting: {(turn id, path): (text, reason)}."""
    hotwords = "" if setting == "no hotwords" else cfg.hotwords
    engine = WhisperEngine(
        dataclasses.replace(cfg, hotwords=hotwords),
        model,
        min_avg_logprob=min_avg_logprob,
        reject_prompt_echo=setting != "hotwords, no guard",
    )
    engine.warmup()
    out = {}
    try:
        for t in turns:
            for p in paths:
                pcm = ulaw_round_trip(t["pcm"]) if p == "ulaw" else t["pcm"]
                r = engine.transcribe(pcm, t["rate"])
                out[(t["id"], p)] = (r.text, r.rejected_reason)
    finally:
        engine.close()
    return out


def score(turns: list[dict], results: dict, path: str) -> dict:
    c_err = c_ref = w_err = w_ref = exact = rejected = 0
    for t in turns:
        text, reason = results[(t["id"], path)]
        c_err += edit_distance(chars(t["text"]), chars(text))
        c_ref += len(chars(t["text"]))
        w_err += edit_distance(words(t["text"]), words(text))
        w_ref += len(words(t["text"]))
        exact += chars(t["text"]) == chars(text)
        rejected += reason is not None
    return {"cer": c_err / c_ref, "wer": w_err / w_ref, "exact": exact, "rejected": rejected, "n": len(turns)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="config.toml (default: the repo's)")
    ap.add_argument("--model", help="model directory (default: resolve stt.model)")
    ap.add_argument("--turns", type=Path, default=TURNS, help="bench turn set (default: bench/turns.toml)")
    ap.add_argument("--path", choices=["pcm", "ulaw", "both"], default="both",
                    help="the clips as they are, through mu-law, or both (default)")
    ap.add_argument("--json", type=Path, help="also write the figures and transcripts here")
    ap.add_argument("--verbose", action="store_true", help="show engine logs")
    args = ap.parse_args()
    if not args.verbose:
        logger.remove()
        logger.add(sys.stderr, level="WARNING")

    config = load_config(args.config)
    cfg = config.stt
    if not cfg.hotwords.strip():
        print("error: stt.hotwords is empty: nothing to compare", file=sys.stderr)
        return 2
    try:
        model = args.model or resolve_whisper_model(cfg, config.base_dir)
    except ModelMissingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    paths = PATHS if args.path == "both" else (args.path,)
    turns = load_turns(args.turns)

    results = {s: run_setting(cfg, model, cfg.min_avg_logprob, s, turns, paths) for s in SETTINGS}

    print(f"model: {model} ({cfg.device}, {cfg.compute_type}, beam {cfg.beam_size})")
    print(f"hotwords: {cfg.hotwords}")
    print(f"clips: {len(turns)} turns of {args.turns.relative_to(ROOT) if args.turns.is_relative_to(ROOT) else args.turns}\n")
    for p in paths:
        print(f"path: {'8 kHz PCM, as the clips are' if p == 'pcm' else '8 kHz through G.711 mu-law'}")
        for t in turns:
            print(f"  {t['id']:<12} {t['text']}")
            for s in SETTINGS:
                text, reason = results[s][(t["id"], p)]
                cer = edit_distance(chars(t["text"]), chars(text)) / len(chars(t["text"]))
                shown = text if reason is None else f"<{reason}>"
                print(f"  {'':<12}   {s:<19} CER {cer:6.1%}  {shown}")
        print()

    summary = {p: {s: score(turns, results[s], p) for s in SETTINGS} for p in paths}
    print(f"{'path':<5} {'setting':<19} {'CER':>6} {'WER':>6} {'exact':>6} {'rejected':>8}")
    for p in paths:
        for s in SETTINGS:
            r = summary[p][s]
            print(f"{p:<5} {s:<19} {r['cer']:6.1%} {r['wer']:6.1%} {r['exact']:>3}/{r['n']:<2} {r['rejected']:>5}/{r['n']}")
    if args.json:
        args.json.write_text(json.dumps({
            "model": model,
            "hotwords": cfg.hotwords,
            "summary": summary,
            "transcripts": {s: {f"{tid}@{p}": {"text": text, "rejected_reason": reason}
                                for (tid, p), (text, reason) in results[s].items()} for s in SETTINGS},
        }, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
