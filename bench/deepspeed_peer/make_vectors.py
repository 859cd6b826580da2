#!/usr/bin/python3
"""Produce fixtures/elasticity/deepspeed_vectors.json: DeepSpeed's own answers for a committed list of configs.

The DeepSpeed elasticity solver is restored at run time from the shared seed (restore.py, seed + PR #8237 rule) into
a temp dir; nothing of DeepSpeed is stored in the repository.  Every case below calls

    compute_elastic_config(config, target_deepspeed_version="0.19.6", world_size=W, return_microbatch=R)

with the environment variable WORLD_SIZE set to the case's env_WORLD_SIZE, or unset when the case has none, and
records the answer (final batch size, valid GPU list, micro batch when DeepSpeed returned a 3-tuple) or the exception
(class name and message).  The case list is data: no expected answer is written here.

Run with Debian's /usr/bin/python3 (numpy); the whole run takes well under two minutes.
"""

import argparse
import json
import os
import platform
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peerlib  # noqa: E402
import restore  # noqa: E402

DEFAULT_OUT = os.path.join(restore.REPO, "fixtures", "elasticity", "deepspeed_vectors.json")
MB6 = [2, 4, 6, 8, 12, 16]  # the micro batch list of the reference timing table (section 2.2)
FIXTURE = dict(max_train_batch_size=10000, micro_batch_sizes=[8, 12, 16, 17], min_gpus=32, max_gpus=1500,
               min_time=20, version=0.1)  # DeepSpeed unit-test fixture


def el(**kw):
    """An enabled elasticity block; keyword order is kept in the JSON."""
    d = {"enabled": True}
    d.update(kw)
    return d


def fx(**overrides):
    """The DeepSpeed unit-test fixture (enabled), with some keys replaced or added."""
    d = el(**FIXTURE)
    d.update(overrides)
    return {"elasticity": d}


def v01(cap, mbs, **kw):
    return {"elasticity": el(max_train_batch_size=cap, micro_batch_sizes=mbs, **kw, version=0.1)}


def v02(cap, mbs, gpn=8, mp=1, **kw):
    return {"elasticity": el(max_train_batch_size=cap, micro_batch_sizes=mbs, num_gpus_per_node=gpn,
                             model_parallel_size=mp, **kw, version=0.2)}


def case(name, config, world_size=0, env=None, rm=False, target=None, note=None):
    c = {"name": name, "config": config, "world_size": world_size}
    if env is not None:
        c["env_WORLD_SIZE"] = env
    c["return_microbatch"] = rm
    if target is not None:
        c["target_deepspeed_version"] = target
    if note:
        c["note"] = note
    return c


