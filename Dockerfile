# syntax=docker/dockerfile:1
#
# mnemo in a container: `mnemo serve` on SQLite in the /data volume by default.
#
#   docker build --build-arg MNEMO_GIT_COMMIT="$(git rev-parse --short HEAD)" -t mnemo .
#   docker run -d --name mnemo -p 8080:8080 -v mnemo-data:/data -e MNEMO_API_KEY=sk-... mnemo
#
# See packaging/README.md. The CMD's flags and the FROM line's Rust version are checked by
# crates/mnemo/tests/cli.rs.

# --- Stage 1: dependencies only, so editing mnemo's code does not rebuild them. ------------
# The tag is the toolchain of rust-toolchain.toml (which .dockerignore keeps out of the build:
# rustup would otherwise download clippy and rustfmt, which a build does not need).
FROM rust:1.95.0-slim-bookworm AS skeleton
WORKDIR /src
COPY . .
# Keep the manifests and replace every target's source with an empty stub: this stage's
# output changes only when a manifest or the lock file does.
RUN set -eu; mkdir /skeleton; \
    find . -name Cargo.toml -o -name Cargo.lock | xargs cp --parents -t /skeleton; \
    for f in $(find crates -path '*/src/lib.rs'); do mkdir -p "/skeleton/${f%/*}"; : > "/skeleton/$f"; done; \
    for f in $(find crates -path '*/src/main.rs' -o -path '*/src/bin/*.rs' -o -path '*/benches/*.rs' \
               -o -path '*/tests/*.rs' -o -name build.rs); do \
        mkdir -p "/skeleton/${f%/*}"; echo 'fn main() {}' > "/skeleton/$f"; \
    done

FROM rust:1.95.0-slim-bookworm AS builder
WORKDIR /src
COPY --from=skeleton /skeleton/ ./
RUN cargo build --release --locked -p mnemo
COPY . .
# The real sources may be older than the stubs they replace: make cargo see them as changed.
# .dockerignore leaves .git out, so build.rs takes the commit for `mnemo --version` from here.
ARG MNEMO_GIT_COMMIT=unknown
RUN find crates -name '*.rs' -exec touch {} + \
    && MNEMO_GIT_COMMIT="$MNEMO_GIT_COMMIT" cargo build --release --locked -p mnemo \
    && install -m 0755 target/release/mnemo /usr/local/bin/mnemo

# --- Stage 2: the runtime. The binary links glibc, so a slim Debian of the builder's release. -
FROM debian:bookworm-slim
# CA certificates for whatever the container runs next to mnemo (an --on-work script, curl in
# a tool call); mnemo itself verifies TLS against the WebPKI roots built into it.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin mnemo \
    && mkdir -p /data /mnt/memory \
    && chown mnemo:mnemo /data /mnt/memory
# /mnt/memory: where `mnemo worker` mounts sessions' memory stores, for the image used as a
# sandbox (docs/WORKER.md); the server does not use it.
COPY --from=builder /usr/local/bin/mnemo /usr/local/bin/mnemo
USER mnemo
WORKDIR /data
VOLUME /data
EXPOSE 8080
# The API key comes from the environment at run time (`-e MNEMO_API_KEY=…`, comma-separated
# for several); without one, the first start creates a key and prints it once in the logs.
# SIGTERM finishes in-flight requests for up to 30 s: give `docker stop` that long (-t 35).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["mnemo", "healthcheck", "--timeout", "5", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["mnemo"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--database", "sqlite:///data/mnemo.sqlite"]
