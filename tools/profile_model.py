#!/usr/bin/python3
"""profile_model.py: measure a PyTorch network for gradsync's --model profile:FILE.

    python3 tools/profile_model.py torchvision:vgg16 --batch 32 --device cpu -o vgg16.json
    python3 tools/profile_model.py path/to/net.py:MyNet --input 3,32,32 -o mynet.json
    python3 tools/profile_model.py transformers:bert -o bert-base.json     (needs transformers)

The model is built without pretrained weights, in training mode, and trained
on random data with a dummy loss (cross-entropy against fixed random labels
for every 2-D output, the mean square of every other floating output), so
that backward reaches every parameter as real training would. The profile
(JSON, "gradsync-profile" version 1; docs/model.md "Bring your own model")
holds:

  parameters   every trainable parameter's name, shape, element count
               (numel) and dtype, in state_dict order, and the layer that
               owns it
  ready_order  the order in which backward made the gradients ready,
               measured by a hook on each parameter's gradient accumulator
               (the hook DDP's reducer uses), not assumed
  layers       the modules that own parameters directly, each with its
               forward_s and backward_s: the medians over the timed steps of
                 forward_s:  the time from the previous layer's forward end
                             (or the step's start) to the end of this one's,
                 backward_s: the time backward spent before each of this
                             layer's gradients became ready, since the
                             gradient ready before it (or backward's start),
               so the parameter-free work between layers (activations,
               pooling, residual additions, attention's products) counts
               towards the layer that follows it, and the layers' times add
               up to the step; and macs, the multiply-adds per sample of the
               layer's own forward where they can be counted (convolutions,
               linear layers, multi-head attention, norms), else null
  forward_tail_s, backward_tail_s
               what the step spent after the last layer's forward (the
               loss) and after the last gradient (the inputs' gradients)
  step         the forward and backward of whole steps without hooks
               (medians), to set the hooks' cost beside the layers' sum
  environment  machine, processor, device, torch version, threads, batch

Timing: --warmup steps first, then --steps timed steps with the hooks
(on a GPU every hook synchronizes the device, so each time is the work's),
then --clean-steps without them. torch's intra-op threads are set by
--threads (default 1: the machines this runs on are shared), its inter-op
threads to 1. Progress goes to stderr, one line per step.
"""
import argparse
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time

try:
    import torch
except ImportError:  # the message a newcomer needs, not a traceback
    sys.exit("profile_model.py: PyTorch is not installed (Debian: apt-get install python3-torch "
             "python3-torchvision; or pip install torch torchvision)")


def say(msg):
    print("profile_model: " + msg, file=sys.stderr, flush=True)


# ---- building the model ----

def build_torchvision(name):
    try:
        import torchvision
    except ImportError:
        sys.exit("profile_model.py: torchvision:%s needs torchvision (Debian: apt-get install "
                 "python3-torchvision; or pip install torchvision)" % name)
    fn = getattr(torchvision.models, name, None)
    if fn is None or not callable(fn) or name.startswith("_"):
        sys.exit("profile_model.py: torchvision has no model %r (e.g. resnet50, vgg16, "
                 "inception_v3, mobilenet_v2)" % name)
    kwargs = {"weights": None}
    if name in ("inception_v3", "googlenet"):
        kwargs["init_weights"] = False  # scipy's truncated normal is slow and changes nothing here
    try:
        model = fn(**kwargs)
    except TypeError:  # torchvision before 0.13
        model = fn(pretrained=False)
    side = 299 if name == "inception_v3" else 224
    return model, ("image", [3, side, side])


