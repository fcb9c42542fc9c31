# Glossa server image: build with the same setup script as the README and CI, then keep only
# the binaries, their shared libraries, the demo model and model_tools.
#   docker build --build-arg GLOSSA_GIT_SHA=$(git rev-parse --short HEAD) -t glossa .
#   (podman: podman build --format docker ...; --format docker keeps the HEALTHCHECK)
#   docker run -p 50051:50051 -p 9464:9464 glossa                          the demo model
#   docker run -v $PWD/models:/models:ro -e GLOSSA_MODELS=xx-yy=/models/xx-yy.glossa \
#              -p 50051:50051 -p 9464:9464 glossa --threads 2               your models
# Configuration: deploy/docker-entrypoint.sh (GLOSSA_MODELS, GLOSSA_FLAGS, glossa-server flags).
FROM debian:12-slim AS build
WORKDIR /src
COPY deploy/setup.sh deploy/setup.sh
RUN GLOSSA_SETUP_MINIMAL=1 bash deploy/setup.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# The commit for glossa_build_info (.git is not in the build context).
ARG GLOSSA_GIT_SHA=""
# ccache's cache (setup.sh installs ccache) in a build cache mount: a rebuild after a source change
# compiles only what changed (BuildKit, buildah/podman; kept by the builder, not in the image).
RUN --mount=type=cache,target=/root/.cache/ccache \
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLOSSA_BUILD_TESTS=OFF \
      -DGLOSSA_GIT_SHA="$GLOSSA_GIT_SHA" \
 && cmake --build build -j "$(nproc)" \
      --target glossa-server glossa-client glossa-translate glossa-batch \
 && mkdir -p /out/bin \
 && install -s build/glossa-server build/glossa-client build/glossa-translate build/glossa-batch \
      /out/bin/ \
 && install deploy/docker-entrypoint.sh /out/bin/glossa-entrypoint

FROM debian:12-slim
# The shared libraries of the binaries (tests/container checks that ldd finds every one), and
# Python with numpy for model_tools/glossa-convert (model.safetensors; pytorch_model.bin would
# need python3-torch, left out for size).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgrpc++1.51 libgrpc29 libprotobuf32 libdnnl2 \
      libabsl20220623 libgomp1 ocl-icd-libopencl1 zlib1g libprometheus-cpp-core1.0 \
      libprometheus-cpp-pull1.0 libcivetweb1 libicu72 libgumbo1 libcld2-0 libisal2 libzip4 libpugixml1v5 \
      python3 python3-numpy \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 glossa \
 && useradd --system --uid 10001 --gid 10001 --home-dir /opt/glossa --no-create-home glossa \
 && mkdir /models
COPY --from=build /out/bin/ /opt/glossa/bin/
COPY --from=build /src/models/ /opt/glossa/models/
COPY --from=build /src/model_tools/ /opt/glossa/model_tools/
ENV PATH=/opt/glossa/bin:/opt/glossa/model_tools:$PATH OMP_WAIT_POLICY=passive
# Models are mounted here (read-only is enough) and named with GLOSSA_MODELS or --model.
WORKDIR /models
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
# gRPC (Translator, health, reflection), Prometheus metrics (/metrics) and the HTTP/JSON API
# with its page (LibreTranslate's /translate, /v1/translate, /).
EXPOSE 50051 9464 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["glossa-client", "--server", "127.0.0.1:50051", "--health", "--timeout", "2s"]
# SIGTERM (docker stop, Kubernetes): health turns NOT_SERVING, in-flight requests finish (up to
# --shutdown_timeout, default 30 s), exit 0. Give the container a longer stop timeout.
ENTRYPOINT ["/opt/glossa/bin/glossa-entrypoint"]
