#!/usr/bin/env bash
# bench/peers/mpi_hosts.sh: Open MPI on bench's emulated hosts, one rank of
#
#   d=$(mktemp -d)
#   bench --hosts K --link RATE -- bench/peers/mpi_hosts.sh $d PROGRAM ARGS...
#
# (one rank per host: --world left at K). Each host is a network namespace
# that only bench's own children enter, so mpirun cannot ssh into it. Here
# host 0's rank runs mpirun over every host's address, and mpirun's rsh
# agent (written into D) hands the line that starts Open MPI's daemon on
# host h to host h's rank of this script, which runs it inside that host;
# D (a directory all ranks can see) carries the line, its output and its
# exit status. MPI's own traffic then crosses the emulated links (eth0).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DIR PROGRAM [ARGS...]  (under bench --hosts K -- ...)" >&2; exit 2; }
dir=$1; shift
: "${GS_HOST_ADDR:?run under bench --hosts K --link RATE -- $0 ...}"
me=$GS_HOST_ADDR
deadline=$((SECONDS + ${GS_MPI_WAIT_S:-60}))

if [ "${RANK:-0}" != 0 ]; then
  # a daemon host: wait for the line, run it, leave its status
  touch "$dir/ready-$me"
  while [ ! -e "$dir/cmd-$me" ]; do
    [ -e "$dir/done" ] && exit 0
    [ $SECONDS -lt $deadline ] || { echo "$0: host $me: no daemon line from mpirun" >&2; exit 1; }
    sleep 0.05
  done
  set +e
  sh -c "$(cat "$dir/cmd-$me")" > "$dir/out-$me" 2>&1
  echo $? > "$dir/rc-$me.tmp" && mv "$dir/rc-$me.tmp" "$dir/rc-$me"
  exit 0
fi

# host 0: every other host's rank ready, then mpirun over all of them
want=$(( ${GS_HOSTS:?} - 1 ))
while [ "$(find "$dir" -maxdepth 1 -name 'ready-*' | wc -l)" -lt "$want" ]; do
  [ $SECONDS -lt $deadline ] || { echo "$0: not every host's rank started" >&2; exit 1; }
  sleep 0.05
done
hosts="$me:1"
for f in "$dir"/ready-*; do hosts="$hosts,${f##*/ready-}:1"; done
cat > "$dir/agent" <<EOF
#!/bin/sh
# rsh agent: agent HOST COMMAND... ; runs COMMAND on HOST through its rank
host=\$1; shift
printf '%s ' "\$@" > "$dir/cmd-\$host.tmp" && mv "$dir/cmd-\$host.tmp" "$dir/cmd-\$host"
while [ ! -e "$dir/rc-\$host" ]; do sleep 0.05; done
cat "$dir/out-\$host" >&2
exit \$(cat "$dir/rc-\$host")
EOF
chmod +x "$dir/agent"
set +e
mpirun --allow-run-as-root --host "$hosts" -np "${WORLD_SIZE:-$GS_HOSTS}" --bind-to none \
  --mca plm_rsh_agent "$dir/agent" --mca plm_rsh_no_tree_spawn 1 \
  --mca oob_tcp_if_include eth0 --mca btl tcp,self --mca btl_tcp_if_include eth0 "$@"
rc=$?
touch "$dir/done"
exit $rc
