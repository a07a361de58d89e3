# The AgentENV control plane: aenv-scheduler (the default command) and aenv-gateway, without
# runsc, the sandbox tools bundle or any host prerequisite. Built by scripts/build-images.sh:
#   docker run -d -p 9090:9090 aenv/control:<version>                        # the scheduler
#   docker run -d -p 8080:8080 aenv/control:<version> /opt/aenv/bin/aenv-gateway
ARG BASE=debian:bookworm-slim
FROM ${BASE}

RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tini ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home --shell /usr/sbin/nologin aenv

COPY control/ /opt/aenv/
USER aenv
ENV SCHEDULER_ADDR=0.0.0.0:9090 \
    GATEWAY_ADDR=0.0.0.0:8080
EXPOSE 8080 9090
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["/opt/aenv/bin/aenv-scheduler"]
