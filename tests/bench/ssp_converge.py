"""ssp_converge.py: bounded staleness converges where its analysis says it
should: with plain SGD (no momentum, as Ho et al.'s analysis of ssp
assumes), ps ssp:2 behind a 3x straggler ends, on the digits data, within
10% of bsp's final training loss (docs/stragglers.md, momentum and
staleness). With momentum 0.9 and lr 0.02 the same runs ended with ssp:2
at 1.8 and 2.3 times bsp's loss, so the check can fail.

"Final loss" is each run's smoothed loss at its end (report.json's last
loss_curve point, the mean of every rank's latest batches), not one batch,
so that timing noise on a shared machine does not decide it. The ssp run
must really have applied gradients 2 updates stale, or it tested nothing.
Skips (77) where python3-sklearn is not installed."""
from common import check, digits, finish, report, run, tmpdir

dd = digits("ssp_converge")
ARGS = ["--mode", "ps", "--world", "4", "--model", "mlp:64-256-256-10", "--batch", "180",
        "--steps", "300", "--slow", "3:3", "--momentum", "0", "--lr", "0.2",
        "--data", f"idx:{dd}/train-images.idx,{dd}/train-labels.idx",
        "--threads", "1", "--timeout", "60", "--link", "none", "--repeat", "1", "--quiet"]


def end_loss(sync):
    out = tmpdir()
    r = run(ARGS + ["--ps-sync", sync, "--out", out], timeout=200)
    if not check(r.returncode == 0, f"{sync}: exit {r.returncode}: {r.stderr[-600:]}"):
        return None, None
    run0 = report(out)["runs"][0]
    return run0["loss_curve"]["loss"][-1], run0


bsp, _ = end_loss("bsp")
ssp, run0 = end_loss("ssp:2")
if bsp is not None and ssp is not None:
    print(f"ssp_converge: smoothed final loss bsp {bsp:.4f}, ssp:2 {ssp:.4f}")
    check(ssp <= 1.10 * bsp, f"ssp:2 ends at loss {ssp:.4f}, more than 10% above bsp's {bsp:.4f}")
    check(run0["staleness_max"] == 2, f"ssp:2: staleness at most {run0['staleness_max']}, "
          "want some gradient 2 updates stale behind a 3x straggler")

finish("bench_ssp_converge")
