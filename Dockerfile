# GIN images, two targets of this one Dockerfile:
#   gin        (the default) gin-master, gin-agent and ginctl, static
#              (CGO_ENABLED=0), on scratch: masters, ginctl, simulated agents;
#   agent-gpu  gin-agent alone built with cgo, so with NVML, on a Debian slim
#              base (glibc): the agent of GPU nodes. go-nvml dlopens
#              libnvidia-ml.so.1 at run time and the NVIDIA container toolkit
#              mounts it from the host's driver (docs/kubernetes.md); the
#              build needs no NVIDIA package (go-nvml carries its headers).
#
# Build them with scripts/docker-build.sh (or `make docker`), not with a bare
# `docker build .`: the script builds the base images (no registry is
# needed) and a build context that carries the vendored modules (the build
# runs with GOPROXY=off), then `docker build --target gin` (gin:dev) and
# `--target agent-gpu` (gin-agent-gpu:dev). Works with the legacy builder (no
# BuildKit/buildx): no RUN --mount, and exec-form RUN only, since the Go base
# has no shell. The legacy builder builds every stage up to its target, so
# the gin stages come first: `--target gin` needs no Debian base.
#
#   docker run --rm gin:dev --version
#   docker run --rm --entrypoint /usr/local/bin/ginctl gin:dev --help
#   docker run --rm gin-agent-gpu:dev --once -o json --source sim:dgx-h100
#   deploy/compose/docker-compose.yml: 3 masters + simulated agents
#   deploy/kubernetes: the masters (gin) and the GPU nodes' agents (agent-gpu)

# gin-go-builder:<go version> from scripts/docker-base.sh (the host's GOROOT).
ARG GO_BASE=gin-go-builder:1.26.8
# From scripts/docker-debian.sh (mmdebstrap of Debian's archive, imported):
# minbase with merged /usr and no docs, man pages or locales (what Debian's
# -slim images are), and the same plus gcc and libc6-dev.
ARG DEBIAN_BASE=gin-debian:bookworm-slim
ARG DEBIAN_CC_BASE=gin-debian:bookworm-cc

FROM ${GO_BASE} AS build
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOPROXY=off GOWORK=off \
    GOCACHE=/tmp/gocache GOPATH=/tmp/gopath HOME=/tmp \
    GOFLAGS="-mod=vendor -buildvcs=false -trimpath"
# The runtime stage's data directory and certificate directory (WORKDIR
# creates them: there is no mkdir).
WORKDIR /out/etc/gin
WORKDIR /out/var/lib/gin-master
WORKDIR /src
# Standard library and modules first, in their own layer: it is rebuilt only
# when go.mod/go.sum or the set of imported packages changes, so an edit of
# GIN's own code recompiles just GIN. _dockerdeps/deps.go (written by
# scripts/docker-build.sh) imports every non-internal package the three
# commands depend on.
COPY go.mod go.sum ./
COPY vendor/ vendor/
COPY _dockerdeps/ _dockerdeps/
RUN ["go", "build", "./_dockerdeps"]
COPY . .
ARG VERSION=dev
# RUN has no shell to expand ${VERSION}; ENV does. GOFLAGS entries may be
# quoted to carry spaces (cmd/go splits GOFLAGS like a command line).
ENV GOFLAGS="-mod=vendor -buildvcs=false -trimpath '-ldflags=-s -w -X=github.com/gin-topology/gin/internal/buildinfo.Version=${VERSION}'"
RUN ["go", "build", "-o", "/out/usr/local/bin/", "./cmd/gin-master", "./cmd/gin-agent", "./cmd/ginctl"]
RUN ["/out/usr/local/bin/gin-master", "--version"]

FROM scratch AS gin
ARG VERSION=dev
LABEL org.opencontainers.image.title="gin" \
      org.opencontainers.image.description="GIN: cluster-wide GPU topology service (gin-master, gin-agent, ginctl)" \
      org.opencontainers.image.source="https://github.com/gin-topology/gin" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/usr/local/bin/ /usr/local/bin/
