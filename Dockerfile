# GIN image: gin-master, gin-agent and ginctl, static, on scratch.
#
# Build it with scripts/docker-build.sh (or `make docker`), not with a bare
# `docker build .`: the script builds the base image (no registry is needed)
# and a build context that carries the vendored modules (the build runs with
# GOPROXY=off). Works with the legacy builder (no BuildKit/buildx): no
# RUN --mount, and exec-form RUN only, since the base has no shell.
#
#   docker run --rm gin:dev --version
#   docker run --rm --entrypoint /usr/local/bin/ginctl gin:dev --help
#   deploy/compose/docker-compose.yml: 3 masters + simulated agents

# gin-go-builder:<go version> from scripts/docker-base.sh (the host's GOROOT).
ARG GO_BASE=gin-go-builder:1.26.8

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

FROM scratch
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
