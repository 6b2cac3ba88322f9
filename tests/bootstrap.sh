#!/usr/bin/env bash
# Prepare everything the test suite needs, from a bare Debian 12 machine:
#   1. the PostgreSQL 15 and MariaDB server binaries (Debian packages), which
#      tests/servers.py uses to start private throwaway servers,
#   2. what pip needs to build the drivers of the `drivers` dependency group that
#      come as source only (mysqlclient, mariadb): MariaDB Connector/C's headers and
#      pkg-config files, pkg-config, a C compiler and Python's headers, and
#   3. the project virtualenv .venv with the package and its dev group installed.
# Idempotent, and fast (no network) when everything is already in place.
#
# With --min-versions, also the virtualenv .venv-min: the same as .venv, but with
# the lowest SQLAlchemy and Alembic versions pyproject.toml allows (pinned from its
# lower bounds by tests/min_versions.py), for `make test-min`.
#
# Environment:
#   LG_SQLA_BOOTSTRAP_SERVERS=0   skip the database packages (venv only)
#   LG_SQLA_TEST_POSTGRES_URL / LG_SQLA_TEST_MYSQL_URL
#                                 servers provided externally: that package is not needed
#   LG_SQLA_TEST_DOCKER=0         do not treat a running Docker engine as a server source
#   LG_SQLA_CITUS_DIR             the prebuilt Citus for PostgreSQL 15 (default: ../shared/citus
#                                 beside the checkout), installed for tests/citus.py's cluster
#   LG_SQLA_TEST_CITUS=0          no Citus: skip its install (the citus tests then skip, saying so)
#   PYTHON                        interpreter used to create .venv (default: python3)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

MIN_VERSIONS=0
for arg in "$@"; do
    case "$arg" in
    --min-versions) MIN_VERSIONS=1 ;;
    *)
        printf '[bootstrap] ERROR: unknown argument %s\n' "$arg" >&2
        exit 2
        ;;
    esac
done

PG_BINDIR=/usr/lib/postgresql/15/bin
PYTHON=${PYTHON:-python3}
STAMP=.venv/.lg_sqla_stamp
POLICY_RC=/usr/sbin/policy-rc.d

log() { printf '[bootstrap] %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

have_postgres() { [ -x "$PG_BINDIR/initdb" ] && [ -x "$PG_BINDIR/postgres" ]; }
have_galera() {
    [ -e /usr/lib/galera/libgalera_smm.so ] && command -v rsync >/dev/null 2>&1 &&
        command -v wsrep_sst_rsync >/dev/null 2>&1
}

have_pgbouncer() { command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; }
have_haproxy() { command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ]; }

have_mariadb() {
    { command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; } &&
        command -v mariadb-install-db >/dev/null 2>&1
}

# mysqlclient finds the client library through pkg-config (`mysqlclient` or
# `mariadb`), MariaDB Connector/Python through mariadb_config: both from Debian's
# libmariadb-dev. Both compile a C extension against Python.h.
have_mariadb_dev() {
    command -v mariadb_config >/dev/null 2>&1 &&
        command -v pkg-config >/dev/null 2>&1 &&
        pkg-config --exists mariadb 2>/dev/null
}
have_python_headers() {
    "$PYTHON" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        >/dev/null 2>&1
}

