#!/usr/bin/env bash
# Runs every cmocka test program given on the command line, shows their output, and
# ends with one summary line "tests: N passed, N failed" (cmocka test cases, summed).
# Exit status: non-zero if any program failed or crashed. SC_TEST_RUNNER, if set, is put before
# each program (scripts/test-aarch64.sh: qemu-aarch64 and the arm64 loader).
# SC_TEST_JOBS programs run at once (default: the CPU count): their outputs are shown whole and
# in the order given, each once it and the programs before it have finished. Every test program
# works in files and folders of its own (named by its process id or mkdtemp), so they can run
# side by side; none asserts a timing.
set -u
jobs=${SC_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $jobs in '' | *[!0-9]* | 0) jobs=1 ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sc_run_tests_XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0; bad_programs=()
report() { # shows program $1's output (number $2) and adds up its counts
  local t=$1 out rc p f
  echo "== $t"
  out=$(cat "$tmp/$2.out"); rc=$(cat "$tmp/$2.rc")
  printf '%s\n' "$out"
  # a program may run several groups (one per kernel path): sum their counts
  p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' | awk '{s+=$1} END {print s+0}')
  f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below:/\1/p' | awk '{s+=$1} END {if (NR) print s}')
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
  if [ "$rc" -ne 0 ]; then
    bad_programs+=("$t")
    # a crash or an early exit reports no cmocka failure count: count the program
    [ -z "$f" ] && failed=$((failed + 1))
  fi
}
progs=("$@")
shown=0 # programs reported so far (in order)
for i in "${!progs[@]}"; do
  (
    ${SC_TEST_RUNNER:-} "${progs[$i]}" >"$tmp/$i.out" 2>&1
    echo $? >"$tmp/$i.rc.part" && mv "$tmp/$i.rc.part" "$tmp/$i.rc"
  ) &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n 2>/dev/null || true; done
  while [ $shown -lt ${#progs[@]} ] && [ -f "$tmp/$shown.rc" ]; do
    report "${progs[$shown]}" $shown
    shown=$((shown + 1))
  done
done
wait
while [ $shown -lt ${#progs[@]} ]; do
  report "${progs[$shown]}" $shown
  shown=$((shown + 1))
done
if [ ${#bad_programs[@]} -ne 0 ]; then echo "failing test programs: ${bad_programs[*]}"; fi
echo "tests: $passed passed, $failed failed"
[ ${#bad_programs[@]} -eq 0 ]
