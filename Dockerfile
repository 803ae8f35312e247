# Operator and node-agent image, for users with a container engine and internet access:
#   docker build -t sealfleet-operator:dev .
# One image holds both binaries: the Deployment runs /manager, the node-agent DaemonSet and the
# operator's scrub pods run /node-agent. The local cluster (hack/cluster.sh) does not use this
# file: hack/images.sh assembles the same layout from bin/manager and bin/node-agent without an
# engine, and that is the path tested in this repository; `make test-hygiene` builds both
# binaries from a copy of exactly what this file's build stage copies (hack/check-build-contexts.sh).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
# The shapes the operator shares with the sealer (exit codes, documents, models), embedded.
COPY contracts/ contracts/
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 go build -trimpath -o /out/node-agent ./cmd/node-agent

# Static binaries on Debian slim, for util-linux blkid: the node agent probes every disk with it
# (`blkid -p`) before preparing it. It runs as root by default because the node agent (sysfs
# writes, device binding, discard) needs it; the chart runs the manager as non-root.
FROM debian:bookworm-slim
COPY --from=build /out/manager /out/node-agent /
ENTRYPOINT ["/manager"]
