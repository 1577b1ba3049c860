# hearth in a container: `docker build -t hearth .` (README, "Run in Docker").
#
# Stage 1 builds the release binary with the toolchain the workspace asks for
# (rust-version 1.95) on Debian 12, the runtime stage's Debian, so the binary
# matches its glibc (2.36: the release link packs relocations, DT_RELR). With
# the PostgreSQL store, so one image serves a home or a replica.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# Cache mounts keep the registry and the target folder between builds (BuildKit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p hearth-cli --features postgres \
    && cp target/release/hearth /usr/local/bin/hearth

# Stage 2: the binary, CA certificates for the providers' HTTPS, a user.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/hearth --shell /usr/sbin/nologin hearth \
    && install -d -m 0700 -o hearth -g hearth /var/lib/hearth
COPY --from=build /usr/local/bin/hearth /usr/local/bin/hearth

USER hearth
# The home (config, prompts, database): a volume, so it outlives the
# container. A new named volume takes this folder's owner and mode 0700.
ENV HEARTH_HOME=/var/lib/hearth \
    HEARTH_BIND=0.0.0.0:7777
VOLUME ["/var/lib/hearth"]
EXPOSE 7777
# The image has no curl: `hearth health` asks /healthz and /readyz itself
# and exits non-zero when hearth is not ready.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["hearth", "health", "--url", "http://127.0.0.1:7777"]
ENTRYPOINT ["hearth"]
CMD ["serve"]