# A Docker engine that answers makes tests/servers.py use testcontainers, so the
# Debian server packages would go unused. The CLI alone (no daemon) does not count.
docker_answers() {
    [ "${LG_SQLA_TEST_DOCKER:-1}" != 0 ] && command -v docker >/dev/null 2>&1 &&
        timeout 5 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

# Commands needing root go through this: directly as root, else via sudo (which
# may prompt on a terminal; without one, `sudo -n` fails fast instead of hanging).
SUDO=()
need_root() {
    [ "$(id -u)" -eq 0 ] && return 0
    if command -v sudo >/dev/null 2>&1; then
        if [ -t 0 ]; then SUDO=(sudo); else SUDO=(sudo -n); fi
        return 0
    fi
    die "installing $* needs root, and this is neither root nor has sudo.
    Either re-run as root, or install them yourself:
        apt-get install -y --no-install-recommends $*
    or point the tests at running servers:
        export LG_SQLA_TEST_POSTGRES_URL=postgresql://USER:PASS@HOST:PORT
        export LG_SQLA_TEST_MYSQL_URL=mysql://root:PASS@HOST:PORT"
}

# Debian's maintainer scripts start every freshly installed server through
# invoke-rc.d. We never use those system instances (tests start private ones on
# free ports), and in containers without an init the start attempt may fail.
# A policy-rc.d that exits 101 ("action forbidden") makes invoke-rc.d skip it;
# we add one only if the machine has none, and remove it again on exit.
ADDED_POLICY=0
remove_policy() {
    if [ "$ADDED_POLICY" = 1 ]; then
        "${SUDO[@]}" rm -f "$POLICY_RC" || log "WARNING: could not remove $POLICY_RC"
    fi
}
trap remove_policy EXIT

apt_install() {
    need_root "$@"
    if [ ! -e "$POLICY_RC" ]; then
        printf '#!/bin/sh\n# Temporary, from lg_sqla tests/bootstrap.sh: do not start services.\nexit 101\n' |
            "${SUDO[@]}" tee "$POLICY_RC" >/dev/null
        "${SUDO[@]}" chmod 755 "$POLICY_RC"
        ADDED_POLICY=1
    fi
    log "installing Debian packages: $*"
    # sudo resets the environment, hence `env` for DEBIAN_FRONTEND. The dpkg
    # options keep existing config files without asking (there is no stdin in CI).
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null
    if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "$@" </dev/null; then
        # A postinst that fails only because it could not start its service is
        # harmless for us; what matters is whether the binaries are now there.
        log "WARNING: apt-get install exited non-zero; checking whether the binaries are usable"
    fi
}

# --- 1. system packages ------------------------------------------------------
packages=()
if [ "${LG_SQLA_BOOTSTRAP_SERVERS:-1}" != 0 ]; then
    server_packages=()
    if [ -z "${LG_SQLA_TEST_POSTGRES_URL:-}" ] && ! have_postgres; then
        server_packages+=(postgresql-15)
    fi
    if [ -z "${LG_SQLA_TEST_MYSQL_URL:-}" ] && ! have_mariadb; then
        server_packages+=(mariadb-server)
    fi
    if [ "${#server_packages[@]}" -gt 0 ] && docker_answers; then
        log "a Docker engine answers: tests will use testcontainers, not installing ${server_packages[*]}"
        server_packages=()
    fi
    packages+=("${server_packages[@]}")
    # The 3-node Galera cluster of tests/galera.py (Debian's mariadb-server depends on
    # both; checked apart for a server installed otherwise). Never from Docker.
    if [ -z "${LG_SQLA_TEST_GALERA_URLS:-}" ] && ! have_galera; then
        packages+=(galera-4 rsync)
    fi
    # PgBouncer in front of the test PostgreSQL (tests/pgbouncer.py), haproxy in front
    # of the Galera nodes (tests/haproxy.py); never from Docker.
    have_pgbouncer || packages+=(pgbouncer)
    have_haproxy || packages+=(haproxy)
fi
have_mariadb_dev || packages+=(libmariadb-dev pkg-config)
command -v cc >/dev/null 2>&1 || packages+=(gcc libc6-dev)
if ! command -v "$PYTHON" >/dev/null 2>&1; then
    [ "$PYTHON" = python3 ] || die "PYTHON=$PYTHON not found"
    packages+=(python3 python3-venv python3-dev)
elif [ ! -x .venv/bin/python ] && ! "$PYTHON" -c 'import ensurepip' >/dev/null 2>&1; then
    # Debian splits `python3 -m venv` support out of python3.
    case "$(command -v "$PYTHON")" in
    /usr/bin/*) packages+=(python3-venv) ;;
    *) die "$PYTHON cannot create virtualenvs (no ensurepip); use another PYTHON=..." ;;
    esac
fi
# Python.h, for the C extensions pip builds: Debian's python3-dev for its own
# Python; another interpreter (pyenv, a python.org build) ships its headers itself.
if command -v "$PYTHON" >/dev/null 2>&1 && ! have_python_headers; then
    case "$(readlink -f "$(command -v "$PYTHON")")" in
    /usr/bin/*) packages+=(python3-dev) ;;
    *) die "$PYTHON has no C headers (Python.h): the drivers mysqlclient and mariadb cannot be built" ;;
    esac
fi
if [ "${#packages[@]}" -gt 0 ]; then
    apt_install "${packages[@]}"
    for pkg in "${packages[@]}"; do
        case "$pkg" in
        postgresql-15) have_postgres || die "postgresql-15 installed but $PG_BINDIR/initdb is missing" ;;
        mariadb-server) have_mariadb || die "mariadb-server installed but mariadbd/mariadb-install-db are missing" ;;
        galera-4) have_galera || die "galera-4 and rsync installed but libgalera_smm.so, rsync or wsrep_sst_rsync is missing" ;;
        pgbouncer) have_pgbouncer || die "pgbouncer installed but its binary is missing" ;;
        haproxy) have_haproxy || die "haproxy installed but its binary is missing" ;;
        libmariadb-dev) have_mariadb_dev || die "libmariadb-dev installed but mariadb_config or pkg-config's mariadb is missing" ;;
        esac
    done
fi

# --- 1b. Citus (distributed PostgreSQL), for tests/integration/clusters/test_citus.py ------
# Not a Debian package: a build of Citus 13.2.2 for Debian 12's postgresql-15 sits beside
# the checkout (../shared/citus: README.md says how it was built; install.sh copies it into
# PostgreSQL's lib and extension directories, idempotently). It was built against 15.20's
# headers and needs symbols 15.20 exports (heap_datum_check: "undefined symbol" at server
# start on 15.18), so an older postgresql-15 is upgraded first.
CITUS_DIR=${LG_SQLA_CITUS_DIR:-../shared/citus}
CITUS_PG_MINOR=20
have_citus() { [ -f /usr/lib/postgresql/15/lib/citus.so ] && [ -f /usr/share/postgresql/15/extension/citus.control ]; }
pg15_minor() { "$PG_BINDIR/postgres" --version | sed -nE 's/.* 15\.([0-9]+).*/\1/p'; }
if [ "${LG_SQLA_TEST_CITUS:-1}" = 0 ]; then
    log "LG_SQLA_TEST_CITUS=0: not installing Citus (the citus tests will skip)"
elif [ "${LG_SQLA_BOOTSTRAP_SERVERS:-1}" != 0 ] && have_postgres; then
    if [ ! -f "$CITUS_DIR/install.sh" ]; then
        log "WARNING: no Citus at $CITUS_DIR (install.sh missing): the citus tests will FAIL."
        log "    Set LG_SQLA_CITUS_DIR to the directory of the prebuilt Citus for PostgreSQL 15,"
        log "    or LG_SQLA_TEST_CITUS=0 to skip those tests on purpose."
    else
        minor=$(pg15_minor)
        if [ -n "$minor" ] && [ "$minor" -lt "$CITUS_PG_MINOR" ]; then
            log "postgresql-15 is 15.$minor; Citus's build needs 15.$CITUS_PG_MINOR or later: upgrading"
            apt_install postgresql-15 postgresql-client-15
            minor=$(pg15_minor)
            [ "$minor" -ge "$CITUS_PG_MINOR" ] ||
                die "postgresql-15 is still 15.$minor after the upgrade; Citus needs 15.$CITUS_PG_MINOR+"
        fi
        if ! have_citus; then
            need_root "Citus (from $CITUS_DIR)"
            log "installing Citus from $CITUS_DIR"
            "${SUDO[@]}" bash "$CITUS_DIR/install.sh" >&2
        fi
        have_citus || die "Citus's install.sh ran but citus.so / citus.control are missing"
    fi
fi

# --- 2. virtualenv -----------------------------------------------------------
# Installs with uv (from PyPI, into .venv itself) when it can be had: it downloads in
# parallel and keeps a wheel cache (~/.cache/uv) that pip's HTTP cache does not match,
# so .venv-min, built right after .venv, reuses every wheel but its pins. On a fresh
# 2-core CI machine: .venv in ~30 s instead of ~190 s with pip, .venv-min in ~10 s
# instead of ~220 s. The same resolution as pip (the highest versions allowed), and
# pip stays in both virtualenvs (>= 25.1: it reads `--group`). If uv cannot be
# installed (an index that lacks it), pip does the work as before.
UV=.venv/bin/uv
venv_install() {
    local venv=$1
    shift
    export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
    if [ ! -x "$UV" ] && ! .venv/bin/python -m pip install -q 'uv>=0.8' </dev/null; then
        log "WARNING: could not install uv; installing with pip (slower)"
    fi
    if [ -x "$UV" ]; then
        # --compile-bytecode: the .pyc files pip writes too (uv does not by default).
        # Without them, and with PYTHONDONTWRITEBYTECODE set (as on CI's machines),
        # every Python process compiles SQLAlchemy, LangGraph, langchain_core and pydantic
        # from source again: ~2 s of CPU for each pytest worker and each `lg-sqla`
        # process the tests start (0.8 s instead of 2.9 s for `python -m lg_sqla --help`).
        if "$UV" pip install -q --compile-bytecode --python "$venv/bin/python" 'pip>=25.1' "$@" </dev/null; then
            return 0
        fi
        # uv reads no pip.conf: a machine that reaches packages only through an index
        # configured for pip gets there with pip.
        log "WARNING: uv could not install into $venv; installing with pip (slower)"
    fi
    # `--group` (PEP 735 dependency groups) needs pip >= 25.1.
    "$venv/bin/python" -m pip install -q -U 'pip>=25.1' </dev/null
    "$venv/bin/python" -m pip install -q "$@" </dev/null
}

if [ ! -x .venv/bin/python ]; then
    log "creating .venv with $PYTHON"
    "$PYTHON" -m venv .venv
fi
# Reinstall only when pyproject.toml (dependencies) changed since the last
# successful install. The package is installed editable, so code changes
# never need a reinstall.
want_stamp="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" = "$want_stamp" ]; then
    log ".venv up to date"
