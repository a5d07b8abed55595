#!/usr/bin/python3
"""profiler.py BENCH: tools/profile_model.py, as a newcomer runs it.
  - torchvision networks (resnet18, mobilenet_v2, at batch 1) profile to
    exactly their parameter counts (torch's own sum, and torchvision's
    published 11,689,512 and 3,504,872), in state_dict order, with a
    readiness order that is a permutation, times >= 0, the machine, torch's
    version and the threads asked for; conv1's multiply-adds as counted by
    hand; and bench accepts the file (--model profile:FILE);
  - the shipped profiles (worker/profiles/) hold torchvision's resnet50 and
    vgg16 and bert-base's counts, and each says what made it;
  - a spec it cannot build, and transformers where it is not installed,
    are refused with a message that says what to do.
Skipped where python3-torch or python3-torchvision is missing."""
import json
import math
import os
import subprocess
import sys

from gstest import SRC, check, finish, require, run, skip_part, tmpdir

TOOL = os.path.join(SRC, "tools", "profile_model.py")
try:
    import torch
    import torchvision
except ImportError as ex:
    skip_part("profiler", f"{ex.name} is not installed")
    finish("profiler")


def profile(args, timeout=600):
    return subprocess.run(["/usr/bin/python3", TOOL] + args, capture_output=True, text=True,
                          timeout=timeout)


d = tmpdir()
PUBLISHED = {"resnet18": 11689512, "mobilenet_v2": 3504872}
for name, published in PUBLISHED.items():
    out = os.path.join(d, name + ".json")
    r = profile([f"torchvision:{name}", "--batch", "1", "--warmup", "0", "--steps", "1",
                 "--clean-steps", "0", "--threads", "1", "-o", out])
    if not check(r.returncode == 0 and os.path.exists(out), f"{name}: {r.stderr[-1500:]}"):
        continue
    check("step 1/1 (timed)" in r.stderr, f"{name}: progress lines: {r.stderr[-300:]}")
    p = json.load(open(out))
    model = getattr(torchvision.models, name)(weights=None)
    ours = sum(q["numel"] for q in p["parameters"])
    torch_count = sum(q.numel() for q in model.parameters())
    check(ours == torch_count == published,
          f"{name}: the profile lists {ours} parameters, torch {torch_count}, published {published}")
    names = [n for n in model.state_dict() if n in dict(model.named_parameters())]
    check([q["name"] for q in p["parameters"]] == names, f"{name}: state_dict order")
    check(all(q["numel"] == math.prod(q["shape"]) and q["dtype"] == "float32"
              for q in p["parameters"]), f"{name}: shapes and dtypes")
    check(sorted(p["ready_order"]) == list(range(len(names))), f"{name}: a permutation")
    check(all(l["forward_s"] >= 0 and l["backward_s"] >= 0 for l in p["layers"]) and
          sum(l["backward_s"] for l in p["layers"]) > 0, f"{name}: times")
    env = p["environment"]
    check(env["torch"] == torch.__version__ and env["threads"] == 1 and env["device"] == "cpu"
          and env.get("machine") is not None, f"{name}: environment {env}")
    check(p["batch"] == 1 and p["model"] == f"torchvision:{name}", f"{name}: batch and model")
    if name == "resnet18":
        conv1 = [l for l in p["layers"] if l["name"] == "conv1"]
        check(conv1 and conv1[0]["macs"] == 64 * 3 * 7 * 7 * 112 * 112,
              f"conv1's multiply-adds per sample: {conv1}")
        r = run(["--mode", "local", "--model", "profile:" + out, "--steps", "1", "--warmup", "0",
                 "--batch", "2", "--compute-ms", "1", "--threads", "1", "--link", "none",
                 "--repeat", "1", "--out", os.path.join(d, "run")])
        check(r.returncode == 0 and f"profile:{out}: 11.7 M parameters" in r.stdout,
              f"bench trains the profile: {r.stdout[-800:]} {r.stderr[-800:]}")

# the shipped profiles: made by this tool, with the networks' counts
SHIPPED = {"resnet50": ("torchvision:resnet50", 25557032), "vgg16": ("torchvision:vgg16", 138357544),
           "bert-base": ("transformers:bert", 109482240)}
for name, (spec, count) in SHIPPED.items():
    p = json.load(open(os.path.join(SRC, "worker", "profiles", name + ".json")))
    check(p["model"] == spec and sum(q["numel"] for q in p["parameters"]) == count and
          p["command"].startswith("tools/profile_model.py"),
          f"worker/profiles/{name}.json: {p['model']}, {sum(q['numel'] for q in p['parameters'])}")

# refusals that say what to do
r = profile(["torchvision:no_such_net", "-o", os.path.join(d, "x.json")])
check(r.returncode != 0 and "no model 'no_such_net'" in r.stderr, f"unknown network: {r.stderr}")
r = profile(["nonsense", "-o", os.path.join(d, "x.json")])
check(r.returncode != 0 and "torchvision:NAME, FILE.py:ClassName" in r.stderr,
      f"an unknown spec: {r.stderr}")
try:
    import transformers  # noqa: F401
    have_transformers = True
except ImportError:
    have_transformers = False
if not have_transformers:
    r = profile(["transformers:bert", "-o", os.path.join(d, "x.json")])
    check(r.returncode != 0 and "not installed here (pip install transformers)" in r.stderr and
          "Traceback" not in r.stderr, f"transformers missing: {r.stderr}")
check(not os.path.exists(os.path.join(d, "x.json")), "a refused profile writes no file")
finish("profiler")
