# PaperTrail service image: `papertrail run` on SQLite in the /data volume unless PAPERTRAIL_DATABASE_URL says otherwise.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY core core
COPY ingest ingest
COPY notifiers notifiers
COPY bot bot
COPY papertrail papertrail
COPY templates templates
COPY migrations migrations
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 papertrail && mkdir /data && chown papertrail /data
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER papertrail
WORKDIR /data
ENV PAPERTRAIL_DATABASE_URL=sqlite:////data/papertrail.db
VOLUME ["/data"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["papertrail"]
CMD ["run"]
