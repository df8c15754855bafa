#!/usr/bin/env bash
# Mutation check: keeps the property tests honest (docs/reliability.md, "Mutation check").
#
# Each tests/mutations/*.patch breaks one property that a test claims to check (allocation-free calls
# on every MPI rank, non-blocking starts, the options struct's versioning, errors reaching every rank
# at once, the documented push rule, a persistent thread pool, timeout detection) and names, in its
# header, the targets to build and the checks that must catch it:
#
#   Mutation: <one line: what the patch breaks>
#   Targets: <cmake targets>
#   Check: <bash command run from the scratch build dir; $BIN = bin dir, $SRC = sources, $MPIEXEC>
#   Check: ...                  (every check must fail on the mutant: each one is claimed to catch it)
#
# The script makes a scratch git worktree of HEAD (or --rev REV) with its own build dir, builds the
# union of the targets once and runs every check on the unmutated tree (each must pass, and a gtest
# check must run at least one test), then per patch: applies it, rebuilds the targets, runs its checks
# and reverts it. A mutation is "caught" when every one of its checks fails, "SURVIVED" otherwise; a
# patch that no longer applies (the code moved) is an error ("patch does not apply"), never caught,
# and so is a mutant that does not build. Exit status 0 only when every mutation was caught.
#
#   scripts/mutation_check.sh [--rev REV] [--keep] [--list] [NAME...]   (NAME: patch file stem)
#
# Environment: ZEN_JOBS (build jobs, default $ZEN_NPROC), ZEN_MUTATION_DIR (scratch parent, default
# <repo>/build-mutation; under the repository so that ccache's base_dir maps its paths onto the main
# build's), ZEN_MUTATION_CHECK_TIMEOUT (seconds per check, default 300).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/scripts/env.sh"
rev=HEAD keep=0 list=0
names=()
while [ $# -gt 0 ]; do
  case $1 in
    --rev) rev=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --list) list=1; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) names+=("$1"); shift ;;
  esac
done
jobs=${ZEN_JOBS:-$ZEN_NPROC}
check_timeout=${ZEN_MUTATION_CHECK_TIMEOUT:-300}
mdir="$repo/tests/mutations"

field() { sed -n "s/^$2: //p" "$1"; }  # header field of a patch (lines before the diff)
header() { sed -n '/^diff --git /q;p' "$1"; }

