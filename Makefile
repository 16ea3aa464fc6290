# GIN build entry points. `make build` puts every binary in ./bin.
GO        ?= go
# go-nvml's cgo build prints deprecation warnings for functions we do not call.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
BIN       := bin
BUF       := $(GO) tool -modfile=tools/go.mod buf
PKGS      := ./...
CMDS      := gin-agent gin-master ginctl
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/gin-topology/gin/internal/buildinfo.Version=$(VERSION)

.PHONY: install verify-units all build plugin test test-short fault-test generate check-generate check-tidy check-gofmt lint vet clean dev

all: build

build: plugin
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(CMDS))

# The NCCL tuner plugin (cgo, c-shared; needs a C compiler) and the
# profiler plugin (C only).
plugin:
	@mkdir -p $(BIN)
	@# The Go plan loader, dlopened by the shim only when NCCL_GIN_ENABLED=1.
	CGO_ENABLED=1 $(GO) build -trimpath -buildmode=c-shared -ldflags '-extldflags -Wl,-z,nodelete' -o $(BIN)/libnccl-tuner-gin-go.so ./internal/ncclplugin
	@rm -f $(BIN)/libnccl-tuner-gin-go.h
	@# The library NCCL loads: C only, starts nothing while GIN is off.
	$(CC) -O2 -Wall -Wextra -fPIC -shared -fvisibility=hidden -o $(BIN)/libnccl-tuner-gin.so internal/ncclplugin/shim/shim.c -ldl
	@# NCCL loads libnccl-tuner.so from the library path when NCCL_TUNER_PLUGIN is unset.
	ln -sf libnccl-tuner-gin.so $(BIN)/libnccl-tuner.so
	@# The profiler plugin (C only): per-rank reports to gin-agent while NCCL_GIN_ENABLED=1.
	$(CC) -O2 -Wall -Wextra -fPIC -shared -fvisibility=hidden -pthread -o $(BIN)/libnccl-profiler-gin.so internal/ncclplugin/profiler/profiler.c
	@# NCCL loads libnccl-profiler.so from the library path when NCCL_PROFILER_PLUGIN is unset.
	ln -sf libnccl-profiler-gin.so $(BIN)/libnccl-profiler.so

PREFIX ?= /usr/local
# Installs the binaries, the plugins (with the libnccl-tuner.so and
# libnccl-profiler.so links), the systemd units and the Slurm prolog/epilog
# under DESTDIR.
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)/etc/systemd/system $(DESTDIR)/etc/slurm
	install -m 0755 $(addprefix $(BIN)/,$(CMDS)) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(BIN)/libnccl-tuner-gin.so $(DESTDIR)$(PREFIX)/lib/
	install -m 0644 $(BIN)/libnccl-tuner-gin-go.so $(DESTDIR)$(PREFIX)/lib/
	ln -sf libnccl-tuner-gin.so $(DESTDIR)$(PREFIX)/lib/libnccl-tuner.so
	install -m 0644 $(BIN)/libnccl-profiler-gin.so $(DESTDIR)$(PREFIX)/lib/
	ln -sf libnccl-profiler-gin.so $(DESTDIR)$(PREFIX)/lib/libnccl-profiler.so
	install -m 0644 deploy/systemd/gin-agent.service deploy/systemd/gin-master.service $(DESTDIR)/etc/systemd/system/
	install -m 0755 deploy/slurm/gin-prolog.sh deploy/slurm/gin-epilog.sh $(DESTDIR)/etc/slurm/

