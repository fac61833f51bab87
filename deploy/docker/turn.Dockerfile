# The TURN server of live streams (deploy/k8s/components/turn): Debian's coturn package,
# nothing else. Build from the repository root (scripts/image turn, `make image`):
#   docker build --network host -f deploy/docker/turn.Dockerfile -t facegate-turn:0.1.0 .
# BASE_IMAGE is any Debian bookworm image with apt (scripts/image uses the debootstrap base
# it makes for the facegate image, so no registry is needed). The runtime stage starts from
# scratch and receives only the turnserver binary and the shared libraries it loads (ldd's
# closure, as deploy/docker/runtime-rootfs does for the facegate image): no shell, no
# package manager. It runs as UID 10002 and writes only /tmp (its pid file and the SQLite
# user database coturn opens even when it authenticates with a shared secret); everything
# else comes on its command line (the manifest's args).

ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
ARG COTURN_VERSION=4.6.1-1
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
    && apt-get install -y --no-install-recommends "coturn=${COTURN_VERSION}" \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /rootfs/usr/bin /rootfs/tmp /rootfs/etc \
    && cp /usr/bin/turnserver /rootfs/usr/bin/turnserver \
    && for link in lib lib64 bin sbin; do \
         if [ -L "/$link" ]; then ln -s "$(readlink "/$link")" "/rootfs/$link"; fi; \
       done \
    && ldd /usr/bin/turnserver \
       | sed -n -e 's/^.* => \(\/[^ ]*\) (0x.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p' \
       | while read -r library; do \
           folder=$(readlink -f "$(dirname "$library")"); \
           mkdir -p "/rootfs$folder"; \
           cp -L "$library" "/rootfs$folder/$(basename "$library")"; \
         done \
    && chmod 1777 /rootfs/tmp \
    && printf 'root:x:0:0::/:/nonexistent\nturn:x:10002:10002::/tmp:/nonexistent\n' >/rootfs/etc/passwd \
    && printf 'root:x:0:\nturn:x:10002:\n' >/rootfs/etc/group \
    && chroot /rootfs /usr/bin/turnserver --version

FROM scratch AS runtime
ARG VERSION=0.1.0
ARG COTURN_VERSION=4.6.1-1
ARG REVISION=unknown
LABEL org.opencontainers.image.title="facegate-turn" \
      org.opencontainers.image.description="coturn (Debian package) for facegate's live streams" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/facegate/facegate" \
      io.facegate.coturn="${COTURN_VERSION}"
COPY --from=build /rootfs/ /
# UID 10002, numeric: Kubernetes' runAsNonRoot can verify it (not the api's 10001).
USER 10002:10002
EXPOSE 3478/udp 3478/tcp
ENTRYPOINT ["/usr/bin/turnserver"]
