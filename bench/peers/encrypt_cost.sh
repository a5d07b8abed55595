#!/bin/bash
# bench/peers/encrypt_cost.sh: what --encrypt costs, as the README reports it.
# Run from anywhere after building; prints one line per measurement. The
# collective runs over the sockets (GS_SHM=0): on one host its all-reduce
# would otherwise go through shared memory, which crosses no network and
# is not encrypted.
B=$(cd "$(dirname "$0")/../.." && pwd)/build/bench/bench
cd "$(mktemp -d)"
out=$PWD/encrypt.raw; : > $out
for round in 1 2 3 4 5; do
  for enc in off on; do
    flag=; [ $enc = on ] && flag=--encrypt
    for mode in ring ps; do
      GS_SHM=0 $B --collective allreduce --mode $mode --world 2 -b 1M -e 64M -f 64 -n 10 -w 2 $flag 2>&1 |
        awk -v m=$mode -v e=$enc '$1 ~ /^[0-9]+$/ {print "coll", m, e, $1, $7}' >> $out
      d=$(mktemp -d)
      $B --mode $mode --world 2 --model mlp:784-1024-1024-10 --batch 64 --steps 60 --warmup 10 --quiet --link none --repeat 1 --out $d/r $flag > $d/log 2>&1
      /usr/bin/python3 -c "import json,sys; r=json.load(open('$d/r/report.json'))['runs']; print('train', '$mode', '$enc', 'samples/s', [x['throughput_samples_per_s'] for x in r if x['world']==2][0])" >> $out
      rm -rf $d
    done
  done
done
/usr/bin/python3 - <<'PY'
import collections, statistics
v = collections.defaultdict(list)
for line in open('encrypt.raw'):
    f = line.split()
    v[(f[0], f[1], f[3])].append((f[2], float(f[4])))
for k in sorted(v):
    off = statistics.median([x for e, x in v[k] if e == 'off'])
    on = statistics.median([x for e, x in v[k] if e == 'on'])
    print(f"{k[0]:5} {k[1]:4} {k[2]:>10}  off {off:10.3f}  on {on:10.3f}  on/off {on/off:.2f}")
PY