def cases():
    C = []
    add = C.append

    # --- v0.1: DeepSpeed unit-test fixture and docs example ----------------------------------------------------------
    add(case("v01_fixture_10k", {"elasticity": el(**FIXTURE)}))
    add(case("v01_fixture_ws64", {"elasticity": el(**FIXTURE)}, world_size=64))
    add(case("v01_fixture_ws128_invalid", {"elasticity": el(**FIXTURE)}, world_size=128))
    add(case("v01_fixture_ws64_rm", {"elasticity": el(**FIXTURE)}, world_size=64, rm=True,
             note="world_size > 0 path wins over return_microbatch"))
    add(case("v01_fixture_rm_no_ws", {"elasticity": el(**FIXTURE)}, rm=True,
             note="issue #8156: v0.1 return_microbatch without world_size divides by 0"))
    add(case("v01_fixture_rm_no_ws_env16", {"elasticity": el(**FIXTURE)}, env="16", rm=True,
             note="v0.1 ignores env WORLD_SIZE"))
    add(case("v01_fixture_prefer_smaller", {"elasticity": el(**FIXTURE, prefer_larger_batch=False)}))
    add(case("v01_fixture_doc_key_prefer_large_batch", {"elasticity": el(**FIXTURE, prefer_large_batch=False)},
             note="documented key spelling prefer_large_batch is ignored by the code"))
    add(case("v01_fixture_ignore_batch_info",
             {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
              "elasticity": el(**FIXTURE, ignore_non_elastic_batch_info=True)}, world_size=34))
    add(case("v01_docs_example", v01(2000, [2, 4, 6], min_gpus=1, max_gpus=10000, min_time=20)))
    add(case("v01_docs_example_ws6", v01(2000, [2, 4, 6], min_gpus=1, max_gpus=10000, min_time=20), world_size=6))
    add(case("v01_docs_example_ws7", v01(2000, [2, 4, 6]), world_size=7))
    add(case("v01_docs_example_ws9_invalid", v01(2000, [2, 4, 6]), world_size=9))
    add(case("v01_negative_world_size", v01(2000, [2, 4, 6]), world_size=-4,
             note="world_size <= 0 skips the membership check"))

    # --- v0.1: large caps, caps between highly composite numbers -----------------------------------------------------
    for cap in (50000, 100000, 123456, 333333, 720720, 720721, 999999, 1000000, 2000000, 5000000, 10000000):
        add(case(f"v01_mb6_cap{cap}", v01(cap, MB6)))
    add(case("v01_mb6_cap100000_ws96_invalid", v01(100000, MB6), world_size=96))
    add(case("v01_mb6_cap720720_ws_1000_invalid", v01(720720, MB6), world_size=1000))
    add(case("v01_mb6_cap720720_prefer_smaller", v01(720720, MB6, prefer_larger_batch=False)))
    add(case("v01_mb6_cap1e6_max1e6", v01(1000000, MB6, max_gpus=1000000)))
    add(case("v01_mb6_cap1e7_max1e6", v01(10000000, MB6, max_gpus=1000000)))
    add(case("v01_mb6_cap1e7_max1e7", v01(10000000, MB6, max_gpus=10000000)))
    add(case("v01_mb6_cap1e7_max1e6_ws7", v01(10000000, MB6, max_gpus=1000000), world_size=7))
    add(case("v01_mb6_cap1e7_min1000", v01(10000000, MB6, min_gpus=1000, max_gpus=1000000)))
    add(case("v01_mb1_cap1e7_max1e7", v01(10000000, [1], max_gpus=10000000),
             note="HCN list saturates at 720720: batch 720720 although the cap is 1e7"))
    add(case("v01_mb1_cap720720", v01(720720, [1])))
    add(case("v01_mb3_cap5e6", v01(5000000, [3])))

    # --- v0.1: many micro batches (primes, duplicates, unsorted) -----------------------------------------------------
    add(case("v01_mb1to10_cap100000", v01(100000, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])))
    add(case("v01_mb1to10_cap1e7", v01(10000000, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])))
    add(case("v01_mb1to10_cap1e7_max1e6", v01(10000000, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], max_gpus=1000000)))
    add(case("v01_primes10_cap1e6", v01(1000000, [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]),
             note="LCM 6469693230 > cap is skipped (PR #8237)"))
    add(case("v01_primes10_cap1e7_ws13_invalid", v01(10000000, [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]),
             world_size=13))
    add(case("v01_primes10_cap1e7_ws11", v01(10000000, [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]), world_size=11))
    add(case("v01_bigprimes10_cap1e7", v01(10000000, [31, 37, 41, 43, 47, 53, 59, 61, 67, 71]),
             note="LCM 86239147714071593 (> 2**53) > cap is skipped"))
    add(case("v01_bigprimes12_lcm_overflow", v01(10000000, [31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79]),
             note="numpy int64 LCM wraps to a negative number; that base yields no valid GPU count"))
    add(case("v01_dups_unsorted", v01(100000, [8, 4, 8, 2, 4, 16, 2])))
    add(case("v01_dups_unsorted_ws8", v01(100000, [8, 4, 8, 2, 4, 16, 2]), world_size=8))
    add(case("v01_unsorted_16_3_8_5_12", v01(720720, [16, 3, 8, 5, 12])))
    add(case("v01_unsorted_16_3_8_5_12_prefer_smaller", v01(720720, [16, 3, 8, 5, 12], prefer_larger_batch=False)))
    add(case("v01_primes_7_11_13_cap100000_ws77_invalid", v01(100000, [7, 11, 13]), world_size=77))
    add(case("v01_primes_7_11_13_cap100000_ws11", v01(100000, [7, 11, 13]), world_size=11))
    add(case("v01_mixed9_cap250000", v01(250000, [24, 1, 9, 32, 7, 18, 5, 64, 3])))
    add(case("v01_mixed9_cap250000_prefer_smaller", v01(250000, [24, 1, 9, 32, 7, 18, 5, 64, 3],
                                                         prefer_larger_batch=False)))
    add(case("v01_mb_1_4_bool_true", v01(1000, [True, 4]), world_size=4,
             note="bool passes the int check and behaves as 1"))

    # --- v0.1: caps relative to micro batches and LCM ---------------------------------------------------------------
    add(case("v01_cap_equals_lcm", v01(6, [2, 3])))
    add(case("v01_cap_equals_mb", v01(8, [8])))
    add(case("v01_cap_below_lcm", v01(815, [8, 12, 16, 17])))
    add(case("v01_cap_below_mb", v01(4, [8, 2]), note="ValueError message has a run of spaces from a line "
                                                     "continuation inside the string"))
    add(case("v01_cap_below_all_mb", v01(1, [2])))
    add(case("v01_cap_float", v01(1000.5, [2, 4]), note="float cap accepted"))
    add(case("v01_proper_mbsz_cap32", v01(32, [1, 2, 3, 7], min_gpus=1, max_gpus=1500), world_size=4))
    add(case("v01_cap100_8_10_12", v01(100, [8, 10, 12], min_gpus=1, max_gpus=1500)))

    # --- v0.1: min/max GPU edge cases --------------------------------------------------------------------------------
    add(case("v01_min_eq_max_64", v01(10000, [8, 12, 16, 17], min_gpus=64, max_gpus=64)))
    add(case("v01_min_eq_max_64_ws64", v01(10000, [8, 12, 16, 17], min_gpus=64, max_gpus=64), world_size=64))
    add(case("v01_min_above_range", v01(10000, [8, 12, 16, 17], min_gpus=5000, max_gpus=6000),
             note="no candidate has a valid count: largest candidate with []"))
    add(case("v01_min_above_range_prefer_smaller",
             v01(10000, [8, 12, 16, 17], min_gpus=5000, max_gpus=6000, prefer_larger_batch=False),
             note="no valid count and prefer_larger false: (min(micro_batches), None)"))
    add(case("v01_min_above_range_ws5000", v01(10000, [8, 12, 16, 17], min_gpus=5000, max_gpus=6000),
             world_size=5000))
    add(case("v01_mb4_cap8_gpus5", v01(8, [4], min_gpus=5, max_gpus=5)))
    add(case("v01_mb4_cap4_gpus2", v01(4, [4], min_gpus=2, max_gpus=2), note="valid_gpus None"))
    add(case("v01_mb4_cap4_gpus2_ws2", v01(4, [4], min_gpus=2, max_gpus=2), world_size=2,
             note="membership test on None"))
    add(case("v01_max_below_smallest_valid", v01(10000, [8, 12, 16, 17], min_gpus=32, max_gpus=33)))
    add(case("v01_mb6_cap720720_max1", v01(720720, MB6, max_gpus=1)))
    add(case("v01_mb6_cap720720_max1e6", v01(720720, MB6, max_gpus=1000000)))
    add(case("v01_min_float", v01(2000, [2, 4, 6], min_gpus=1.5, max_gpus=100.5), note="float gpu bounds accepted"))

    # --- v0.2: gpn 8, model parallel 1/2/4, env WORLD_SIZE -----------------------------------------------------------
    for mp in (1, 2, 4):
        for ws in (8, 16, 24, 32, 64, 12):
            add(case(f"v02_cap10000_fixture_gpn8_mp{mp}_env{ws}",
                     v02(10000, [8, 12, 16, 17], mp=mp, min_gpus=32, max_gpus=1500, min_time=20), env=str(ws),
                     rm=True))
    for mp in (1, 2, 4):
        for ws in (16, 64):
            add(case(f"v02_cap720720_mb6_gpn8_mp{mp}_env{ws}", v02(720720, MB6, mp=mp), env=str(ws),
                     rm=(ws == 64)))
    add(case("v02_cap1e7_mb6_gpn8_mp4_env64", v02(10000000, MB6, mp=4), env="64"))
    add(case("v02_cap1e7_mb6_gpn8_mp4_env64_rm", v02(10000000, MB6, mp=4), env="64", rm=True))
    add(case("v02_cap1e7_mb6_gpn8_mp1_max1e6_env64", v02(10000000, MB6, mp=1, max_gpus=1000000), env="64", rm=True))
    add(case("v02_cap100000_mb6_gpn8_mp2_env12_rm", v02(100000, MB6, mp=2), env="12", rm=True,
             note="fallback; micro batch None"))
    add(case("v02_cap2000_gpn8_mp1_prefer_smaller_env24", v02(2000, [2, 4, 6], prefer_larger_batch=False), env="24",
             rm=True))
    add(case("v02_cap2000_gpn8_mp1_prefer_smaller_env12", v02(2000, [2, 4, 6], prefer_larger_batch=False), env="12",
             rm=True))
    add(case("v02_fixture_mp4_env16_2tuple", v02(10000, [8, 12, 16, 17], mp=4, min_gpus=32, max_gpus=1500),
             env="16"))

    # --- v0.2: world_size argument ---------------------------------------------------------------------------------
    add(case("v02_cap720720_mb6_mp2_ws64", v02(720720, MB6, mp=2), world_size=64,
             note="world_size is total GPUs inside v0.2 and DP size in the membership test"))
    add(case("v02_cap720720_mb6_mp2_ws32", v02(720720, MB6, mp=2), world_size=32))
    add(case("v02_cap720720_mb6_mp1_ws64", v02(720720, MB6, mp=1), world_size=64))
    add(case("v02_cap720720_mb6_mp1_ws64_env8", v02(720720, MB6, mp=1), world_size=64, env="8",
             note="argument wins over env"))
    add(case("v02_cap10000_mp1_ws12_fallback", v02(10000, [8, 12, 16, 17], mp=1, min_gpus=32, max_gpus=1500),
             world_size=12, note="fallback list [12] then micro batch from the world_size path"))
    add(case("v02_cap128_mb16_ws16", v02(128, [16], mp=1), world_size=16))
    add(case("v02_negative_world_size_arg", v02(100, [2, 3], gpn=8, mp=1), world_size=-8, rm=True,
             note="negative world_size: fallback with a negative DP size; Python floor division and modulo"))

    # --- v0.2: fallback branch quirks -----------------------------------------------------------------------------
    add(case("v02_batch0_cap128_mb16_env16", v02(128, [16]), env="16", rm=True,
             note="fallback factor 0: batch 0"))
    add(case("v02_batch0_cap128_mb16_env16_2tuple", v02(128, [16]), env="16"))
    add(case("v02_max_below_gpn", v02(1000, [2, 4], max_gpus=4, min_gpus=1), env="8", rm=True,
             note="int(max_gpus / gpn) == 0 becomes cap // min(mb) nodes inside v0.1"))
    add(case("v02_gpn7_env29_float_dp", v02(1000, [2, 3, 5], gpn=7, min_gpus=1, max_gpus=4), env="29", rm=True,
             note="(29 / 7) * 7 == 29.000000000000004 in double arithmetic"))
    add(case("v02_gpn9_mp3_env19_fallback", v02(1000, [2, 3, 5], gpn=9, mp=3, min_gpus=1, max_gpus=4), env="19",
             rm=True))
    add(case("v02_env_world_size_0", v02(100000, MB6, mp=2), env="0", rm=True, note="ZeroDivisionError"))
    add(case("v02_env_world_size_unset", v02(100000, MB6, mp=2)))
    add(case("v02_env_world_size_abc", v02(100000, MB6, mp=2), env="abc"))
    add(case("v02_env_world_size_empty", v02(100000, MB6, mp=2), env=""))
    add(case("v02_env_world_size_minus8", v02(100000, MB6, mp=2), env="-8"))
    add(case("v02_env_world_size_08", v02(100000, MB6, mp=2), env="08", rm=True))
    add(case("v02_mp16_gpn8_invalid", v02(10000, [8, 12, 16, 17], mp=16), env="16"))
    add(case("v02_default_version_env16", {"elasticity": el(max_train_batch_size=2000, micro_batch_sizes=[2, 4, 6])},
             env="16", rm=True, note="version defaults to 0.2"))
    add(case("v02_default_version_no_env", {"elasticity": el(max_train_batch_size=2000, micro_batch_sizes=[2, 4, 6])},
             note="version defaults to 0.2, which needs WORLD_SIZE"))
    add(case("v02_version_string", {"elasticity": el(max_train_batch_size=2000, micro_batch_sizes=[2, 4, 6],
                                                     num_gpus_per_node=4, model_parallel_size=2, version="0.2")},
             env="8", rm=True))

    # --- disabled / missing / bad types / bad versions ---------------------------------------------------------------
    add(case("err_config_not_dict", [], note="ds_config is a list"))
    add(case("err_no_elasticity", {"train_batch_size": 8}))
    add(case("err_elasticity_empty", {"elasticity": {}}))
    add(case("err_disabled", fx(enabled=False)))
    add(case("err_enabled_zero", fx(enabled=0)))
    add(case("enabled_string_false_is_truthy", fx(enabled="false"),
             note="any truthy value enables"))
    add(case("err_elasticity_null", {"elasticity": None}))
    add(case("err_missing_max", {"elasticity": el(micro_batch_sizes=[2, 4], version=0.1)}))
    add(case("err_missing_micro", {"elasticity": el(max_train_batch_size=100, version=0.1)}))
    add(case("err_micro_not_list", v01(100, 4)))
    add(case("err_micro_str_elem", v01(100, [2, "4"])))
    add(case("err_micro_float_elem", v01(100, [2, 4.0])))
    add(case("err_micro_nested", v01(100, [[2], 4])))
    add(case("err_micro_zero", v01(100, [2, 0])))
    add(case("err_micro_negative", v01(100, [-2])))
    add(case("err_micro_empty", v01(100, []), note="empty list passes validation; numpy lcm fails"))
    add(case("err_min_gpus_0", v01(100, [2], min_gpus=0)))
    add(case("err_max_lt_min", v01(100, [2], min_gpus=8, max_gpus=4)))
    add(case("err_min_gpus_str", v01(100, [2], min_gpus="2")))
    add(case("err_cap_str", v01("100", [2])))
    add(case("err_mp0", v01(100, [2], model_parallel_size=0)))
    add(case("err_gpn0", v01(100, [2], num_gpus_per_node=0)))
    add(case("err_min_time_negative", v01(100, [2], min_time=-1)))
    add(case("err_mp2_v01", v01(100, [2], model_parallel_size=2, num_gpus_per_node=8)))
    add(case("err_version_str_0_3", fx(version="0.3")))
    add(case("err_version_0_3", fx(version=0.3)))
    add(case("err_version_0_15", fx(version=0.15), note="NotImplementedError"))
    add(case("err_version_0_0", fx(version=0.0)))
    add(case("err_version_abc", fx(version="abc")))
    add(case("err_version_null", fx(version=None)))
    add(case("err_mp2_version_0_15", fx(version=0.15, model_parallel_size=2,
                                                           num_gpus_per_node=8)))
    add(case("version_string_0_1", fx(version="0.1")))
    add(case("err_target_0_3_7", {"elasticity": el(**FIXTURE)}, target="0.3.7"))
    add(case("target_0_3_8", {"elasticity": el(**FIXTURE)}, target="0.3.8"))
    return C