def build_file(spec, kwargs):
    path, _, cls = spec.rpartition(":")
    if not path or not cls:
        sys.exit("profile_model.py: %s: give FILE.py:ClassName" % spec)
    if not os.path.isfile(path):
        sys.exit("profile_model.py: %s: no such file" % path)
    mod_spec = importlib.util.spec_from_file_location("profiled_module", path)
    mod = importlib.util.module_from_spec(mod_spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    mod_spec.loader.exec_module(mod)
    klass = getattr(mod, cls, None)
    if klass is None:
        sys.exit("profile_model.py: %s defines no %s" % (path, cls))
    return klass(**kwargs)


def build_transformers(spec, seq):
    try:
        import transformers
    except ImportError:
        sys.exit("profile_model.py: transformers:%s needs Hugging Face transformers, which is not "
                 "installed here (pip install transformers); torchvision:NAME and FILE.py:Class "
                 "work without it" % spec)
    if spec.endswith(".json"):
        config = transformers.AutoConfig.from_pretrained(spec)  # a local config file
    else:
        config = transformers.AutoConfig.for_model(spec)  # the model type's defaults
    model = transformers.AutoModel.from_config(config)
    return model, ("tokens", [seq], config.vocab_size)


def build(spec, args):
    kind, _, rest = spec.partition(":")
    if kind == "torchvision" and rest:
        return build_torchvision(rest)
    if kind == "transformers" and rest:
        return build_transformers(rest, args.seq)
    if spec.rpartition(":")[0].endswith(".py"):
        model = build_file(spec, json.loads(args.kwargs) if args.kwargs else {})
        shape = [int(x) for x in args.input.split(",")]
        return model, ("image" if len(shape) == 3 else "vector", shape)
    sys.exit("profile_model.py: %s: give torchvision:NAME, FILE.py:ClassName or "
             "transformers:MODEL_TYPE (or transformers:config.json)" % spec)


# ---- inputs and the loss ----

def make_inputs(how, batch, device, gen):
    if how[0] == "tokens":
        seq, vocab = how[1][0], how[2]
        ids = torch.randint(0, vocab, (batch, seq), generator=gen).to(device)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                "token_type_ids": torch.zeros_like(ids)}
    return torch.randn([batch] + how[1], generator=gen).to(device)


def floating_outputs(out):
    if torch.is_tensor(out):
        return [out] if out.is_floating_point() else []
    if isinstance(out, dict):
        vals = list(out.values())
    elif isinstance(out, (list, tuple)):
        vals = list(out)
    elif hasattr(out, "to_tuple"):
        vals = list(out.to_tuple())
    else:
        vals = []
    return [t for v in vals for t in floating_outputs(v)]


def dummy_loss(out, labels):
    outs = floating_outputs(out)
    if not outs:
        sys.exit("profile_model.py: the model's output holds no floating tensor to take a loss of")
    loss = 0
    for t in outs:
        if t.dim() == 2:
            loss = loss + torch.nn.functional.cross_entropy(t.float(), labels % t.shape[1])
        else:
            loss = loss + t.float().pow(2).mean()
    return loss


def run_model(model, inputs):
    return model(**inputs) if isinstance(inputs, dict) else model(inputs)


# ---- what the profile lists ----

def trainable_in_state_dict_order(model):
    """[(name, parameter)]: state_dict order, each tensor once (tied weights
    under their first name, as named_parameters() and DDP list them)"""
    by_name = dict(model.named_parameters())
    out, seen = [], set()
    for name in model.state_dict(keep_vars=True):
        p = by_name.get(name)
        if p is None or id(p) in seen or not p.requires_grad:
            continue
        seen.add(id(p))
        out.append((name, p))
    return out


def layers_of(model, params):
    """the modules that own parameters directly: [(name, module)], and each
    parameter's layer index"""
    owner = {}
    layers = []
    for mname, mod in model.named_modules():
        own = [p for p in mod._parameters.values() if p is not None]
        if not own:
            continue
        idx = len(layers)
        layers.append((mname, mod))
        for p in own:
            owner.setdefault(id(p), idx)
    return layers, [owner[id(p)] for _, p in params]


def macs_of(mod, inp, out, batch):
    """multiply-adds per sample of one call, or None where not counted"""
    nn = torch.nn
    o = out[0] if isinstance(out, (tuple, list)) else out
    if isinstance(mod, nn.modules.conv._ConvNd) and torch.is_tensor(o):
        k = math.prod(mod.kernel_size) * mod.in_channels // mod.groups
        return o.numel() / batch * k
    if isinstance(mod, nn.Linear) and torch.is_tensor(o):
        return o.numel() / batch * mod.in_features
    if isinstance(mod, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)) and \
            torch.is_tensor(o):
        return o.numel() / batch  # one multiply-add per element (scale and shift)
    if isinstance(mod, nn.Embedding):
        return 0.0  # a lookup
    if isinstance(mod, nn.MultiheadAttention) and len(inp) >= 2:
        q, k = inp[0], inp[1]
        tq, tk = q.numel() / mod.embed_dim, k.numel() / mod.embed_dim  # tokens, whole batch
        e = mod.embed_dim
        # q, k, v and out projections; the scores and their weighted sum
        return (e * e * (2 * tq + 2 * tk) + 2 * tq * (tk / batch) * e) / batch
    return None


