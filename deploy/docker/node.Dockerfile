# The AgentENV node (aenv-server) with gVisor's runsc and every prerequisite inside.
# Built by scripts/build-images.sh from a release (npm run release), never from a git checkout:
#   scripts/build-images.sh [--local-base]      # → aenv/node:<version>
# Run it with the host's /dev and a state directory; privileged where the host allows it:
#   docker run -d --name aenv-node --privileged --network host --cgroupns host \
#     -v /dev:/dev -v /sys/fs/cgroup:/sys/fs/cgroup -v /var/lib/aenv:/var/lib/aenv aenv/node:<version>
# and where --privileged is refused, with the capabilities listed in docs/deploy.md (2. Container image).
ARG BASE=debian:bookworm-slim
FROM ${BASE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The host prerequisites (the same list scripts/install.sh installs) and tini, which forwards
# SIGTERM to the node (it pauses its sandboxes) and reaps the processes runsc leaves to PID 1.
COPY release/scripts/prerequisites.sh /tmp/prerequisites.sh
RUN . /tmp/prerequisites.sh \
 && aenv_install_packages "${AENV_NODE_PACKAGES[@]}" tini \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/prerequisites.sh

COPY release/ /opt/aenv/
RUN ln -s /opt/aenv/bin/aenv /usr/local/bin/aenv && /opt/aenv/bin/aenv --version >/dev/null

ENV API_ADDR=0.0.0.0:8000 \
    AENV_HOME_PATH=/var/lib/aenv \
    AENV_RUNTIME_PATH=/run/aenv
VOLUME ["/var/lib/aenv"]
EXPOSE 8000
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/aenv/bin/aenv-server"]
