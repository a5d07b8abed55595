# provenance.sh: sourced by the scripts under docs/results/ that write a
# results file: the check that the bench they run was built clean from this
# commit (a figure is a commit's only then), and the first lines every
# results file starts with (command, commit, machine, date).
#
#   gs_require_clean BENCH [--allow-dirty]   refuse (exit 1) a dirty work
#                                            tree, or a bench built from
#                                            another revision
#   gs_results_header BENCH COMMAND...       print the header lines
gs_require_clean() {
  local b=$1 allow=${2:-}
  if [ -n "$(git status --porcelain)" ] && [ "$allow" != "--allow-dirty" ]; then
    echo "$0: the work tree has changes: commit them first (or --allow-dirty)" >&2
    exit 1
  fi
  local built
  built=$("$b" --version | head -1)
  case $built in
    *"(git $(git rev-parse --short=12 HEAD))"*) ;;
    *) [ "$allow" = "--allow-dirty" ] ||
         { echo "$0: $b is '$built', not a clean build of $(git rev-parse --short=12 HEAD): rebuild it (ninja -C build)" >&2; exit 1; } ;;
  esac
}

gs_results_header() {
  local b=$1 commit
  shift
  commit=$(git rev-parse HEAD)
  if [ -n "$(git status --porcelain)" ]; then commit="$commit (with uncommitted changes)"; fi
  echo "# command: $*"
  echo "# commit: $commit"
  echo "# machine: $(hostname), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores, $(uname -sr)"
  echo "# date: $(date -u '+%F %T UTC')"
  echo "# bench: $("$b" --version | head -1)"
}