# ---- measuring ----

class Recorder:
    """the hooks: each layer's forward end, each gradient's readiness"""

    def __init__(self, model, layers, params, device):
        self.sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" \
            else (lambda: None)
        self.on = False
        self.fwd, self.bwd, self.calls, self.macs = [], [], {}, {}
        self.batch = 0
        self.handles, self.accs = [], []
        for i, (_, mod) in enumerate(layers):
            self.handles.append(mod.register_forward_hook(self._fwd_hook(i)))
        for j, (_, p) in enumerate(params):
            self._grad_hook(p, j)

    def _fwd_hook(self, i):
        def hook(mod, inp, out):
            if not self.on:
                return
            self.sync()
            self.fwd.append((time.perf_counter(), i))
            if self.batch:
                m = macs_of(mod, inp, out, self.batch)
                prev = self.macs.get(i, 0.0)
                self.macs[i] = None if m is None or prev is None else prev + m
        return hook

    def _grad_hook(self, p, j):
        def fired(*_):
            if self.on:
                self.sync()
                self.bwd.append((time.perf_counter(), j))
        if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
            self.handles.append(p.register_post_accumulate_grad_hook(fired))
        else:  # the gradient accumulator itself, as DDP's reducer hooks it
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            self.accs.append(acc)  # keep it alive: the hook lives on this node
            acc.register_hook(fired)

    def close(self):
        for h in self.handles:
            h.remove()


def one_step(model, inputs, labels, rec, device, hooked):
    sync = rec.sync
    rec.fwd, rec.bwd, rec.on = [], [], hooked
    for p in model.parameters():
        p.grad = None
    sync()
    t0 = time.perf_counter()
    loss = dummy_loss(run_model(model, inputs), labels)
    sync()
    t1 = time.perf_counter()
    loss.backward()
    sync()
    t2 = time.perf_counter()
    rec.on = False
    return t0, t1, t2


def segments(step, nlayers, layer_of, nparams):
    """per layer (forward_s, backward_s), the tails, the readiness order"""
    (t0, t1, t2), fwd, bwd = step
    f = [0.0] * nlayers
    prev = t0
    for t, i in sorted(fwd):
        f[i] += t - prev
        prev = t
    ftail = t1 - prev
    b = [0.0] * nlayers
    prev = t1
    order = []
    for t, j in sorted(bwd):
        b[layer_of[j]] += t - prev
        prev = t
        order.append(j)
    btail = t2 - prev
    missing = sorted(set(range(nparams)) - set(order))
    return f, b, ftail, btail, order, missing


