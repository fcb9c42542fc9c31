#!/usr/bin/env bash
# The top-level Dockerfile, built and run for real with podman (no Docker daemon here; see
# ../shared/NOTES-containers.md): the image builds, holds no build tools and finds every shared
# library, the server in it answers health (the image's HEALTHCHECK and from the host), serves
# the bundled model and a model mounted at /models and chosen with GLOSSA_MODELS, translating
# exactly as glossa-translate does, over ports published on 127.0.0.1; it runs as a non-root
# user, on a read-only root filesystem, exposes metrics, and exits 0 on SIGTERM. Prints the
# image size and the time of each step.
#
# Environment (set by tests/container/CMakeLists.txt):
#   GLOSSA_SOURCE_DIR   the build context (the repository)
#   GLOSSA_CLIENT, GLOSSA_TRANSLATE, GLOSSA_MODEL   host binaries and the demo model, to compare
#   GLOSSA_CONTAINER_CACHE   where the debian:12-slim base tarball is kept between runs
#                       (default /var/cache/glossa-test, else $XDG_CACHE_HOME/glossa-test);
#                       delete debian-12-slim.tar.gz there to make a fresh one
#   GLOSSA_CONTAINER_FRESH=1   build with nothing kept from earlier runs (ctest
#                       container_image_fresh, label long). Otherwise (container_image) podman's
#                       image store and the build's ccache (the Dockerfile's cache mount) are kept
#                       in the cache directory, so that an unchanged deploy/setup.sh layer and
#                       unchanged sources are not built again; the store is emptied past 8 GB.
# podman keeps everything (images, containers, networks) under a directory of its own inside the
# cache directory; a fresh run's is removed at the end, and a run killed before its cleanup is
# cleaned by the next.
# Exit 77 (skip) only when podman is not installed.
set -euo pipefail

if ! command -v podman >/dev/null; then
  echo "skipped: podman is not installed (deploy/setup.sh installs it with the test packages)"
  exit 77
fi

