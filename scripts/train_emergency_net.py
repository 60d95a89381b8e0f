#!/usr/bin/env python3
"""Train the emergency recogniser's learned question net (bot/dialog/emergency_learned.py).

    python scripts/train_emergency_net.py            # write bot/data/emergency_learned.npz
    python scripts/train_emergency_net.py --check    # leave one table out: what it would add, per table
    python scripts/train_emergency_net.py --curve 0,10,86 --read bench/emergency_heldout_bz.toml
                                                     # trained on the first K tables, read on spent tables

The rows are the shipped tables and the training tables below (emergencies and near misses) and the line's ordinary turns
(``scripts/eval_emergency.py --ordinary``'s tables) as "none". Held-out tables are never read here:
a table joins TRAINING only once it has been read as held-out.

``--check`` trains once per table without that table and reads it as fresh: of its emergencies the
hand-written nets neither escalate nor ask, how many the net asks about, and how many of their
questions its second opinion turns into an escalation of the right kind (with what it escalates alone);
of its near misses, how many get a false question from the net, and how many a false escalation; and,
five folds over the ordinary turns, how many ordinary turns the net asks about or escalates. It exits 1
when a figure misses its bound (below), 2 when it could not judge. It also prints how many escalations
the net's doubt turns into questions (emergencies, near misses), the net's own questions at each of
``QUESTION_TRIES`` and what the net would escalate ALONE beyond ``ALONE`` (no hand-written net asking,
or one asking too) at each of ``ALONE_TRIES``: emergencies of the right kind and not, near misses,
ordinary turns.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from eval_emergency import ORDINARY, ordinary_turns  # noqa: E402

from bot.core.digest import sha256_file  # noqa: E402
from bot.dialog.emergency import DEFAULT_PATH, EmergencyRules, Verdict  # noqa: E402
from bot.dialog.emergency_eval import load_cases  # noqa: E402
from bot.dialog.emergency_learned import LEARNED_PATH, NONE, Anchors, LearnedNet, features, train  # noqa: E402

TRAINING = [ROOT / "bench" / name for name in (
    "emergency_table.toml", "emergency_families.toml", "emergency_training.toml", "emergency_training_t1.toml", "emergency_training_t2.toml",
    "emergency_training_t3.toml", "emergency_training_t4.toml", "emergency_training_t5.toml",
    "emergency_training_t6.toml", "emergency_heldout_a.toml", "emergency_heldout_b.toml",
    "emergency_heldout_c.toml", "emergency_heldout_d.toml", "emergency_heldout_e.toml", "emergency_heldout_f.toml",
    "emergency_heldout_g.toml", "emergency_training_t7.toml", "emergency_training_t8.toml",
    "emergency_heldout_h.toml", "emergency_heldout_i.toml", "emergency_heldout_j.toml", "emergency_heldout_k.toml",
    "emergency_heldout_l.toml", "emergency_heldout_m.toml", "emergency_heldout_n.toml", "emergency_heldout_o.toml",
    "emergency_heldout_p.toml", "emergency_heldout_q.toml", "emergency_heldout_r.toml", "emergency_heldout_s.toml",
    "emergency_heldout_t.toml", "emergency_heldout_u.toml", "emergency_heldout_v.toml", "emergency_heldout_w.toml",
    "emergency_heldout_x.toml", "emergency_heldout_y.toml", "emergency_heldout_z.toml", "emergency_heldout_aa.toml",
    "emergency_heldout_ab.toml", "emergency_heldout_ac.toml", "emergency_heldout_ad.toml",
    "emergency_heldout_ae.toml", "emergency_heldout_af.toml", "emergency_heldout_ag.toml",
    "emergency_heldout_ah.toml", "emergency_heldout_ai.toml", "emergency_heldout_aj.toml", "emergency_heldout_ak.toml",
    "emergency_heldout_al.toml", "emergency_heldout_am.toml", "emergency_heldout_an.toml",
    "emergency_heldout_ao.toml", "emergency_heldout_ap.toml", "emergency_heldout_aq.toml",
    "emergency_heldout_ar.toml", "emergency_heldout_as.toml", "emergency_heldout_at.toml",
    "emergency_heldout_au.toml", "emergency_heldout_av.toml", "emergency_heldout_aw.toml",
    "emergency_heldout_ax.toml", "emergency_heldout_ay.toml", "emergency_heldout_az.toml",
    "emergency_heldout_ba.toml", "emergency_heldout_bb.toml", "emergency_heldout_bc.toml",
    "emergency_heldout_bd.toml", "emergency_heldout_be.toml",
    "emergency_heldout_bf.toml", "emergency_heldout_bg.toml", "emergency_heldout_bh.toml", "emergency_heldout_bi.toml",
    "emergency_heldout_bj.toml", "emergency_heldout_bk.toml", "emergency_heldout_bl.toml",
    "emergency_heldout_bm.toml", "emergency_heldout_bn.toml", "emergency_heldout_bo.toml",
    "emergency_heldout_bp.toml", "emergency_heldout_bq.toml", "emergency_heldout_br.toml",
    "emergency_heldout_bs.toml", "emergency_heldout_bt.toml", "emergency_heldout_bu.toml",
    "emergency_heldout_bv.toml", "emergency_heldout_bw.toml")]
THRESHOLD = 0.95  # round 9, left out in turn: 0.9 asked 52 emergencies and 33 near misses, 0.95 51 and 26
# Pass orders averaged (emergency_learned.train): with L and M one order's net asked a crime question on a
# worry that ended well at 0.98 and another's held it at 1.00 none; eight orders' mean holds it (0.95 none).
ORDERS = 8
L2 = 1e-3  # leave-one-table-out: 1e-4 asked 2 of 764 ordinary turns, 1e-2 found a third fewer emergencies
MIN_SYLLABLES = 6
# A grammar or cue question this net reads as the same kind escalates at this weight: leave-one-table-out
# at 0.9 escalated 73 more emergencies and 4 of 4,306 near misses, at 0.99 62 and 2.
CONFIRM = 0.99  # round 13, four folds over 32 tables: 0.9 escalates 9 more of 8,114 emergencies, 2 more near misses
# A sure verdict of the hand-written nets on a turn of 20+ syllables that this net reads as "none" at DOUBT is
# asked instead (round 10), unless the talk turns in it (근데, 지금: round 11). Four folds of whole tables
# (30 tables; 7,462 emergencies escalated, 65 near misses escalated): at 0.99 5 emergencies asked instead and
# 48 near misses held, at 0.999 3 and 44; the 3 were all told past a turn of the talk. Round 11's guard (no doubt
# where the talk turns) gave 0 and 39; round 12's (the danger read again after the turn) 0 and 44.
DOUBT = 0.999
# --check's bounds: ordinary turns asked about (five folds), near misses newly asked about per table.
MAX_ORDINARY_SHARE = 0.01
MAX_NEAR_SHARE = 0.03
MAX_NEAR_ESCALATED_SHARE = 0.002  # near misses the net escalates (second opinion, alone), all tables together
# --check also measures the net escalating ALONE (round 9): a turn no net escalates, not hedged, that the
# net puts at least this weight on one kind; "net" where no hand-written net asks, "any" where one asks too.
ALONE_TRIES = (0.995, 0.999, 0.9995, 0.9999)
# Not adopted in round 9: left out in turn, where no hand-written net asks, 0.995 escalated 39 more emergencies
# (all of the right kind) and 5 of 5,601 near misses, 0.999 35 and 4, 0.9995 33 and 4, no ordinary turn; but the
# net trained on every table escalated two near misses of tests/dialog (a cat on a railing: rescue 0.99993).
# Adopted in round 15, four folds of whole tables (36 tables: 8,971 emergencies, 7,136 near misses, 759 ordinary
# turns), where no hand-written net asks and the turn is not hedged: at 0.999 74 more emergencies escalated (all
# of the right kind) and 4 near misses, all under 20 syllables ("누가 집 앞에 차를 대고 있어요"); with the floor
# of 20, 73 and 1; 0.9995 67 and 0; 0.9999 64 and 0; no ordinary turn at any. The shipped net puts 0.9998 on
# the shelf near miss of tests/dialog (boxes nobody can lift), hence 0.9999.
ALONE = 0.9999
ALONE_SYLLABLES = 20
QUESTION_TRIES = (0.9, THRESHOLD)  # --check: the net's own questions at each weight


def rows_of(rules: EmergencyRules, tables: list[Path]) -> list[tuple[str, str]]:
    return [(read(rules, c.text), c.expect) for t in tables for c in load_cases(t, set(rules.kinds))]


def fit(rows: list[tuple[str, str]], kinds: list[str], sources=()) -> LearnedNet:
    """The net of ``rows``, its anchors the content morphemes of their emergencies (round 22)."""
    anchors = Anchors.of(text for text, kind in rows if kind != NONE)
    return train(rows, [NONE, *kinds], threshold=THRESHOLD, min_syllables=MIN_SYLLABLES, confirm=CONFIRM, doubt=DOUBT,
                 alone=ALONE, alone_syllables=ALONE_SYLLABLES, l2=L2, orders=ORDERS, sources=sources,
                 anchors=anchors, featurize=functools.partial(_features, anchors=anchors))


_features = functools.lru_cache(maxsize=None)(features)  # --check fits 17 times on the same turns


def read(rules: EmergencyRules, text: str) -> str:
    """The turn as ``EmergencyRules.classify`` hands it to the learned net."""
    return rules.standard(rules.after_aside(text))


def seconded(rules: EmergencyRules, with_net: EmergencyRules, text: str) -> Verdict | None:
    """A sure verdict the net gives (``with_net``: the same rules and the net) where the hand-written
    nets only asked or read nothing: its second opinion, and its escalations alone (round 15)."""
    before = rules.classify(text)
    after = with_net.classify(text)
    return after if after is not None and after.sure and not (before is not None and before.sure) else None


def doubted_by(with_net: EmergencyRules, text: str) -> bool:
    """A sure verdict of the hand-written nets that the net's doubt turns into a question."""
    verdict = with_net.classify(text)
    return verdict is not None and verdict.rule.endswith("-doubted")


