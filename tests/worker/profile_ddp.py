#!/usr/bin/python3
"""profile_ddp.py BENCH: a small PyTorch module, profiled by
tools/profile_model.py, trains in gradsync as torch reported it, with the
buckets torch's own DistributedDataParallel builds for it.

The module is laid out so that backward's order is not the reverse of the
parameters' order: its head is defined first and used last, a skip
projection defined last is used first. Checked:
  - the profile lists torch's state_dict names and shapes, in that order;
  - its ready_order is the order in which torch's tensor hooks saw the
    gradients (a hook of another kind than the profiler's);
  - bench --model profile:FILE saves parameters (--save-params) of exactly
    those names and shapes, and trains in ps and ring at world 2;
  - the buckets bench plans (printed, first and last tensor and count) are
    DDP's after its first iteration, read from torch: a communication hook
    on DDP over a gloo group of one process sees each bucket's parameters,
    with DDP's default caps (25 MiB, the first 1 MiB);
  - the plan is not what the parameters' reverse order would give, so the
    test tells the two apart.
Skipped where python3-torch is missing."""
import os
import re
import subprocess
import sys

from gstest import SRC, check, finish, require, run, skip_part, tmpdir, load_params

try:
    import torch
    import torch.distributed as dist
except ImportError:
    skip_part("profile_ddp", "python3-torch is not installed")
    finish("profile_ddp")

NET = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(1024, 10)           # defined first, used last
        self.body = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(1024, 1024), nn.ReLU())])
        self.norm = nn.LayerNorm(1024)
        self.skip = nn.Linear(64, 1024)           # defined last, used first

    def forward(self, x):
        h = self.skip(x)
        h = self.norm(self.body(h) + h)
        return self.head(torch.relu(h))
'''

d = tmpdir()
src = os.path.join(d, "net.py")
with open(src, "w") as f:
    f.write(NET)
sys.path.insert(0, d)
import net  # noqa: E402

prof = os.path.join(d, "net.json")
r = subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tools", "profile_model.py"),
                    src + ":Net", "--input", "64", "--batch", "4", "--warmup", "1", "--steps", "2",
                    "--clean-steps", "1", "-o", prof], capture_output=True, text=True, timeout=300)
require(r.returncode == 0 and os.path.exists(prof), f"the profiler: {r.stderr[-2000:]}")
check("step 3/4 (timed)" in r.stderr, f"progress while measuring: {r.stderr[-500:]}")
import json  # noqa: E402
p = json.load(open(prof))

# ---- torch's names, shapes and readiness
torch.manual_seed(0)
model = net.Net()
names = [n for n in model.state_dict() if n in dict(model.named_parameters())]
shapes = {n: list(q.shape) for n, q in model.named_parameters()}
check([q["name"] for q in p["parameters"]] == names, "the profile's parameters in state_dict order")
check(all(q["shape"] == shapes[q["name"]] for q in p["parameters"]), "the profile's shapes")
seen = []
for i, (n, q) in enumerate(model.named_parameters()):
    q.register_hook(lambda g, i=i: seen.append(i))
x = torch.randn(4, 64)
torch.nn.functional.cross_entropy(model(x), torch.tensor([1, 2, 3, 4])).backward()
by_name = [n for n, _ in model.named_parameters()]
torch_order = [names.index(by_name[i]) for i in seen]
check(p["ready_order"] == torch_order,
      f"ready_order {p['ready_order']} is torch's {torch_order}")
check(p["ready_order"] != list(range(len(names)))[::-1],
      "the module's backward is not its parameters' reverse order (the test tells them apart)")

# ---- DDP's buckets, read from torch after its first iteration (the rebuild)
dist.init_process_group("gloo", init_method="file://" + os.path.join(d, "pg"), rank=0,
                        world_size=1)
torch.manual_seed(0)
ddp = torch.nn.parallel.DistributedDataParallel(net.Net())
name_of = {id(q): n for n, q in ddp.module.named_parameters()}
buckets = {}


def hook(state, bucket):
    buckets[bucket.index()] = [name_of[id(q)] for q in bucket.parameters()]
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


ddp.register_comm_hook(None, hook)
for it in range(2):
    buckets.clear()
    ddp.zero_grad()
    torch.nn.functional.cross_entropy(ddp(x), torch.tensor([1, 2, 3, 4])).backward()
dist.destroy_process_group()
ddp_buckets = [buckets[i] for i in sorted(buckets)]
require(len(ddp_buckets) >= 3, f"DDP made {len(ddp_buckets)} buckets: {ddp_buckets}")

# ---- gradsync: the same tensors, the same buckets
common = ["--model", "profile:" + prof, "--batch", "4", "--compute-ms", "2", "--threads", "1",
          "--link", "none", "--repeat", "1", "--timeout", "60"]
r = run(["--mode", "local", "--steps", "2", "--warmup", "0", "--save-params", os.path.join(d, "p"),
         "--out", os.path.join(d, "local")] + common)
require(r.returncode == 0, f"bench --mode local: {r.stderr[-1500:]}")
saved = load_params(os.path.join(d, "p"))
check(sorted(saved) == sorted(names), f"saved tensors {sorted(saved)}")
check(all(list(saved[n].shape) == shapes[n] for n in saved if n in shapes),
      "the saved parameters have torch's shapes")
plan = []
for line in r.stdout.splitlines():
    m = re.match(r"\s+bucket (\d+): [\d.]+ [KMG]?i?B, (.*)$", line)
    if not m:
        continue
    text = m.group(2)
    many = re.match(r"(\S+) \.\. (\S+) \((\d+) tensors\)$", text)
    if many:
        plan.append((many.group(1), many.group(2), int(many.group(3))))
    else:
        ts = text.split(", ")
        plan.append((ts[0], ts[-1], len(ts)))
want = [(b[0], b[-1], len(b)) for b in ddp_buckets]
check(plan == want, f"gradsync's buckets {plan} are DDP's {want}")
# what the reverse of the parameters' order would have made instead
rev = []
size, cap, cur = 0, 1 << 20, []
for n in names[::-1]:
    cur.append(n)
    size += 4 * int(torch.tensor(shapes[n]).prod())
    if size >= cap:
        rev.append(cur)
        cur, size, cap = [], 0, 25 << 20
if cur:
    rev.append(cur)
check([(b[0], b[-1], len(b)) for b in rev] != want, "reverse order would give other buckets")

for mode in ("ps", "ring"):
    r = run(["--mode", mode, "--world", "2", "--steps", "3", "--warmup", "1", "--out",
             os.path.join(d, mode)] + common)
    check(r.returncode == 0 and "throughput" in r.stdout, f"{mode} at world 2: {r.stderr[-1500:]}")

finish("profile_ddp")
