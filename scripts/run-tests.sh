#!/usr/bin/env bash
# Runs every cmocka test program given on the command line, shows their output, and
# ends with one summary line "tests: N passed, N failed" (cmocka test cases, summed).
# Exit status: non-zero if any program failed or crashed. SC_TEST_RUNNER, if set, is put before
# each program (scripts/test-aarch64.sh: qemu-aarch64 and the arm64 loader).
set -u
passed=0; failed=0; bad_programs=()
for t in "$@"; do
  echo "== $t"
  out=$(${SC_TEST_RUNNER:-} "$t" 2>&1); rc=$?
  printf '%s\n' "$out"
  # a program may run several groups (one per kernel path): sum their counts
  p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' | awk '{s+=$1} END {print s+0}')
  f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below:/\1/p' | awk '{s+=$1} END {if (NR) print s}')
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
  if [ $rc -ne 0 ]; then
    bad_programs+=("$t")
    # a crash or an early exit reports no cmocka failure count: count the program
    [ -z "$f" ] && failed=$((failed + 1))
  fi
done
if [ ${#bad_programs[@]} -ne 0 ]; then echo "failing test programs: ${bad_programs[*]}"; fi
echo "tests: $passed passed, $failed failed"
[ ${#bad_programs[@]} -eq 0 ]
