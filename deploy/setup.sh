#!/usr/bin/env bash
# Installs everything Glossa's build, tests and tools need on Debian 12 (idempotent; fast when done).
#   deploy/setup.sh            packages + SentencePiece built against the system protobuf
#   GLOSSA_SETUP_MINIMAL=1     skip test-only packages (used by the Docker build stage)
set -euo pipefail

# libcivetweb-dev: the HTTP API's server (prometheus-cpp already links civetweb for /metrics);
# libicu-dev: sentence breaks for split_sentences (documents); libgumbo-dev: format=html;
# libcld2-dev: language identification (LibreTranslate's /detect and source "auto");
# libisal-dev: the model file's checksums at load (ISA-L's crc32, ~4x zlib's);
# libzip-dev, libpugixml-dev: office documents and e-books (zip archives of XML) for /translate_file.
BUILD_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates dpkg-dev
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers libabsl-dev prometheus-cpp-dev
  nlohmann-json3-dev zlib1g-dev libgtest-dev libgmock-dev libbenchmark-dev
  libcivetweb-dev libicu-dev libgumbo-dev libcld2-dev libisal-dev libzip-dev libpugixml-dev
  python3 python3-numpy python3-torch
)
# podman and friends: the container test builds the top-level Dockerfile and runs the image, and
# brings up deploy/docker-compose.yml's glossa service with podman-compose
# (../shared/NOTES-containers.md; debootstrap makes the debian:12-slim base without a registry).
# clang-14 and its runtime libraries (libFuzzer, ASan, UBSan) for the fuzz targets (tests/fuzz);
# libomp-14-dev only for clang's omp.h (that build links GCC's libgomp, as oneDNN does).
# chromium and python3-websocket: the web page test drives headless Chromium over DevTools.
# nodejs: docs/quickstart.md's JavaScript example (the npm clients test also needs npm).
# python3-sentencepiece: the CTranslate2 side of tests/bench/peer_compare.py tokenizes with it.
# python3-docx, python3-openpyxl, python3-ebooklib: independent writers and readers of the office
# documents and e-books the file API test translates; LibreOffice (headless, no GUI) makes the
# OpenDocument and PowerPoint files of that test and checks that translations open and print.
TEST_PACKAGES=(python3-grpcio python3-protobuf python3-yaml prometheus
               podman buildah runc debootstrap uidmap slirp4netns fuse-overlayfs podman-compose
               clang-14 libclang-rt-14-dev libomp-14-dev
               chromium python3-websocket python3-sentencepiece nodejs
               python3-docx python3-openpyxl python3-ebooklib
               libreoffice-writer-nogui libreoffice-impress-nogui)

SPM_PREFIX=${GLOSSA_SPM_PREFIX:-/opt/glossa/sentencepiece}
SPM_VERSION=0.1.97

missing=()
want=("${BUILD_PACKAGES[@]}")
[ "${GLOSSA_SETUP_MINIMAL:-0}" = 1 ] || want+=("${TEST_PACKAGES[@]}")
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# SentencePiece: Debian's libsentencepiece bundles its own protobuf-lite, which clashes with the
# system libprotobuf that gRPC loads (see ../shared/NOTES-debian.md). We build Debian's own source
# package as a static library against the system protobuf, once, into $SPM_PREFIX.
if [ ! -f "$SPM_PREFIX/lib/libsentencepiece.a" ]; then
  echo "setup: building SentencePiece $SPM_VERSION from Debian's source package into $SPM_PREFIX" >&2
  # A private apt configuration that knows only bookworm's deb-src: no edit of /etc/apt.
  work=$(mktemp -d)
  mkdir -p "$work/lists/partial"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" >"$work/src.list"
  apt_src=(-o "Dir::Etc::SourceList=$work/src.list" -o Dir::Etc::SourceParts=/dev/null
           -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
  apt-get "${apt_src[@]}" update -q >/dev/null
  (cd "$work" && apt-get "${apt_src[@]}" source -q --download-only sentencepiece >/dev/null &&
   dpkg-source -x --skip-patches sentencepiece_*.dsc src >/dev/null)
  cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSPM_USE_BUILTIN_PROTOBUF=OFF -DSPM_ENABLE_SHARED=OFF -DSPM_ENABLE_TCMALLOC=OFF \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$SPM_PREFIX" >/dev/null
  cmake --build "$work/build" --target sentencepiece-static
  $SUDO mkdir -p "$SPM_PREFIX/lib" "$SPM_PREFIX/include"
  $SUDO cp "$work/build/src/libsentencepiece.a" "$SPM_PREFIX/lib/"
  $SUDO cp "$work/src/src/sentencepiece_processor.h" "$SPM_PREFIX/include/"
  rm -rf "$work"
fi
echo "setup: all dependencies present" >&2
