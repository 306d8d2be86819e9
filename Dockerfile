# syntax=docker/dockerfile:1
#
# The klbot image: klbot (the GitHub App, the entrypoint) and kl, static,
# with Terraform on PATH, running as a non-root user (uid 65532).
#
#   make docker            # docker build -t kilolock:$(VERSION) . (a release's image: Dockerfile.release)
#   docker run -p 8080:8080 -e KLBOT_APP_ID=… -e KLBOT_PRIVATE_KEY_FILE=/run/secrets/key.pem \
#     -e KLBOT_WEBHOOK_SECRET=… -e KLBOT_DATABASE_URL=postgres://… kilolock:VERSION
#
# Secrets come at run time (environment, mounted files), never as build
# arguments: nothing secret is in any layer. See docs/klbot.md.

ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=debian:trixie-slim

# ── kl and klbot: the Makefile's `build` flags (CGO off: the SQLite driver
#    is pure Go, so the binaries are static).
#    `kl version` says VERSION (a semantic version; empty: a development
#    build), COMMIT and COMMIT_DATE (RFC 3339): .git is not in the context.
FROM ${GO_IMAGE} AS build
ARG VERSION=
ARG COMMIT=
ARG COMMIT_DATE=
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    V=github.com/kilolock/kilolock/internal/version && \
    LDFLAGS="-s -w -X $V.Version=${VERSION} -X $V.Commit=${COMMIT} -X $V.Date=${COMMIT_DATE}" && \
    go build -trimpath -ldflags "$LDFLAGS" -o /out/kl ./cmd/kl && \
    go build -trimpath -ldflags "$LDFLAGS" -o /out/klbot ./cmd/klbot

# ── Terraform, built from its source module with `go install`, as
#    `make tools` does (docs/design.md): the module comes from the Go module proxy
#    and is checked against the Go checksum database (sum.golang.org, a
#    public append-only log), so no checksum list or signing key has to be
#    kept here per version and per architecture. 1.5.7 is the last MPL-2.0
#    release. This stage depends on TERRAFORM_VERSION alone, so its layer is
#    cached across source changes (the first build takes minutes).
FROM ${GO_IMAGE} AS terraform
ARG TERRAFORM_VERSION=1.5.7
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOBIN=/out go install -trimpath -ldflags "-s -w" "github.com/hashicorp/terraform@v${TERRAFORM_VERSION}" && \
    /out/terraform version

# ── The image. Debian slim rather than distroless: Terraform runs /bin/sh
#    for local-exec provisioners and git for git:: module sources, and the
#    health check needs an HTTP client.
FROM ${BASE_IMAGE}
RUN apt-get update && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates curl git openssh-client && \
    rm -rf /var/lib/apt/lists/* && \
    groupadd --gid 65532 nonroot && \
    useradd --uid 65532 --gid 65532 --home-dir /home/nonroot --create-home --shell /usr/sbin/nologin nonroot
COPY --from=terraform /out/terraform /usr/local/bin/terraform
COPY --from=build /out/kl /out/klbot /usr/local/bin/
USER 65532:65532
WORKDIR /home/nonroot
# terraform-exec sets TF_IN_AUTOMATION and refuses it from the environment.
ENV CHECKPOINT_DISABLE=1
EXPOSE 8080
# klbot answers GET /healthz on KLBOT_LISTEN (default :8080).
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD listen="${KLBOT_LISTEN:-:8080}"; curl -fsS -o /dev/null "http://127.0.0.1:${listen##*:}/healthz" || exit 1
ENTRYPOINT ["klbot"]