def top(net: LearnedNet, said: str) -> float:
    """The net's weight on its likeliest kind (0 for a turn too short to read)."""
    likeliest = net.likeliest(said)
    return 0.0 if likeliest is None else likeliest[1]


def alone(rules: EmergencyRules, with_net: EmergencyRules, text: str) -> tuple[str, str, float] | None:
    """A turn today's nets do not escalate, not hedged: (``"net"`` where no hand-written net asks, else
    ``"any"``; the net's kind; its weight), for ``ALONE_TRIES``."""
    verdict = with_net.classify(text)
    net = with_net.learned
    if (verdict is not None and verdict.sure) or net is None or rules.hedged(text):
        return None
    if (likeliest := net.likeliest(read(rules, text))) is None:
        return None
    scope = "net" if verdict is None or verdict.rule.startswith("learned:") else "any"
    return scope, *likeliest


def print_alone(emergencies: list[tuple[tuple[str, str, float], bool]], near: list[tuple[tuple[str, str, float], str]],
                ordinary: list[tuple[tuple[str, str, float], str]], counts: tuple[int, int, int]) -> None:
    """What the net alone would escalate at each of ``ALONE_TRIES``, beyond today's nets."""
    print(f"the net escalating alone (round 9), all tables left out in turn ({counts[0]} emergencies, {counts[1]} "
          f"near misses) and five folds ({counts[2]} ordinary turns); 'net': where no hand-written net asks, "
          "'any': where one asks too")
    print(f"{'weight':>7} {'scope':>5} {'+ esc right':>10} {'+ esc wrong':>11} {'near esc':>8} {'ordinary esc':>12}")
    for x in ALONE_TRIES:
        for scopes in (("net",), ("net", "any")):
            def hit(a: tuple[str, str, float], scopes=scopes, x=x) -> bool:
                return a[0] in scopes and a[2] >= x
            right = sum(1 for a, ok in emergencies if hit(a) and ok)
            wrong = sum(1 for a, ok in emergencies if hit(a) and not ok)
            print(f"{x:7} {scopes[-1]:>5} {right:+10} {wrong:+11} {sum(hit(a) for a, _ in near):8} "
                  f"{sum(hit(a) for a, _ in ordinary):12}")
    x = ALONE_TRIES[0]
    for a, text in near:
        if a[2] >= x:
            print(f"  near miss escalated at {a[2]:.4f} ({a[0]}, {a[1]}): {text}")
    for a, text in ordinary:
        if a[2] >= x:
            print(f"  ordinary turn escalated at {a[2]:.4f} ({a[0]}, {a[1]}): {text}")


