#!/usr/bin/env bash
# The test suites under the sanitizers, in build trees of their own:
#   bash scripts/sanitize.sh asan   the quick suite under AddressSanitizer + UndefinedBehaviorSanitizer
#                                   (build-asan; any report fails the test that made it)
#   bash scripts/sanitize.sh tsan   DiComm's suite and the core's stream tests (cpu-reference's worker
#                                   threads) under ThreadSanitizer (build-tsan)
#   bash scripts/sanitize.sh        both
# Slow (the sanitized builds and runs take tens of minutes on two cores), so not part of CI's quick
# suite; run it before a release and after changing threads, memory or parsers.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
bash scripts/install-deps.sh

common=(-Dcuda=disabled -Dtorch_oracle=disabled -Dbenchmarks=disabled -Db_lundef=false)

if [ "$which" = asan ] || [ "$which" = all ]; then
  [ -f build-asan/build.ninja ] || meson setup build-asan "${common[@]}" -Db_sanitize=address,undefined \
    -Dc_args=-fno-sanitize-recover=undefined -Dcpp_args=-fno-sanitize-recover=undefined
  ninja -C build-asan
  # Leaks are reported too, except the libraries' in scripts/lsan.supp. handle_segv=0: the suites
  # plant crashes on purpose (a plugin that segfaults) and check the signal that ended the child,
  # which ASan's handler would turn into an abort; its reports of bad accesses do not need it.
  ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:handle_segv=0:handle_sigbus=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp \
    meson test -C build-asan --suite quick --print-errorlogs --timeout-multiplier 4
fi

if [ "$which" = tsan ] || [ "$which" = all ]; then
  [ -f build-tsan/build.ninja ] || meson setup build-tsan "${common[@]}" -Db_sanitize=thread
  ninja -C build-tsan
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  meson test -C build-tsan --suite dicomm --print-errorlogs --timeout-multiplier 8
  meson test -C build-tsan streams streams_blocking --print-errorlogs --timeout-multiplier 8
fi