SRC=${GLOSSA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
CLIENT=${GLOSSA_CLIENT:?set GLOSSA_CLIENT to the host glossa-client}
TRANSLATE=${GLOSSA_TRANSLATE:?set GLOSSA_TRANSLATE to the host glossa-translate}
MODEL=${GLOSSA_MODEL:-$SRC/models/opus-mt-es-en-bible.glossa}
IMAGE=localhost/glossa:test
BUILD_TIMEOUT=${GLOSSA_IMAGE_BUILD_TIMEOUT:-1800}

fail() { echo "FAIL: $*" >&2; exit 1; }
step_start=$SECONDS
step() { echo "--- $* (at $((SECONDS - step_start)) s)"; }
seconds_since() { echo $((SECONDS - $1)); }

# --- Cache directory (base tarball, podman's private storage) --------------------------------
CACHE=${GLOSSA_CONTAINER_CACHE:-}
if [ -z "$CACHE" ]; then
  CACHE=/var/cache/glossa-test
  mkdir -p "$CACHE" 2>/dev/null && [ -w "$CACHE" ] || CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/glossa-test
fi
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock -w 600 9 || fail "another container test holds $CACHE/.lock for over 10 minutes"

# podman's configuration for this test: its own storage and state in $WORK, and the two fixes
# that these machines need (hard limits that cannot be raised; crun unsupported: runc).
write_podman_conf() {  # DIR [RUN_DIR]: images under DIR, the run-time state under RUN_DIR
  local dir=$1 run=${2:-$1} nofile nproc
  nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=1048576
  nproc=$(ulimit -Hu); { [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; } && nproc=32768
  mkdir -p "$dir/graph" "$run/run" "$run/tmp" "$run/networks"
  cat >"$dir/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
events_logger = "file"
cgroup_manager = "cgroupfs"
tmp_dir = "$run/tmp"
[network]
network_config_dir = "$run/networks"
EOF
  cat >"$dir/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$dir/graph"
runroot = "$run/run"
EOF
}
# podman logs an error for each container with a HEALTHCHECK when there is no systemd to run
# it on a timer (there is none here); the test runs the check itself with `podman healthcheck run`.
without_systemd_noise() { grep -v 'unable to get systemd connection' >&2 || true; }
podman_in() {  # DIR podman-args...: podman with the configuration in DIR
  local dir=$1; shift
  CONTAINERS_CONF="$dir/containers.conf" CONTAINERS_STORAGE_CONF="$dir/storage.conf" podman "$@"
}
remove_work_dir() {  # DIR
  local dir=$1
  if [ -f "$dir/containers.conf" ]; then
    podman_in "$dir" rm -a -f -t 0 >/dev/null 2>&1 || true
    podman_in "$dir" system reset -f >/dev/null 2>&1 || true
  fi
  # Overlay mounts that outlived podman would make rm fail.
  grep -o " $dir/[^ ]*" /proc/mounts 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$dir" || echo "warning: could not remove $dir" >&2
}

# Left behind by a run that was killed (ctest timeout, SIGKILL): its process is gone.
for old in "$CACHE"/run.*; do
  [ -d "$old" ] || continue
  pid=$(cat "$old/pid" 2>/dev/null || echo 0)
  if [ "$pid" = 0 ] || ! kill -0 "$pid" 2>/dev/null; then
    echo "cleaning up $old, left by an earlier run"
    remove_work_dir "$old"
  fi
done

WORK=$(mktemp -d "$CACHE/run.XXXXXX")
echo $$ >"$WORK/pid"
# Where podman keeps its images, and where the build's cache mounts live (buildah puts them
# under $TMPDIR): this run's own directory, or the cache directory's, kept between runs.
if [ "${GLOSSA_CONTAINER_FRESH:-0}" = 1 ]; then
  STORE=$WORK
  BUILD_TMP=$WORK/tmp
else
  STORE=$CACHE/store
  BUILD_TMP=$CACHE/build-tmp
  if [ -d "$STORE" ] && [ "$(du -sm "$STORE" | cut -f1)" -gt 8000 ]; then
    echo "emptying the kept image store $STORE (over 8 GB)"
    remove_work_dir "$STORE"
  fi
fi
mkdir -p "$BUILD_TMP"
NAME=glossa-test-$$
cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && podman_in "$STORE" container exists "$NAME" 2>/dev/null; then
    echo "--- container log"; podman_in "$STORE" logs "$NAME" 2>&1 | tail -40
  fi
  podman_in "$STORE" rm -a -f -t 0 >/dev/null 2>&1 || true  # the store is this test's own
  if [ "$STORE" != "$WORK" ]; then  # the kept store: this run's image goes, its layers stay
    podman_in "$STORE" rmi -f "$IMAGE" >/dev/null 2>&1 || true
  fi
  remove_work_dir "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP
# podman refuses a store whose recorded run-time paths changed: a kept store keeps them too, on
# /run (a tmpfs, emptied by a reboot, after which podman resets their state as it should).
state=$WORK
if [ "$STORE" != "$WORK" ]; then
  state=/run/glossa-test-podman
  mkdir -p "$state" 2>/dev/null && [ -w "$state" ] || state=$STORE/state
fi
write_podman_conf "$STORE" "$state"
export CONTAINERS_CONF="$STORE/containers.conf" CONTAINERS_STORAGE_CONF="$STORE/storage.conf"
podman rm -a -f -t 0 >/dev/null 2>&1 || true  # a kept store's containers of a killed run
total_start=$SECONDS

# --- Base image: debian:12-slim made with debootstrap (no registry reachable) ------------------
BASE_TAR=$CACHE/debian-12-slim.tar.gz
t=$SECONDS
if [ ! -s "$BASE_TAR" ]; then
  step "making the debian:12-slim base with debootstrap into $BASE_TAR"
  command -v debootstrap >/dev/null || fail "debootstrap is not installed (deploy/setup.sh)"
  rootfs=$WORK/rootfs
  timeout 900 debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian \
    >"$WORK/debootstrap.log" 2>&1 || { tail -30 "$WORK/debootstrap.log"; fail "debootstrap failed"; }
  # What makes the official image "slim", and its apt sources (with updates and security).
  rm -f "$rootfs/etc/apt/sources.list" "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
EOF
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/usr/share/groff/* "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* \
    "$rootfs"/var/cache/debconf/*-old "$rootfs"/tmp/*
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias \
    -exec rm -rf {} +
  tar --numeric-owner -C "$rootfs" -czf "$BASE_TAR.tmp" . && mv "$BASE_TAR.tmp" "$BASE_TAR"
  rm -rf "$rootfs"
  echo "base tarball: $(du -h "$BASE_TAR" | cut -f1), made in $(seconds_since "$t") s"
else
  step "using the cached base $BASE_TAR"
fi
# Imported once per tarball into a kept store: a new import is a new base, and every layer
# built on it would be built again.
base_stamp=$(stat -c %Y "$BASE_TAR")
if ! podman image exists localhost/debian:12-slim ||
   [ "$(cat "$STORE/base-stamp" 2>/dev/null)" != "$base_stamp" ]; then
  podman import --quiet --change 'CMD ["bash"]' "$BASE_TAR" localhost/debian:12-slim >/dev/null
  podman tag localhost/debian:12-slim docker.io/library/debian:12-slim
  echo "$base_stamp" >"$STORE/base-stamp"
fi
base_seconds=$(seconds_since "$t")

# --- Build ----------------------------------------------------------------------------------
step "podman build (the Dockerfile as it is; compiles Glossa in the build stage)"
t=$SECONDS
sha=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! TMPDIR=$BUILD_TMP timeout "$BUILD_TIMEOUT" podman build --pull=never --format docker \
    --build-arg GLOSSA_GIT_SHA="$sha" -t "$IMAGE" -f "$SRC/Dockerfile" "$SRC" \
    >"$WORK/build.log" 2>&1; then
  tail -60 "$WORK/build.log"
  fail "podman build failed (or ran past ${BUILD_TIMEOUT} s); the log's end is above"
fi
build_seconds=$(seconds_since "$t")
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
base_size=$(podman image inspect --format '{{.Size}}' localhost/debian:12-slim)
echo "image $IMAGE: $((size / 1000000)) MB (base debian:12-slim: $((base_size / 1000000)) MB)," \
     "built in ${build_seconds} s"

# --- The image's configuration ----------------------------------------------------------------
step "image configuration"
podman image inspect "$IMAGE" >"$WORK/image.json"
/usr/bin/python3 - "$WORK/image.json" <<'EOF'
import json, sys
image = json.load(open(sys.argv[1]))[0]
c = image["Config"]
c.setdefault("Healthcheck", image.get("Healthcheck"))  # podman shows it beside Config
def check(ok, what):
    if not ok:
        sys.exit(f"FAIL: image config: {what}: {json.dumps(c, indent=1)}")
user = c.get("User", "")
check(user.split(":")[0] not in ("", "0", "root"), "runs as root")
check(user.split(":")[0].isdigit(), "USER is not numeric (Kubernetes' runAsNonRoot cannot check it)")
check({"50051/tcp", "9464/tcp"} <= set(c.get("ExposedPorts") or {}), "EXPOSE 50051 9464")
test = (c.get("Healthcheck") or {}).get("Test") or []
check("glossa-client" in test and "--health" in test, "HEALTHCHECK through glossa-client --health")
print(f"user {user}, ports {sorted(c['ExposedPorts'])}, healthcheck {test[1:]}")
EOF

# Only what runs: every binary finds its libraries, and no compiler or build tool came along.
podman run --rm --no-healthcheck --entrypoint /bin/sh "$IMAGE" -c '
  for f in /opt/glossa/bin/glossa-*; do
    head -c4 "$f" | grep -q ELF || continue
    out=$(ldd "$f") || exit 1
    if echo "$out" | grep "not found"; then echo "$f: missing libraries"; exit 1; fi
  done
  for tool in c++ gcc cc cmake ninja make; do
    if command -v "$tool"; then echo "build tool in the runtime image: $tool"; exit 1; fi
  done' || fail "the runtime image is missing a library or carries build tools"
podman run --rm --no-healthcheck "$IMAGE" glossa-convert --inspect /opt/glossa/models/opus-mt-es-en-bible.glossa \
  >"$WORK/inspect.log" 2>&1 || { cat "$WORK/inspect.log"; fail "model_tools in the image"; }

# --- Run ------------------------------------------------------------------------------------
step "podman run (read-only root, /models mounted, GLOSSA_MODELS, ports on 127.0.0.1)"
t=$SECONDS
models_dir=$(cd "$(dirname "$MODEL")" && pwd)
model_file=$(basename "$MODEL")
podman run -d --name "$NAME" --read-only --read-only-tmpfs=false \
  -v "$models_dir:/models:ro" \
  -e GLOSSA_MODELS="opus-mt-es-en=/opt/glossa/models/opus-mt-es-en-bible.glossa,mounted=/models/$model_file" \
  -e GLOSSA_FLAGS="--shutdown_timeout=20s --max_active_sequences=16" \
  -p 127.0.0.1::50051 -p 127.0.0.1::9464 \
  "$IMAGE" --threads 1 >/dev/null 2> >(without_systemd_noise)
grpc_addr=$(podman port "$NAME" 50051/tcp | head -1)
metrics_addr=$(podman port "$NAME" 9464/tcp | head -1)
case "$grpc_addr:$metrics_addr" in
  127.0.0.1:*:127.0.0.1:*) ;;
  *) fail "ports not published on 127.0.0.1: gRPC '$grpc_addr', metrics '$metrics_addr'" ;;
esac
echo "gRPC on $grpc_addr, metrics on $metrics_addr"

deadline=$((SECONDS + 120))
until "$CLIENT" --server "$grpc_addr" --health --timeout 2s >/dev/null 2>&1; do
  [ "$(podman inspect --format '{{.State.Running}}' "$NAME")" = true ] ||
    fail "the container stopped before it served"
  [ $SECONDS -lt $deadline ] || fail "no SERVING health answer from $grpc_addr in 120 s"
  sleep 1
done
echo "health from the host: SERVING after $(seconds_since "$t") s"
# No systemd here, so no timer runs the HEALTHCHECK: run it once (exit 0 = healthy).
hc=$(podman healthcheck run "$NAME" 2>&1) || fail "the image's HEALTHCHECK failed: $hc"
echo "HEALTHCHECK (podman healthcheck run): ${hc:-healthy}"

step "translations over the published port vs glossa-translate"
"$CLIENT" --server "$grpc_addr" --list
sentences=$'Y dijo Dios: Sea la luz; y fue la luz.\nEn el principio creó Dios los cielos y la tierra.\nBuenos días\n\nY vio Dios que la luz era buena; y separó Dios la luz de las tinieblas.'
for beam in 4 1; do
  printf '%s\n' "$sentences" | "$TRANSLATE" --model "$MODEL" --beam_size $beam >"$WORK/expected.$beam"
  for model in opus-mt-es-en mounted; do
    printf '%s\n' "$sentences" |
      "$CLIENT" --server "$grpc_addr" --model $model --beam_size $beam >"$WORK/got.$beam.$model" ||
      fail "glossa-client --model $model --beam_size $beam failed"
    diff -u "$WORK/expected.$beam" "$WORK/got.$beam.$model" ||
      fail "model $model, beam $beam: the container's translation differs from glossa-translate's"
  done
done
echo "identical to glossa-translate (2 models x beam 4 and 1, $(grep -c '' "$WORK/expected.4") lines):"
sed 's/^/  /' "$WORK/expected.4"

step "user, metrics"
uids=$(podman exec "$NAME" awk '/^Uid:/ {print $2, $3, $4, $5}' /proc/1/status)
comm=$(podman exec "$NAME" cat /proc/1/comm)
[ "$comm" = glossa-server ] || fail "PID 1 is '$comm', not glossa-server (the entrypoint must exec it)"
for u in $uids; do [ "$u" != 0 ] || fail "glossa-server runs as root (uids: $uids)"; done
echo "PID 1 is glossa-server, uids $uids"
/usr/bin/python3 - "http://$metrics_addr/metrics" "$sha" <<'EOF'
import re, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
for model in ("opus-mt-es-en", "mounted"):
    if not re.search(r'^glossa_queue_depth\{[^}]*model="%s"' % re.escape(model), text, re.M):
        sys.exit(f"FAIL: no glossa_queue_depth for model {model} in the metrics")
m = re.search(r'^glossa_build_info\{[^}]*git_sha="([^"]*)"', text, re.M)
if not m or m.group(1) != sys.argv[2]:
    sys.exit(f"FAIL: glossa_build_info git_sha {m and m.group(1)!r}, expected {sys.argv[2]!r}")
print(f"metrics: glossa_queue_depth for both models, glossa_build_info git_sha {m.group(1)}")
EOF

step "SIGTERM"
t=$SECONDS
podman kill --signal TERM "$NAME" >/dev/null
code=$(timeout 60 podman wait "$NAME") || fail "the container did not stop within 60 s of SIGTERM"
[ "$code" = 0 ] || fail "exit code $code after SIGTERM, expected 0"
logs=$(podman logs "$NAME" 2>&1)
if ! grep -q "draining" <<<"$logs" || ! grep -q "glossa-server: stopped" <<<"$logs"; then
  fail "the log does not show the drain: $logs"
fi
echo "stopped on SIGTERM with exit code 0 in $(seconds_since "$t") s"

# --- deploy/docker-compose.yml's glossa service, as the quickstart uses it ---------------------
step "podman-compose up glossa (deploy/docker-compose.yml): gRPC and HTTP on the published ports"
compose_up() {
  command -v podman-compose >/dev/null || { echo "skipped: podman-compose is not installed"; return; }
  if ss -ltn | grep -qE '127\.0\.0\.1:(50051|8080|9464) |\*:(50051|8080|9464) '; then
    echo "skipped: the compose file's host ports (50051, 8080, 9464) are taken"; return
  fi
  podman tag "$IMAGE" localhost/glossa:latest  # the compose file's image, already built
  local compose=(podman-compose -p "glossa-test-$$" -f "$SRC/deploy/docker-compose.yml")
  "${compose[@]}" up -d --no-build glossa >"$WORK/compose.log" 2>&1 ||
    { cat "$WORK/compose.log"; fail "podman-compose up glossa"; }
  local deadline=$((SECONDS + 120)) answer
  until "$CLIENT" --server 127.0.0.1:50051 --health --timeout 2s >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { cat "$WORK/compose.log"; fail "compose: no gRPC health in 120 s"; }
    sleep 1
  done
  answer=$(curl -s --max-time 30 localhost:8080/translate \
    -d 'q=¡Cuán grandes son tus obras, oh Jehová!&source=es&target=en')
  "${compose[@]}" down >>"$WORK/compose.log" 2>&1 || true
  podman rmi localhost/glossa:latest >/dev/null 2>&1 || true
  [ "$answer" = '{"translatedText":"How great are your works, Yahweh!"}' ] ||
    fail "compose: POST /translate on 127.0.0.1:8080 answered '$answer'"
  echo "compose: gRPC health SERVING on 127.0.0.1:50051; 127.0.0.1:8080/translate: $answer"
}
compose_up

step "done"
echo "summary: image $((size / 1000000)) MB; base image ${base_seconds} s, build ${build_seconds} s," \
     "whole test $(seconds_since "$total_start") s"