patches=()
if [ ${#names[@]} -eq 0 ]; then
  patches=("$mdir"/*.patch)
else
  for n in "${names[@]}"; do
    [ -f "$mdir/$n.patch" ] || { echo "mutation_check: no mutation $n (tests/mutations/$n.patch)" >&2; exit 2; }
    patches+=("$mdir/$n.patch")
  done
fi
[ -f "${patches[0]}" ] || { echo "mutation_check: no patches in $mdir" >&2; exit 2; }

if [ $list = 1 ]; then
  for p in "${patches[@]}"; do
    printf '%-28s %s\n' "$(basename "$p" .patch)" "$(header "$p" | field /dev/stdin Mutation)"
  done
  exit 0
fi

commit=$(git -C "$repo" rev-parse --verify "$rev^{commit}") || { echo "mutation_check: unknown revision $rev" >&2; exit 2; }
if [ "$rev" = HEAD ] && [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  echo "mutation_check: note: uncommitted changes are not checked (the scratch tree is HEAD $(git -C "$repo" rev-parse --short HEAD))" >&2
fi
parent=${ZEN_MUTATION_DIR:-$repo/build-mutation}
mkdir -p "$parent"
scratch=$(mktemp -d "$parent/run.XXXXXX")
wt="$scratch/wt"
cleanup() {
  if [ $keep = 1 ]; then
    echo "mutation_check: kept $scratch"
  else
    git -C "$repo" worktree remove --force "$wt" >/dev/null 2>&1
    rm -rf "$scratch"
    rmdir "$parent" 2>/dev/null
    git -C "$repo" worktree prune
  fi
}
trap cleanup EXIT
git -C "$repo" worktree add --detach "$wt" "$commit" >/dev/null 2>&1 || { echo "mutation_check: git worktree add failed" >&2; exit 2; }
bld="$wt/build"
export BIN="$bld/bin" SRC="$wt" MPIEXEC=${MPIEXEC:-mpiexec}

t_start=$(date +%s)
echo "mutation_check: $(git -C "$repo" rev-parse --short "$commit") in $wt, ${#patches[@]} mutation(s)"
if ! cmake -S "$wt" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZEN_WITH_CUDA=OFF >"$scratch/configure.log" 2>&1; then
  tail -n 30 "$scratch/configure.log"; echo "mutation_check: configure failed" >&2; exit 2
fi
all_targets=()
for p in "${patches[@]}"; do
  for t in $(header "$p" | field /dev/stdin Targets); do all_targets+=("$t"); done
done
mapfile -t all_targets < <(printf '%s\n' "${all_targets[@]}" | sort -u)

build() {  # build LOG TARGETS...
  local log=$1; shift
  cmake --build "$bld" -j "$jobs" --target "$@" >"$log" 2>&1
}

# run_checks PATCH TAG: runs every check of PATCH; prints one line per check; sets ok_count/fail_count
# and first_fail (the first failing check's last meaningful output line).
run_checks() {
  local p=$1 tag=$2 i=0 line rc log
  ok_count=0 fail_count=0 first_fail="" hollow=""
  while IFS= read -r line; do
    i=$((i + 1))
    log="$scratch/$(basename "$p" .patch).$tag.$i.log"
    local t0=$(date +%s)
    # stdin from /dev/null: mpirun would otherwise read the remaining Check lines of this loop.
    (cd "$bld" && timeout "$check_timeout" bash -c "$line") </dev/null >"$log" 2>&1
    rc=$?
    local dt=$(( $(date +%s) - t0 ))
    if [ $rc -eq 0 ]; then
      ok_count=$((ok_count + 1))
      # A gtest filter that selects nothing passes without testing anything.
      if grep -q '^\[==========\] 0 tests from' "$log"; then hollow="check $i ran no test: $line"; fi
      printf '    %-8s %4ss  %s\n' pass "$dt" "$line"
    else
      fail_count=$((fail_count + 1))
      [ $rc -eq 124 ] && rc="timeout after ${check_timeout}s"
      printf '    %-8s %4ss  %s  (exit %s)\n' FAIL "$dt" "$line" "$rc"
      if [ -z "$first_fail" ]; then
        first_fail=$(grep -E 'Failure|FAIL|Expected|error|took|timed out' "$log" | grep -v '^\[  FAILED  \]' | head -n 3 | cut -c1-200)
      fi
    fi
  done < <(header "$p" | field /dev/stdin Check)
  [ $i -gt 0 ] || hollow="no Check: lines"
}

status=0
echo "== baseline: build ${all_targets[*]}"
t0=$(date +%s)
if ! build "$scratch/build-baseline.log" "${all_targets[@]}"; then
  tail -n 40 "$scratch/build-baseline.log"; echo "mutation_check: the unmutated tree does not build" >&2; exit 2
fi
echo "   built in $(( $(date +%s) - t0 )) s; every check must pass on the unmutated tree"
for p in "${patches[@]}"; do
  echo "  $(basename "$p" .patch):"
  run_checks "$p" baseline
  if [ $fail_count -gt 0 ] || [ -n "$hollow" ]; then
    echo "mutation_check: BASELINE FAILS for $(basename "$p" .patch) ${hollow:+($hollow)}: a check that fails (or tests nothing) unmutated proves nothing" >&2
    status=2
  fi
done
[ $status -eq 0 ] || exit $status

declare -a rows
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  t0=$(date +%s)
  echo "== $name: $(header "$p" | field /dev/stdin Mutation)"
  if ! git -C "$wt" apply --check "$p" 2>"$scratch/$name.apply.log"; then
    sed 's/^/   /' "$scratch/$name.apply.log"
    echo "   $name: patch does not apply (the code it mutates moved: refresh the patch, docs/reliability.md)"
    rows+=("$(printf '%-28s %-22s %5s  %s' "$name" "PATCH DOES NOT APPLY" "-" "refresh tests/mutations/$name.patch")")
    status=1
    continue
  fi
  git -C "$wt" apply "$p"
  read -r -a targets <<<"$(header "$p" | field /dev/stdin Targets)"
  if ! build "$scratch/$name.build.log" "${targets[@]}"; then
    grep -m 5 -E 'error|Error' "$scratch/$name.build.log" | sed 's/^/   /'
    rows+=("$(printf '%-28s %-22s %5s  %s' "$name" "MUTANT DOES NOT BUILD" "$(( $(date +%s) - t0 ))" "fix the patch")")
    status=1
  else
    run_checks "$p" mutant
    dt=$(( $(date +%s) - t0 ))
    if [ $ok_count -eq 0 ]; then
      rows+=("$(printf '%-28s %-22s %5s  %s' "$name" "caught ($fail_count/$fail_count)" "$dt" "$(echo "$first_fail" | head -n 1)")")
    else
      rows+=("$(printf '%-28s %-22s %5s  %s' "$name" "SURVIVED" "$dt" "$ok_count of $((ok_count + fail_count)) checks passed on the mutant")")
      status=1
    fi
  fi
  git -C "$wt" checkout -q -- . && git -C "$wt" clean -fdq -e build
done

echo
echo "mutation                     result                     s  detail"
printf '%s\n' "${rows[@]}"
echo "mutation_check: $(( $(date +%s) - t_start )) s in all; $([ $status -eq 0 ] && echo "every mutation caught" || echo "FAILED")"
exit $status