def environment(args, device):
    env = {"machine": platform.node(), "platform": platform.platform(),
           "processor": platform.processor() or platform.machine(),
           "python": platform.python_version(), "torch": torch.__version__,
           "threads": torch.get_num_threads(), "device": str(device)}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    env["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    env["cores"] = os.cpu_count()
    if device.type == "cuda":
        env["device_name"] = torch.cuda.get_device_name(device)
    else:
        env["device_name"] = env.get("cpu", env["processor"])
    try:
        import torchvision
        env["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    return env


def med(xs):
    return statistics.median(xs) if xs else 0.0


def profile(args):
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set by an earlier parallel call
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("profile_model.py: --device cuda: no CUDA device is visible to torch")
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    model, how = build(args.model, args)
    model.to(device).train()
    params = trainable_in_state_dict_order(model)
    if not params:
        sys.exit("profile_model.py: %s has no trainable parameters" % args.model)
    layers, layer_of = layers_of(model, params)
    gen = torch.Generator().manual_seed(args.seed)
    inputs = make_inputs(how, args.batch, device, gen)
    labels = torch.randint(0, 1 << 30, (args.batch,), generator=gen).to(device)
    rec = Recorder(model, layers, params, device)
    nparams = sum(p.numel() for _, p in params)
    say("%s: %d parameters in %d tensors, %d layers; batch %d on %s, %d thread%s" %
        (args.model, nparams, len(params), len(layers), args.batch, device, args.threads,
         "" if args.threads == 1 else "s"))
    timed, clean = [], []
    total = args.warmup + args.steps + args.clean_steps
    for s in range(total):
        phase = "warm-up" if s < args.warmup else "timed" if s < args.warmup + args.steps \
            else "without hooks"
        hooked = phase == "timed"
        rec.batch = args.batch if s == args.warmup else 0  # count multiply-adds once
        t0, t1, t2 = one_step(model, inputs, labels, rec, device, hooked)
        if phase == "timed":
            timed.append(((t0, t1, t2), list(rec.fwd), list(rec.bwd)))
        elif phase == "without hooks":
            clean.append((t1 - t0, t2 - t1))
        say("step %d/%d (%s): forward %.3f s, backward %.3f s" % (s + 1, total, phase, t1 - t0,
                                                                 t2 - t1))
    rec.close()
    per = [segments(st, len(layers), layer_of, len(params)) for st in timed]
    missing = per[0][5]
    if missing:
        names = ", ".join(params[j][0] for j in missing[:5])
        sys.exit("profile_model.py: backward gave no gradient to %d parameters (%s%s): gradsync "
                 "trains every parameter every step, as DDP without find_unused_parameters"
                 % (len(missing), names, ", ..." if len(missing) > 5 else ""))
    order = per[0][4]
    agree = sum(1 for p in per if p[4] == order)
    if agree < len(per):
        say("note: the readiness order differed between timed steps (%d of %d as the first); "
            "the first is kept" % (agree, len(per)))
    out_layers = []
    for i, (name, mod) in enumerate(layers):
        macs = rec.macs.get(i)  # None: not counted, or never called as a module
        out_layers.append({
            "name": name or "(model)",
            "type": type(mod).__name__,
            "forward_s": med([p[0][i] for p in per]),
            "backward_s": med([p[1][i] for p in per]),
            "macs": macs,
        })
    prof = {
        "format": "gradsync-profile",
        "version": 1,
        "model": args.model,
        "batch": args.batch,
        "input": {"kind": how[0], "shape": how[1]},
        "environment": environment(args, device),
        "steps": {"warmup": args.warmup, "timed": args.steps, "without_hooks": args.clean_steps},
        "step": {"forward_s": med([c[0] for c in clean]), "backward_s": med([c[1] for c in clean])},
        "forward_tail_s": med([p[2] for p in per]),
        "backward_tail_s": med([p[3] for p in per]),
        "parameters": [{"name": n, "shape": list(p.shape), "numel": p.numel(),
                        "dtype": str(p.dtype).replace("torch.", ""), "layer": layer_of[j]}
                       for j, (n, p) in enumerate(params)],
        "layers": out_layers,
        "ready_order": order,
        "command": " ".join(["tools/profile_model.py"] + sys.argv[1:]),
    }
    fsum = sum(l["forward_s"] for l in out_layers) + prof["forward_tail_s"]
    bsum = sum(l["backward_s"] for l in out_layers) + prof["backward_tail_s"]
    counted = [l["macs"] for l in out_layers if l["macs"] is not None]
    say("layers: forward %.3f s, backward %.3f s (whole steps without hooks: %.3f and %.3f s); "
        "%.3g GMAC per sample counted in %d of %d layers" %
        (fsum, bsum, prof["step"]["forward_s"], prof["step"]["backward_s"], sum(counted) / 1e9,
         len(counted), len(out_layers)))
    return prof


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="MODEL: torchvision:NAME (no pretrained weights), "
                                 "FILE.py:ClassName (built with --kwargs), or "
                                 "transformers:MODEL_TYPE / transformers:config.json (needs Hugging "
                                 "Face transformers; optional)")
    ap.add_argument("model", metavar="MODEL")
    ap.add_argument("-o", "--out", required=True, help="the profile to write (JSON)")
    ap.add_argument("--batch", type=int, default=32, help="samples per step [32]")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="[cpu]")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (a shared machine: say how many) [1]")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first [2]")
    ap.add_argument("--steps", type=int, default=5, help="timed steps, with the hooks [5]")
    ap.add_argument("--clean-steps", type=int, default=3,
                    help="steps timed whole, without hooks [3]")
    ap.add_argument("--input", default="3,224,224",
                    help="FILE.py models: one sample's shape, C,H,W or N [3,224,224]")
    ap.add_argument("--kwargs", help="FILE.py models: the constructor's arguments, as JSON")
    ap.add_argument("--seq", type=int, default=128, help="transformers: tokens per sample [128]")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.batch < 1 or args.steps < 1 or args.warmup < 0 or args.clean_steps < 0 or \
            args.threads < 1:
        ap.error("--batch, --steps and --threads must be at least 1, --warmup and --clean-steps "
                 "at least 0")
    prof = profile(args)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(prof, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)
    say("wrote %s (bench --model profile:%s)" % (args.out, args.out))


if __name__ == "__main__":
    main()