def data_parallel_size(c):
    """DP size a case runs with: world_size when given, else env WORLD_SIZE // model_parallel_size (v0.2)."""
    if c.get("world_size", 0) > 0:
        return c["world_size"]
    env = c.get("env_WORLD_SIZE")
    if env and env.isdigit() and int(env) > 0:
        return int(env) // c["config"]["elasticity"].get("model_parallel_size", 1)
    return None


def quirks(out_cases):
    """Describe (for the console only) answers that look odd: batch 0, valid list None or [], micro batch None, or a
    micro batch that does not divide the per-rank batch final_batch_size / DP size."""
    lines = []
    for c in out_cases:
        e = c["expected"]
        if "error" in e:
            continue
        tags = []
        if e["final_batch_size"] == 0:
            tags.append("final batch 0")
        if e["valid_gpus"] is None:
            tags.append("valid_gpus None")
        elif e["valid_gpus"] == []:
            tags.append("valid_gpus []")
        if "micro_batch" in e:
            mb = e["micro_batch"]
            if mb is None:
                tags.append("micro batch None")
            else:
                dp = data_parallel_size(c)
                if dp and e["final_batch_size"] % (dp * mb):
                    tags.append(f"micro {mb} does not divide the per-rank batch {e['final_batch_size']}/{dp} "
                                f"(DP size {dp})")
        if tags:
            lines.append(f"quirk: {c['name']}: " + "; ".join(tags))
    return lines