def check(rules: EmergencyRules, kinds: list[str], ordinary: list[str]) -> int:
    """Leave one table out; print what the net adds on each and exit 1 past a bound."""
    failures = []
    print(f"{'left out':30} {'emerg':>5} {'esc|asked':>10} {'+ net':>6} {'+ esc':>6} {'near':>5} {'net asks':>8} "
          f"{'net esc':>7}")
    totals = [0, 0, 0]
    alone_emergencies: list[tuple[tuple[str, str, float], bool]] = []
    alone_near: list[tuple[tuple[str, str, float], str]] = []
    alone_ordinary: list[tuple[tuple[str, str, float], str]] = []
    counts = [0, 0, len(ordinary)]
    doubts = [0, 0]  # emergencies and near misses the net's doubt turns from an escalation into a question
    questions: dict[str, list[float]] = {"emergencies": [], "near misses": [], "ordinary turns": []}
    for held in TRAINING:
        net = fit(rows_of(rules, [t for t in TRAINING if t != held]) + [(read(rules, t), NONE) for t in ordinary], kinds)
        cases = load_cases(held, set(kinds))
        emergencies = [c for c in cases if c.expect != NONE]
        near = [c for c in cases if c.expect == NONE]
        missed = [c for c in emergencies if rules.classify(c.text) is None]
        added = [c for c in missed if net.classify(read(rules, c.text))]
        false = [c for c in near if rules.classify(c.text) is None and net.classify(read(rules, c.text))]
        questions["emergencies"] += [top(net, read(rules, c.text)) for c in added]
        questions["near misses"] += [top(net, read(rules, c.text)) for c in false]
        with_net = dataclasses.replace(rules, learned=net)
        escalated = [c for c in emergencies if (v := seconded(rules, with_net, c.text)) and c.right(v.kind.name)]
        false_escalated = [c for c in near if seconded(rules, with_net, c.text)]
        doubted = [c for c in cases if doubted_by(with_net, c.text)]
        doubts[0] += sum(1 for c in doubted if c.expect != NONE)
        doubts[1] += sum(1 for c in doubted if c.expect == NONE)
        alone_emergencies += [(a, c.right(a[1])) for c in emergencies if (a := alone(rules, with_net, c.text))]
        alone_near += [(a, c.text) for c in near if (a := alone(rules, with_net, c.text))]
        counts[0] += len(emergencies)
        counts[1] += len(near)
        print(f"{held.name:30} {len(emergencies):5} {len(emergencies) - len(missed):10} {len(added):+6} "
              f"{len(escalated):+6} {len(near):5} {len(false):8} {len(false_escalated):7}")
        totals = [totals[0] + len(escalated), totals[1] + len(false_escalated), totals[2] + len(near)]
        if len(false) > MAX_NEAR_SHARE * len(near):
            failures.append(f"{held.name}: {len(false)} near misses asked")
    print(f"second opinion and alone, all tables left out in turn: {totals[0]} emergencies escalated, "
          f"{totals[1]} of {totals[2]} near misses escalated")
    print(f"the net's doubt, all tables left out in turn: {doubts[0]} emergencies asked instead of escalated, "
          f"{doubts[1]} near misses asked instead of escalated")
    if totals[1] > MAX_NEAR_ESCALATED_SHARE * totals[2]:
        failures.append(f"second opinion and alone: {totals[1]} near misses escalated")
    folds = 5
    shuffled = ordinary[:]
    random.Random(0).shuffle(shuffled)
    asked: list[str] = []
    escalated_turns: list[str] = []
    base = rows_of(rules, TRAINING)
    for k in range(folds):
        test = shuffled[k::folds]
        rest = [t for i, t in enumerate(shuffled) if i % folds != k]
        net = fit(base + [(read(rules, t), NONE) for t in rest], kinds)
        asked_now = [t for t in test if rules.classify(t) is None and net.classify(read(rules, t))]
        asked += asked_now
        questions["ordinary turns"] += [top(net, read(rules, t)) for t in asked_now]
        with_net = dataclasses.replace(rules, learned=net)
        escalated_turns += [t for t in test if seconded(rules, with_net, t)]
        alone_ordinary += [(a, t) for t in test if (a := alone(rules, with_net, t))]
    print(f"ordinary turns, five folds: {len(asked)} of {len(ordinary)} asked, {len(escalated_turns)} escalated "
          "by the second opinion")
    for text in asked:
        print(f"  asked: {text}")
    for text in escalated_turns:
        print(f"  escalated: {text}")
    print("the net's own questions, left out in turn: " + "; ".join(
        f"{what} " + " / ".join(f"{sum(w >= x for w in weights)} at {x}" for x in QUESTION_TRIES)
        for what, weights in questions.items()))
    print_alone(alone_emergencies, alone_near, alone_ordinary, (counts[0], counts[1], counts[2]))
    if escalated_turns:
        failures.append(f"ordinary: {len(escalated_turns)} escalated")
    if len(asked) > MAX_ORDINARY_SHARE * len(ordinary):
        failures.append(f"ordinary: {len(asked)} asked")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    return 0


