#!/usr/bin/env bash
# The two commands of the README.
#   deploy/run.sh serve [glossa-server flags]   install, build, serve the bundled demo model
#   deploy/run.sh test  [ctest flags]           install, build, run every test but the soak,
#                                               shapes and catalogue tests (name them, e.g. -L
#                                               soak, to run them),
#                                               then the unit and server tests again under
#                                               ASan+UBSan, then each fuzz target for a short while
# Environment: BUILD_DIR (default build), JOBS (default: number of cores),
#   GLOSSA_SANITIZERS=0 skips the sanitizer pass (ASan+UBSan build in build-asan),
#   GLOSSA_FUZZ=0 skips the fuzz pass (clang libFuzzer build in build-fuzz, ctest -L fuzz),
#   GLOSSA_TSAN=1 adds a ThreadSanitizer pass over the unit and server tests (build-tsan; off by
#   default: another full build, ~15 more minutes on 2 cores). python_batch and
#   metrics_ScrapeLatency skip there: their timing does not hold under TSan's slowdown.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

configure_and_build() {  # DIR CMAKE_ARGS...
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

sanitized_tests() {  # DIR SANITIZER: build with GLOSSA_SANITIZE=SANITIZER, run labels unit|server
  # (called as `sanitized_tests ... || status=$?`, where set -e does not apply: hence the return)
  configure_and_build "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLOSSA_BUILD_TESTS=ON \
    -DGLOSSA_SANITIZE="$2" || return
  (cd "$1" && ctest --output-on-failure --timeout 1500 -j "$JOBS" -L "unit|server")
}

case "${1:-}" in
  serve)
    shift
    bash deploy/setup.sh
    configure_and_build "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DGLOSSA_BUILD_TESTS=OFF
    exec "$BUILD_DIR/glossa-server" "$@"
    ;;
  test)
    shift
    bash deploy/setup.sh
    # The npm client libraries of python_npm_clients (pinned by tests/clients/package-lock.json);
    # without npm or the registry the test skips and says why.
    if command -v npm >/dev/null; then
      timeout 300 npm ci --prefix tests/clients --no-audit --no-fund --ignore-scripts \
        --fetch-retries 1 --loglevel=error >/dev/null || {
        echo "test: npm ci --prefix tests/clients failed (exit $?): python_npm_clients skips" >&2
        rm -rf tests/clients/node_modules  # no half install: the test checks the top level only
      }
    else
      echo "test: no npm to install tests/clients: python_npm_clients skips" >&2
    fi
    configure_and_build "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DGLOSSA_BUILD_TESTS=ON
    status=0
    # Minutes-long load tests and the released-size random models (gigabytes): only when asked
    # for by name (-L soak, -L shapes, -L catalogue).
    exclude=(-LE 'soak|shapes|catalogue')
    case " $* " in *soak*|*shapes*|*catalogue*) exclude=() ;; esac
    (cd "$BUILD_DIR" && ctest --output-on-failure --timeout 1500 -j "$JOBS" "${exclude[@]}" "$@") ||
      status=$?
    if [ "${GLOSSA_SANITIZERS:-1}" != 0 ]; then
      echo "== the unit and server tests again under AddressSanitizer + UndefinedBehaviorSanitizer"
      sanitized_tests build-asan address || status=$?
    fi
    if [ "${GLOSSA_TSAN:-0}" != 0 ]; then
      echo "== the unit and server tests again under ThreadSanitizer"
      sanitized_tests build-tsan thread || status=$?
    fi
    if [ "${GLOSSA_FUZZ:-1}" != 0 ]; then
      echo "== the fuzz targets (clang, libFuzzer + ASan + UBSan), ${GLOSSA_FUZZ_SECONDS:-30} s each"
      configure_and_build build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLOSSA_FUZZ=ON \
        -DCMAKE_CXX_COMPILER=clang++-14 -DGLOSSA_FUZZ_SECONDS="${GLOSSA_FUZZ_SECONDS:-30}"
      (cd build-fuzz && ctest --output-on-failure -j "$JOBS" -L fuzz) || status=$?
    fi
    exit $status
    ;;
  *)
    echo "usage: deploy/run.sh serve [glossa-server flags] | test [ctest flags]" >&2
    exit 2
    ;;
esac
