#!/usr/bin/python3
"""Check that the restored DeepSpeed elasticity peer reproduces DeepSpeed's own recorded answers.

Reads shared/fixtures/deepspeed_elasticity_cases.json ("compute_elastic_config_cases": 23 cases DeepSpeed itself
produced at the reference commit), restores the peer from the seed into a temp dir (restore.py), runs every case
and compares with "expected" exactly: final batch size, valid GPU list, micro batch (and whether DeepSpeed returned a
2- or 3-tuple); for expected errors the exception class name, and the message when the fixture has one.
With --pre-8237 the peer is restored without the PR #8237 edit and compared with "expected_pre8237" where present.
Exits 1 on any mismatch, 2 on setup errors.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peerlib  # noqa: E402
import restore  # noqa: E402

SHARED_FIXTURE = os.path.normpath(
    os.path.join(restore.REPO, "..", "shared", "fixtures", "deepspeed_elasticity_cases.json"))
REPO_FIXTURE = os.path.join(restore.REPO, "fixtures", "elasticity", "deepspeed_cases.json")  # a copy, if present
DEFAULT_FIXTURE = SHARED_FIXTURE if os.path.exists(SHARED_FIXTURE) or not os.path.exists(REPO_FIXTURE) else REPO_FIXTURE


def expected_of(case, pre_8237):
    exp = case["expected"]
    if pre_8237 and "expected_pre8237" in case:
        exp = case["expected_pre8237"]
    if "expected_error" in exp:  # fixture spelling -> vector spelling
        e = {"error": exp["expected_error"]}
        if "message" in exp:
            e["message"] = exp["message"]
        return e
    return exp


def compare(expected, got):
    """Return a list of human-readable differences (empty when equal)."""
    diffs = []
    if "error" in expected or "error" in got:
        if expected.get("error") != got.get("error"):
            diffs.append(f"error class: expected {expected.get('error')!r}, got {got.get('error')!r}"
                         + (f" ({got.get('message')})" if "error" in got else f" (result {got})"))
        elif "message" in expected and expected["message"] != got.get("message"):
            diffs.append(f"error message:\n      expected {expected['message']!r}\n      got      {got.get('message')!r}")
        return diffs
    for key in ("final_batch_size", "valid_gpus"):
        if expected.get(key) != got.get(key):
            diffs.append(f"{key}: expected {expected.get(key)!r}, got {got.get(key)!r}")
    if ("micro_batch" in expected) != ("micro_batch" in got):
        diffs.append(f"tuple arity: expected {'3' if 'micro_batch' in expected else '2'}-tuple, got "
                     f"{'3' if 'micro_batch' in got else '2'}-tuple")
    elif "micro_batch" in expected and expected["micro_batch"] != got["micro_batch"]:
        diffs.append(f"micro_batch: expected {expected['micro_batch']!r}, got {got['micro_batch']!r}")
    return diffs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixture", default=DEFAULT_FIXTURE, help="DeepSpeed-produced cases (default: %(default)s)")
    ap.add_argument("--seed", default=restore.DEFAULT_SEED, help="seed text (default: %(default)s)")
    ap.add_argument("--peer-dir", help="restore into this directory instead of a temp dir")
    ap.add_argument("--pre-8237", action="store_true", help="check the seed without the PR #8237 edit against "
                    "expected_pre8237 (cases without it use expected)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    args = ap.parse_args(argv)

    try:
        with open(args.fixture, encoding="utf-8") as f:
            fixture = json.load(f)
        cases = fixture["compute_elastic_config_cases"]
        mod, peer_dir, _ = peerlib.restore_and_load(args.seed, pre_8237=args.pre_8237, out_dir=args.peer_dir)
    except (OSError, ValueError, KeyError, peerlib.PeerError) as e:
        print(f"check_fixture.py: error: {e}", file=sys.stderr)
        return 2

    failures = 0
    for case in cases:
        exp = expected_of(case, args.pre_8237)
        got, _ = peerlib.run_case(mod, case)
        diffs = compare(exp, got)
        if diffs:
            failures += 1
            print(f"MISMATCH {case['name']}")
            for d in diffs:
                print(f"    {d}")
        elif args.verbose:
            print(f"ok       {case['name']}: {json.dumps(got)[:150]}")
    label = "pre-#8237 seed" if args.pre_8237 else "seed + PR #8237"
    print(f"{len(cases) - failures}/{len(cases)} DeepSpeed fixture cases reproduced by the restored peer ({label}, "
          f"peer in {peer_dir if args.peer_dir else 'a temp dir, removed at exit'})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
