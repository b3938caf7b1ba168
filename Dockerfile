# StepLedger's image, in the shape of the Hummingbird template: a build stage that runs scripts/release (the same
# archive as a bare-metal deployment), then a slim runtime stage with a non-root user and crash backtraces on.
#
#   docker build -t stepledger .
#   docker run -p 8080:8080 -v stepledger-data:/var/lib/stepledger stepledger
#
# The default command serves test-phase on SQLite in the volume; give production its configuration with
# `-v /etc/stepledger:/etc/stepledger:ro` and `serve --config /etc/stepledger/stepledger.json`.

# ================================
# Build image
# ================================
FROM swift:6.3-noble AS build

RUN export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true \
    && apt-get -q update \
    && apt-get -q dist-upgrade -y \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /build

# Resolve dependencies first, so this layer is cached while only sources change.
COPY ./Package.* ./
RUN swift package resolve

COPY . .

# The release archive: static Swift standard library (the console and openapi.yaml compiled in), backtracer, BUILD,
# units, example config.
RUN scripts/release --configuration release --out /release \
    && mkdir /staging \
    && tar -xzf /release/stepledger-*.tar.gz -C /staging --strip-components=1

# ================================
# Run image
# ================================
FROM ubuntu:noble

RUN export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true \
    && apt-get -q update \
    && apt-get -q dist-upgrade -y \
    && apt-get -q install -y --no-install-recommends ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/*

# A system user that owns only its data directory.
RUN useradd --user-group --create-home --system --skel /dev/null --home-dir /var/lib/stepledger stepledger

COPY --from=build /staging /opt/stepledger

# Crash backtraces on, symbolicated by the backtracer shipped in the archive.
ENV SWIFT_BACKTRACE=enable=yes,sanitize=yes,threads=all,images=all,interactive=no,swift-backtrace=/opt/stepledger/bin/swift-backtrace-static

USER stepledger:stepledger
WORKDIR /var/lib/stepledger
VOLUME /var/lib/stepledger
EXPOSE 8080

# stepd healthcheck probes /readyz without curl in the image.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s \
    CMD ["/opt/stepledger/bin/stepd", "healthcheck", "--url", "http://127.0.0.1:8080/readyz"]

ENTRYPOINT ["/opt/stepledger/bin/stepd"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080", "--database", "/var/lib/stepledger/stepledger.sqlite"]
