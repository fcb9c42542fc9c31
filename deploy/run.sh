#!/usr/bin/env bash
# The two commands of the README.
#   deploy/run.sh serve [glossa-server flags]   install, build, serve the bundled demo model
#   deploy/run.sh test  [ctest flags]           install, build, run every test
# Environment: BUILD_DIR (default build), JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

build() {
  bash deploy/setup.sh
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

case "${1:-}" in
  serve)
    shift
    build -DGLOSSA_BUILD_TESTS=OFF
    exec "$BUILD_DIR/glossa-server" "$@"
    ;;
  test)
    shift
    build -DGLOSSA_BUILD_TESTS=ON
    cd "$BUILD_DIR"
    exec ctest --output-on-failure --timeout 1500 -j "$JOBS" "$@"
    ;;
  *)
    echo "usage: deploy/run.sh serve [glossa-server flags] | test [ctest flags]" >&2
    exit 2
    ;;
esac
