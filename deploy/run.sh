#!/usr/bin/env bash
# The two commands of the README.
#   deploy/run.sh serve [glossa-server flags]   install, build, serve the bundled demo model
#   deploy/run.sh test  [ctest flags]           install, build, run every test, then the unit and
#                                               server tests again under ASan+UBSan
# Environment: BUILD_DIR (default build), JOBS (default: number of cores),
#   GLOSSA_SANITIZERS=0 skips the sanitizer pass (ASan+UBSan build in build-asan).
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
    configure_and_build "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DGLOSSA_BUILD_TESTS=ON
    status=0
    (cd "$BUILD_DIR" && ctest --output-on-failure --timeout 1500 -j "$JOBS" "$@") || status=$?
    if [ "${GLOSSA_SANITIZERS:-1}" != 0 ]; then
      echo "== the unit and server tests again under AddressSanitizer + UndefinedBehaviorSanitizer"
      configure_and_build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLOSSA_BUILD_TESTS=ON \
        -DGLOSSA_SANITIZE=address
      (cd build-asan && ctest --output-on-failure --timeout 1500 -j "$JOBS" -L "unit|server") ||
        status=$?
    fi
    exit $status
    ;;
  *)
    echo "usage: deploy/run.sh serve [glossa-server flags] | test [ctest flags]" >&2
    exit 2
    ;;
esac
