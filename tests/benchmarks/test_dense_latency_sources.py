"""benchmarks/dense_latency_sources.py reads a write-up that pastes each benchmark command above its console summary:
each summary gets the flags of the command before it, and the load it ran under follows from those flags."""

from __future__ import annotations

from types import ModuleType

from tests.benchmarks.scripts import load_script

_SUMMARY = """============ Serving Benchmark Result ============
Successful requests:                     {n}
Benchmark duration (s):                  12.50
Total input tokens:                      {tin}
Total generated tokens:                  {tout}
Request throughput (req/s):              0.80
Output token throughput (tok/s):         {otps}
Total Token throughput (tok/s):          900.00
---------------Time to First Token----------------
Mean TTFT (ms):                          {ttft}
Median TTFT (ms):                        40.00
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          {tpot}
Median TPOT (ms):                        9.00
==================================================
"""

DOC = f"""# A write-up

### Test 1: one GPU

```
python benchmarks/benchmark_serving.py --backend vllm \\
--model Some-7B --dataset-name random \\
--num-prompts 1 \\
--random-input-len 1024 \\
--random-output-len 128

{_SUMMARY.format(n=1, tin=1024, tout=128, otps="100.00", ttft="41.50", tpot="9.25")}
```

### Test 2: more load

```
vllm bench serve --model Some-7B --num-prompts 64 --max-concurrency 8 --random-input-len 512
{_SUMMARY.format(n=64, tin=32768, tout=8192, otps="700.00", ttft="120.75", tpot="11.50")}
python benchmarks/benchmark_serving.py --model Some-7B --num-prompts 50 --random-input-len 512
{_SUMMARY.format(n=50, tin=25600, tout=6400, otps="650.00", ttft="2100.00", tpot="30.00")}
```
"""


def _module() -> ModuleType:
    return load_script("dense_latency_sources")


def test_each_summary_gets_the_flags_of_the_command_above_it() -> None:
    mod = _module()
    runs = list(mod.command_summaries(DOC))
    assert [(h, f["num-prompts"], s["ttft_mean"], s["tpot_mean"]) for h, f, s in runs] == [
        ("Test 1: one GPU", "1", "41.50", "9.25"),
        ("Test 2: more load", "64", "120.75", "11.50"),
        ("Test 2: more load", "50", "2100.00", "30.00"),
    ]
    assert runs[0][1]["random-output-len"] == "128" and runs[1][1]["max-concurrency"] == "8"
    assert "max-concurrency" not in runs[2][1]  # a later command's flags do not inherit an earlier one's


def test_the_load_follows_from_the_flags() -> None:
    mod = _module()
    (_, f1, s1), (_, f2, s2), (_, f3, s3) = mod.command_summaries(DOC)
    assert mod._load_fields(s1, f1)[:3] == ("concurrency", "1", "")  # one request alone: concurrency 1
    assert mod._load_fields(s2, f2)[:3] == ("concurrency", "8", "")
    assert mod._load_fields(s3, f3)[:3] == ("offline", "", "")  # everything sent at once
    assert mod._load_fields(s3, f3 | {"request-rate": "4"})[:3] == ("request_rate", "", "4")