# The README's test command: gofmt and vet, race tests, generated-code drift, buf lint,
# systemd unit verification (skipped when systemd-analyze is missing, unless
# REQUIRE_SYSTEMD=1 as in CI), the Docker image and compose deployment
# (skipped without a Docker engine, unless REQUIRE_DOCKER=1 as in CI) and the
# fault campaign on real processes in network namespaces (skipped when not
# root, unless REQUIRE_FAULT_TESTS=1 as in CI).
test: vet check-tidy
	$(GO) test -race -count=1 -timeout 40m $(PKGS)
	$(MAKE) check-generate
	$(MAKE) verify-units
	@if docker info >/dev/null 2>&1 || [ "$(REQUIRE_DOCKER)" = 1 ]; then $(MAKE) docker-test; \
	else echo "docker-test: skipped, no Docker engine (make docker-test)"; fi
	@if [ "$$(id -u)" = 0 ] || [ "$(REQUIRE_FAULT_TESTS)" = 1 ]; then $(MAKE) fault-test; \
	else echo "fault-test: skipped, needs root (sudo make fault-test)"; fi
	@if { [ "$$(id -u)" = 0 ] && command -v lintian >/dev/null; } || [ "$(REQUIRE_DEB)" = 1 ]; then $(MAKE) deb-test; \
	else echo "deb-test: skipped, needs root and lintian (sudo make deb-test)"; fi

verify-units: build
	@if command -v systemd-analyze >/dev/null; then bash deploy/systemd/verify.sh; \
	elif [ "$(REQUIRE_SYSTEMD)" = 1 ]; then echo "systemd-analyze is required (REQUIRE_SYSTEMD=1)"; exit 1; \
	else echo "verify-units: skipped, systemd-analyze not installed"; fi

test-short:
	$(GO) test -count=1 -short $(PKGS)

# gofmt first (non-generated files; fails naming them), then go vet.
vet: check-gofmt
	$(GO) vet $(PKGS)

check-gofmt:
	bash scripts/check-gofmt.sh

# Fault-injection campaign against three masters in network namespaces
# (needs root, `ip netns` and nft). One round of each fault kind by default;
# GIN_FAULT_SEED and GIN_FAULT_ROUNDS replay or resize it, e.g.
#   sudo GIN_FAULT_ROUNDS=45 make fault-test
fault-test:
	GIN_FAULT_TESTS=1 GIN_FAULT_REQUIRE=$(REQUIRE_FAULT_TESTS) $(GO) test -count=1 -v -timeout 30m ./faulttest/

# Regenerate api/gen from api/proto (buf pinned in tools/go.mod).
generate:
	$(BUF) generate

# Fails when the committed generated code differs from what `make generate` writes.
check-generate: generate
	@if [ -n "$$(git status --porcelain -- api/gen)" ]; then \
		echo "generated code drifted from api/proto; run 'make generate' and commit:"; \
		git status --porcelain -- api/gen; git diff --stat -- api/gen; exit 1; \
	fi
	$(BUF) lint

# Fails when go.mod/go.sum (module and tools) differ from what `go mod tidy` writes.
check-tidy:
	$(GO) mod tidy -diff
	cd tools && $(GO) mod tidy -diff

lint: vet
	$(BUF) lint

# Run the whole dev cluster (master + 4 simulated DGX H100 agents) on loopback,
# with the web view at http://127.0.0.1:5002/ui/.
dev: build
	$(BIN)/gin-master --dev --http-bind 127.0.0.1:5002

clean:
	rm -rf $(BIN)

# The Docker image (gin:dev; GIN_IMAGE=... to change the tag), built without
# any registry: scripts/docker-build.sh imports the host's GOROOT as the
# builder base and vendors the modules into a temporary build context.
# docker-test: the compose deployment (3 masters, 4 simulated agents) brought
# up, its leader killed and restarted, torn down (needs Docker; part of
# `make test` when an engine answers).
.PHONY: docker docker-test
docker:
	GO=$(GO) VERSION=$(VERSION) bash scripts/docker-build.sh

docker-test:
	GO=$(GO) VERSION=$(VERSION) bash scripts/compose-smoke.sh

# Debian packages (nfpm, pinned in tools/go.mod; configs in deploy/deb):
# dist/gin-agent_*.deb, dist/gin-master_*.deb, dist/gin-tools_*.deb.
# deb-test installs them on this machine with dpkg -i, checks files, user,
# units and lintian, runs the installed binaries, then purges them (root;
# part of `make test` as root when lintian is installed, REQUIRE_DEB=1 in CI).
.PHONY: deb deb-test
deb:
	GO=$(GO) bash scripts/deb-build.sh

deb-test: deb
	bash scripts/deb-test.sh