# Owned by the runtime user; a new named volume mounted here copies the owner.
COPY --from=build --chown=65532:65532 /out/var/lib/gin-master /var/lib/gin-master
# Certificates (GIN_TLS_* name files here); a volume mounted here (compose's
# certs) is writable by the runtime user.
COPY --from=build --chown=65532:65532 /out/etc/gin /etc/gin
USER 65532:65532
WORKDIR /var/lib/gin-master
# 5000 gRPC (agents, ginctl, other masters), 5001 Raft, 5002 /metrics and
# /healthz; gin-agent serves /metrics on 9410.
EXPOSE 5000 5001 5002
ENTRYPOINT ["/usr/local/bin/gin-master"]
# A single master with its Raft on loopback (nobody else dials it), plaintext
# by choice (--insecure: a try-out, warned at start; give it --tls-ca,
# --tls-cert, --tls-key instead for real use); a replicated master needs
# --raft-bind on an address its peers can reach and certificates: see
# deploy/compose/docker-compose.yml.
CMD ["--node-id", "m1", "--raft-bind", "127.0.0.1:5001", "--data-dir", "/var/lib/gin-master", "--insecure"]

# --- agent-gpu: gin-agent with cgo (NVML) --------------------------------------
# The Go toolchain is the build stage's (the same GOROOT), on Debian with gcc.
FROM ${DEBIAN_CC_BASE} AS build-cgo
COPY --from=build /usr/local/go /usr/local/go
# netgo, osusergo: the pure-Go resolver and user lookups, as in the static
# binaries, so the only C left is go-nvml's (dlopen of libnvidia-ml.so.1).
# go-nvml wraps NVML calls the header marks deprecated: gcc's warnings about
# them say nothing about GIN.
ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    GOROOT=/usr/local/go CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" \
    GOTOOLCHAIN=local GOPROXY=off GOWORK=off \
    GOCACHE=/tmp/gocache GOPATH=/tmp/gopath HOME=/tmp \
    GOFLAGS="-mod=vendor -buildvcs=false -trimpath -tags=netgo,osusergo"
WORKDIR /src
# The agent's modules, cgo ones included (_dockerdeps/agent/deps.go, from
# scripts/docker-build.sh), in a layer of their own as above.
COPY go.mod go.sum ./
COPY vendor/ vendor/
COPY _dockerdeps/ _dockerdeps/
RUN ["go", "build", "./_dockerdeps/agent"]
COPY . .
ARG VERSION=dev
ENV GOFLAGS="-mod=vendor -buildvcs=false -trimpath -tags=netgo,osusergo '-ldflags=-s -w -X=github.com/gin-topology/gin/internal/buildinfo.Version=${VERSION}'"
RUN ["go", "build", "-o", "/out/usr/local/bin/", "./cmd/gin-agent"]
RUN ["/out/usr/local/bin/gin-agent", "--version"]

FROM ${DEBIAN_BASE} AS agent-gpu
ARG VERSION=dev
LABEL org.opencontainers.image.title="gin-agent-gpu" \
      org.opencontainers.image.description="GIN agent for GPU nodes: gin-agent with NVML (cgo), on Debian; libnvidia-ml.so.1 comes from the host through the NVIDIA container toolkit" \
      org.opencontainers.image.source="https://github.com/gin-topology/gin" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build-cgo /out/usr/local/bin/gin-agent /usr/local/bin/gin-agent
# Not root by default; the DaemonSet runs it as root with NET_ADMIN and
# SYS_ADMIN only (deploy/kubernetes/agent-daemonset.yaml, docs/kubernetes.md).
USER 65532:65532
WORKDIR /
# /metrics
EXPOSE 9410
ENTRYPOINT ["/usr/local/bin/gin-agent"]

# The default target (a bare `docker build`): the static image.
FROM gin
