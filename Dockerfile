# PaperTrail service image: `papertrail run` (every role) on SQLite in the /data volume, unless
# PAPERTRAIL_DATABASE_URL says otherwise. One role per container: `docker run IMAGE run --role worker`.
# Deployment, compose file and the settings each role needs: docs/deploy.md.

# One base for both stages: the virtualenv built in the first runs on the second's Python.
# Pinned by tag; to pin the exact bytes too, append the digest: --build-arg PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:...
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# -- build: dependencies, then the PaperTrail wheel, into /opt/venv ---------------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
RUN python -m venv /opt/venv
WORKDIR /src
# Dependencies first, read from pyproject.toml: this layer is rebuilt only when they change, not on every
# source edit. Every dependency ships binary wheels, so no compiler is needed here either.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > requirements.txt \
    && pip install -r requirements.txt
COPY core core
COPY ingest ingest
COPY notifiers notifiers
COPY bot bot
COPY papertrail papertrail
COPY templates templates
COPY migrations migrations
COPY locale locale
# A real wheel, not the source tree: templates, migrations and catalogs travel inside it (force-include).
RUN pip wheel --no-deps --wheel-dir /wheels . \
    && pip install --no-deps /wheels/papertrail-*.whl \
    && papertrail --help > /dev/null

# -- runtime: the virtualenv only; no compiler, no wheels, no source ---------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="PaperTrail" \
      org.opencontainers.image.description="Paper alerts: arXiv new papers and revisions to email, Telegram, Slack and webhooks"
# A fixed numeric uid, so that orchestrators can check runAsNonRoot and a host can chown a bind mount to it.
RUN groupadd --gid 10001 papertrail \
    && useradd --uid 10001 --gid 10001 --create-home --shell /usr/sbin/nologin papertrail \
    && mkdir /data \
    && chown 10001:10001 /data
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PAPERTRAIL_DATABASE_URL=sqlite:////data/papertrail.db \
    PAPERTRAIL_WEB_HOST=0.0.0.0 \
    PAPERTRAIL_WEB_PORT=8080
USER 10001:10001
# The working directory is the volume: a papertrail.toml placed there is read on start.
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
# Liveness of the web role (/healthz answers without touching the database). Containers that run other
# roles only have no web server: override or disable this check there (docs/deploy.md). The start period
# covers the migrations that run on every start, which can take minutes on a large store.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PAPERTRAIL_WEB_PORT', '8080'), timeout=4)"]
# The service stops cleanly on SIGTERM (docker stop): in-flight work finishes, then it exits.
STOPSIGNAL SIGTERM
ENTRYPOINT ["papertrail"]
CMD ["run"]
