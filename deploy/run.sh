#!/usr/bin/env bash
# The two commands of the README.
#   deploy/run.sh serve [glossa-server flags]   install, build, serve the bundled demo model
#   deploy/run.sh test  [ctest flags]           install, build, run every test but the long
#                                               ones (labels soak, abuse, shapes, catalogue,
#                                               long: name them, e.g. -L soak, to run them),
#                                               then the unit and server tests again under
#                                               ASan+UBSan, then each fuzz target for a short
#                                               while
# Each phase prints its elapsed time; `test` ends with a table of them.
# Environment: BUILD_DIR (default build), JOBS (default: number of cores),
#   GLOSSA_SANITIZERS=0 skips the sanitizer pass (ASan+UBSan build in build-asan),
#   GLOSSA_FUZZ=0 skips the fuzz pass (clang libFuzzer build in build-fuzz, ctest -L fuzz),
#   GLOSSA_FUZZ_SECONDS (default 10): how long each fuzz target runs in that pass,
#   GLOSSA_TSAN=1 adds a ThreadSanitizer pass over the unit and server tests (build-tsan; off by
#   default: another full build, ~15 more minutes on 2 cores). python_batch and
#   metrics_ScrapeLatency skip there: their timing does not hold under TSan's slowdown.
# The three builds share ccache's cache (~/.cache/ccache): paths are hashed relative to the
# checkout, so a clone elsewhere on the same machine reuses what an earlier build compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}

phases=()
phase() {  # NAME COMMAND...: run COMMAND, print and record its elapsed time; returns its status
  local name=$1 start=$SECONDS rc=0
  shift
  echo "== $name" >&2
  "$@" || rc=$?
  local took=$((SECONDS - start))
  phases+=("$(printf '%-44s %4d min %02d s  exit %d' "$name" $((took / 60)) $((took % 60)) $rc)")
  echo "== $name: $((took / 60)) min $((took % 60)) s, exit $rc" >&2
  return $rc
}
print_phases() {
  echo "== phases (wall time)"
  printf '%s\n' "${phases[@]}"
  if command -v ccache >/dev/null; then
    echo "== ccache: $(ccache --print-stats 2>/dev/null | awk -F'\t' '
      $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hit += $2 }
      $1 == "cache_miss" { miss = $2 } END { printf "%d hits, %d misses", hit, miss }')"
  fi
}

configure_and_build() {  # DIR CMAKE_ARGS...
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

install_npm_clients() {
  # The npm client libraries of python_npm_clients and python_npm_deepl (pinned by
  # tests/clients/package-lock.json); without npm or the registry the tests skip and say why.
  if command -v npm >/dev/null; then
    timeout 300 npm ci --prefix tests/clients --no-audit --no-fund --ignore-scripts \
      --fetch-retries 1 --loglevel=error >/dev/null || {
      echo "test: npm ci --prefix tests/clients failed (exit $?): python_npm_clients and" \
        "python_npm_deepl skip" >&2
      rm -rf tests/clients/node_modules  # no half install: the test checks the top level only
    }
  else
    echo "test: no npm to install tests/clients: python_npm_clients and python_npm_deepl skip" >&2
  fi
}

run_ctest() {  # DIR CTEST_ARGS...
  local dir=$1
  shift
  (cd "$dir" && ctest --output-on-failure --timeout 1500 -j "$JOBS" "$@")
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
    command -v ccache >/dev/null && ccache --zero-stats >/dev/null
    status=0
    phase "setup (deploy/setup.sh)" bash deploy/setup.sh || exit
    install_npm_clients
    phase "build ($BUILD_DIR, Release)" configure_and_build "$BUILD_DIR" \
      -DCMAKE_BUILD_TYPE=Release -DGLOSSA_BUILD_TESTS=ON || { print_phases; exit 1; }
    # Minutes-long load tests, full variants of the slow tests and the released-size random
    # models (gigabytes): only when asked for by label (-L soak, -L abuse, -L shapes,
    # -L catalogue, -L long).
    exclude=(-LE 'soak|abuse|shapes|catalogue|long')
    case " $* " in *soak*|*abuse*|*shapes*|*catalogue*|*long*) exclude=() ;; esac
    phase "tests ($BUILD_DIR)" run_ctest "$BUILD_DIR" "${exclude[@]}" "$@" || status=$?
    if [ "${GLOSSA_SANITIZERS:-1}" != 0 ]; then
      echo "== the unit and server tests again under AddressSanitizer + UndefinedBehaviorSanitizer"
      phase "build (build-asan, ASan+UBSan)" configure_and_build build-asan \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLOSSA_BUILD_TESTS=ON -DGLOSSA_SANITIZE=address \
        -DGLOSSA_INTEGRATION_TESTS=OFF &&
        phase "tests (build-asan, unit|server)" run_ctest build-asan -L "unit|server" ||
        status=$?
    fi
    if [ "${GLOSSA_TSAN:-0}" != 0 ]; then
      echo "== the unit and server tests again under ThreadSanitizer"
      phase "build (build-tsan, TSan)" configure_and_build build-tsan \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLOSSA_BUILD_TESTS=ON -DGLOSSA_SANITIZE=thread \
        -DGLOSSA_INTEGRATION_TESTS=OFF &&
        phase "tests (build-tsan, unit|server)" run_ctest build-tsan -L "unit|server" ||
        status=$?
    fi
    if [ "${GLOSSA_FUZZ:-1}" != 0 ]; then
      fuzz_seconds=${GLOSSA_FUZZ_SECONDS:-10}
      echo "== the fuzz targets (clang, libFuzzer + ASan + UBSan), $fuzz_seconds s each"
      phase "build (build-fuzz, clang libFuzzer)" configure_and_build build-fuzz \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLOSSA_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-14 \
        -DGLOSSA_FUZZ_SECONDS="$fuzz_seconds" &&
        phase "fuzz (build-fuzz, $fuzz_seconds s a target)" run_ctest build-fuzz -L '^fuzz$' ||
        status=$?
    fi
    print_phases
    exit $status
    ;;
  *)
    echo "usage: deploy/run.sh serve [glossa-server flags] | test [ctest flags]" >&2
    exit 2
    ;;
esac
