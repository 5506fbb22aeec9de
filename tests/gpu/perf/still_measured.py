"""Which kernels `learn` still measures once a program's first steps are past: the launches
the footprint engine's trace planned to measure in a SHORT run, subtracted per kernel from a
LONG run's (the same program, the same first steps). Per kernel: the launches measured in the
extra steps, of them the samples that check a learnt key (the rest: new keys, or keys that
cannot be learnt), and how many different words they had (many: a key that does not settle).
Usage, from the repository root with .device/ filled:
    for n in 10 30; do STREAMSAN_FOOTPRINT_TRACE=1 .device/streamsan run -- \\
        python3 tests/gpu/perf/programs.py gpt2 $n 5 2> trace-$n.txt; done
    python3 tests/gpu/perf/still_measured.py trace-10.txt trace-30.txt 20"""
import collections
import re
import sys

PLANNED = re.compile(r"streamsan: footprint plan: measure \((.*?)\) (.*?) words (\[.*\])")


def planned(path):
    """Per kernel: the launches planned to be measured, those of them samples, and their
    distinct words."""
    launches, samples, words = collections.Counter(), collections.Counter(), collections.defaultdict(set)
    for line in open(path, errors="replace"):
        m = PLANNED.match(line)
        if m:
            why, kernel = m.group(1), m.group(2)
            launches[kernel] += 1
            samples[kernel] += why == "sample"
            words[kernel].add(m.group(3))
    return launches, samples, words


short, short_samples, _ = planned(sys.argv[1])
long, long_samples, words = planned(sys.argv[2])
steps = int(sys.argv[3])
extra = {k: long[k] - short[k] for k in long if long[k] > short[k]}
sampled = {k: long_samples[k] - short_samples[k] for k in extra}
total, checks = sum(extra.values()), sum(sampled.values())
print(f"measured in the {steps} extra steps: {total} ({total / steps:.1f} a step), {checks} of them samples")
print("launches samples  words  kernel")
for kernel, n in sorted(extra.items(), key=lambda kv: -(kv[1] - sampled[kv[0]])):
    print(f"{n:8d} {sampled[kernel]:7d} {len(words[kernel]):6d}  {kernel[:160]}")