def curve(rules: EmergencyRules, kinds: list[str], ordinary: list[str], sizes: list[int], tables: list[Path]) -> int:
    """A net trained on the first K training tables, for each K (0: no learned net), in a copy of the
    rules' folder; each of ``tables`` read with it (``eval_emergency.py --summary``, its line for all families).
    The tables must be spent and out of TRAINING: what more tables buy the net, read on words it never saw."""
    bad = [t for t in tables if not t.is_file() or t.resolve() in {x.resolve() for x in TRAINING}]
    if bad or not tables or any(not 0 <= k <= len(TRAINING) for k in sizes):
        print(f"cannot judge: no --read tables, tables missing or in TRAINING {[str(t) for t in bad]}, "
              f"or K outside 0..{len(TRAINING)}")
        return 2
    per_table = [rows_of(rules, [t]) for t in TRAINING[: max(sizes)]]  # each table read once, whatever K
    none = [(read(rules, t), NONE) for t in ordinary]
    for k in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "data"
            shutil.copytree(DEFAULT_PATH.parent, copy)
            (copy / LEARNED_PATH.name).unlink(missing_ok=True)
            if k:
                fit([row for rows in per_table[:k] for row in rows] + none, kinds).save(copy / LEARNED_PATH.name)
            for table in tables:
                out = subprocess.run([sys.executable, str(ROOT / "scripts" / "eval_emergency.py"), "--rules",
                                      str(copy / DEFAULT_PATH.name), "--table", str(table), "--summary"],
                                     capture_output=True, text=True, cwd=ROOT)
                line = next((x for x in out.stdout.splitlines() if x.startswith("all ")), None)
                if line is None:
                    print(f"cannot judge: {table} gave no summary\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
                    return 2
                print(f"K={k:<3} {table.name}: {' '.join(line.split()[1:])}", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="leave one table out and print what the net adds")
    parser.add_argument("--curve", metavar="K,K,...", help="train on the first K training tables, for each K, and "
                        "read the --read tables with each net (emergencies, escalated, esc.|asked, near, held, quiet)")
    parser.add_argument("--read", nargs="+", type=Path, default=[], help="--curve's tables: spent, not in TRAINING")
    parser.add_argument("--out", default=str(LEARNED_PATH), help="where the weights go (default: %(default)s)")
    args = parser.parse_args()
    rules = EmergencyRules.load(learned_net=False)  # the hand-written nets alone
    kinds = list(rules.kinds)
    ordinary = ordinary_turns()
    if not ordinary:
        print(f"no ordinary turns found in {[str(p) for p in ORDINARY]}: cannot judge")
        return 2
    # A few ordinary turns are emergencies ("사람이 쓰러졌어요" routes to the model in the shortcut table):
    # as "none" rows they taught the net that the plainest emergencies are ordinary (round 10).
    emergencies = [t for t in ordinary if (v := rules.classify(t)) is not None and v.sure]
    ordinary = [t for t in ordinary if t not in emergencies]
    print(f"{len(ordinary)} ordinary turns; {len(emergencies)} left out, the hand-written nets escalate them: {emergencies}")
    if args.check:
        return check(rules, kinds, ordinary)
    if args.curve:
        return curve(rules, kinds, ordinary, [int(k) for k in args.curve.split(",")], args.read)
    start = time.perf_counter()
    sources = [(str(t.relative_to(ROOT)), sha256_file(t)) for t in [*TRAINING, *ORDINARY]]
    net = fit(rows_of(rules, TRAINING) + [(read(rules, t), NONE) for t in ordinary], kinds, sources)
    net.save(args.out)
    print(f"{args.out}: {len(net.vocabulary)} features x {len(net.classes)} classes from {len(TRAINING)} tables "
          f"and {len(ordinary)} ordinary turns, {len(net.anchors.ids) if net.anchors else 0} anchors "
          f"(kiwipiepy_model {net.anchors.model if net.anchors else '-'}), in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
