# For users who build with Docker: one image per program, static and
# distroless, running as the nonroot user (UID 65532, as the chart expects).
#
#   docker build --build-arg PROGRAM=webhook     -t orchestratord-webhook .
#   docker build --build-arg PROGRAM=controllers -t orchestratord-controllers .
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION} AS build
ARG PROGRAM=webhook
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd cmd
COPY pkg pkg
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/materializeinc/orchestratord/pkg/version.Version=${VERSION}" \
      -o /out/${PROGRAM} ./cmd/${PROGRAM}

FROM gcr.io/distroless/static-debian12:nonroot
ARG PROGRAM=webhook
COPY --from=build /out/${PROGRAM} /usr/local/bin/orchestratord
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/orchestratord"]
