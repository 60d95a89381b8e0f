#!/usr/bin/env bash
# Recreate the bench turn clips in bench/audio: 8 kHz mono PCM16 WAV (the phone rate), each under 100 KB.
# Needs espeak-ng and sox (Debian: apt-get install espeak-ng sox). sox -R makes dither
# repeatable, so a rerun with the same tool versions gives the same bytes.
#
# Each clip has 0.2 s of silence either side, like a real VAD segment; the bench finds where the
# speech ends from the energy envelope (bot/tools/bench.py speech_bounds), not from the file's end.
# The texts are in bench/turns.toml (keep the two in step).
set -euo pipefail
cd "$(dirname "$0")/audio"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# speak OUT TEXT [espeak-ng options...]
speak() {
    local out=$1 text=$2
    shift 2
    espeak-ng -v ko "$@" -w "$tmp/raw.wav" "$text"
    sox -R "$tmp/raw.wav" -r 8000 -c 1 -b 16 -e signed-integer "$out" pad 0.2 0.2
}

speak trash.wav "쓰레기 수거 문의드리려고요"
speak bulky.wav "대형 폐기물 버리려고요"
speak parking.wav "불법주차 신고하려고요"
speak water.wav "수도가 안 나와요"
speak streetlight.wav "가로등이 고장났어요"
speak certificate.wav "주민등록등본 떼려면 어떻게 해요"
speak hello.wav "여보세요"
speak bye.wav "안녕히 계세요"

for f in *.wav; do
    size=$(stat -c %s "$f")
    if [ "$size" -ge 102400 ]; then
        echo "$f is $size bytes (limit 100 KB)" >&2
        exit 1
    fi
    echo "$f: $(soxi -D "$f") s, $size bytes"
done
