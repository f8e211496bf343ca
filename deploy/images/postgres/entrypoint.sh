#!/bin/sh
# First start: initdb, then the database and Runbox's roles with the passwords given.
#   RUNBOX_DB_NAME (runbox), RUNBOX_DB_OWNER_PASSWORD, RUNBOX_DB_APP_PASSWORD,
#   RUNBOX_DB_SYSTEM_PASSWORD (all three required on first start)
set -eu
bin=/usr/local/lib/postgresql-bin
db=${RUNBOX_DB_NAME:-runbox}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${RUNBOX_DB_OWNER_PASSWORD:?must be set on first start}" "${RUNBOX_DB_APP_PASSWORD:?must be set}" "${RUNBOX_DB_SYSTEM_PASSWORD:?must be set}"
  "$bin/initdb" -D "$PGDATA" -U postgres --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "host all all ::/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
  "$bin/pg_ctl" -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  # psql variables quote the passwords, so any character is safe in them.
  "$bin/psql" -v ON_ERROR_STOP=1 -q -U postgres -d postgres \
    -v db="$db" -v owner_pw="$RUNBOX_DB_OWNER_PASSWORD" -v app_pw="$RUNBOX_DB_APP_PASSWORD" -v system_pw="$RUNBOX_DB_SYSTEM_PASSWORD" <<'SQL'
CREATE ROLE runbox LOGIN CREATEDB PASSWORD :'owner_pw';
CREATE DATABASE :"db" OWNER runbox;
CREATE ROLE runbox_app LOGIN PASSWORD :'app_pw' NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOINHERIT;
CREATE ROLE runbox_system LOGIN PASSWORD :'system_pw' NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOINHERIT;
SQL
  "$bin/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec "$bin/postgres" -D "$PGDATA"
