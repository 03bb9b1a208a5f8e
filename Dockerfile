# leasehold in a container: a static binary on distroless (no shell, no
# libc), run as a non-root user, its data directory a volume.
#
#   docker build -t leasehold --build-arg VERSION="$(git describe --tags --always)" .
#   docker run -d -p 7379:7379 -v leasehold-data:/data \
#     -e LEASEHOLD_REQUIREPASS=secret -e LEASEHOLD_PASSWORD=secret leasehold
#
# See docs/operations-packaging.md: listening on every address, the server's
# protected mode refuses clients from outside the container until a password
# is set (LEASEHOLD_REQUIREPASS, or --requirepass-file on a mounted file),
# and the health check then needs it too (LEASEHOLD_PASSWORD).

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# The modules first, a layer of their own, reused while go.mod and go.sum
# stay as they are.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
# CGO_ENABLED=0: a static binary, with Go's own DNS resolver, that needs
# nothing from the image it runs in.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/leasehold . \
	&& mkdir /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/leasehold /leasehold
# An empty /data owned by the user: a new volume mounted there takes this
# owner, so the server can write to it.
COPY --from=build --chown=65532:65532 /out/data /data
# distroless's nonroot user, by number so that runAsNonRoot can check it.
USER 65532:65532
VOLUME /data
EXPOSE 7379
# The binary itself is the probe (the image has no shell, no curl): INFO over
# RESP, which answers once the data directory is recovered. With a password
# set, give the probe LEASEHOLD_PASSWORD.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
	CMD ["/leasehold", "info", "--addr", "127.0.0.1:7379", "server"]
ENTRYPOINT ["/leasehold"]
# serve's flags win over LEASEHOLD_ variables and a --config file: to use a
# config file, give the command whole (docker run IMAGE serve --config
# /etc/leasehold/leasehold.toml --data-dir /data).
CMD ["serve", "--addr", "0.0.0.0:7379", "--data-dir", "/data"]
