# rltuned, controller side: Slurm client tools, munge and the daemon, running as a non-root user.
#
#   docker build -t rltuned .
#   docker run -d --name rltuned --network host \
#     -v /etc/slurm:/etc/slurm:ro \
#     -v /run/munge:/run/munge \
#     -v /etc/rltuned:/etc/rltuned:ro \
#     -v rltuned-state:/var/lib/rltuned \
#     rltuned
#
# The host's munged socket is mounted, so no key is copied into the image. The client tools must match
# the cluster's Slurm release (bookworm ships 22.05); build on another base for another release.
FROM python:3.11-slim-bookworm

ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 PATH=/opt/rltuned/bin:$PATH

RUN apt-get update \
 && apt-get install -y --no-install-recommends slurm-client munge \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system rltune \
 && useradd --system --gid rltune --home-dir /var/lib/rltuned --shell /usr/sbin/nologin rltune \
 && install -d -o rltune -g rltune -m 0750 /var/lib/rltuned /run/rltuned \
 && install -d -m 0755 /etc/rltuned /usr/share/rltuned

# torch first, pinned and CPU-only: an unpinned torch pulls gigabytes of CUDA packages.
RUN python -m venv /opt/rltuned \
 && /opt/rltuned/bin/pip install --index-url "$TORCH_INDEX" torch==2.13.0

COPY pyproject.toml README.md /src/
COPY rltuned /src/rltuned
RUN /opt/rltuned/bin/pip install /src && rm -rf /src

COPY models /usr/share/rltuned/models
COPY etc/rltuned.toml /etc/rltuned/rltuned.toml

USER rltune
WORKDIR /var/lib/rltuned
EXPOSE 9817
HEALTHCHECK --interval=60s --timeout=10s --start-period=120s \
  CMD ["rltunectl", "status", "--check", "--config", "/etc/rltuned/rltuned.toml"]
ENTRYPOINT ["rltuned"]
CMD ["--config", "/etc/rltuned/rltuned.toml"]