def dump_compact(doc):
    """JSON with one line per case field (lists stay on one line), so diffs of the vectors stay readable."""
    head = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items() if k != "cases"]
    body = []
    for c in doc["cases"]:
        fields = ",\n    ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in c.items())
        body.append("   {\n    " + fields + "\n   }")
    text = "{\n" + ",\n".join(head) + ',\n  "cases": [\n' + ",\n".join(body) + "\n  ]\n}\n"
    if json.loads(text) != doc:
        raise AssertionError("compact JSON writer lost information")
    return text


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT, help="output JSON (default: %(default)s)")
    ap.add_argument("--seed", default=restore.DEFAULT_SEED, help="seed text (default: %(default)s)")
    ap.add_argument("--list", action="store_true", help="only list the case names")
    ap.add_argument("--max-seconds", type=float, default=110.0,
                    help="fail if the whole run takes longer than this (default: %(default)s)")
    args = ap.parse_args(argv)

    all_cases = cases()
    names = [c["name"] for c in all_cases]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        print(f"make_vectors.py: error: duplicate case names: {dups}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(names))
        return 0

    try:
        mod, _, info = peerlib.restore_and_load(args.seed)
    except peerlib.PeerError as e:
        print(f"make_vectors.py: error: {e}", file=sys.stderr)
        return 2
    import numpy

    t_start = time.perf_counter()
    out_cases = []
    slowest = (0.0, "")
    for c in all_cases:
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                expected, _ = peerlib.run_case(mod, c)
        except peerlib.PeerError as e:
            print(f"make_vectors.py: error in case {c['name']}: {e}", file=sys.stderr)
            return 2
        dt = time.perf_counter() - t0
        for w in caught:
            print(f"note: case {c['name']}: DeepSpeed/numpy emitted {w.category.__name__}: {w.message}")
        slowest = max(slowest, (dt, c["name"]))
        rec = {k: v for k, v in c.items() if k != "note"}
        rec["expected"] = expected
        if "note" in c:
            rec["note"] = c["note"]
        out_cases.append(rec)
        if time.perf_counter() - t_start > args.max_seconds:
            print(f"make_vectors.py: error: run exceeded {args.max_seconds} s at case {c['name']}", file=sys.stderr)
            return 2

    doc = {
        "generated_by": "bench/deepspeed_peer/make_vectors.py (DeepSpeed compute_elastic_config restored from the "
                        "shared seed by bench/deepspeed_peer/restore.py)",
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "deepspeed_source": "seed 002 (DeepSpeed elasticity.py, commit edaa7221 per reference) + PR #8237 rule",
        "seed_fingerprint_sha256": info["seed_fingerprint_sha256"],
        "target_deepspeed_version": peerlib.TARGET_DEEPSPEED_VERSION,
        "call": "compute_elastic_config(config, target_deepspeed_version, world_size=world_size, "
                "return_microbatch=return_microbatch) with env WORLD_SIZE = env_WORLD_SIZE (unset when absent); "
                "a case's target_deepspeed_version overrides the top-level one",
        "cases": out_cases,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(dump_compact(doc))
    for line in quirks(out_cases):
        print(line)
    n_err = sum(1 for c in out_cases if "error" in c["expected"])
    print(f"wrote {len(out_cases)} cases ({len(out_cases) - n_err} answers, {n_err} errors) to {args.out} in "
          f"{time.perf_counter() - t_start:.1f} s (slowest case {slowest[1]}: {slowest[0]:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