else
    log "installing the project and its dev dependency group into .venv"
    venv_install .venv -e . --group dev
    printf '%s\n' "$want_stamp" >"$STAMP"
fi

# The package's own bytecode, for the same reason (PYTHONDONTWRITEBYTECODE): each
# `lg-sqla` process the tests start would compile lg_sqla again (~0.25 s of CPU).
# Up-to-date files are skipped; an edited file's stale .pyc is ignored by Python.
.venv/bin/python -m compileall -q -j 0 lg_sqla >/dev/null

# --- virtualenv at the lowest allowed versions (--min-versions) ----------------
if [ "$MIN_VERSIONS" = 1 ]; then
    MIN_STAMP=.venv-min/.lg_sqla_stamp
    pins="$(.venv/bin/python tests/min_versions.py)"
    want_min="$(cat pyproject.toml tests/min_versions.py | sha256sum | cut -d' ' -f1)"
    if [ ! -x .venv-min/bin/python ]; then
        log "creating .venv-min with $PYTHON"
        "$PYTHON" -m venv .venv-min
    fi
    if [ "$(cat "$MIN_STAMP" 2>/dev/null || true)" = "$want_min" ]; then
        log ".venv-min up to date"
    else
        # shellcheck disable=SC2086 # one pin per word
        log "installing the project with the lowest allowed versions into .venv-min:" $pins
        # shellcheck disable=SC2086
        venv_install .venv-min -e . --group dev $pins
        # pip resolves the pins together with everything else: check they held.
        # shellcheck disable=SC2086
        .venv-min/bin/python - $pins <<'PY'
import sys
from importlib.metadata import version

from packaging.requirements import Requirement

for pin in sys.argv[1:]:
    requirement = Requirement(pin)
    installed = version(requirement.name)
    if not requirement.specifier.contains(installed):
        sys.exit(f"[bootstrap] ERROR: .venv-min has {requirement.name} {installed}, not {pin}")
PY
        printf '%s\n' "$want_min" >"$MIN_STAMP"
    fi
fi
