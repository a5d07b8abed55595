"""ring_period.py: --ring-period H, post-local SGD on the ring.

  - H = 1 is today's ring, bit for bit (the flag's path through the job);
  - H = 4 at world 3: after steps 0, 4, 8 every rank holds the same
    parameters (--verify's hashes) and bytes went over the ring; after the
    others the ranks differ and nothing was sent;
  - against PyTorch 1.13 itself (python3-torch, gloo, 2 processes):
    torch.distributed.optim.PostLocalSGDOptimizer over SGD with momentum +
    PeriodicModelAverager(period=3, warmup_steps=0), on the same initial
    parameters and data split (DistributedSampler(shuffle=False)): every
    tensor of rank 0 within 1e-5 relative, after training moved it by far
    more. Skipped (that part alone) where PyTorch is missing;
  - bad values are refused (exit 2)."""
import os
import subprocess
import sys

import numpy as np

from gstest import (SMALL, SRC, check, finish, free_port, load_params, run, same_bits, skip_part,
                    steps_csv, tmpdir)

REF = os.path.join(SRC, "tests", "ref", "ref.py")

for args, says in [(["--ring-period", "0"], "--ring-period 0"),
                   (["--ring-period", "2", "--mode", "ps"], "needs --mode ring"),
                   (["--ring-period", "2", "--precision", "fp16"], "--precision fp32")]:
    a = args + (["--mode", "ring"] if "--mode" not in args else [])
    r = run(a + SMALL)
    check(r.returncode == 2 and says in r.stderr, f"{args}: {r.returncode} {r.stderr[-300:]}")

base = ["--mode", "ring", "--world", "3", "--steps", "10", "--warmup", "1", "--verify"] + SMALL
outs = {}
for name, extra in (("plain", []), ("h1", ["--ring-period", "1"]), ("h4", ["--ring-period", "4"])):
    d, p = tmpdir(), tmpdir()
    r = run(base + extra + ["--out", d + "/r", "--save-params", p + "/x"])
    check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stderr[-600:]}")
    outs[name] = (d + "/r", p + "/x")
if all(os.path.isdir(p) for _, p in outs.values()):
    check(same_bits(load_params(outs["h1"][1]), load_params(outs["plain"][1])),
          "--ring-period 1 differs from the ring")
    check(not same_bits(load_params(outs["h4"][1]), load_params(outs["plain"][1])),
          "--ring-period 4 gave the ring's bits")
    rows = steps_csv(outs["h4"][0])
    for step in range(10):
        rs = [x for x in rows if int(x["step"]) == step]
        same = len({x["param_hash"] for x in rs}) == 1
        sent = min(int(x["bytes_sent"]) for x in rs)
        if step % 4 == 0:
            check(same and sent > 0, f"H=4 step {step}: averaged? same {same}, sent {sent}")
        else:
            check(not same and sent == 0, f"H=4 step {step}: local? same {same}, sent {sent}")

# against PyTorch's post-local SGD
TORCH = r'''
import os, sys, numpy as np, torch, torch.distributed as dist, torch.nn.functional as F
from torch.distributed.optim import PostLocalSGDOptimizer
from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
sys.path.insert(0, sys.argv[1]); import ref
rank, world, init, data, out, steps, batch, period = (int(sys.argv[2]), int(sys.argv[3]),
    sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9]))
torch.set_num_threads(1)
dist.init_process_group("gloo", rank=rank, world_size=world)
model = "mlp:64-32-10"
shapes = ref.param_shapes(model)
P = {n: torch.tensor(np.load(os.path.join(init, n + ".npy")), requires_grad=True)
     for n, _ in shapes}
x, y = ref.load_data(data)
x, y = torch.tensor(x.astype(np.float32))[rank::world], torch.tensor(y)[rank::world]
params = [P[n] for n, _ in shapes]
opt = PostLocalSGDOptimizer(optim=torch.optim.SGD(params, lr=0.05, momentum=0.9),
                            averager=PeriodicModelAverager(period=period, warmup_steps=0))
pos = 0
for _ in range(steps):
    if pos >= len(y): pos = 0
    xb, yb = x[pos:pos + batch], y[pos:pos + batch]
    pos += len(yb)
    opt.zero_grad()
    h = xb
    for i in range(1, 3):
        h = F.linear(h, P[f"fc{i}.weight"], P[f"fc{i}.bias"])
        if i < 2: h = F.relu(h)
    F.cross_entropy(h, yb).backward()
    opt.step()
if rank == 0:
    os.makedirs(out, exist_ok=True)
    for n, _ in shapes: np.save(os.path.join(out, n + ".npy"), P[n].detach().numpy())
dist.destroy_process_group()
'''
have_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed.optim"],
                            capture_output=True).returncode == 0
if not have_torch:
    skip_part("the comparison with PyTorch's PostLocalSGDOptimizer",
              "/usr/bin/python3 cannot import torch.distributed.optim (python3-torch: "
              "./install.sh --deps)")
else:
    t = tmpdir()
    rng = np.random.default_rng(5)
    imgs, labs = rng.integers(0, 256, (96, 8, 8)), rng.integers(0, 10, 96)
    for path, arr, nd in ((t + "/i.idx", imgs, 3), (t + "/l.idx", labs, 1)):
        with open(path, "wb") as f:
            f.write(bytes([0, 0, 8, nd]))
            for dim in arr.shape:
                f.write(int(dim).to_bytes(4, "big"))
            f.write(arr.astype(np.uint8).tobytes())
    data = f"idx:{t}/i.idx,{t}/l.idx"
    subprocess.run(["/usr/bin/python3", REF, "init", "--model", "mlp:64-32-10", "--seed", "3",
                    "--out", t + "/init"], check=True, capture_output=True)
    steps, batch, period = 14, 8, 3
    r = run(["--mode", "ring", "--world", "2", "--ring-period", str(period), "--model",
             "mlp:64-32-10", "--data", data, "--no-shuffle", "--batch", str(batch), "--steps",
             str(steps), "--lr", "0.05", "--momentum", "0.9", "--load-params", t + "/init",
             "--save-params", t + "/ours", "--threads", "1", "--link", "none", "--repeat", "1",
             "--quiet", "--timeout", "20", "--out", t + "/r"])
    check(r.returncode == 0, f"bench for the torch comparison: {r.stderr[-600:]}")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               OMP_NUM_THREADS="1")
    procs = [subprocess.Popen(["/usr/bin/python3", "-c", TORCH, os.path.dirname(REF), str(k), "2",
                               t + "/init", data, t + "/torch", str(steps), str(batch),
                               str(period)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in range(2)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    ok = all(p.returncode == 0 for p in procs)
    check(ok, f"torch post-local SGD failed: {errs}")
    if ok and r.returncode == 0:
        ours, theirs = load_params(t + "/ours"), load_params(t + "/torch")
        init = load_params(t + "/init")
        for k in theirs:
            err = np.linalg.norm(ours[k] - theirs[k]) / np.linalg.norm(theirs[k])
            moved = np.linalg.norm(theirs[k] - init[k]) / np.linalg.norm(theirs[k])
            check(err < 1e-5, f"{k}: {err:.2e} relative to torch's PostLocalSGDOptimizer")
            check(moved > 100 * 1e-5, f"{k}: training moved it only {moved:.2e}")
            print(f"ring_period: {k}: {err:.1e} from torch, moved {moved:.2e}")

finish("bench_ring_period")
