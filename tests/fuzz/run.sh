#!/usr/bin/env bash
# Runs every fuzz target of a -Dfuzz=true build for SECONDS each (default 60), starting from
# the committed seeds (tests/fuzz/corpus) plus seeds made from the shared test data.
# Prints "fuzz-NAME: N executions in S s" per target; exits non-zero if any target found a
# crash (its reproducer is left in BUILD_DIR/fuzz-artifacts/).
#
#   tests/fuzz/run.sh BUILD_DIR [SECONDS]
#
# FUZZ_SEED=N starts libFuzzer's draws from a fixed seed (CI uses 1, which keeps its runs
# near the checked ones; runs still part where coverage differs, so not a replay: see
# docs/reliability.md); unset, each run explores from a fresh random seed.
set -uo pipefail

build=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS]}" && pwd)
seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
export HANASHI_TESTDATA=${HANASHI_TESTDATA:-$source_dir/../shared/testdata}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

work="$build/fuzz-work"
artifacts="$build/fuzz-artifacts"
rm -rf "$work"
mkdir -p "$work/generated" "$artifacts"
python3 "$here/make-corpus.py" "$work/generated" "$HANASHI_TESTDATA" "$source_dir" || exit 1

status=0
unit_timeout=10 # seconds one input may take
for target in gguf session gbnf json-schema chat-template tokenizer reasoning markdown import; do
  exe="$build/tests/fuzz/fuzz-$target"
  if [ ! -x "$exe" ]; then
    echo "fuzz-$target: not built"; status=1; continue
  fi
  # libFuzzer writes new inputs into the first directory: a scratch copy, not the repository
  corpus="$work/$target"
  mkdir -p "$corpus"
  seeds=()
  [ -d "$here/corpus/$target" ] && seeds+=("$here/corpus/$target")
  [ -d "$work/generated/$target" ] && seeds+=("$work/generated/$target")
  log="$work/$target.log"
  seed_option=()
  [ -n "${FUZZ_SEED:-}" ] && seed_option=(-seed="$FUZZ_SEED")
  "$exe" "${seed_option[@]}" -max_total_time="$seconds" -timeout="$unit_timeout" -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$artifacts/$target-" -print_final_stats=1 "$corpus" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ $rc -ne 0 ] && grep -q "ERROR: libFuzzer: timeout" "$log"; then
    # libFuzzer's limit is wall-clock time: a virtual machine that was not scheduled for a
    # while (a process stopped with SIGSTOP shows the same) fails a unit that runs in a
    # fraction of a second.  The unit runs once more on its own; only a unit that is
    # slow again is a finding.
    unit=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    started=$(date +%s%N)
    if [ -f "$unit" ] && "$exe" -timeout="$unit_timeout" -rss_limit_mb=2048 "$unit" >"$log.repeat" 2>&1; then
      took=$(( ($(date +%s%N) - started) / 1000000 ))
      echo "fuzz-$target: a unit passed the ${unit_timeout} s limit after ${execs:-?} executions but ran in ${took} ms when repeated: the machine stalled, not the code (unit $unit)"
      continue
    fi
  fi
  if [ $rc -ne 0 ]; then
    echo "fuzz-$target: FAILED after ${execs:-?} executions (exit $rc); log $log"
    grep -m 20 -E "ERROR|SUMMARY|runtime error|abort|Test unit written|^Base64:" "$log" | sed 's/^/  /'
    status=1
  else
    echo "fuzz-$target: ${execs:-?} executions in ${seconds} s, no crash"
  fi
done
exit $status
