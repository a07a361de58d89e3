# Redis from Debian's package, for the Compose cluster's scheduler store on machines that cannot
# pull an image (elsewhere any redis:7 image does the same).
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
USER redis
EXPOSE 6379
# The append-only file keeps the scheduler's state across a restart of this container.
VOLUME /var/lib/redis
CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/var/lib/redis", \
     "--save", "", "--appendonly", "yes", "--appendfsync", "everysec"]
