# leasehold in a container: a static binary on distroless (no shell, no
# libc), run as a non-root user, its data directory a volume.
#
#   docker build -t leasehold --build-arg VERSION="$(git describe --tags --always)" .
#   docker run -d -p 7379:7379 -v leasehold-data:/data \
#     -e LEASEHOLD_REQUIREPASS=secret leasehold
#
# See docs/operations.md ("Container image"): listening on every address,
# the server's protected mode refuses clients from outside the container
# until a password is set (LEASEHOLD_REQUIREPASS, or --requirepass-file on a
# mounted file). The health check asks the admin listener, on loopback
# inside the container, and needs no password.

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
# The binary itself is the probe (the image has no shell, no curl): it GETs
# the admin listener's /readyz, 200 once the data directory is recovered and
# commands are served; exit 1 otherwise, as Docker wants for "unhealthy".
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
	CMD ["/leasehold", "probe", "--url", "http://127.0.0.1:9379/readyz"]
ENTRYPOINT ["/leasehold"]
# serve's flags win over LEASEHOLD_ variables and a --config file: to use a
# config file, give the command whole, keeping the admin listener the health
# check asks (docker run IMAGE serve --config /etc/leasehold/leasehold.toml
# --data-dir /data --http-addr 127.0.0.1:9379). On loopback, the admin
# listener (metrics, status page) is not reachable from outside the
# container.
CMD ["serve", "--addr", "0.0.0.0:7379", "--data-dir", "/data", "--http-addr", "127.0.0.1:9379"]
