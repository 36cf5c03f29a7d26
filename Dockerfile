# syntax=docker/dockerfile:1
# modelgate: a small, non-root image with the console built in.
#   docker build -t modelgate .
#   docker run -e ENCRYPTION_KEY=... -e DATABASE_URL=... -p 8080:8080 modelgate
# See docs/deployment.md and deploy/compose.yaml.

# 1. The console (Preact + Vite) is built here; only its static files reach the image.
FROM node:22-slim AS console
WORKDIR /src/modelgate/console/web
COPY modelgate/console/web/package.json modelgate/console/web/package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY modelgate/console/web/ ./
RUN npm run build

# 2. One wheel of the project, with the built console as package data.
FROM python:3.12-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY modelgate/ modelgate/
COPY --from=console /src/modelgate/console/dist/ modelgate/console/dist/
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# 3. The runtime: the wheels installed, no compilers, no build caches, an unprivileged user.
FROM python:3.12-slim
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/modelgate --create-home modelgate
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER modelgate
WORKDIR /var/lib/modelgate
ENV MODELGATE_ENV=production \
    MODELGATE_DATA_DIR=/var/lib/modelgate \
    SERVER_HOST=0.0.0.0 \
    SERVER_PORT=8080 \
    SERVER_DRAIN_NOTICE_SECONDS=5 \
    PYTHONUNBUFFERED=1
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status != 200)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["modelgate"]
CMD ["serve"]
